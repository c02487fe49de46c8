"""What a run leaves for people and tools besides the ConformanceReport.

Pure functions: the run's facts as Allure's `environment.properties`, the
failure categories (Allure's `categories.json`, and the same sorting in our
HTML page), and reading the attachments Allure wrote for each test.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

# -- facts of a run ---------------------------------------------------------------


@dataclass
class Facts:
    """What the run found out about the cluster and what it tested."""

    kubernetes_version: str = "unknown"
    api_revision: str = "unknown"
    api_revision_title: str = ""
    extension_version: str = "unknown"
    gateway_api_version: str = "unknown"
    gateway_api_channel: str = "unknown"
    cluster: str = "unknown"
    gateway_class: str = "unknown"
    source: str = ""  # where the cluster facts came from, for the record
    # API name -> {"revision", "title", "extension_version"}: each API the run judged.
    judged: dict = field(default_factory=dict)

    def judge(self, judged: dict[str, tuple[str, str, str]]) -> None:
        """Record the judged APIs: API name -> (revision, title, extension version)."""
        self.judged = {api: {"revision": r, "title": t, "extension_version": v} for api, (r, t, v) in judged.items()}
        self.api_revision = ", ".join(f"{api} {r}" for api, (r, _t, _v) in judged.items()) or "unknown"
        self.api_revision_title = "; ".join(t for _r, t, _v in judged.values())
        self.extension_version = ", ".join(v for _r, _t, v in judged.values()) or "unknown"

    def to_dict(self) -> dict:
        return dict(self.__dict__)

    @classmethod
    def from_dict(cls, d: dict) -> Facts:
        return cls(**{k: (dict(v) if k == "judged" else str(v)) for k, v in d.items()
                      if k in cls.__dataclass_fields__})


def environment_properties(facts: Facts, implementation: str, mode: str) -> str:
    """Allure's environment.properties (a Java properties file)."""
    rows = [
        ("Kubernetes.version", facts.kubernetes_version),
        ("API.revision", facts.api_revision + (f" ({facts.api_revision_title})" if facts.api_revision_title else "")),
        ("Extension.version", facts.extension_version),
        ("Gateway.API.bundle", f"{facts.gateway_api_version} ({facts.gateway_api_channel} channel)"),
        ("GatewayClass", facts.gateway_class),
        ("Implementation", implementation),
        ("Mode", mode),
        ("Cluster", facts.cluster),
    ]
    return "".join(f"{k}={_escape_property(v)}\n" for k, v in rows)


def _escape_property(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n")


# -- failure categories --------------------------------------------------------------

ENVIRONMENT = "environment"
DEFECT = "implementation"


@dataclass(frozen=True)
class Category:
    name: str
    kind: str  # ENVIRONMENT or DEFECT
    statuses: tuple[str, ...]  # Allure statuses: failed (assertion), broken (other error)
    pattern: str  # searched in the message and the trace; "" matches anything
    description: str


# First match wins; the order goes from the most specific to the catch-alls.
CATEGORIES: tuple[Category, ...] = (
    Category("Environment: cluster unreachable", ENVIRONMENT, ("failed", "broken"),
             r"cannot reach |cannot start the embedded cluster|Connection refused|NewConnectionError|"
             r"Max retries exceeded|RemoteDisconnected|ConnectionResetError|SSLError|certificate verify failed",
             "the API server could not be reached or started"),
    Category("Environment: API request timed out", ENVIRONMENT, ("failed", "broken"),
             r"ReadTimeoutError|ConnectTimeoutError|Read timed out|socket\.timeout|TimeoutError",
             "a single API request got no answer in time"),
    Category("Environment: implementation not ready", ENVIRONMENT, ("failed", "broken"),
             r"GatewayClass \S+ to be Accepted|does not exist on the cluster|cannot start the implementation|"
             r"the implementation under test exited|wrote no InferencePool status|"
             r"CRD .*is not installed",
             "the implementation under test was not installed, not running, or its GatewayClass never got Accepted"),
    Category("Environment: cleanup timed out", ENVIRONMENT, ("failed", "broken"),
             r"waiting for \S+ \S+ to be deleted|namespace \S+ to be deleted",
             "objects the suite deleted were still there after the delete timeout"),
    Category("Environment: traffic Pods not Ready", ENVIRONMENT, ("failed", "broken"),
             r"waiting for Pod \S+: |never got Ready in an earlier traffic test",
             "Pods of the traffic tier did not get Ready: the cluster could not pull or run their images "
             "(--model-server-image, --epp-image, --sentinel-image)"),
    Category("Precondition failed", DEFECT, ("failed",), r"precondition failed",
             "a step the test rests on failed (the message names it and its rule): the test's own rule was not "
             "reached"),
    Category("Implementation defect", DEFECT, ("failed",), "",
             "an expectation of the API failed: the implementation (or the installed CRD) does not conform"),
    Category("Suite or environment error", ENVIRONMENT, ("broken",), "",
             "an unexpected error that is not an assertion; read the trace"),
)


def categories_json(categories: tuple[Category, ...] = CATEGORIES) -> str:
    """Allure's categories.json; Allure matches the whole text, hence the [\\s\\S]* around each pattern."""
    out = []
    for c in categories:
        entry: dict = {"name": c.name, "matchedStatuses": list(c.statuses), "description": c.description}
        if c.pattern:
            entry["traceRegex"] = f"[\\s\\S]*({c.pattern})[\\s\\S]*"
        out.append(entry)
    return json.dumps(out, indent=2) + "\n"


def categorize(outcome: str, assertion: bool, text: str,
               categories: tuple[Category, ...] = CATEGORIES) -> Category | None:
    """The category of a failed test; None for a test that did not fail.

    `assertion`: the failure was an assertion (Allure's status "failed"),
    else another error (Allure's "broken"). `text` is the failure's message
    and trace.
    """
    if outcome != "failed":
        return None
    status = "failed" if assertion else "broken"
    for c in categories:
        if status in c.statuses and (not c.pattern or re.search(c.pattern, text)):
            return c
    return None


# -- Allure attachments ------------------------------------------------------------------


@dataclass
class Attachment:
    name: str
    body: str


@dataclass
class AllureTest:
    nodeid: str
    attachments: list[Attachment] = field(default_factory=list)


MAX_ATTACHMENT = 200_000


def _read_attachment(directory: Path, a: dict) -> Attachment | None:
    source = a.get("source")
    if not source or "/" in source:
        return None
    try:
        body = (directory / source).read_bytes()[:MAX_ATTACHMENT].decode("utf-8", "replace")
    except OSError:
        return None
    return Attachment(a.get("name") or source, body)


def _attachments(directory: Path, node: dict) -> list[Attachment]:
    out = [x for a in node.get("attachments") or [] if (x := _read_attachment(directory, a))]
    for step in node.get("steps") or []:
        out += _attachments(directory, step)
    return out


def read_allure(directory: Path | None, run: str | None = None) -> dict[str, list[Attachment]]:
    """nodeid -> the attachments Allure saved for that test (its own, and its fixtures').

    Tests are matched by their `nodeid` label; with `run`, only results whose
    `run` label is that run's ID count (a reused directory holds older runs).
    """
    if directory is None or not directory.is_dir():
        return {}
    by_uuid: dict[str, str] = {}
    out: dict[str, list[Attachment]] = {}
    for path in sorted(directory.glob("*-result.json")):
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        labels = {lb.get("name"): lb.get("value") for lb in doc.get("labels") or []}
        nodeid = labels.get("nodeid")
        if not nodeid or (run is not None and labels.get("run") != run):
            continue
        by_uuid[doc.get("uuid", "")] = nodeid
        out.setdefault(nodeid, []).extend(_attachments(directory, doc))
    for path in sorted(directory.glob("*-container.json")):
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        fixtures = [a for part in ("befores", "afters") for f in doc.get(part) or []
                    for a in _attachments(directory, f)]
        if not fixtures:
            continue
        for child in doc.get("children") or []:
            if child in by_uuid:
                out.setdefault(by_uuid[child], []).extend(fixtures)
    return out
