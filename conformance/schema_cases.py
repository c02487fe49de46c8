"""Schema and defaulting cases: data files under manifests/schema/<api>/, run by a thin harness.

Each YAML file there holds cases that a reader can check against the API
without reading Python (see manifests/schema/README.md for the format). A case
is a JSON merge patch over a valid base InferencePool of its API (or over its
status), sent one or more ways (`via`), and the outcome the API says the server
must give: accepted (optionally with fields it must hold or must not hold) or
rejected (HTTP status, field path, cause type). Messages are never compared:
their wording changes between Kubernetes versions.

Each InferencePool API (`conformance.revisions.APIS`: `v1alpha2`, `v1`) has a
folder of its own (`Api.schema_cases`), written with that API's field names and
keyed by that API's revisions. A `Case` carries the name of its API (`api`), so
that a test parametrized over the cases of every API runs each case only with
the API it was written for (the plugin deselects the other pairs).
"""

from __future__ import annotations

import copy
import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from .kube import ApiError, Kube
from .results import evidence
from .revisions import APIS, Api, Revision, revisions_of

VIAS = ("dry-run", "create", "update", "apply", "read")
TARGETS = ("spec", "status")
# A case name is a test id and, lower-cased, the start of an object name.
_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9.]*[A-Za-z0-9])?$")


@dataclass(frozen=True)
class Case:
    name: str
    api: str  # the API the case is written for ("v1alpha2", "v1"): its folder, field names and revisions
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
        if revision.api.name != self.api:
            return None
        return self.expect.get(revision.name)

    def __repr__(self) -> str:  # a test's parameter in the reports: its name, not all of its data
        return f"{self.name} ({self.api}, {self.source})"


@dataclass(frozen=True)
class Sending:
    """A case and one way of sending it: the one parameter of a schema test.

    One parameter rather than two: pytest sets up each parameter of each test
    as a fixture of its own, which the Allure results record in a file apiece.
    """
    case: Case
    via: str

    @property
    def name(self) -> str:
        return self.case.name

    @property
    def api(self) -> str:
        return self.case.api

    def __repr__(self) -> str:
        return f"{self.case.name} via {self.via} ({self.case.api}, {self.case.source})"


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


def _api(api: Api | str) -> Api:
    if isinstance(api, Api):
        return api
    if api not in APIS:
        raise ValueError(f"unknown InferencePool API {api!r} (known: {', '.join(APIS)})")
    return APIS[api]


def _bases(directory: Path) -> dict:
    return yaml.load((directory / "_base.yaml").read_text(), Loader=_Loader)


def base_pool(api: Api | str) -> dict:
    """The valid InferencePool of `api` every case of that API starts from (manifests/schema/<api>/_base.yaml)."""
    return _bases(_api(api).schema_cases)["pool"]


def _applies(raw: dict, doc: dict, order: list[str], where: str) -> list[str]:
    """The revisions a case applies to: its own `revisions:` or `since:`, else its file's, else all of its API.

    `since: R` is the shorthand for R and every later revision of the API (the
    order of `conformance.revisions.revisions_of`).
    """
    for level, source in (("case", raw), ("file", doc)):
        given = [k for k in ("revisions", "since") if k in source]
        if len(given) > 1:
            raise ValueError(f"{where}: the {level} gives both `revisions` and `since`; give one")
        if not given:
            continue
        if given[0] == "revisions":
            names = source["revisions"]
            names = [names] if isinstance(names, str) else list(names)
            unknown = [n for n in names if n not in order]
            if unknown:
                raise ValueError(f"{where}: unknown revision(s) {unknown} (this API has {order})")
            return names
        since = source["since"]
        if since not in order:
            raise ValueError(f"{where}: `since: {since}` names no revision of this API (it has {order})")
        return order[order.index(since):]
    return list(order)


def load(api: Api | str, directory: Path | None = None) -> tuple[dict, list[Case]]:
    """The base objects and every case of one API, in file order.

    `directory` defaults to the API's own folder (`Api.schema_cases`). Revision
    names are those of the API (`revisions_of`); case names are unique in it.
    """
    api = _api(api)
    directory = api.schema_cases if directory is None else directory
    order = [r.name for r in revisions_of(api)]
    bases = _bases(directory)
    if (bases.get("pool") or {}).get("apiVersion") != api.api_version:
        raise ValueError(f"{directory / '_base.yaml'}: the base pool's apiVersion must be {api.api_version}")
    cases: list[Case] = []
    seen: set[str] = set()
    for path in sorted(directory.glob("*.yaml")):
        if path.name.startswith("_"):
            continue
        doc = yaml.load(path.read_text(), Loader=_Loader)
        for raw in doc["cases"]:
            where = f"{api.name}/{path.name}: case {raw.get('name')!r}"
            name = raw["name"]
            if not isinstance(name, str) or not _NAME.match(name):
                raise ValueError(f"{where}: a name is letters, digits, '-' and '.', a letter or digit at both ends")
            if name in seen:
                raise ValueError(f"{where}: duplicate case name")
            seen.add(name)
            rules = raw.get("rule", doc.get("rule"))
            if not rules:
                raise ValueError(f"{where}: no rule: give the case or its file a `rule`")
            rules = tuple([rules] if isinstance(rules, str) else rules)
            applies = _applies(raw, doc, order, where)
            default = _normalise(raw["expect"], where)
            overrides = {rev: _normalise(e, where) for rev, e in (raw.get("expect_by_revision") or {}).items()}
            stray = sorted(set(overrides) - set(applies), key=str)
            if stray:
                raise ValueError(f"{where}: expect_by_revision names revision(s) {stray} the case does not apply to "
                                 f"(it applies to {applies})")
            via = raw.get("via", doc.get("via", ["dry-run"]))
            via = tuple([via] if isinstance(via, str) else via)
            if set(via) - set(VIAS):
                raise ValueError(f"{where}: via must be among {VIAS}")
            target = raw.get("target", doc.get("target", "spec"))
            if target not in TARGETS:
                raise ValueError(f"{where}: target must be one of {TARGETS}")
            patch = expand(raw.get("patch") or {})
            if target == "status" and set(patch) - {"status"}:
                raise ValueError(f"{where}: a status case patches status only, not {sorted(set(patch) - {'status'})}")
            # The list of parent entries is `status.<status_key>` in this API; anything else under
            # status is an unknown field, which only a pruning case (S11) writes on purpose.
            other = set((patch.get("status") or {}) if isinstance(patch.get("status"), dict) else ()) - {api.status_key}
            if other and "S11" not in rules:
                raise ValueError(f"{where}: status.{sorted(other)[0]} is no field of {api.name} (its parent entries "
                                 f"are status.{api.status_key}); only a case of rule S11 writes unknown fields")
            cases.append(Case(
                name=name, api=api.name, source=path.name, rules=rules,
                target=target, via=via, patch=patch,
                replace=expand(raw.get("replace") or {}),
                expect={rev: overrides.get(rev, default) for rev in applies},
                field_validation=raw.get("fieldValidation"),
            ))
    return bases, cases


def load_all() -> tuple[dict[str, dict], list[Case]]:
    """The bases of every API (by API name) and the cases of every API, API by API.

    A test id is the case name alone (the API shows as another part of the id),
    and pytest numbers ids that repeat: so names are unique across the APIs too.
    """
    bases: dict[str, dict] = {}
    cases: list[Case] = []
    owner: dict[str, str] = {}
    for api in APIS.values():
        bases[api.name], mine = load(api)
        for case in mine:
            if case.name in owner:
                raise ValueError(f"case {case.name!r} of API {api.name} ({case.source}) has the name of a case of "
                                 f"API {owner[case.name]}: a test id is the case name, so names are unique "
                                 "across all APIs")
            owner[case.name] = api.name
        cases += mine
    return bases, cases


def params(cases: list[Case], target: str) -> list:
    out = []
    for case in cases:
        if case.target != target:
            continue
        for via in case.via:
            test_id = case.name if len(case.via) == 1 else f"{case.name}[{via}]"
            out.append(pytest.param(Sending(case, via), id=test_id, marks=[pytest.mark.rule(*case.rules)]))
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
    assert exp is not None, f"case {case.name} ({case.api}) does not apply to revision {revision.name}"
    label = (f"case {case.name} ({case.api}/{case.source}, rule {', '.join(case.rules)}, "
             f"revision {revision.name})")
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


def _same_api(case: Case, revision: Revision, bases: dict | None = None) -> None:
    """A case runs only with a revision (and a base pool) of its own API: anything else is a harness error."""
    if revision.api.name != case.api:
        raise ValueError(f"case {case.name} is written for API {case.api}, not for {revision.api.name} "
                         f"(revision {revision.name})")
    if bases is not None and (bases.get("pool") or {}).get("apiVersion") != revision.api.api_version:
        raise ValueError(f"case {case.name}: the base pool given is not a {revision.api.api_version} pool")


def build_object(bases: dict, case: Case, via: str, namespace: str) -> dict:
    """The object a spec case sends: the case's patch over `bases["pool"]` (the base of the case's API)."""
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
    """Send a spec case one way (`via`) and judge the answer; `bases` are those of the case's API."""
    _same_api(case, revision, bases)
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
            result = kube.get_as_of(obj["apiVersion"], obj["kind"], obj["metadata"]["name"], namespace,
                                    created["metadata"]["resourceVersion"])
        elif via == "apply":
            result = kube.apply(obj)
        elif via == "update":
            # Start from the complete base, then replace it with the case's object.
            start = merge_patch(bases["pool"], {"metadata": obj["metadata"]})
            created = kube.create(start)
            result = _update_against_latest(kube, obj, case.field_validation, current=created)[1]
            note = foreign_status_note(result, created)
            if note:
                # Judge the status as the create left it: absent stays absent.
                result = {k: v for k, v in result.items() if k != "status"}
                if "status" in created:
                    result["status"] = created["status"]
                evidence.attach_text("status written by another client", note)
    except ApiError as e:
        if e.status not in (400, 422):
            raise
        error = e
    if result is not None:
        evidence.attach_yaml("object as the server returned it", result)
    check(case, revision, result, error)


def _update_against_latest(kube: Kube, obj: dict, field_validation: str | None, *, current: dict,
                           subresource: str | None = None, dry_run: bool = False) -> tuple[dict, dict]:
    """PUT `obj` against the version of the pool last seen (`current`); on a conflict, read and retry.

    What is judged is how the server validates and defaults the object sent,
    not who wrote last: a controller that writes the pool's status in between
    must not turn the case into a 409. (Custom resources take no update
    without a resourceVersion.) Returns the pool as written against, and the answer.
    """
    md = obj["metadata"]

    def write(latest: dict) -> dict:
        body = copy.deepcopy(obj)
        body["metadata"]["resourceVersion"] = latest["metadata"]["resourceVersion"]
        return kube.replace(body, subresource=subresource, dry_run=dry_run, field_validation=field_validation)
    return kube.write_latest(obj["apiVersion"], obj["kind"], md["name"], md["namespace"], write, current=current)


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


@dataclass
class StatusPool:
    """The real pool that status cases write to with dry-run: as created (what every case's patch
    is merged over) and as last seen (the version the next write is tried against; a controller
    may have written the pool's status since)."""
    created: dict
    seen: dict | None = None


def run_status_case(kube: Kube, case: Case, revision: Revision, pool: StatusPool) -> None:
    """Send the case's status to /status (dry-run) as a merge patch over the pool as it was created.

    The patch is merged here, over the status the create stored, and the whole
    object is sent: a controller that has since written the pool's status
    cannot change what the case starts from.
    """
    _same_api(case, revision)
    created = pool.created
    if created.get("apiVersion") != revision.api.api_version:
        raise ValueError(f"case {case.name}: the pool given is not a {revision.api.api_version} pool")
    md = created["metadata"]
    body = merge_patch(created, case.patch)
    body["metadata"] = {"name": md["name"], "namespace": md["namespace"]}
    result = error = None
    try:
        # A dry-run write changes nothing: the version written against is still the latest.
        pool.seen, result = _update_against_latest(kube, body, None, current=pool.seen or created,
                                                   subresource="status", dry_run=True)
    except ApiError as e:
        if e.status not in (400, 422):
            raise
        error = e
    evidence.attach_yaml("applied status patch (dry-run)", case.patch)
    if result is not None:
        evidence.attach_yaml("object as the server returned it", result)
    check(case, revision, result, error)
