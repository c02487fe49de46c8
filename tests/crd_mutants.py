"""Mutants of the InferencePool CRD, each dropping or loosening exactly one thing.

The schema tier (conformance/tests/test_schema.py, test_status_subresource.py)
must judge the API, not echo our CRD back at us: a CRD that lost any single
validation or default has to make at least one of its tests fail.
`mutants(crd)` derives those CRDs from the generated one by walking the
openAPIV3Schema of its storage version (v1alpha2, or v1 for the GA API), so a
validation added to the CRD later gets its mutants without anyone listing
paths by hand.

Mutation operators, on every schema node:

* drop one validation keyword (minimum, maximum, minLength, maxLength, pattern,
  enum, maxItems, format, ... see DROPPED_KEYWORDS) or one CEL rule;
* drop `default`, or change it to another plausible value;
* remove one entry of a `required` list;
* turn `x-kubernetes-list-type: map` (or `set`) into `atomic`, which drops the
  uniqueness of the list-map keys;
* widen `type: integer` to `number`;
* add `x-kubernetes-preserve-unknown-fields: true` to an object that prunes;

and once per CRD: drop the status subresource of that version.

Each mutant also says which part of an object it reaches (`Mutant.reaches`),
and `first_cases` names the schema cases that write, expect or reject a value
there: the meta-test runs those first, so that its run (which stops at the
first failure) kills a mutant in a few tests instead of a few hundred. The
order only saves time: a mutant that none of them kills meets the rest of the
tier in the same run, and an equivalent one survives the whole tier.

Some mutants cannot be told apart from the original by any request to the API
(equivalent mutants): they are listed in EQUIVALENT with the reason. Some
mutants are CRDs the API server refuses to install: they are listed in
REFUSED. Both lists hold the names of every API's mutants (the field paths
tell the APIs apart); `applies` picks the ones of one CRD. The meta-test
(test_crd_mutants.py) checks both lists against what the cluster does, so
neither can go stale.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from dataclasses import dataclass

VERSION = "v1alpha2"

# Keywords whose removal loosens what the API server accepts. Only the ones the
# CRD uses produce mutants; the others are here so that adding one to the Go
# markers is covered at once.
DROPPED_KEYWORDS = (
    "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
    "minLength", "maxLength", "pattern", "format", "enum",
    "minItems", "maxItems", "uniqueItems", "minProperties", "maxProperties",
)

# Replacement defaults that read like something a wrong CRD could plausibly
# say. Anything not listed gets a generic change (see _other_value).
_OTHER_DEFAULTS = {
    "": "apps",
    "Service": "Pod",
    "Ready": "Accepted",
    "Accepted": "Ready",
    "FailClose": "FailOpen",
    "FailOpen": "FailClose",
    # The GA API's parentRef defaults: another valid group and kind (a changed
    # default the API server refuses to install would test nothing).
    "gateway.networking.k8s.io": "networking.example.com",
    "Gateway": "Mesh",
}

# Mutants that no request to the API server can tell from the original CRD.
# The meta-test fails if one of these is killed after all (the reason is then
# wrong) or if any mutant not listed here survives.
EQUIVALENT: dict[str, str] = {
    # The pattern needs a leading letter, so every string shorter than 1 also
    # fails the pattern, with the same cause type (FieldValueInvalid) on the
    # same field. Only the message would differ, and messages are not API
    # (SPEC section 3: rejections are judged by status, field and cause type).
    "drop minLength at spec.extensionRef.kind":
        "the pattern ^[a-zA-Z]... already rejects the empty string, with the same field and cause type",
    "drop minLength at status.parent[].conditions[].reason":
        "the pattern ^[A-Za-z]... already rejects the empty string, with the same field and cause type",
    # minLength 0 is the lower bound of every string length: it forbids nothing.
    "drop minLength at spec.selector.*":
        "minLength 0 forbids nothing",
    # Integer formats: kube-openapi checks `format` only on strings, and the
    # bounds of these fields lie far inside the int32/int64 range anyway.
    "drop format at spec.extensionRef.portNumber":
        "format int32 is not enforced on integers; minimum 1 / maximum 65535 lie inside int32 anyway",
    "drop format at spec.targetPortNumber":
        "format int32 is not enforced on integers; minimum 1 / maximum 65535 lie inside int32 anyway",
    "drop format at status.parent[].conditions[].observedGeneration":
        "format int64 is not enforced on integers; the JSON decoder holds integers as int64 either way",
    # The GA API (v1; the names are the same in each of its revisions that has the field).
    "drop minLength at spec.endpointPickerRef.kind":
        "the pattern ^[a-zA-Z]... already rejects the empty string, with the same field and cause type",
    "drop minLength at status.parents[].conditions[].reason":
        "the pattern ^[A-Za-z]... already rejects the empty string, with the same field and cause type",
    "drop minLength at status.parents[].parentRef.kind":
        "the pattern ^[a-zA-Z]... already rejects the empty string, with the same field and cause type",
    "drop minLength at status.parents[].parentRef.namespace":
        "the pattern ^[a-z0-9]... already rejects the empty string, with the same field and cause type",
    "drop minLength at status.parents[].controllerName":
        "the pattern (a domain, a slash, a path) already rejects the empty string, with the same field and cause type",
    "drop minLength at spec.selector.matchLabels.*": "minLength 0 forbids nothing",
    "drop minLength at spec.endpointPickerRef.group": "minLength 0 forbids nothing",
    "drop minLength at status.parents[].parentRef.group": "minLength 0 forbids nothing",
    "drop format at spec.endpointPickerRef.port.number":
        "format int32 is not enforced on integers; minimum 1 / maximum 65535 lie inside int32 anyway",
    "drop format at spec.targetPorts[].number":
        "format int32 is not enforced on integers; minimum 1 / maximum 65535 lie inside int32 anyway",
    "drop format at status.parents[].conditions[].observedGeneration":
        "format int64 is not enforced on integers; the JSON decoder holds integers as int64 either way",
}

# Mutants that are not valid CRDs: the API server refuses to create them, so no
# cluster can ever serve them. The meta-test checks that the refusal happens.
REFUSED: dict[str, str] = {
    "drop required type at status.parent[].conditions[]":
        "type is the list-map key of conditions, and a list-map key must be required or defaulted",
    "drop required type at status.parents[].conditions[]":
        "type is the list-map key of conditions, and a list-map key must be required or defaulted",
    # v1.1+ only: the uniqueness rule walks the list twice, and without maxItems its estimated
    # cost is unbounded (v1.0 and v1.0.2 have no such rule, and their mutant is killed).
    "drop maxItems at spec.targetPorts":
        "the CEL rule on targetPorts exceeds the cost budget by more than 100x without maxItems (v1.1+)",
}


def applies(listed: dict[str, str], crd: dict) -> dict[str, str]:
    """The entries of EQUIVALENT or REFUSED for one CRD: its mutants' names, with the exception that
    "drop maxItems at spec.targetPorts" is refused only where targetPorts has a CEL rule (v1.1+)."""
    names = {m.name for m in mutants(crd)}
    out = {k: v for k, v in listed.items() if k in names}
    if listed is REFUSED and "drop maxItems at spec.targetPorts" in out:
        _, schema = schema_of(crd)
        ports = ((schema.get("properties") or {}).get("spec") or {}).get("properties", {}).get("targetPorts", {})
        if not ports.get("x-kubernetes-validations"):
            del out["drop maxItems at spec.targetPorts"]
    return out


@dataclass(frozen=True)
class Mutant:
    name: str  # e.g. "drop maxLength at spec.extensionRef.name"; stable across runs
    field: str  # the object field whose schema was touched, e.g. "spec.extensionRef.name", or "(root)"
    pointer: str  # JSON Pointer (RFC 6901) into the CRD of the key that was dropped, changed or added
    crd: dict  # the whole mutant CRD; shares nothing with the input
    # The object path whose values the change concerns: the field, or the required entry that was
    # dropped ("spec.extensionRef" for "drop required extensionRef at spec"), "status" for the status
    # subresource; "" (the whole object) for the root.
    reaches: str = ""


def storage_version(crd: dict) -> str:
    """The version a CRD stores (v1alpha2 for the x-k8s.io API, v1 for the GA API)."""
    versions = (crd.get("spec") or {}).get("versions") or []
    stored = [v.get("name") for v in versions if v.get("storage")]
    return stored[0] if stored else VERSION


def schema_of(crd: dict, version: str | None = None) -> tuple[int, dict]:
    """(index of the version in spec.versions, its openAPIV3Schema); the storage version by default."""
    version = storage_version(crd) if version is None else version
    for i, v in enumerate((crd.get("spec") or {}).get("versions") or []):
        if v.get("name") == version:
            schema = (v.get("schema") or {}).get("openAPIV3Schema")
            if isinstance(schema, dict):
                return i, schema
    raise ValueError(f"the CRD has no openAPIV3Schema for version {version}")


ROOT = "(root)"


def walk(schema: dict, field: str = ROOT, keys: tuple = ()) -> Iterator[tuple[str, tuple, dict]]:
    """Every schema node as (field path, key path from the schema root, node), parents first.

    Field paths read like the object: `spec.extensionRef.name`,
    `status.parent[].conditions` (list items), `spec.selector.*` (map values);
    the schema root is `(root)`.
    """
    yield field, keys, schema
    prefix = "" if field == ROOT else field + "."
    for name in sorted(schema.get("properties") or {}):
        yield from walk(schema["properties"][name], prefix + name, keys + ("properties", name))
    if isinstance(schema.get("items"), dict):
        yield from walk(schema["items"], ("" if field == ROOT else field) + "[]", keys + ("items",))
    if isinstance(schema.get("additionalProperties"), dict):
        yield from walk(schema["additionalProperties"], prefix + "*", keys + ("additionalProperties",))


def _pointer(keys) -> str:
    return "".join("/" + str(k).replace("~", "~0").replace("/", "~1") for k in keys)


def _show(value) -> str:
    return '""' if value == "" else str(value)


def _other_value(value, node: dict):
    """A value of the same shape as `value` that differs from it, or None when there is none to make.

    Strings prefer another member of the node's enum, then a plausible word
    (_OTHER_DEFAULTS); lists of objects change the list-map key (or the first
    string field) of their first entry. Returns (new value, description).
    """
    if isinstance(value, bool):
        return not value, f"{value} -> {not value}"
    if isinstance(value, (int, float)):
        new = value - 1 if "maximum" in node and value + 1 > node["maximum"] else value + 1
        return new, f"{value} -> {new}"
    if isinstance(value, str):
        others = [e for e in node.get("enum") or [] if e != value]
        new = others[0] if others else _OTHER_DEFAULTS.get(value, value + "X" if value else "x")
        return new, f"{_show(value)} -> {_show(new)}"
    if isinstance(value, list) and value:
        item_schema = node.get("items") or {}
        first = value[0]
        if isinstance(first, dict):
            keys = list(node.get("x-kubernetes-list-map-keys") or []) + sorted(first)
            for key in keys:
                if isinstance(first.get(key), str):
                    changed = _other_value(first[key], (item_schema.get("properties") or {}).get(key) or {})
                    if changed is not None:
                        new_first = {**first, key: changed[0]}
                        return [new_first, *value[1:]], f"[0].{key} {changed[1]}"
            return None
        changed = _other_value(first, item_schema)
        return None if changed is None else ([changed[0], *value[1:]], f"[0] {changed[1]}")
    if isinstance(value, dict) and value:
        for key in sorted(value):
            changed = _other_value(value[key], ((node.get("properties") or {}).get(key)) or {})
            if changed is not None:
                return {**value, key: changed[0]}, f"{key} {changed[1]}"
    return None


def _edits(field: str, node: dict) -> Iterator[tuple[str, tuple, Callable[[dict], None], str]]:
    """(name, key path relative to the node, edit, the object path it reaches) for every one-step
    loosening of one node."""
    at = "" if field == ROOT else field
    for kw in DROPPED_KEYWORDS:
        if kw in node:
            yield f"drop {kw} at {field}", (kw,), lambda n, kw=kw: n.pop(kw), at
    for i, _rule in enumerate(node.get("x-kubernetes-validations") or []):
        def drop_rule(n, i=i):
            del n["x-kubernetes-validations"][i]
            if not n["x-kubernetes-validations"]:
                del n["x-kubernetes-validations"]
        yield f"drop validation rule {i} at {field}", ("x-kubernetes-validations", i), drop_rule, at
    if "default" in node:
        yield f"drop default at {field}", ("default",), lambda n: n.pop("default"), at
        changed = _other_value(node["default"], node)
        if changed is not None:
            new, how = changed
            yield (f"change default at {field}: {how}", ("default",),
                   lambda n, new=new: n.__setitem__("default", copy.deepcopy(new)), at)
    for i, entry in enumerate(node.get("required") or []):
        def drop_required(n, i=i):
            del n["required"][i]
            if not n["required"]:
                del n["required"]
        yield f"drop required {entry} at {field}", ("required", i), drop_required, f"{at}.{entry}".lstrip(".")
    if node.get("x-kubernetes-list-type") in ("map", "set"):
        def to_atomic(n):
            n["x-kubernetes-list-type"] = "atomic"
            n.pop("x-kubernetes-list-map-keys", None)  # only allowed with list-type map
        yield (f"list-type {node['x-kubernetes-list-type']} to atomic at {field}",
               ("x-kubernetes-list-type",), to_atomic, at)
    if node.get("type") == "integer":
        yield f"type integer to number at {field}", ("type",), lambda n: n.__setitem__("type", "number"), at
    if (node.get("type") == "object" and not node.get("x-kubernetes-preserve-unknown-fields")
            and "additionalProperties" not in node and field != "metadata"):
        # Objects with additionalProperties hold no unknown fields to prune, and
        # the root's metadata is always ObjectMeta whatever its schema says.
        yield (f"preserve unknown fields at {field}", ("x-kubernetes-preserve-unknown-fields",),
               lambda n: n.__setitem__("x-kubernetes-preserve-unknown-fields", True), at)


def _resolve(root: dict, keys: tuple) -> dict:
    node = root
    for k in keys:
        node = node[k]
    return node


def mutants(crd: dict, version: str | None = None) -> Iterator[Mutant]:
    """Every single-step loosening of `crd` (left unchanged), in schema order (of its storage version
    unless `version` names another)."""
    version = storage_version(crd) if version is None else version
    index, schema = schema_of(crd, version)
    schema_keys = ("spec", "versions", index, "schema", "openAPIV3Schema")
    seen: set[str] = set()
    for field, keys, node in walk(schema):
        for name, rel, edit, reaches in _edits(field, node):
            if name in seen:
                raise ValueError(f"two mutants are named {name!r}")
            seen.add(name)
            mutant = copy.deepcopy(crd)
            edit(_resolve(mutant, schema_keys + keys))
            yield Mutant(name, field, _pointer(schema_keys + keys + rel), mutant, reaches)
    if "status" in (crd["spec"]["versions"][index].get("subresources") or {}):
        mutant = copy.deepcopy(crd)
        subresources = mutant["spec"]["versions"][index]["subresources"]
        del subresources["status"]
        if not subresources:
            del mutant["spec"]["versions"][index]["subresources"]
        yield Mutant(f"drop status subresource of {version}", ROOT,
                     _pointer(("spec", "versions", index, "subresources", "status")), mutant, "status")


# -- which schema cases to run first ----------------------------------------------

# A path as a tuple of steps: "status.parents[0].conditions[].type" and "status.parents.0.conditions"
# (the dotted index of `absent:`) both give list items as "[]"; a map value of a mutant's path is "*".
Steps = tuple[str, ...]


def steps(path: str) -> Steps:
    """The steps of a field path, as mutants and schema cases write them ("" or (root): no step)."""
    if path in ("", ROOT):
        return ()
    out: list[str] = []
    for part in path.split("."):
        head = part.partition("[")[0]
        if head.isdigit():
            out.append("[]")
        elif head:
            out.append(head)
        out += ["[]"] * part.count("[")
    return tuple(out)


def _value_steps(value, prefix: Steps = ()) -> Iterator[Steps]:
    """The path of every node of a value (a patch, an expected result), the value itself first."""
    yield prefix
    if isinstance(value, dict):
        for key, sub in value.items():
            yield from _value_steps(sub, (*prefix, str(key)))
    elif isinstance(value, list):
        for sub in value:
            yield from _value_steps(sub, (*prefix, "[]"))


def _within(path: Steps, reach: Steps) -> bool:
    """Whether `path` is `reach` or lies below it ("*" in `reach` stands for any one step)."""
    return len(path) >= len(reach) and all(r in ("*", p) for p, r in zip(path, reach, strict=False))


def _case_paths(case) -> tuple[set[Steps], set[Steps], set[Steps]]:
    """(fields a rejection names, fields an accepted answer must hold or lack, fields the case writes),
    over every revision the case has an expectation for."""
    rejected: set[Steps] = set()
    accepted: set[Steps] = set()
    for exp in case.expect.values():
        if exp["outcome"] == "rejected":
            rejected |= {steps(c["field"]) for c in exp.get("causes") or [] if c.get("field")}
            rejected |= {steps(n) for n in exp.get("message_names") or []}
        else:
            accepted |= set(_value_steps(exp.get("result") or {}))
            accepted |= {steps(p) for p in exp.get("absent") or []}
    written = set(_value_steps(case.patch)) | {steps(p) for p in case.replace}
    return rejected, accepted, written


def first_cases(mutant: Mutant, cases) -> list[str]:
    """The names of the schema cases (conformance.schema_cases.Case) most likely to kill `mutant`, best first.

    First the cases whose expectation names the very field the mutant reaches, then those naming a
    field below it: a rejection, for a mutant that drops a check (a keyword, a rule, a required
    entry, a list type, the integer type); a value an accepted answer must hold or lack, for one that
    changes a default or pruning. Then every other case that writes or expects a value there. A
    mutant of the whole object (the root) names none: its run keeps the suite's order.
    """
    reach = steps(mutant.reaches)
    if not reach:
        return []
    looks_at_answer = mutant.name.startswith(("drop default", "change default", "preserve unknown fields"))
    ranked = []
    for i, case in enumerate(cases):
        rejected, accepted, written = _case_paths(case)
        telling = accepted if looks_at_answer else rejected
        if any(len(p) == len(reach) and _within(p, reach) for p in telling):
            rank = 0
        elif any(_within(p, reach) for p in telling):
            rank = 1
        elif any(_within(p, reach) for p in rejected | accepted | written):
            rank = 2
        else:
            continue
        ranked.append((rank, i, case.name))
    return [name for *_, name in sorted(ranked)]
