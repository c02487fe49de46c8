"""The ConformanceReport: which tests count, how, and the YAML that GIE publishes.

Pure functions on plain data, so every rule here is unit-tested without a
cluster or a pytest run (`tests/test_report.py`). The pytest glue that feeds
them is `reporting.py` beside it.

How a run is counted (SPEC section 4, and the choices this suite makes):

* The profile `Gateway` holds every conformance test (a test with a `rule`
  marker). A test is *extended* when it needs a feature outside the core
  features, else *core* (the SupportInferencePool status tests, and the schema
  and defaulting tests, which are core API behaviour).
* Outcomes: passed, failed (a failure or error in any phase), skipped,
  not-supported (skipped with a reason starting `not-supported:`) and
  not-applicable (skipped with a reason starting `not-applicable:`: the
  installed API revision has no such behaviour). An extended test that is
  not-supported is not counted. A core feature cannot be unsupported, only
  exempted, so a not-supported core test counts as skipped. Not-applicable
  tests are never counted: they say nothing about the implementation.
* A test of the profile that did not run (deselected with `-k`/`-m`/
  `--deselect`, left out by `--run-test` or by naming only some files, or not
  reached because the run was interrupted or stopped) counts as skipped. A
  partial run therefore reads `partial`, never `success`.
* Result: failure if any failed, partial if any skipped, else success.
* Test names in `skippedTests`/`failedTests` are short names: the test
  function's name without `test_`, with the parameter id in brackets for a
  parametrized test (`schema_spec[selector-missing]`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime

import yaml

from ..revisions import NOT_APPLICABLE_PREFIX

API_VERSION = "gateway.networking.k8s.io/v1"
KIND = "ConformanceReport"
PROFILE_GATEWAY = "Gateway"
EXTENSION_VERSION_KEY = "GatewayAPIInferenceExtensionVersion"
NOT_SUPPORTED_PREFIX = "not-supported:"
METADATA_FIELDS = ("organization", "project", "url", "version", "contact")

TOP_KEYS = frozenset({EXTENSION_VERSION_KEY, "apiVersion", "kind", "date", "gatewayAPIVersion",
                      "gatewayAPIChannel", "mode", "implementation", "profiles"})
IMPLEMENTATION_KEYS = frozenset(METADATA_FIELDS)
PROFILE_KEYS = frozenset({"name", "summary", "core", "extended"})
TIER_KEYS = frozenset({"result", "statistics", "skippedTests", "failedTests"})
STATISTICS_KEYS = frozenset({"Passed", "Failed", "Skipped"})
RESULTS = ("success", "partial", "failure")

# Rule ID prefix -> area (the label used in JUnit properties and Allure).
AREAS = {"S": "schema", "D": "defaulting", "C": "status", "X": "externalname", "T": "traffic"}
_RFC3339 = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$")
# Versions and modes name report files, so they must be one path segment.
_TOKEN = re.compile(r"^[A-Za-z0-9][-A-Za-z0-9_.+]*$")


# -- what a test is --------------------------------------------------------------


@dataclass(frozen=True)
class ProfileTest:
    """One conformance test of the profile, as collected."""

    key: str  # `file.py::test_name[param]`: stable across rootdirs
    name: str  # the short name used in the report
    tier: str  # "core" or "extended"
    rules: tuple[str, ...] = ()
    features: tuple[str, ...] = ()
    api: str = ""  # the InferencePool API it judges ("v1alpha2", "v1"); empty: none in particular

    @property
    def areas(self) -> tuple[str, ...]:
        return areas_of(self.rules)


def key_of(nodeid: str) -> str:
    """`conformance/tests/test_x.py::test_y[p]` -> `test_x.py::test_y[p]`."""
    path, sep, rest = nodeid.partition("::")
    return f"{path.rsplit('/', 1)[-1]}{sep}{rest}"


def short_name(nodeid: str) -> str:
    """The report name of a test: its function name without `test_`, plus `[param]` if any."""
    return nodeid.rsplit("::", 1)[-1].removeprefix("test_")


def areas_of(rules) -> tuple[str, ...]:
    seen: list[str] = []
    for rule in rules:
        area = AREAS.get(rule[:1], "other")
        if area not in seen:
            seen.append(area)
    return tuple(seen)


def tier_of(rules, features, core_features) -> str | None:
    """core, extended, or None for a test outside the profile (no rule marker)."""
    if not rules:
        return None
    return "extended" if set(features) - set(core_features) else "core"


# -- what happened to a test -----------------------------------------------------


@dataclass(frozen=True)
class Phase:
    """What one pytest report (setup, call or teardown) said."""

    when: str
    outcome: str  # passed, failed, skipped
    reason: str = ""  # the skip reason or the failure's last line


def outcome_of(phases: list[Phase]) -> tuple[str, str]:
    """(passed|failed|skipped|not-supported|not-applicable, reason) of one test from its phases.

    A test without a call phase that did not fail or skip in setup never
    finished: it reads as skipped ("not completed").
    """
    for p in phases:
        if p.outcome == "failed":
            return "failed", f"{p.when}: {p.reason}" if p.when != "call" else p.reason
    for p in phases:
        if p.outcome == "skipped" and p.when in ("setup", "call"):
            reason = p.reason
            if reason.startswith(NOT_SUPPORTED_PREFIX):
                return "not-supported", reason
            if reason.startswith(NOT_APPLICABLE_PREFIX):
                return "not-applicable", reason
            return "skipped", reason
    if any(p.when == "call" and p.outcome == "passed" for p in phases):
        return "passed", ""
    return "skipped", "not completed: the run ended during this test"


def skip_reason(longrepr) -> str:
    """The reason of a skip report's longrepr (a (path, line, 'Skipped: why') tuple)."""
    if isinstance(longrepr, (tuple, list)) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr or "").removeprefix("Skipped: ")


# -- counting ------------------------------------------------------------------


@dataclass
class TierResult:
    passed: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)

    @property
    def result(self) -> str:
        return result_of(len(self.failed), len(self.skipped))


def result_of(failed: int, skipped: int) -> str:
    if failed:
        return "failure"
    if skipped:
        return "partial"
    return "success"


@dataclass
class ProfileResult:
    name: str
    core: TierResult
    extended: TierResult | None  # None: the profile has no extended tests
    not_run: int = 0  # tests of the profile that did not run (included in skipped)


def count(inventory: list[ProfileTest], outcomes: dict[str, tuple[str, str]], *,
          profile: str = PROFILE_GATEWAY) -> ProfileResult:
    """Count a run: `outcomes` maps test keys to `outcome_of` results.

    `inventory` is every test of the profile (the caller adds tests that ran
    but are missing from it); a test in it without an outcome did not run and
    counts as skipped. Outcomes of tests outside the inventory are ignored.
    """
    core, extended = TierResult(), TierResult()
    has_extended = any(t.tier == "extended" for t in inventory)
    not_run = 0
    for t in sorted(inventory, key=lambda t: t.key):
        tier = extended if t.tier == "extended" else core
        outcome = outcomes.get(t.key)
        if outcome is None:
            not_run += 1
            tier.skipped.append(t.name)
            continue
        kind, _reason = outcome
        if kind == "not-applicable" or (kind == "not-supported" and t.tier == "extended"):
            continue
        {"passed": tier.passed, "failed": tier.failed}.get(kind, tier.skipped).append(t.name)
    return ProfileResult(profile, core, extended if has_extended else None, not_run)


def summary(p: ProfileResult, notes: tuple[str, ...] = ()) -> str:
    """One sentence per tier, in this suite's own words, plus notes on a partial run."""
    parts = []
    for label, tier in (("core", p.core), ("extended", p.extended)):
        if tier is None:
            continue
        parts.append(f"{label} {tier.result}: {len(tier.passed)} passed, {len(tier.failed)} failed, "
                     f"{len(tier.skipped)} skipped")
    text = "; ".join(parts) + "."
    if p.not_run:
        text += f" Partial run: {p.not_run} test(s) of the profile did not run"
        text += f" ({'; '.join(notes)})." if notes else "."
    return text


# -- the document ----------------------------------------------------------------


def rfc3339(moment: datetime | None = None) -> str:
    moment = (moment or datetime.now(UTC)).astimezone(UTC).replace(microsecond=0)
    return moment.isoformat().replace("+00:00", "Z")


def _tier_doc(t: TierResult) -> dict:
    doc: dict = {"result": t.result,
                 "statistics": {"Passed": len(t.passed), "Failed": len(t.failed), "Skipped": len(t.skipped)}}
    if t.skipped:  # the lists are left out when empty, as upstream omits empty fields
        doc["skippedTests"] = list(t.skipped)
    if t.failed:
        doc["failedTests"] = list(t.failed)
    return doc


def build(*, implementation: dict, extension_version: str, gateway_api_version: str,
          gateway_api_channel: str, mode: str, profiles: list[ProfileResult], date: str,
          notes: tuple[str, ...] = ()) -> dict:
    """The ConformanceReport as a plain dict, keys as GIE spells them."""
    missing = missing_metadata(implementation)
    if missing:
        raise ValueError(f"implementation metadata incomplete: missing {', '.join(missing)}")
    docs = []
    for p in profiles:
        entry = {"name": p.name, "summary": summary(p, notes), "core": _tier_doc(p.core)}
        if p.extended is not None:
            entry["extended"] = _tier_doc(p.extended)
        docs.append(entry)
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "date": date,
        "gatewayAPIVersion": gateway_api_version,
        "gatewayAPIChannel": gateway_api_channel,
        EXTENSION_VERSION_KEY: extension_version,
        "mode": mode,
        "implementation": {
            "organization": implementation["organization"],
            "project": implementation["project"],
            "url": implementation["url"],
            "version": implementation["version"],
            "contact": list(implementation["contact"]),
        },
        "profiles": docs,
    }


def dump(doc: dict) -> str:
    """The YAML text: keys sorted as Go's YAML marshalling sorts them (capitalised keys first)."""
    return yaml.safe_dump(doc, sort_keys=True, default_flow_style=False, allow_unicode=True, width=1000)


def file_name(doc: dict) -> str:
    """`<implementation version>-<mode>-<profile>-report.yaml`, the published file name."""
    profiles = "-".join(p["name"].lower() for p in doc["profiles"])
    return f"{doc['implementation']['version']}-{doc['mode']}-{profiles}-report.yaml"


def missing_metadata(implementation: dict) -> list[str]:
    return [f for f in METADATA_FIELDS if not implementation.get(f)]


def is_token(value: str) -> bool:
    return bool(_TOKEN.match(value))


# -- checking a report -------------------------------------------------------------


def _keys(where: str, obj, allowed: frozenset, required: frozenset) -> list[str]:
    if not isinstance(obj, dict):
        return [f"{where}: expected a mapping, got {type(obj).__name__}"]
    problems = []
    if unknown := sorted(set(map(str, obj)) - allowed):
        problems.append(f"{where}: unknown key(s) {', '.join(unknown)}")
    if missing := sorted(required - set(obj)):
        problems.append(f"{where}: missing key(s) {', '.join(missing)}")
    return problems


def _check_tier(where: str, tier) -> list[str]:
    problems = _keys(where, tier, TIER_KEYS, frozenset({"result", "statistics"}))
    if problems:
        return problems
    stats = tier["statistics"]
    problems += _keys(f"{where}.statistics", stats, STATISTICS_KEYS, STATISTICS_KEYS)
    if problems:
        return problems
    for k in sorted(STATISTICS_KEYS):
        if not isinstance(stats[k], int) or isinstance(stats[k], bool) or stats[k] < 0:
            problems.append(f"{where}.statistics.{k}: must be a non-negative integer, got {stats[k]!r}")
    if problems:
        return problems
    if tier["result"] not in RESULTS:
        problems.append(f"{where}.result: {tier['result']!r} is not one of {', '.join(RESULTS)}")
    elif tier["result"] != result_of(stats["Failed"], stats["Skipped"]):
        problems.append(f"{where}.result: {tier['result']} does not follow from Failed={stats['Failed']}, "
                        f"Skipped={stats['Skipped']} (expected {result_of(stats['Failed'], stats['Skipped'])})")
    for key, stat in (("skippedTests", "Skipped"), ("failedTests", "Failed")):
        names = tier.get(key, [])
        if key in tier and (not isinstance(names, list) or not names):
            problems.append(f"{where}.{key}: must be a non-empty list of test names when present")
            continue
        if len(names) != stats[stat]:
            problems.append(f"{where}.{key}: lists {len(names)} test(s) but statistics.{stat} is {stats[stat]}")
        if len(set(map(str, names))) != len(names):
            problems.append(f"{where}.{key}: names a test more than once")
    return problems


def validate(doc) -> list[str]:
    """Problems that make `doc` not a well-formed, self-consistent ConformanceReport."""
    problems = _keys("report", doc, TOP_KEYS, TOP_KEYS)
    if problems:
        return problems
    if doc["apiVersion"] != API_VERSION:
        problems.append(f"apiVersion: {doc['apiVersion']!r}, expected {API_VERSION}")
    if doc["kind"] != KIND:
        problems.append(f"kind: {doc['kind']!r}, expected {KIND}")
    if not isinstance(doc["date"], str) or not _RFC3339.match(doc["date"]):
        problems.append(f"date: {doc['date']!r} is not an RFC 3339 date-time (e.g. 2025-01-31T12:00:00Z)")
    for key in ("gatewayAPIVersion", "gatewayAPIChannel", EXTENSION_VERSION_KEY, "mode"):
        if not isinstance(doc[key], str) or not doc[key]:
            problems.append(f"{key}: must be a non-empty string")
    if isinstance(doc["mode"], str) and doc["mode"] and not is_token(doc["mode"]):
        problems.append(f"mode: {doc['mode']!r} must be one word (letters, digits, -_.+)")
    impl = doc["implementation"]
    impl_problems = _keys("implementation", impl, IMPLEMENTATION_KEYS, IMPLEMENTATION_KEYS)
    problems += impl_problems
    if not impl_problems:
        for key in ("organization", "project", "url", "version"):
            if not isinstance(impl[key], str) or not impl[key].strip():
                problems.append(f"implementation.{key}: must be a non-empty string")
        if not isinstance(impl["contact"], list) or not impl["contact"] or not all(
                isinstance(c, str) and c.strip() for c in impl["contact"]):
            problems.append("implementation.contact: must be a non-empty list of contacts")
        if isinstance(impl["version"], str) and impl["version"] and not is_token(impl["version"]):
            problems.append(f"implementation.version: {impl['version']!r} must be one word (letters, digits, -_.+)")
    profiles = doc["profiles"]
    if not isinstance(profiles, list) or not profiles:
        return problems + ["profiles: must be a non-empty list"]
    names = []
    for i, p in enumerate(profiles):
        where = f"profiles[{i}]"
        p_problems = _keys(where, p, PROFILE_KEYS, frozenset({"name", "summary", "core"}))
        problems += p_problems
        if p_problems:
            continue
        names.append(p["name"])
        if p["name"] != PROFILE_GATEWAY:
            problems.append(f"{where}.name: {p['name']!r} is not a known profile ({PROFILE_GATEWAY})")
        if not isinstance(p["summary"], str) or not p["summary"]:
            problems.append(f"{where}.summary: must be a non-empty string")
        problems += _check_tier(f"{where}.core", p["core"])
        if "extended" in p:
            problems += _check_tier(f"{where}.extended", p["extended"])
    if len(set(names)) != len(names):
        problems.append("profiles: a profile is listed more than once")
    return problems
