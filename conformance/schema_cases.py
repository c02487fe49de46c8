"""Schema and defaulting cases: data files under manifests/schema/, run by a thin harness.

Each YAML file there holds cases that a reader can check against the API
without reading Python (see manifests/schema/README.md for the format). A case
is a JSON merge patch over a valid base InferencePool (or over its status),
sent one or more ways (`via`), and the outcome the API says the server must
give: accepted (optionally with fields it must hold or must not hold) or
rejected (HTTP status, field path, cause type). Messages are never compared:
their wording changes between Kubernetes versions.
"""

from __future__ import annotations

import copy
import hashlib
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from .results import evidence
from .data import MANIFESTS
from .kube import ApiError, Kube
from .revisions import REVISIONS, Revision

CASES_DIR = MANIFESTS / "schema"
POOL_API = "inference.networking.x-k8s.io/v1alpha2"
VIAS = ("dry-run", "create", "update", "apply", "read")


@dataclass(frozen=True)
class Case:
    name: str
    source: str  # file name, for messages
    rules: tuple[str, ...]
    target: str  # "spec": the object is sent; "status": the patch goes to /status of an existing pool
    via: tuple[str, ...]
    patch: dict
    replace: dict  # dotted path -> value, set after the patch (to set a map to exactly {})
    expect: dict  # revision name -> normalised expectation
    field_validation: str | None

    def expectation(self, revision: Revision) -> dict | None:
        """What the server must do for this revision, or None when the case does not apply to it."""
        return self.expect.get(revision.name)


def merge_patch(target, patch):
    """RFC 7386 JSON merge patch (null deletes); returns a new object, sharing nothing."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = copy.deepcopy(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


def _fill(value, i: int):
    if isinstance(value, str):
        return value.replace("{i}", str(i))
    if isinstance(value, dict):
        return {k: _fill(v, i) for k, v in value.items()}
    if isinstance(value, list):
        return [_fill(v, i) for v in value]
    return value


def expand(value):
    """Expand the two shorthands of the case files.

    `{$repeat: "a", times: 3}` is "aaa"; `{$repeat: {name: "gw-{i}"}, times: 2}`
    is [{name: gw-0}, {name: gw-1}]; `{$concat: [...]}` joins strings.
    """
    if isinstance(value, dict):
        if "$repeat" in value:
            item, times = expand(value["$repeat"]), int(value["times"])
            return item * times if isinstance(item, str) else [_fill(item, i) for i in range(times)]
        if "$concat" in value:
            return "".join(str(expand(v)) for v in value["$concat"])
        return {k: expand(v) for k, v in value.items()}
    if isinstance(value, list):
        return [expand(v) for v in value]
    return value


def _normalise(expect, where: str) -> dict:
    if expect == "accepted":
        return {"outcome": "accepted", "result": {}, "absent": []}
    if isinstance(expect, dict) and set(expect) == {"accepted"}:
        body = expect["accepted"] or {}
        return {"outcome": "accepted", "result": body.get("result") or {}, "absent": list(body.get("absent") or [])}
    if isinstance(expect, dict) and set(expect) == {"rejected"}:
        body = expect["rejected"] or {}
        causes = body.get("causes") or ([{"field": body["field"], "cause": body["cause"]}] if "field" in body else [])
        return {"outcome": "rejected", "status": int(body.get("status", 422)), "causes": causes,
                "message_names": body.get("message_names")}
    raise ValueError(f"{where}: expect must be `accepted`, {{accepted: ...}} or {{rejected: ...}}")


_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def base_pool(directory: Path = CASES_DIR) -> dict:
    """The valid InferencePool every case starts from (manifests/schema/_base.yaml)."""
    return yaml.load((directory / "_base.yaml").read_text(), Loader=_Loader)["pool"]


def load(directory: Path = CASES_DIR) -> tuple[dict, list[Case]]:
    """The base objects and every case, in file order."""
    bases = yaml.load((directory / "_base.yaml").read_text(), Loader=_Loader)
    cases: list[Case] = []
    seen: set[str] = set()
    for path in sorted(directory.glob("*.yaml")):
        if path.name.startswith("_"):
            continue
        doc = yaml.load(path.read_text(), Loader=_Loader)
        for raw in doc["cases"]:
            where = f"{path.name}: case {raw.get('name')!r}"
            name = raw["name"]
            if name in seen:
                raise ValueError(f"{where}: duplicate case name")
            seen.add(name)
            rules = raw.get("rule", doc.get("rule"))
            rules = tuple([rules] if isinstance(rules, str) else rules)
            applies = raw.get("revisions", doc.get("revisions", list(REVISIONS)))
            default = _normalise(raw["expect"], where)
            overrides = {rev: _normalise(e, where) for rev, e in (raw.get("expect_by_revision") or {}).items()}
            unknown = set(applies) | set(overrides)
            unknown -= set(REVISIONS)
            if unknown:
                raise ValueError(f"{where}: unknown revision(s) {sorted(unknown)}")
            via = raw.get("via", doc.get("via", ["dry-run"]))
            via = tuple([via] if isinstance(via, str) else via)
            if set(via) - set(VIAS):
                raise ValueError(f"{where}: via must be among {VIAS}")
            cases.append(Case(
                name=name, source=path.name, rules=rules,
                target=raw.get("target", doc.get("target", "spec")), via=via,
                patch=expand(raw.get("patch") or {}),
                replace=expand(raw.get("replace") or {}),
                expect={rev: overrides.get(rev, default) for rev in applies},
                field_validation=raw.get("fieldValidation"),
            ))
    return bases, cases


def params(cases: list[Case], target: str) -> list:
    out = []
    for case in cases:
        if case.target != target:
            continue
        for via in case.via:
            test_id = case.name if len(case.via) == 1 else f"{case.name}[{via}]"
            out.append(pytest.param(case, via, id=test_id, marks=[pytest.mark.rule(*case.rules)]))
    return out


def object_name(case: Case, via: str) -> str:
    digest = hashlib.sha256(f"{case.name}/{via}".encode()).hexdigest()[:8]
    return f"{case.name[:40].lower().strip('-.')}-{digest}"


# -- checking ------------------------------------------------------------------


def _lookup(obj, dotted: str):
    cur = obj
    for part in dotted.split("."):
        if isinstance(cur, list):
            cur = cur[int(part)] if part.isdigit() and int(part) < len(cur) else _MISSING
        elif isinstance(cur, dict) and part in cur:
            cur = cur[part]
        else:
            return _MISSING
    return cur


_MISSING = object()


def _subset_problems(expected, actual, path: str = "") -> list[str]:
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return [f"{path or '.'}: expected a mapping, got {actual!r}"]
        problems = []
        for k, v in expected.items():
            sub = f"{path}.{k}" if path else k
            problems += _subset_problems(v, actual[k], sub) if k in actual else [f"{sub}: missing, expected {v!r}"]
        return problems
    if isinstance(expected, list):
        if not isinstance(actual, list) or len(actual) != len(expected):
            return [f"{path}: expected {len(expected)} item(s) {expected!r}, got {actual!r}"]
        return [p for i, (e, a) in enumerate(zip(expected, actual, strict=True))
                for p in _subset_problems(e, a, f"{path}.{i}")]
    return [] if expected == actual else [f"{path}: expected {expected!r}, got {actual!r}"]


def check(case: Case, revision: Revision, result: dict | None, error: ApiError | None) -> None:
    """Fail the test with one readable message unless the outcome is what the case expects."""
    exp = case.expectation(revision)
    assert exp is not None
    label = f"case {case.name} ({case.source}, rule {', '.join(case.rules)}, revision {revision.name})"
    if exp["outcome"] == "accepted":
        if error is not None:
            pytest.fail(f"{label}: expected the server to accept it, but it answered HTTP {error.status} "
                        f"{error.reason}: {error.body.get('message', '')}", pytrace=False)
        problems = _subset_problems(exp["result"], result)
        problems += [f"{p}: expected absent (pruned or not defaulted), got {_lookup(result, p)!r}"
                     for p in exp["absent"] if _lookup(result, p) is not _MISSING]
        if problems:
            pytest.fail(f"{label}: accepted, but the stored object differs:\n  " + "\n  ".join(problems), pytrace=False)
        return
    if error is None:
        pytest.fail(f"{label}: expected HTTP {exp['status']} rejecting "
                    f"{', '.join(c['field'] for c in exp['causes']) or 'the object'}, but the server accepted it",
                    pytrace=False)
    problems = []
    if error.status != exp["status"]:
        problems.append(f"HTTP status {error.status}, expected {exp['status']}")
    got = [(c.get("field"), c.get("reason")) for c in error.causes]
    for want in exp["causes"]:
        if (want["field"], want["cause"]) not in got:
            problems.append(f"no cause {want['cause']} on field {want['field']}")
    for word in exp.get("message_names") or []:
        # Strict field validation answers 400 with no causes: the unknown field's
        # path in the message is the only structured part there is.
        if f'"{word}"' not in error.body.get("message", ""):
            problems.append(f"the rejection does not name field {word!r}")
    if problems:
        pytest.fail(f"{label}: rejected, but not as the API says: {'; '.join(problems)}\n"
                    f"  server answered HTTP {error.status} with causes {got}", pytrace=False)


# -- running -------------------------------------------------------------------


def build_object(bases: dict, case: Case, via: str, namespace: str) -> dict:
    obj = merge_patch(bases["pool"], case.patch)
    for dotted, value in case.replace.items():
        *parents, leaf = dotted.split(".")
        cur = obj
        for part in parents:
            cur = cur.setdefault(part, {})
        cur[leaf] = copy.deepcopy(value)
    obj["metadata"] = {**(obj.get("metadata") or {}), "name": object_name(case, via), "namespace": namespace}
    return obj


def run_spec_case(kube: Kube, bases: dict, case: Case, via: str, revision: Revision, namespace: str) -> None:
    obj = build_object(bases, case, via, namespace)
    evidence.attach_yaml(f"applied object ({via})", obj)
    result = error = None
    try:
        if via == "dry-run":
            result = kube.create(obj, dry_run=True, field_validation=case.field_validation)
        elif via == "create":
            result = kube.create(obj, field_validation=case.field_validation)
        elif via == "read":
            created = kube.create(obj, field_validation=case.field_validation)
            # Read back as stored by the create: a controller may write the new
            # pool's status at any moment, and its write is not what is judged.
            result = kube.get_as_of(POOL_API, "InferencePool", obj["metadata"]["name"], namespace,
                                    created["metadata"]["resourceVersion"])
        elif via == "apply":
            result = kube.apply(obj)
        elif via == "update":
            # Start from the complete base, then replace it with the case's object.
            start = merge_patch(bases["pool"], {"metadata": obj["metadata"]})
            created = kube.create(start)
            result = _update_against_latest(kube, obj, case.field_validation)
            note = foreign_status_note(result, created)
            if note:
                result = {**result, "status": created.get("status")}
                evidence.attach_text("status written by another client", note)
    except ApiError as e:
        if e.status not in (400, 422):
            raise
        error = e
    if result is not None:
        evidence.attach_yaml("object as the server returned it", result)
    check(case, revision, result, error)


def _update_against_latest(kube: Kube, obj: dict, field_validation: str | None, *,
                           subresource: str | None = None, dry_run: bool = False) -> dict:
    """PUT `obj` against the version of the pool just read; on a conflict, read again and retry.

    What is judged is how the server validates and defaults the object sent,
    not who wrote last: a controller that writes the pool's status in between
    must not turn the case into a 409. (Custom resources take no update
    without a resourceVersion.)
    """
    md = obj["metadata"]
    for _ in range(10):
        current = kube.get(POOL_API, "InferencePool", md["name"], md["namespace"])
        body = copy.deepcopy(obj)
        body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
        try:
            return kube.replace(body, subresource=subresource, dry_run=dry_run, field_validation=field_validation)
        except ApiError as e:
            if e.status != 409:
                raise
    pytest.fail("every update of the pool conflicted with another writer 10 times in a row", pytrace=False)


def foreign_status_note(result: dict, created: dict) -> str | None:
    """Why the status of `result` is not the one the create stored, or None when it is.

    An update of the main resource never changes status; a status different from
    the create's was written by someone else (a controller) in between, and says
    nothing about the CRD. Its managers are named from managedFields.
    """
    if (result.get("status") or None) == (created.get("status") or None):
        return None
    writers = sorted({m.get("manager", "?") for m in (result.get("metadata") or {}).get("managedFields") or []
                      if m.get("subresource") == "status"})
    return (f"the pool's status was written by {', '.join(writers) or 'another client'} between the create and "
            "the update; status is judged as the create stored it, since an update of the main resource "
            "cannot change it")


def run_status_case(kube: Kube, case: Case, revision: Revision, pool: dict) -> None:
    """Send the case's status to /status (dry-run) as a merge patch over the pool as it was created.

    The patch is merged here, over the status the create stored, and the whole
    object is sent: a controller that has since written the pool's status
    cannot change what the case starts from.
    """
    md = pool["metadata"]
    body = merge_patch(pool, case.patch)
    body["metadata"] = {"name": md["name"], "namespace": md["namespace"]}
    result = error = None
    try:
        result = _update_against_latest(kube, body, None, subresource="status", dry_run=True)
    except ApiError as e:
        if e.status not in (400, 422):
            raise
        error = e
    evidence.attach_yaml("applied status patch (dry-run)", case.patch)
    if result is not None:
        evidence.attach_yaml("object as the server returned it", result)
    check(case, revision, result, error)
