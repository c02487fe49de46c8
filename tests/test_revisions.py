"""Revision detection and the revision data, on the generated CRDs (no cluster)."""

import copy

import pytest
import yaml

from conformance import revisions
from conformance.revisions import REVISIONS


def _crd(name: str) -> dict:
    return yaml.safe_load(REVISIONS[name].crd.read_text())


def _status(crd: dict) -> dict:
    [version] = [v for v in crd["spec"]["versions"] if v["name"] in ("v1alpha2", "v1")]
    return version["schema"]["openAPIV3Schema"]["properties"]["status"]


def _entry(rev) -> dict:
    return _status(_crd(rev.name))["properties"][rev.api.status_key]["items"]["properties"]


@pytest.mark.parametrize("name", sorted(REVISIONS))
def test_each_generated_crd_is_detected_as_its_revision(name):
    assert REVISIONS[name].crd.is_file()
    assert revisions.detect(_crd(name)) is REVISIONS[name]


@pytest.mark.parametrize("name", sorted(REVISIONS))
def test_traffic_facts_follow_the_crd(name):
    """The revision facts T8's tests are gated by say what the revision's CRD says."""
    fp, rev = revisions.fingerprint(_crd(name)), REVISIONS[name]
    assert rev.multiple_target_ports == ((fp.get("target_ports_max") or 1) > 1)
    assert rev.app_protocol == bool(fp.get("app_protocol"))


def test_revisions_differ_in_their_fingerprints():
    prints = [tuple(revisions.fingerprint(_crd(n)).values()) for n in REVISIONS]
    assert len(set(prints)) == len(prints)


def test_a_crd_of_no_known_revision_is_described():
    crd = _crd("v0.5")
    _status(crd).pop("default")  # a v0.5 parentRef without the status default: no release has that
    assert revisions.detect(crd) is None
    assert revisions.describe(revisions.fingerprint(crd)) == (
        "default condition type Accepted, parent ref shape ParentGatewayReference, status default parent False")
    assert revisions.detect({"spec": {"versions": [{"name": "v1"}]}}) is None
    ga = _crd("v1.6")
    ga["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["targetPorts"][
        "maxItems"] = 4  # no release has that
    assert revisions.detect(ga) is None
    assert "target ports max 4" in revisions.describe(revisions.fingerprint(ga))


def test_fresh_parents_are_what_the_crd_defaults():
    for rev in REVISIONS.values():
        default = _status(_crd(rev.name)).get("default")
        if not rev.status_default_parent:
            assert default is None and rev.fresh_parents == [] and rev.default_parent is None
            continue
        # The CRD's default, with the parentRef's own group default filled in (as the server does).
        expected = copy.deepcopy(default[rev.api.status_key])
        for entry in expected:
            entry["parentRef"].setdefault("group", revisions.GATEWAY_GROUP)
        assert rev.fresh_parents == expected
        assert rev.is_default_parent(rev.default_parent)


@pytest.mark.parametrize("name", sorted(REVISIONS))
def test_default_conditions_match_the_crd(name):
    rev = REVISIONS[name]
    assert _entry(rev)["conditions"].get("default", []) == rev.default_conditions


@pytest.mark.parametrize("name", sorted(REVISIONS))
def test_gateway_parent_ref_names_the_gateway(name):
    rev = REVISIONS[name]
    ref = rev.gateway_parent_ref("gw", "ns")
    assert rev.names_gateway(ref, "gw", "ns")
    assert not rev.names_gateway(ref, "gw", "other")
    assert not rev.names_gateway({**ref, "kind": "HTTPRoute"}, "gw", "ns")
    assert not rev.is_default_parent({"parentRef": ref})


def test_v05_placeholder_is_not_a_gateway_entry():
    rev = REVISIONS["v0.5"]
    placeholder = rev.default_parent
    assert not rev.names_gateway(placeholder["parentRef"], "default", "ns")
    assert not REVISIONS["seed"].is_default_parent(placeholder)  # no placeholder in revisions without one


@pytest.mark.parametrize("api", sorted(revisions.APIS))
def test_a_pool_in_the_ga_shape_is_spelled_as_each_api_spells_it(api):
    """The status topologies write pools in the GA shape; each API's spelling validates against its CRDs."""
    a = revisions.APIS[api]
    pool = a.spell_pool({"kind": "InferencePool", "metadata": {"name": "p"},
                         "spec": {"selector": {"matchLabels": {"app": "m"}}, "targetPorts": [{"number": 8000}],
                                  "endpointPickerRef": {"name": "e", "port": {"number": 9002}}}})
    assert pool["apiVersion"] == a.api_version
    [version] = [v for v in _crd(revisions.revisions_of(a)[0].name)["spec"]["versions"] if v["name"] == a.version]
    spec_props = version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    assert set(pool["spec"]) <= set(spec_props)
    assert a.picker_field in pool["spec"]
    assert a.target_port_patch(8001)["spec"].keys() <= set(spec_props)
