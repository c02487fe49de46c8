"""The traffic topologies as the loader fills them in: every EPP of a manifest gets container ports of
its own (on the embedded cluster all Pods share one network namespace), and two-pools.yaml (rule T6)
holds what `Traffic.two_pools` chooses from: two disjoint pools, a picker each, the Gateways and routes."""

import json
import re

from conformance.options import DEFAULT_EPP_IMAGE, DEFAULT_MODEL_SERVER_IMAGE
from conformance.revisions import REVISIONS
from conformance.traffic import manifests, tier


def load(name):
    return manifests.load(name, namespace="ns", gateway_class="gc", api=REVISIONS["v1.6"].api,
                          model_server_image=DEFAULT_MODEL_SERVER_IMAGE, epp_image=DEFAULT_EPP_IMAGE)


def container_ports(docs):
    return [p["containerPort"] for d in docs if d["kind"] == "Pod" for c in d["spec"]["containers"]
            for p in c.get("ports") or [] if p["containerPort"] not in (3000,)]


def test_every_epp_gets_ports_no_other_epp_of_the_run_has():
    one, two, again = load("pool-with-picker.yaml"), load(tier.TWO_POOLS), load(tier.TWO_POOLS)
    ports = container_ports(one) + container_ports(two) + container_ports(again)
    assert len(ports) == 3 + 6 + 6 and len(set(ports)) == len(ports), ports
    assert all(isinstance(p, int) for p in ports)
    services = {d["metadata"]["name"]: d["spec"]["ports"][0]["targetPort"] for d in two if d["kind"] == "Service"}
    pickers = {d["metadata"]["name"]: d["spec"]["containers"][0]["ports"][0]["containerPort"]
               for d in two if d["kind"] == "Pod" and d["metadata"]["name"].endswith("-picker")}
    assert services == pickers and len(services) == 2  # each Service to its own picker's gRPC port
    assert not re.search(r"\{[a-z0-9_]+\}", json.dumps(two))  # every placeholder filled in


def test_two_pools_holds_disjoint_pools_each_with_its_own_picker():
    docs = load(tier.TWO_POOLS)
    names = {f"{d['kind']}/{d['metadata']['name']}" for d in docs}
    assert set(tier.TWO_POOLS_ROUTING) == {n for n in names if n.startswith(("Gateway/", "HTTPRoute/"))}
    pools = {d["metadata"]["name"]: d["spec"] for d in docs if d["kind"] == "InferencePool"}
    assert {p: s["endpointPickerRef"]["name"] for p, s in pools.items()} == {p: f"{p}-picker" for p in tier.POOLS}
    for pool, pods in tier.POOLS.items():
        selected = {d["metadata"]["name"] for d in docs if d["kind"] == "Pod"
                    and d["metadata"]["labels"].items() >= pools[pool]["selector"]["matchLabels"].items()}
        assert selected == set(pods)
    [weighted] = [d for d in docs if d["kind"] == "HTTPRoute" and d["metadata"]["name"] == "weighted"]
    assert [(b["name"], b["weight"]) for b in weighted["spec"]["rules"][0]["backendRefs"]] == [("primary", 70),
                                                                                             ("secondary", 30)]
