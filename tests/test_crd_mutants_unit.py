"""tests/crd_mutants.py on plain data: what each operator yields, and that it changes one thing only."""

import copy

import pytest
import yaml

from conformance.revisions import REVISIONS

from . import crd_mutants
from .crd_mutants import mutants

SCHEMA = ("spec", "versions", 0, "schema", "openAPIV3Schema")


def _crd(schema: dict, subresources: dict | None = None, versions_before: tuple = ()) -> dict:
    version = {"name": "v1alpha2", "served": True, "storage": True, "schema": {"openAPIV3Schema": schema}}
    if subresources is not None:
        version["subresources"] = subresources
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "things.example.com"},
            "spec": {"group": "example.com", "versions": [*versions_before, version]}}


def _obj(**props) -> dict:
    return {"type": "object", "properties": props}


def _by_name(crd: dict) -> dict:
    out = {m.name: m for m in mutants(crd)}
    assert len(out) == len(list(mutants(crd))), "mutant names are not unique"
    return out


def _at(doc, pointer: str):
    for part in pointer.lstrip("/").split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        doc = doc[int(part)] if isinstance(doc, list) else doc[part]
    return doc


def _diff(a, b, path="") -> list[str]:
    """Paths (JSON Pointer) where two documents differ."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b), key=str):
            sub = f"{path}/{k}"
            if k not in a or k not in b:
                out.append(sub)
            else:
                out += _diff(a[k], b[k], sub)
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [p for i, (x, y) in enumerate(zip(a, b, strict=True)) for p in _diff(x, y, f"{path}/{i}")]
    return [] if a == b else [path]


def test_drops_each_validation_keyword_of_a_leaf():
    crd = _crd(_obj(spec=_obj(port={"type": "integer", "format": "int32", "minimum": 1, "maximum": 65535},
                              name={"type": "string", "minLength": 1, "maxLength": 253, "pattern": "^a$"},
                              mode={"type": "string", "enum": ["A", "B"]},
                              items={"type": "array", "maxItems": 3, "items": {"type": "string"}})))
    names = set(_by_name(crd))
    for kw in ("minimum", "maximum", "format"):
        assert f"drop {kw} at spec.port" in names
    for kw in ("minLength", "maxLength", "pattern"):
        assert f"drop {kw} at spec.name" in names
    assert "drop enum at spec.mode" in names
    assert "drop maxItems at spec.items" in names
    assert "type integer to number at spec.port" in names


def test_a_mutant_touches_only_its_pointer_and_leaves_the_input_alone():
    crd = _crd(_obj(spec={**_obj(name={"type": "string", "maxLength": 5}, kind={"type": "string", "default": "A"}),
                          "required": ["name", "kind"]}),
               subresources={"status": {}})
    before = copy.deepcopy(crd)
    found = list(mutants(crd))
    assert crd == before, "mutants() changed its input"
    assert len(found) > 5
    for m in found:
        changed = _diff(crd, m.crd)
        assert changed, f"{m.name}: the mutant equals the original"
        # Everything that changed lies in the schema node (or subresources) holding the touched key ...
        node = m.pointer.rsplit("/", 2 if m.pointer.rsplit("/", 1)[1].isdigit() else 1)[0]
        assert all(p == node or p.startswith(node + "/") for p in changed), \
            f"{m.name}: changed {changed} outside {node}"
        # ... and the touched key itself is among the changes.
        assert any(m.pointer == p or m.pointer.startswith(p + "/") for p in changed), (m.name, changed)
    assert len({id(m.crd) for m in found}) == len(found), "two mutants share one CRD object"


def test_drop_keyword_removes_exactly_that_key():
    crd = _crd(_obj(spec=_obj(name={"type": "string", "maxLength": 5, "minLength": 1})))
    m = _by_name(crd)["drop maxLength at spec.name"]
    assert m.field == "spec.name"
    assert m.pointer == "/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/name/maxLength"
    assert _at(m.crd, "/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/name") == {
        "type": "string", "minLength": 1}


def test_field_paths_name_list_items_and_map_values():
    crd = _crd(_obj(status=_obj(parent={"type": "array", "maxItems": 2, "items": _obj(
                        conditions={"type": "array", "items": _obj(reason={"type": "string", "pattern": "^R$"})})}),
                    spec=_obj(selector={"type": "object",
                                        "additionalProperties": {"type": "string", "maxLength": 63}})))
    names = set(_by_name(crd))
    assert "drop maxItems at status.parent" in names
    assert "drop pattern at status.parent[].conditions[].reason" in names
    assert "drop maxLength at spec.selector.*" in names


def test_each_required_entry_is_dropped_on_its_own():
    crd = _crd(_obj(spec={**_obj(a={"type": "string"}, b={"type": "string"}), "required": ["a", "b"]}))
    by = _by_name(crd)
    spec = "/spec/versions/0/schema/openAPIV3Schema/properties/spec"
    assert _at(by["drop required a at spec"].crd, spec)["required"] == ["b"]
    assert _at(by["drop required b at spec"].crd, spec)["required"] == ["a"]
    assert by["drop required b at spec"].pointer == spec + "/required/1"


def test_the_last_required_entry_removes_the_list():
    crd = _crd(_obj(spec={**_obj(a={"type": "string"}), "required": ["a"]}))
    spec = _at(_by_name(crd)["drop required a at spec"].crd, "/spec/versions/0/schema/openAPIV3Schema/properties/spec")
    assert "required" not in spec


@pytest.mark.parametrize(("node", "expected_name", "new"), [
    ({"type": "string", "enum": ["FailOpen", "FailClose"], "default": "FailClose"},
     "change default at spec.x: FailClose -> FailOpen", "FailOpen"),
    ({"type": "string", "default": "Service"}, "change default at spec.x: Service -> Pod", "Pod"),
    ({"type": "string", "default": ""}, 'change default at spec.x: "" -> apps', "apps"),
    ({"type": "string", "default": "Other"}, "change default at spec.x: Other -> OtherX", "OtherX"),
    ({"type": "integer", "default": 3, "maximum": 3}, "change default at spec.x: 3 -> 2", 2),
    ({"type": "boolean", "default": False}, "change default at spec.x: False -> True", True),
])
def test_default_is_dropped_and_changed(node, expected_name, new):
    crd = _crd(_obj(spec=_obj(x=node)))
    by = _by_name(crd)
    assert "default" not in _at(by["drop default at spec.x"].crd,
                                "/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/x")
    assert _at(by[expected_name].crd, by[expected_name].pointer) == new


def test_a_list_map_default_changes_the_key_of_its_first_entry():
    conditions = {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"],
                  "default": [{"type": "Ready", "status": "Unknown"}],
                  "items": _obj(type={"type": "string"}, status={"type": "string"})}
    by = _by_name(_crd(_obj(status=_obj(conditions=conditions))))
    m = by["change default at status.conditions: [0].type Ready -> Accepted"]
    assert _at(m.crd, m.pointer) == [{"type": "Accepted", "status": "Unknown"}]


def test_list_map_turns_atomic_without_its_keys():
    conditions = {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"],
                  "items": {**_obj(type={"type": "string"}), "required": ["type"]}}
    m = _by_name(_crd(_obj(status=_obj(conditions=conditions))))["list-type map to atomic at status.conditions"]
    node = _at(m.crd, "/spec/versions/0/schema/openAPIV3Schema/properties/status/properties/conditions")
    assert node["x-kubernetes-list-type"] == "atomic"
    assert "x-kubernetes-list-map-keys" not in node


def test_preserve_unknown_fields_only_where_objects_prune():
    crd = _crd({**_obj(metadata={"type": "object"},
                       spec=_obj(selector={"type": "object", "additionalProperties": {"type": "string"}},
                                 open={"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                                 ref=_obj(name={"type": "string"})))})
    names = {n for n in _by_name(crd) if n.startswith("preserve unknown fields")}
    assert names == {"preserve unknown fields at (root)", "preserve unknown fields at spec",
                     "preserve unknown fields at spec.ref"}
    m = _by_name(crd)["preserve unknown fields at spec.ref"]
    assert _at(m.crd, m.pointer) is True


def test_each_cel_rule_is_dropped_on_its_own():
    node = {**_obj(a={"type": "string"}), "x-kubernetes-validations": [{"rule": "self.a != 'x'"}, {"rule": "true"}]}
    by = _by_name(_crd(_obj(spec=node)))
    rules = _at(by["drop validation rule 0 at spec"].crd, "/spec/versions/0/schema/openAPIV3Schema/properties/spec")
    assert rules["x-kubernetes-validations"] == [{"rule": "true"}]


def test_status_subresource_is_dropped_for_the_version_only():
    crd = _crd(_obj(spec=_obj()), subresources={"status": {}, "scale": {"specReplicasPath": ".spec.r"}},
               versions_before=({"name": "v1alpha1", "served": False, "storage": False,
                                 "subresources": {"status": {}}},))
    m = _by_name(crd)["drop status subresource of v1alpha2"]
    assert m.pointer == "/spec/versions/1/subresources/status"
    assert m.crd["spec"]["versions"][1]["subresources"] == {"scale": {"specReplicasPath": ".spec.r"}}
    assert m.crd["spec"]["versions"][0]["subresources"] == {"status": {}}


def test_a_crd_without_the_version_is_an_error():
    with pytest.raises(ValueError, match="v1alpha2"):
        list(mutants({"spec": {"versions": [{"name": "v1", "schema": {"openAPIV3Schema": _obj()}}]}}))


def test_the_generated_crds_yield_every_listed_mutant():
    """EQUIVALENT and REFUSED name only mutants some revision's CRD yields (found without a cluster);
    they hold both APIs' names, which their field paths tell apart."""
    names = set()
    for revision in REVISIONS.values():
        names |= set(_by_name(yaml.safe_load(revision.crd.read_text())))
    assert not set(crd_mutants.EQUIVALENT) & set(crd_mutants.REFUSED)
    assert set(crd_mutants.EQUIVALENT) <= names, set(crd_mutants.EQUIVALENT) - names
    assert set(crd_mutants.REFUSED) <= names, set(crd_mutants.REFUSED) - names
    for reason in [*crd_mutants.EQUIVALENT.values(), *crd_mutants.REFUSED.values()]:
        assert reason.strip()


@pytest.mark.parametrize("revision", ["seed", "v1.0", "v1.6"])
def test_applies_picks_the_entries_of_one_crd(revision):
    crd = yaml.safe_load(REVISIONS[revision].crd.read_text())
    names = set(_by_name(crd))
    equivalent = crd_mutants.applies(crd_mutants.EQUIVALENT, crd)
    refused = crd_mutants.applies(crd_mutants.REFUSED, crd)
    assert equivalent and set(equivalent) <= names and set(refused) <= names
    # Without the uniqueness rule (v1.0) targetPorts may lose maxItems; with it (v1.1+) the API server
    # refuses the CRD (the rule's cost is unbounded).
    ga = REVISIONS[revision].api.name == "v1"
    assert ("drop maxItems at spec.targetPorts" in refused) == (revision == "v1.6")
    assert ("drop required type at status.parents[].conditions[]" in refused) == ga


def test_the_ga_crd_gets_mutants_of_its_own_kinds():
    names = set(_by_name(yaml.safe_load(REVISIONS["v1.6"].crd.read_text())))
    for name in ("drop validation rule 0 at spec.targetPorts", "drop validation rule 0 at spec.endpointPickerRef",
                 "drop minProperties at spec.selector.matchLabels", "drop maxProperties at spec.selector.matchLabels",
                 "drop minItems at spec.targetPorts", "drop enum at spec.appProtocol",
                 "change default at spec.appProtocol: http -> kubernetes.io/h2c",
                 "change default at status.parents[].parentRef.group: gateway.networking.k8s.io -> "
                 "networking.example.com",
                 "drop pattern at status.parents[].controllerName", "drop status subresource of v1"):
        assert name in names, name


def test_the_generated_crd_gets_mutants_of_every_kind():
    crd = yaml.safe_load(REVISIONS["seed"].crd.read_text())
    names = set(_by_name(crd))
    for name in ("drop maxLength at spec.extensionRef.name", "drop pattern at spec.extensionRef.group",
                 "drop enum at spec.extensionRef.failureMode", "drop maxItems at status.parent",
                 "drop required targetPortNumber at spec", "drop default at spec.extensionRef.kind",
                 "change default at spec.extensionRef.failureMode: FailClose -> FailOpen",
                 "change default at spec.extensionRef.kind: Service -> Pod",
                 "change default at status.parent[].conditions: [0].type Ready -> Accepted",
                 "list-type map to atomic at status.parent[].conditions",
                 "type integer to number at spec.targetPortNumber",
                 "preserve unknown fields at spec.extensionRef", "drop status subresource of v1alpha2",
                 "drop minimum at status.parent[].conditions[].observedGeneration"):
        assert name in names


# -- which schema cases a mutant's run tries first ----------------------------------


def test_steps_read_list_items_and_indices_alike():
    assert crd_mutants.steps("status.parents[0].conditions[].type") == (
        "status", "parents", "[]", "conditions", "[]", "type")
    assert crd_mutants.steps("status.parents.0.conditions") == ("status", "parents", "[]", "conditions")
    assert crd_mutants.steps("spec.selector.*") == ("spec", "selector", "*")
    assert crd_mutants.steps(crd_mutants.ROOT) == crd_mutants.steps("") == ()


def test_each_mutant_reaches_its_field_its_required_entry_or_status():
    crd = _crd(_obj(spec={**_obj(a={"type": "string", "maxLength": 3}), "required": ["a"]}),
               subresources={"status": {}})
    by = _by_name(crd)
    assert by["drop maxLength at spec.a"].reaches == "spec.a"
    assert by["drop required a at spec"].reaches == "spec.a"
    assert by["preserve unknown fields at (root)"].reaches == ""
    assert by["drop status subresource of v1alpha2"].reaches == "status"


def _case(name, patch=None, **expect):
    from types import SimpleNamespace

    return SimpleNamespace(name=name, patch=patch or {}, replace={}, expect={"r": expect})


def test_the_case_that_names_the_field_comes_first():
    cases = [
        _case("elsewhere", {"spec": {"b": 1}}, outcome="rejected", causes=[{"field": "spec.b"}]),
        _case("writes-a", {"spec": {"a": "x"}}, outcome="accepted", result={}, absent=[]),
        _case("below-a", {"spec": {"a": {"c": 1}}}, outcome="rejected", causes=[{"field": "spec.a.c"}]),
        _case("rejects-a", {"spec": {"a": "xxxx"}}, outcome="rejected", causes=[{"field": "spec.a"}]),
        _case("defaults-a", {"spec": {"a": None}}, outcome="accepted", result={"spec": {"a": "d"}}, absent=[]),
    ]
    drop = crd_mutants.Mutant("drop maxLength at spec.a", "spec.a", "/x", {}, "spec.a")
    default = crd_mutants.Mutant("drop default at spec.a", "spec.a", "/x", {}, "spec.a")
    assert crd_mutants.first_cases(drop, cases) == ["rejects-a", "below-a", "writes-a", "defaults-a"]
    assert crd_mutants.first_cases(default, cases) == ["defaults-a", "writes-a", "below-a", "rejects-a"]
    assert crd_mutants.first_cases(crd_mutants.Mutant("m", crd_mutants.ROOT, "/x", {}, ""), cases) == []


@pytest.mark.parametrize("revision", ["seed", "v1.6"])
def test_every_mutant_below_the_root_has_cases_to_try_first(revision):
    """A mutant of a field no case writes, expects or rejects would be run through the whole tier
    in suite order: still judged, only slowly. The cases cover every field the CRDs validate."""
    from conformance import schema_cases

    cases = [c for c in schema_cases.load_all()[1] if c.expectation(REVISIONS[revision]) is not None]
    crd = yaml.safe_load(REVISIONS[revision].crd.read_text())
    without = [m.name for m in mutants(crd) if m.reaches and not crd_mutants.first_cases(m, cases)]
    assert not without


def test_the_run_keeps_the_tier_and_puts_the_named_cases_first(tmp_path, monkeypatch):
    """The plugin a mutant's run loads (-p tests.suite_run): the tier's modules only, named cases first."""
    from pathlib import Path
    from types import SimpleNamespace

    from . import suite_run

    def item(module, case=None):
        params = {"sending": SimpleNamespace(name=case)} if case else {}
        return SimpleNamespace(path=Path(module), callspec=SimpleNamespace(params=params), name=f"{module}:{case}")

    items = [item("test_schema.py", "a"), item("test_other.py"), item("test_schema.py", "b"),
             item("test_status_subresource.py"), item("test_schema.py", "c")]
    deselected = []
    config = SimpleNamespace(hook=SimpleNamespace(pytest_deselected=lambda items: deselected.extend(items)))
    monkeypatch.setenv(*next(iter(suite_run.ordered(tmp_path / "order.json",
                                                    ["test_schema.py", "test_status_subresource.py"],
                                                    ["c", "b"]).items())))
    suite_run.pytest_collection_modifyitems(config, items)
    assert [i.name for i in items] == ["test_schema.py:c", "test_schema.py:b", "test_schema.py:a",
                                       "test_status_subresource.py:None"]
    assert [i.name for i in deselected] == ["test_other.py:None"]
