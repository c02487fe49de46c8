"""A self-contained HTML page of a run's results, built offline.

One file with its styles and a few lines of script inline, nothing fetched:
it opens from a CI artifact or a mail attachment as it is. It shows the
result per profile and tier, the run's facts, and every test of the profile
(also those that did not run), with the failure text, the failure category
and the Allure attachments (applied manifests, last observed objects, events)
of each test. Without script it still shows everything; the script adds
filters by outcome and a search box.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from html import escape

from .artifacts import Attachment, Facts
from .report import ProfileResult

OUTCOMES = ("failed", "skipped", "not-run", "not-supported", "not-applicable", "passed")


@dataclass
class Row:
    name: str
    nodeid: str
    tier: str  # core, extended, or "" for a test outside the profile
    outcome: str  # one of OUTCOMES
    rules: tuple[str, ...] = ()
    areas: tuple[str, ...] = ()
    duration: float = 0.0
    reason: str = ""  # one line: the skip reason or the failure's summary
    text: str = ""  # the full failure text
    category: str = ""
    attachments: list[Attachment] = field(default_factory=list)


_CSS = """
:root { --ok:#1a7f37; --bad:#cf222e; --warn:#9a6700; --mute:#57606a; --line:#d0d7de; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0; color: #1f2328; }
header { padding: 16px 24px; border-bottom: 1px solid var(--line); background: #f6f8fa; }
h1 { font-size: 20px; margin: 0 0 4px; }
h2 { font-size: 16px; margin: 20px 0 8px; }
main { padding: 0 24px 32px; }
.sub { color: var(--mute); }
.badge { display: inline-block; padding: 1px 8px; border-radius: 10px; font-weight: 600; color: #fff;
         font-size: 12px; text-transform: uppercase; white-space: nowrap; }
.success, .passed { background: var(--ok); } .failure, .failed { background: var(--bad); }
.partial, .skipped, .not-run { background: var(--warn); } .not-supported, .not-applicable { background: var(--mute); }
table { border-collapse: collapse; margin: 4px 0; }
td, th { border: 1px solid var(--line); padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #f6f8fa; }
.controls { position: sticky; top: 0; background: #fff; padding: 8px 0; border-bottom: 1px solid var(--line); }
.controls button { margin-right: 4px; border: 1px solid var(--line); background: #fff; border-radius: 6px;
                   padding: 2px 10px; cursor: pointer; }
.controls button[aria-pressed="true"] { background: #0969da; color: #fff; border-color: #0969da; }
.controls input { padding: 2px 6px; width: 260px; }
details.test { border-bottom: 1px solid var(--line); padding: 3px 0; }
details.test > summary { cursor: pointer; list-style: none; display: flex; gap: 8px; align-items: baseline; }
details.test > summary::-webkit-details-marker { display: none; }
.name { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; }
.meta { color: var(--mute); font-size: 12px; }
.reason { color: var(--mute); overflow: hidden; text-overflow: ellipsis; white-space: nowrap; max-width: 60ch; }
pre { background: #f6f8fa; border: 1px solid var(--line); padding: 8px; overflow: auto; max-height: 480px;
      font-size: 12px; white-space: pre-wrap; }
.att { margin: 6px 0 6px 16px; }
"""

_SCRIPT = """
(function () {
  var shown = 'all';
  var tests = Array.prototype.slice.call(document.querySelectorAll('details.test'));
  var search = document.getElementById('search');
  var count = document.getElementById('shown-count');
  function apply() {
    var q = search.value.trim().toLowerCase();
    var n = 0;
    tests.forEach(function (t) {
      var ok = (shown === 'all' || t.dataset.outcome === shown) &&
               (!q || t.dataset.search.indexOf(q) !== -1);
      t.hidden = !ok;
      if (ok) { n++; }
    });
    count.textContent = n + ' of ' + tests.length + ' tests shown';
  }
  Array.prototype.forEach.call(document.querySelectorAll('.controls button'), function (b) {
    b.addEventListener('click', function () {
      shown = b.dataset.filter;
      Array.prototype.forEach.call(document.querySelectorAll('.controls button'), function (o) {
        o.setAttribute('aria-pressed', o === b ? 'true' : 'false');
      });
      apply();
    });
  });
  search.addEventListener('input', apply);
  apply();
  document.body.dataset.ready = 'true';
})();
"""


def _tier_cells(label: str, tier) -> str:
    return (f"<tr><td>{escape(label)}</td><td><span class='badge {tier.result}'>{tier.result}</span></td>"
            f"<td>{len(tier.passed)}</td><td>{len(tier.failed)}</td><td>{len(tier.skipped)}</td></tr>")


def _row(r: Row) -> str:
    labels = " ".join(filter(None, [r.tier, ", ".join(r.areas), " ".join(r.rules)]))
    search = " ".join([r.name, r.nodeid, labels, r.category, r.reason]).lower()
    parts = [f"<details class='test' data-outcome='{escape(r.outcome)}' data-search='{escape(search)}'>",
             f"<summary><span class='badge {escape(r.outcome)}'>{escape(r.outcome)}</span>"
             f"<span class='name'>{escape(r.name)}</span><span class='meta'>{escape(labels)}"
             f"{f' · {r.duration:.2f}s' if r.duration else ''}</span>"
             f"<span class='reason'>{escape(r.category + ': ' if r.category else '')}{escape(r.reason)}</span>"
             "</summary>",
             f"<div class='meta'>{escape(r.nodeid)}</div>"]
    if r.text:
        parts.append(f"<pre>{escape(r.text)}</pre>")
    elif r.reason:
        parts.append(f"<pre>{escape(r.reason)}</pre>")
    for a in r.attachments:
        parts.append(f"<details class='att'><summary>{escape(a.name)}</summary><pre>{escape(a.body)}</pre></details>")
    parts.append("</details>")
    return "".join(parts)


_RESULTS_HEAD = "<tr><th>profile</th><th>result</th><th>passed</th><th>failed</th><th>skipped</th></tr>"


def render(*, title: str, facts: Facts, implementation: str, mode: str, date: str,
           profiles: list[ProfileResult], rows: list[Row], notes: list[str] = ()) -> str:
    """The page as one string."""
    order = {o: i for i, o in enumerate(OUTCOMES)}
    rows = sorted(rows, key=lambda r: (order.get(r.outcome, 99), r.name))
    counts = {o: sum(1 for r in rows if r.outcome == o) for o in OUTCOMES}
    tiers = "".join(_tier_cells(f"{p.name} {label}", t) for p in profiles
                    for label, t in (("core", p.core), ("extended", p.extended)) if t is not None)
    overall = profiles[0].core.result if profiles else "partial"
    fact_rows = [("Implementation", implementation), ("Mode", mode),
                 ("Extension version", facts.extension_version),
                 ("API revision",
                  facts.api_revision + (f" ({facts.api_revision_title})" if facts.api_revision_title else "")),
                 ("Gateway API", f"{facts.gateway_api_version} ({facts.gateway_api_channel} channel)"),
                 ("GatewayClass", facts.gateway_class), ("Kubernetes", facts.kubernetes_version),
                 ("Cluster", facts.cluster), ("Date", date)]
    buttons = "".join(
        f"<button type='button' data-filter='{o}' aria-pressed='{'true' if o == 'all' else 'false'}'>"
        f"{o} ({len(rows) if o == 'all' else counts[o]})</button>"
        for o in ("all", *OUTCOMES) if o == "all" or counts[o])
    note_html = "".join(f"<li>{escape(n)}</li>" for n in notes)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{escape(title)}</title><style>{_CSS}</style></head>
<body data-ready="false">
<header><h1>{escape(title)} <span class="badge {overall}" id="overall">{overall}</span></h1>
<div class="sub">{escape(implementation)} · {escape(date)}</div></header>
<main>
<h2>Result</h2>
<table id="results">{_RESULTS_HEAD}{tiers}</table>
{f"<ul class='sub'>{note_html}</ul>" if note_html else ""}
<h2>Run</h2>
<table id="facts">{"".join(f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>" for k, v in fact_rows)}</table>
<h2>Tests</h2>
<div class="controls">{buttons}
<input id="search" type="search" placeholder="filter by name, rule, area, category">
<span class="sub" id="shown-count">{len(rows)} tests</span></div>
<div id="tests">{"".join(_row(r) for r in rows)}</div>
</main>
<script>{_SCRIPT}</script>
</body></html>
"""
