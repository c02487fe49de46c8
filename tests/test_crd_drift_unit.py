"""conformance/crd_drift.py on plain data: what it names, what it ignores, and that no mutant escapes it."""

import copy

import pytest
import yaml

from conformance import crd_drift
from conformance.revisions import REVISIONS

from . import crd_mutants

SCHEMA = ("spec", "versions", 0, "schema", "openAPIV3Schema")

# Mutants of tests/crd_mutants.py that change nothing in what the CRD says, so
# crd_drift rightly finds no difference, with the reason. Every other mutant of
# every revision's CRD must be named.
_MIN_LENGTH_0 = "minLength 0 is the lower bound of every string: it says nothing"
NO_DIFFERENCE: dict[str, str] = {
    "drop minLength at spec.selector.*": _MIN_LENGTH_0,
    # The GA API's CRDs (v1.x) write minLength 0 on label values and on both group fields.
    "drop minLength at spec.selector.matchLabels.*": _MIN_LENGTH_0,
    "drop minLength at spec.endpointPickerRef.group": _MIN_LENGTH_0,
    "drop minLength at status.parents[].parentRef.group": _MIN_LENGTH_0,
}


def _crd(name: str) -> dict:
    return yaml.safe_load(REVISIONS[name].crd.read_text())


def _node(crd: dict, *path: str) -> dict:
    node = crd
    for k in SCHEMA:
        node = node[k]
    for name in path:
        if name == "[]":
            node = node["items"]
        elif name == "*":
            node = node["additionalProperties"]
        else:
            node = node["properties"][name]
    return node


def _diffs(installed: dict, expected: dict, revision: str = "seed") -> list[str]:
    return [str(d) for d in crd_drift.differences(installed, expected, revision)]


def _changed(name: str, edit) -> dict:
    crd = _crd(name)
    edit(crd)
    return crd


# -- what it names ------------------------------------------------------------------


def test_each_revision_crd_has_no_difference_from_itself():
    for name in REVISIONS:
        assert _diffs(_crd(name), _crd(name), name) == []


def test_an_enum_that_lost_a_value():
    crd = _changed("seed", lambda c: _node(c, "spec", "extensionRef", "failureMode").__setitem__("enum", ["FailOpen"]))
    assert _diffs(crd, _crd("seed")) == [
        "spec.extensionRef.failureMode: enum is [FailOpen] where revision seed has [FailClose, FailOpen]"]


def test_an_enum_that_gained_a_value_and_one_in_another_order():
    node = {"enum": ["FailOpen", "FailClose", "Fail"]}
    crd = _changed("seed", lambda c: _node(c, "spec", "extensionRef", "failureMode").update(node))
    assert _diffs(crd, _crd("seed")) == [
        "spec.extensionRef.failureMode: enum is [Fail, FailClose, FailOpen] "
        "where revision seed has [FailClose, FailOpen]"]
    reordered = _changed("seed", lambda c: _node(c, "spec", "extensionRef", "failureMode").update(
        {"enum": ["FailClose", "FailOpen"]}))
    assert _diffs(reordered, _crd("seed")) == []


def test_a_raised_maximum_and_a_dropped_one():
    crd = _changed("seed", lambda c: _node(c, "spec", "targetPortNumber").__setitem__("maximum", 65536))
    assert _diffs(crd, _crd("seed")) == ["spec.targetPortNumber: maximum is 65536 where revision seed has 65535"]
    crd = _changed("seed", lambda c: _node(c, "spec", "targetPortNumber").pop("maximum"))
    assert _diffs(crd, _crd("seed")) == ["spec.targetPortNumber: no maximum where revision seed has 65535"]


def test_a_number_written_as_a_float_is_the_same_number():
    crd = _changed("seed", lambda c: _node(c, "spec", "targetPortNumber").__setitem__("maximum", 65535.0))
    assert _diffs(crd, _crd("seed")) == []


@pytest.mark.parametrize(("path", "edit", "expected"), [
    (("spec", "targetPortNumber"), {"exclusiveMaximum": True},
     "spec.targetPortNumber: exclusiveMaximum is true where revision seed has none"),
    (("spec", "targetPortNumber"), {"minimum": 0}, "spec.targetPortNumber: minimum is 0 where revision seed has 1"),
    (("spec", "extensionRef", "name"), {"maxLength": 63},
     "spec.extensionRef.name: maxLength is 63 where revision seed has 253"),
    (("spec", "extensionRef", "name"), {"minLength": 0},
     "spec.extensionRef.name: no minLength where revision seed has 1"),
    (("spec", "extensionRef", "kind"), {"pattern": "^[A-Z].*$"},
     'spec.extensionRef.kind: pattern is "^[A-Z].*$" where revision seed has "^[a-zA-Z]([-a-zA-Z0-9]*[a-zA-Z0-9])?$"'),
    (("spec", "extensionRef", "kind"), {"default": "Pod"},
     "spec.extensionRef.kind: default is Pod where revision seed has Service"),
    (("spec", "extensionRef", "group"), {"default": "apps"},
     'spec.extensionRef.group: default is apps where revision seed has ""'),
    (("spec", "extensionRef", "portNumber"), {"default": 9002},
     "spec.extensionRef.portNumber: default is 9002 where revision seed has none"),
    (("spec", "extensionRef"), {"required": ["kind", "name"]},
     "spec.extensionRef: required is [kind, name] where revision seed has [name]"),
    (("spec", "targetPortNumber"), {"type": "number"},
     "spec.targetPortNumber: type is number where revision seed has integer"),
    (("spec", "targetPortNumber"), {"format": "int64"},
     "spec.targetPortNumber: format is int64 where revision seed has int32"),
    (("status", "parent"), {"maxItems": 64}, "status.parent: maxItems is 64 where revision seed has 32"),
    (("status", "parent"), {"minItems": 1}, "status.parent: minItems is 1 where revision seed has none"),
    (("spec", "selector"), {"maxProperties": 64}, "spec.selector: maxProperties is 64 where revision seed has none"),
    (("spec", "selector"), {"minProperties": 1}, "spec.selector: minProperties is 1 where revision seed has none"),
    (("spec", "extensionRef"), {"x-kubernetes-preserve-unknown-fields": True},
     "spec.extensionRef: x-kubernetes-preserve-unknown-fields is true where revision seed has none"),
    (("status", "parent", "[]", "parentRef"), {"x-kubernetes-map-type": "granular"},
     "status.parent[].parentRef: no x-kubernetes-map-type where revision seed has atomic"),
    (("status", "parent", "[]", "conditions"), {"x-kubernetes-list-type": "atomic"},
     "status.parent[].conditions: no x-kubernetes-list-type where revision seed has map"),
    (("status", "parent", "[]", "conditions"), {"x-kubernetes-list-map-keys": ["type", "reason"]},
     "status.parent[].conditions: x-kubernetes-list-map-keys is [reason, type] where revision seed has [type]"),
    (("status", "parent", "[]", "conditions", "[]", "status"), {"enum": ["True", "False", "Unknown", "Yes"]},
     'status.parent[].conditions[].status: enum is ["False", "True", Unknown, Yes] where revision seed has '
     '["False", "True", Unknown]'),
    (("spec", "selector", "*"), {"maxLength": 64}, "spec.selector.*: maxLength is 64 where revision seed has 63"),
    (("spec",), {"nullable": True}, "spec: nullable is true where revision seed has none"),
])
def test_each_keyword_is_named_by_field_path(path, edit, expected):
    crd = _changed("seed", lambda c: _node(c, *path).update(edit))
    assert _diffs(crd, _crd("seed")) == [expected]


def test_a_list_map_default_that_changed():
    crd = _crd("seed")
    assert _diffs(crd, _crd("v0.2"), "v0.2") == [
        'status.parent[].conditions: default is [{"lastTransitionTime": "1970-01-01T00:00:00Z", '
        '"message": "Waiting for controller", "reason": "Pending", "status": "Unknown", "type": "Ready"}] '
        'where revision v0.2 has [{"lastTransitionTime": "1970-01-01T00:00:00Z", '
        '"message": "Waiting for controller", "reason": "Pending", "status": "Unknown", "type": "Accepted"}]']


def test_a_default_of_true_is_not_a_default_of_1():
    a = _changed("seed", lambda c: _node(c, "spec", "extensionRef", "portNumber").__setitem__("default", 1))
    b = _changed("seed", lambda c: _node(c, "spec", "extensionRef", "portNumber").__setitem__("default", True))
    assert _diffs(a, b) == ["spec.extensionRef.portNumber: default is 1 where revision seed has true"]


def test_fields_present_and_missing():
    def edit(c):
        ref = _node(c, "spec", "extensionRef")
        ref["properties"]["namespace"] = {"type": "string"}
        del ref["properties"]["portNumber"]
    assert _diffs(_changed("seed", edit), _crd("seed")) == [
        "spec.extensionRef.namespace: present where revision seed has no such field",
        "spec.extensionRef.portNumber: missing where revision seed has this field"]


def test_cel_rules_are_compared_by_rule_text():
    rule = {"rule": "self.kind != 'ExternalName'", "message": "no ExternalName"}
    with_rule = _changed("seed",
                         lambda c: _node(c, "spec", "extensionRef").__setitem__("x-kubernetes-validations", [rule]))
    assert _diffs(with_rule, _crd("seed")) == [
        "spec.extensionRef: CEL rule \"self.kind != 'ExternalName'\" where revision seed has no such rule"]
    assert _diffs(_crd("seed"), with_rule) == [
        "spec.extensionRef: no CEL rule \"self.kind != 'ExternalName'\" where revision seed has it"]
    reworded = _changed("seed", lambda c: _node(c, "spec", "extensionRef").__setitem__(
        "x-kubernetes-validations", [{**rule, "message": "other words", "messageExpression": "'x'"}]))
    assert _diffs(reworded, with_rule) == []
    with_reason = _changed("seed", lambda c: _node(c, "spec", "extensionRef").__setitem__(
        "x-kubernetes-validations", [{**rule, "reason": "FieldValueForbidden", "fieldPath": ".kind"}]))
    assert _diffs(with_reason, with_rule) == [
        "spec.extensionRef: reason of CEL rule \"self.kind != 'ExternalName'\" is FieldValueForbidden "
        "where revision seed has none",
        "spec.extensionRef: fieldPath of CEL rule \"self.kind != 'ExternalName'\" is .kind "
        "where revision seed has none"]


def test_subresources_served_and_storage():
    def edit(c):
        v = c["spec"]["versions"][0]
        v["served"] = False
        v["storage"] = False
        v["subresources"] = {"scale": {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"}}
    assert _diffs(_changed("seed", edit), _crd("seed")) == [
        "version v1alpha2: served is false where revision seed has true",
        "version v1alpha2: storage is false where revision seed has true",
        "version v1alpha2: a scale subresource where revision seed has none",
        "version v1alpha2: no status subresource where revision seed has it"]


def test_versions_the_revision_does_not_have_and_a_missing_one():
    def add_v1(c):
        c["spec"]["versions"].append({**copy.deepcopy(c["spec"]["versions"][0]), "name": "v1", "storage": False})
    assert _diffs(_changed("seed", add_v1), _crd("seed")) == [
        "version v1: served where revision seed has no such version"]
    renamed = _changed("seed", lambda c: c["spec"]["versions"][0].__setitem__("name", "v1alpha3"))
    assert _diffs(renamed, _crd("seed")) == [
        "version v1alpha3: served where revision seed has no such version",
        "version v1alpha2: not in the installed CRD where revision seed has it"]


def test_scope_and_preserve_unknown_fields_of_the_crd():
    def edit(c):
        c["spec"]["scope"] = "Cluster"
        c["spec"]["preserveUnknownFields"] = True
    assert _diffs(_changed("seed", edit), _crd("seed")) == [
        "CRD: scope is Cluster where revision seed has Namespaced",
        "CRD: preserveUnknownFields is true where revision seed has false"]


# -- the GA API (v1): CEL rules, property counts, list bounds ---------------------------


UNIQUE_PORTS = "self.all(p1, self.exists_one(p2, p1.number==p2.number))"
SERVICE_PORT = "self.kind != 'Service' || has(self.port)"


def test_v1_cel_rules_dropped_and_added():
    dropped = _changed("v1.6", lambda c: _node(c, "spec", "targetPorts").pop("x-kubernetes-validations"))
    assert _diffs(dropped, _crd("v1.6"), "v1.6") == [
        f"spec.targetPorts: no CEL rule {UNIQUE_PORTS!r} where revision v1.6 has it".replace("'", '"')]
    dropped = _changed("v1.6", lambda c: _node(c, "spec", "endpointPickerRef").pop("x-kubernetes-validations"))
    assert _diffs(dropped, _crd("v1.6"), "v1.6") == [
        f'spec.endpointPickerRef: no CEL rule "{SERVICE_PORT}" where revision v1.6 has it']
    # v1.0 has no uniqueness rule (maxItems 1 makes it moot): a v1.0 CRD that carries one is named too.
    added = _changed("v1.0", lambda c: _node(c, "spec", "targetPorts").__setitem__(
        "x-kubernetes-validations", [{"rule": UNIQUE_PORTS, "message": "port number must be unique"}]))
    assert _diffs(added, _crd("v1.0"), "v1.0") == [
        f'spec.targetPorts: CEL rule "{UNIQUE_PORTS}" where revision v1.0 has no such rule']


def test_v1_cel_rule_text_whitespace_aside():
    def respaced(c):
        _node(c, "spec", "targetPorts")["x-kubernetes-validations"][0]["rule"] = (
            "self.all(p1,  self.exists_one(p2,p1.number == p2.number))")
        _node(c, "spec", "endpointPickerRef")["x-kubernetes-validations"][0]["rule"] = (
            "self.kind!='Service'\n  || has(self.port)")
    assert _diffs(_changed("v1.6", respaced), _crd("v1.6"), "v1.6") == []
    # Inside a string literal a space is meaning: 'Service ' is another rule.
    literal = _changed("v1.6", lambda c: _node(c, "spec", "endpointPickerRef")["x-kubernetes-validations"][0]
                       .__setitem__("rule", "self.kind != 'Service ' || has(self.port)"))
    assert _diffs(literal, _crd("v1.6"), "v1.6") == [
        "spec.endpointPickerRef: CEL rule \"self.kind != 'Service ' || has(self.port)\" where revision v1.6 has no "
        "such rule",
        f'spec.endpointPickerRef: no CEL rule "{SERVICE_PORT}" where revision v1.6 has it']
    loosened = _changed("v1.6", lambda c: _node(c, "spec", "targetPorts")["x-kubernetes-validations"][0]
                        .__setitem__("rule", "self.all(p1, self.exists(p2, p1.number==p2.number))"))
    assert len(_diffs(loosened, _crd("v1.6"), "v1.6")) == 2


def test_v1_cel_rule_reason_and_field_path():
    def edit(c):
        rule = _node(c, "spec", "endpointPickerRef")["x-kubernetes-validations"][0]
        rule.update({"reason": "FieldValueRequired", "fieldPath": ".port", "message": "other words"})
    assert _diffs(_changed("v1.6", edit), _crd("v1.6"), "v1.6") == [
        f'spec.endpointPickerRef: reason of CEL rule "{SERVICE_PORT}" is FieldValueRequired where revision v1.6 '
        "has none",
        f'spec.endpointPickerRef: fieldPath of CEL rule "{SERVICE_PORT}" is .port where revision v1.6 has none']


@pytest.mark.parametrize(("path", "edit", "expected"), [
    (("spec", "selector", "matchLabels"), {"minProperties": 0},
     "spec.selector.matchLabels: no minProperties where revision v1.6 has 1"),
    (("spec", "selector", "matchLabels"), {"maxProperties": 65},
     "spec.selector.matchLabels: maxProperties is 65 where revision v1.6 has 64"),
    (("spec", "targetPorts"), {"maxItems": 16}, "spec.targetPorts: maxItems is 16 where revision v1.6 has 8"),
    (("spec", "targetPorts"), {"minItems": 0}, "spec.targetPorts: no minItems where revision v1.6 has 1"),
    (("spec", "targetPorts"), {"x-kubernetes-list-type": "set"},
     "spec.targetPorts: x-kubernetes-list-type is set where revision v1.6 has none"),
    (("spec", "targetPorts", "[]", "number"), {"maximum": 65536},
     "spec.targetPorts[].number: maximum is 65536 where revision v1.6 has 65535"),
    (("spec", "appProtocol"), {"enum": ["http", "kubernetes.io/h2c", "kubernetes.io/ws"]},
     "spec.appProtocol: enum is [http, kubernetes.io/h2c, kubernetes.io/ws] where revision v1.6 has "
     "[http, kubernetes.io/h2c]"),
    (("spec", "appProtocol"), {"default": "kubernetes.io/h2c"},
     "spec.appProtocol: default is kubernetes.io/h2c where revision v1.6 has http"),
    (("spec", "endpointPickerRef", "port", "number"), {"minimum": 0},
     "spec.endpointPickerRef.port.number: minimum is 0 where revision v1.6 has 1"),
    (("status", "parents"), {"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["controllerName"]},
     "status.parents: x-kubernetes-list-map-keys is [controllerName] where revision v1.6 has none"),
    (("status", "parents", "[]", "controllerName"), {"maxLength": 512},
     "status.parents[].controllerName: maxLength is 512 where revision v1.6 has 253"),
    (("status", "parents", "[]", "controllerName"), {"pattern": "^.+$"},
     "status.parents[].controllerName: pattern is ^.+$ where revision v1.6 has "),
    (("status", "parents", "[]", "parentRef", "namespace"), {"maxLength": 253},
     "status.parents[].parentRef.namespace: maxLength is 253 where revision v1.6 has 63"),
])
def test_each_v1_keyword_is_named_by_field_path(path, edit, expected):
    crd = _changed("v1.6", lambda c: _node(c, *path).update(edit))
    found = _diffs(crd, _crd("v1.6"), "v1.6")
    assert any(d == expected or (expected.endswith(" has ") and d.startswith(expected)) for d in found), found


def test_v1_revisions_are_told_apart():
    pairs = {
        ("v1.0", "v1.0.2"): ["spec.selector.matchLabels: no maxProperties where revision v1.0.2 has 64",
                             "spec.selector.matchLabels: no minProperties where revision v1.0.2 has 1"],
        ("v1.0.2", "v1.1"): [
            "spec.targetPorts: maxItems is 1 where revision v1.1 has 8",
            f'spec.targetPorts: no CEL rule "{UNIQUE_PORTS}" where revision v1.1 has it',
            "status.parents[].controllerName: missing where revision v1.1 has this field"],
        ("v1.1", "v1.4"): ["spec.appProtocol: missing where revision v1.4 has this field"],
        ("v1.4", "v1.6"): ["spec: required is [endpointPickerRef, selector, targetPorts] where revision v1.6 has "
                           "[selector, targetPorts]"],
    }
    for (older, newer), named in pairs.items():
        assert _diffs(_crd(older), _crd(newer), newer) == named


def test_the_v1alpha2_crd_is_not_a_v1_revision():
    names = _diffs(_crd("v0.5"), _crd("v1.6"), "v1.6")
    assert names[:2] == ["version v1alpha2: served where revision v1.6 has no such version",
                         "version v1: not in the installed CRD where revision v1.6 has it"]


# -- what it ignores ----------------------------------------------------------------


def test_descriptions_are_ignored():
    # The seed's CRD and v0.2's differ in their descriptions and the default condition type only.
    v02 = _crd("v0.2")
    _node(v02, "status", "parent", "[]", "conditions")["default"][0]["type"] = "Ready"
    assert _diffs(v02, _crd("seed")) == []


def test_what_the_api_server_adds_to_a_stored_crd_is_ignored():
    stored = _crd("seed")
    stored["metadata"].update({"uid": "0b3c6f8e", "resourceVersion": "42", "generation": 1,
                               "creationTimestamp": "2026-01-01T00:00:00Z", "managedFields": [{"manager": "x"}],
                               "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}"}})
    stored["spec"]["conversion"] = {"strategy": "None"}
    stored["spec"]["names"]["shortNames"] = ["ipool"]
    stored["status"] = {"acceptedNames": {"kind": "InferencePool", "plural": "inferencepools"},
                        "storedVersions": ["v1alpha2"], "conditions": [{"type": "Established", "status": "True"}]}
    assert _diffs(stored, _crd("seed")) == []


@pytest.mark.parametrize(("keyword", "neutral"), [
    ("minLength", 0), ("minItems", 0), ("minProperties", 0), ("uniqueItems", False), ("nullable", False),
    ("x-kubernetes-preserve-unknown-fields", False), ("x-kubernetes-list-type", "atomic"),
    ("x-kubernetes-map-type", "granular"), ("required", []), ("exclusiveMaximum", False),
])
def test_values_that_say_the_same_as_no_keyword(keyword, neutral):
    crd = _changed("seed", lambda c: _node(c, "spec", "extensionRef", "portNumber").__setitem__(keyword, neutral))
    assert _diffs(crd, _crd("seed")) == []


def test_revisions_are_told_apart():
    names = set(_diffs(_crd("v0.5"), _crd("seed")))
    assert "status.parent[].parentRef.group: present where revision seed has no such field" in names
    assert "status.parent[].parentRef.uid: missing where revision seed has this field" in names
    assert "status.parent[].parentRef: required is [name] where revision seed has none" in names
    assert any(n.startswith("status: default is ") for n in names)


def test_the_report_is_one_message_naming_each_difference():
    crd = _changed("seed", lambda c: _node(c, "spec", "targetPortNumber").__setitem__("maximum", 65536))
    text = crd_drift.report(crd_drift.differences(crd, _crd("seed"), "seed"), "seed", "the seed")
    assert text.splitlines() == [
        "the installed InferencePool CRD differs from API revision seed (the seed) in 1 place of its validation:",
        "  spec.targetPortNumber: maximum is 65536 where revision seed has 65535"]


# -- no loosening or tightening escapes it -------------------------------------------


@pytest.mark.parametrize("revision", sorted(REVISIONS))
def test_every_mutant_of_every_revision_is_named(revision):
    """Each loosening tests/crd_mutants.py derives shows as a difference (NO_DIFFERENCE aside)."""
    original = _crd(revision)
    missed, named = [], []
    for m in crd_mutants.mutants(original):
        found = crd_drift.differences(m.crd, original, revision)
        if m.name in NO_DIFFERENCE:
            if found:
                named.append(f"{m.name}: listed in NO_DIFFERENCE, but named: {[str(d) for d in found]}")
        elif not found:
            missed.append(m.name)
        elif m.field != crd_mutants.ROOT and not any(d.path == m.field for d in found):
            missed.append(f"{m.name}: named at {[d.path for d in found]}, not at {m.field}")
    assert not missed, f"mutants of the {revision} CRD that crd_drift does not name: {missed}"
    assert not named, named


def test_no_difference_lists_only_mutants_that_exist():
    names = {m.name for r in REVISIONS for m in crd_mutants.mutants(_crd(r))}
    assert set(NO_DIFFERENCE) <= names, set(NO_DIFFERENCE) - names


def _tightenings(crd: dict):
    """(name, CRD) for single-step tightenings (and other additions) of each schema node."""
    _, schema = crd_mutants.schema_of(crd)

    def variant(keys, edit):
        out = copy.deepcopy(crd)
        node = out
        for k in (*SCHEMA, *keys):
            node = node[k]
        edit(node)
        return out

    for field, keys, node in crd_mutants.walk(schema):
        edits = []
        for kw, step in (("maximum", -1), ("minimum", 1), ("maxLength", -1), ("minLength", 1),
                         ("maxItems", -1), ("minItems", 1), ("maxProperties", -1), ("minProperties", 1)):
            if kw in node:
                edits.append((f"{kw} {step:+d}", lambda n, kw=kw, step=step: n.__setitem__(kw, n[kw] + step)))
        if "maximum" in node:
            edits.append(("exclusiveMaximum", lambda n: n.__setitem__("exclusiveMaximum", True)))
        if len(node.get("enum") or []) > 1:
            edits.append(("enum less one", lambda n: n.__setitem__("enum", n["enum"][1:])))
        if node.get("type") == "string":
            if "pattern" not in node:
                edits.append(("add pattern", lambda n: n.__setitem__("pattern", "^[a-z]+$")))
            if "maxLength" not in node:
                edits.append(("add maxLength", lambda n: n.__setitem__("maxLength", 8)))
            if "minLength" not in node:
                edits.append(("add minLength", lambda n: n.__setitem__("minLength", 1)))
            if "enum" not in node:
                edits.append(("add enum", lambda n: n.__setitem__("enum", ["x"])))
            if "format" not in node:
                edits.append(("add format", lambda n: n.__setitem__("format", "date-time")))
        if node.get("type") == "integer":
            if "maximum" not in node:
                edits.append(("add maximum", lambda n: n.__setitem__("maximum", 10)))
            if "minimum" not in node:
                edits.append(("add minimum", lambda n: n.__setitem__("minimum", 1)))
        if node.get("type") == "array" and "maxItems" not in node:
            edits.append(("add maxItems", lambda n: n.__setitem__("maxItems", 1)))
        if node.get("type") == "array" and "minItems" not in node:
            edits.append(("add minItems", lambda n: n.__setitem__("minItems", 1)))
        if node.get("type") == "object" and "additionalProperties" in node:
            if "maxProperties" not in node:
                edits.append(("add maxProperties", lambda n: n.__setitem__("maxProperties", 1)))
            if "minProperties" not in node:
                edits.append(("add minProperties", lambda n: n.__setitem__("minProperties", 2)))
        if node.get("type") == "array" and node.get("x-kubernetes-list-type", "atomic") == "atomic":
            edits.append(("list-type set", lambda n: n.__setitem__("x-kubernetes-list-type", "set")))
        for i, rule in enumerate(node.get("x-kubernetes-validations") or []):
            # A CEL rule made stricter, or made to report another cause or field.
            edits.append((f"tighten CEL rule {i}", lambda n, i=i: n["x-kubernetes-validations"][i].__setitem__(
                "rule", f"({n['x-kubernetes-validations'][i]['rule']}) && size(self) > 0")))
            if "reason" not in rule:
                edits.append((f"reason of CEL rule {i}", lambda n, i=i: n["x-kubernetes-validations"][i].__setitem__(
                    "reason", "FieldValueForbidden")))
            if "fieldPath" not in rule:
                edits.append((f"fieldPath of CEL rule {i}", lambda n, i=i: n["x-kubernetes-validations"][i].__setitem__(
                    "fieldPath", ".x")))
        for prop in sorted(set(node.get("properties") or {}) - set(node.get("required") or [])):
            edits.append((f"require {prop}",
                          lambda n, prop=prop: n.__setitem__("required", [*(n.get("required") or []), prop])))
        if node.get("x-kubernetes-preserve-unknown-fields"):
            edits.append(("prune unknown fields", lambda n: n.pop("x-kubernetes-preserve-unknown-fields")))
        if node.get("type") == "object" and node.get("properties") and "x-kubernetes-map-type" not in node:
            edits.append(("map-type atomic", lambda n: n.__setitem__("x-kubernetes-map-type", "atomic")))
        if "default" not in node and node.get("type") == "string":
            edits.append(("add default", lambda n: n.__setitem__("default", "x")))
        edits.append(("add CEL rule", lambda n: n.setdefault("x-kubernetes-validations", []).append({"rule": "false"})))
        for how, edit in edits:
            yield f"{how} at {field}", field, variant(keys, edit)

    def scale(c):
        c["spec"]["versions"][0].setdefault("subresources", {})["scale"] = {
            "specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"}
    for how, edit in (("add scale subresource", scale),
                      ("not served", lambda c: c["spec"]["versions"][0].__setitem__("served", False))):
        out = copy.deepcopy(crd)
        edit(out)
        yield how, crd_mutants.ROOT, out


@pytest.mark.parametrize("revision", sorted(REVISIONS))
def test_every_tightening_of_every_revision_is_named(revision):
    original = _crd(revision)
    variants = list(_tightenings(original))
    assert len(variants) > 100
    missed = []
    for name, field, crd in variants:
        found = crd_drift.differences(crd, original, revision)
        if not found or (field != crd_mutants.ROOT and not any(d.path == field for d in found)):
            missed.append(f"{name}: {[str(d) for d in found]}")
    assert not missed, missed
