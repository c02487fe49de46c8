"""An entry that carries controllerName carries the GatewayClass's controllerName (C16, v1.1+).

Controllers MAY set `status.parents[].controllerName`; one that does names
itself as its GatewayClass does. An entry without it passes.
"""

import pytest

from conformance import conditions

pytestmark = [pytest.mark.rule("C16", "C2"), pytest.mark.features("SupportInferencePool"),
              pytest.mark.api_revision_has("controller_name")]


def test_controller_name(topology):
    topology.apply_file("pool-with-route.yaml")
    wanted = topology.controller_name()
    ns = topology.namespace
    accepted = conditions.judge_pool_condition(topology.revision, "gateway", ns, "Accepted", "True", "Accepted")

    def judge(pool):
        verdict = accepted(pool)
        if not verdict.ok:
            return verdict
        seen = conditions.pool_parent(pool, topology.revision, "gateway", ns).get("controllerName")
        if seen is None or seen == wanted:
            return verdict
        return conditions.Judgement((f"the entry for Gateway {ns}/gateway has controllerName {seen!r} where the "
                                     f"rule wants {wanted!r} (the GatewayClass's controllerName)",), True)

    topology.wait_pool(judge, f"the entry for Gateway {ns}/gateway Accepted True, its controllerName (if any) "
                              f"{wanted!r}")
