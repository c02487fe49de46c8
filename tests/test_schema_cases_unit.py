"""conformance/schema_cases.py and the case folders (manifests/schema/<api>/) without a cluster.

What the loader refuses, what `since` means, and facts about the data that no
run against a server would notice: every case is of its folder's API and its
revisions, names are unique across the APIs (they are test ids), each field a
case writes exists in that API's schema (a typo would silently be pruned and
pass as "accepted"), and each API's folder covers the rules SPEC gives it.
"""

from __future__ import annotations

import functools
import textwrap
from pathlib import Path

import pytest
import yaml

from conformance import rules, schema_cases
from conformance.revisions import APIS, REVISIONS, Api, revisions_of

BASES, CASES = schema_cases.load_all()
BY_API = {name: [c for c in CASES if c.api == name] for name in APIS}

# The rules each API's cases must cover. S10 (status is a subresource) is
# test_status_subresource.py's; D5 and D9 are the status defaults of each API.
COVERED = {
    "v1alpha2": {f"S{i}" for i in range(1, 13)} - {"S10"} | {f"D{i}" for i in range(1, 8)},
    "v1": ({f"S{i}" for i in range(1, 18)} - {"S10"}) | ({f"D{i}" for i in range(1, 10)}),
}


def _write(folder: Path, api: Api, files: dict[str, str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "_base.yaml").write_text(yaml.safe_dump({"pool": schema_cases.merge_patch(
        schema_cases.base_pool(api), {})}))
    for name, text in files.items():
        (folder / name).write_text(textwrap.dedent(text))
    return folder


def _load(tmp_path: Path, api: str, text: str):
    return schema_cases.load(APIS[api], _write(tmp_path / api, APIS[api], {"cases.yaml": text}))[1]


# -- the data ---------------------------------------------------------------------------


def test_every_api_has_cases_and_a_base_of_its_own():
    for name, api in APIS.items():
        assert BY_API[name], f"no cases for API {name}"
        assert BASES[name]["pool"]["apiVersion"] == api.api_version
        assert api.schema_cases.name == name and (api.schema_cases / "_base.yaml").is_file()


def test_cases_are_keyed_by_revisions_of_their_own_api():
    for case in CASES:
        own = {r.name for r in revisions_of(APIS[case.api])}
        assert case.expect and set(case.expect) <= own, (case.name, set(case.expect) - own)
        for revision in REVISIONS.values():
            if revision.api.name != case.api:
                assert case.expectation(revision) is None


def test_names_are_unique_across_apis_and_the_test_ids_are_the_names():
    names = [c.name for c in CASES]
    assert len(names) == len(set(names))
    for target in schema_cases.TARGETS:
        ids = [p.id for p in schema_cases.params(CASES, target)]
        assert len(ids) == len(set(ids))
        assert {i.split("[")[0] for i in ids} == {c.name for c in CASES if c.target == target}


@pytest.mark.parametrize("api", list(APIS))
def test_each_api_covers_its_rules(api):
    named = {r for c in BY_API[api] for r in c.rules}
    assert named <= set(rules.RULES), named - set(rules.RULES)
    assert COVERED[api] <= named, f"rules of API {api} no case checks: {sorted(COVERED[api] - named)}"


def test_the_v1_only_rules_are_not_in_the_v1alpha2_cases():
    v1_only = {"S13", "S14", "S15", "S16", "S17", "D8", "D9"}
    assert not {r for c in BY_API["v1alpha2"] for r in c.rules} & v1_only


@functools.cache
def _schema(revision: str) -> dict:
    rev = REVISIONS[revision]
    crd = yaml.load(rev.crd.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    [version] = [v for v in crd["spec"]["versions"] if v["name"] == rev.api.version]
    return version["schema"]["openAPIV3Schema"]


def _schemas(api: str, revision_names) -> list[dict]:
    return [_schema(name) for name in revision_names]


def _unknown_paths(value, schema: dict, path: str = "") -> list[str]:
    """The paths in `value` (a patch) that `schema` has no field for."""
    if isinstance(value, dict) and schema.get("type") == "object":
        props, extra = schema.get("properties") or {}, schema.get("additionalProperties")
        out = []
        for k, v in value.items():
            sub = f"{path}.{k}" if path else k
            if k in props:
                out += _unknown_paths(v, props[k], sub)
            elif isinstance(extra, dict):
                out += _unknown_paths(v, extra, sub)
            elif path != "metadata":
                out.append(sub)
        return out
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [p for i, v in enumerate(value) for p in _unknown_paths(v, schema["items"], f"{path}[{i}]")]
    return []


@pytest.mark.parametrize("api", list(APIS))
def test_cases_write_only_fields_of_their_api(api):
    """A field no revision of the case's API has is pruned, and the case would pass as accepted for the
    wrong reason; only a case of rule S11 (pruning) writes one on purpose."""
    wrong = []
    for case in BY_API[api]:
        if "S11" in case.rules:
            continue
        schemas = _schemas(api, case.expect)
        written = [case.patch] + [_nest(k, v) for k, v in case.replace.items()]
        for patch in written:
            unknown = [set(_unknown_paths(patch, s)) for s in schemas]
            missing = set.intersection(*unknown) if unknown else set()
            wrong += [f"{case.name}: {p}" for p in sorted(missing)]
    assert not wrong, wrong


def _nest(dotted: str, value):
    out: dict = {}
    cur = out
    *head, last = dotted.split(".")
    for part in head:
        cur = cur.setdefault(part, {})
    cur[last] = value
    return out


def test_since_is_the_revision_and_every_later_one():
    [case] = [c for c in CASES if c.name == "targetPorts-neighbours-distinct"]
    assert list(case.expect) == ["v1.1", "v1.4", "v1.6"]
    [case] = [c for c in CASES if c.name == "appProtocol-HTTP"]
    assert list(case.expect) == ["v1.4", "v1.6"]


def test_a_case_with_a_revision_override_expects_it_there_only():
    [case] = [c for c in CASES if c.name == "endpointPickerRef-missing"]
    assert case.expect["v1.6"]["outcome"] == "accepted"
    assert {case.expect[r]["outcome"] for r in ("v1.0", "v1.0.2", "v1.1", "v1.4")} == {"rejected"}


# -- what the loader refuses ----------------------------------------------------------


@pytest.mark.parametrize(("text", "says"), [
    ("""\
     rule: S1
     cases:
       - {name: a, revisions: [seed], expect: accepted}
     """, "unknown revision(s) ['seed']"),
    ("""\
     rule: S1
     cases:
       - {name: a, since: v0.5, expect: accepted}
     """, "`since: v0.5` names no revision of this API"),
    ("""\
     rule: S1
     cases:
       - {name: a, since: v1.1, revisions: [v1.6], expect: accepted}
     """, "both `revisions` and `since`"),
    ("""\
     rule: S1
     since: v1.4
     cases:
       - {name: a, expect: accepted, expect_by_revision: {v1.0: accepted}}
     """, "expect_by_revision names revision(s) ['v1.0'] the case does not apply to"),
    ("""\
     rule: S1
     cases:
       - {name: a, expect: accepted}
       - {name: a, expect: accepted}
     """, "duplicate case name"),
    ("""\
     rule: S1
     cases:
       - {name: "a_b", expect: accepted}
     """, "a name is letters, digits"),
    ("""\
     rule: S1
     cases:
       - {name: a, target: status, patch: {status: {parent: []}}, expect: accepted}
     """, "status.parent is no field of v1 (its parent entries are status.parents)"),
    ("""\
     rule: S1
     cases:
       - {name: a, target: status, patch: {spec: {}}, expect: accepted}
     """, "a status case patches status only"),
    ("""\
     rule: S1
     cases:
       - {name: a, via: [post], expect: accepted}
     """, "via must be among"),
])
def test_the_loader_refuses(tmp_path, text, says):
    with pytest.raises(ValueError) as e:
        _load(tmp_path, "v1", text)
    assert says in str(e.value), str(e.value)


def test_a_pruning_case_may_write_another_status_field(tmp_path):
    [case] = _load(tmp_path, "v1", """\
        cases:
          - {name: a, rule: S11, target: status, patch: {status: {parent: []}}, expect: accepted}
        """)
    assert case.api == "v1" and list(case.expect) == [r.name for r in revisions_of(APIS["v1"])]


def test_a_base_of_another_api_is_refused(tmp_path):
    folder = _write(tmp_path / "v1", APIS["v1alpha2"], {})
    with pytest.raises(ValueError, match="apiVersion must be inference.networking.k8s.io/v1"):
        schema_cases.load(APIS["v1"], folder)


def test_a_name_in_two_apis_is_refused(tmp_path, monkeypatch):
    for name in APIS:
        _write(tmp_path / name, APIS[name], {"cases.yaml": "rule: S1\ncases:\n  - {name: same, expect: accepted}\n"})
    monkeypatch.setattr(Api, "schema_cases", property(lambda self: tmp_path / self.name))
    with pytest.raises(ValueError, match="has the name of a case of API v1alpha2"):
        schema_cases.load_all()


def test_a_case_never_runs_with_another_apis_revision():
    case = BY_API["v1"][0]
    with pytest.raises(ValueError, match="written for API v1, not for v1alpha2"):
        schema_cases.run_spec_case(None, BASES["v1"], case, "dry-run", REVISIONS["seed"], "ns")
    with pytest.raises(ValueError, match="base pool given is not a inference.networking.k8s.io/v1 pool"):
        schema_cases.run_spec_case(None, BASES["v1alpha2"], case, "dry-run", REVISIONS["v1.6"], "ns")
    status = next(c for c in BY_API["v1alpha2"] if c.target == "status")
    with pytest.raises(ValueError, match="written for API v1alpha2"):
        schema_cases.run_status_case(None, status, REVISIONS["v1.6"], schema_cases.StatusPool(BASES["v1"]["pool"]))
