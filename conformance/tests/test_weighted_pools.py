"""One rule, two InferencePool backendRefs weighted 70/30, each pool with its own picker: every
request is served by a Pod of one of the two pools, and the split follows the weights within a
binomial bound (T6). Upstream: GatewayWeightedAcrossTwoInferencePools (200 requests, 70/30, within
10 points or 3 sigma, after random warm-ups).

N = 600 requests, 10 at a time: the accepted range for pool primary (stats.accepted(600, 0.7)) is
364..473, which a correct split leaves with probability 8.7e-7 (FALSE_FAILURE is 1e-6); a gateway
that splits evenly lands in it with probability 1e-7, and a shift of the share by 0.13 (up) or 0.14
(down) is caught 99 times in 100 (stats.detectable_shift). No warm-up: the test waits only until
both pools, and the weighted rule, answer consistently."""

import pytest

from conformance.traffic import stats

pytestmark = [pytest.mark.rule("T6"), pytest.mark.features("SupportInferencePool", "SupportInferencePoolTraffic")]

N, WEIGHTS = 600, {"primary": 70, "secondary": 30}  # the weights of HTTPRoute weighted in two-pools.yaml


def test_weighted_pools(traffic):
    pools = traffic.two_pools("Gateway/gateway", "HTTPRoute/rules", "HTTPRoute/weighted")
    target, served = traffic.target(), {name: pool for pool, pods in pools.items() for name in pods.values()}
    everyone = ",".join(sorted(ip for pods in pools.values() for ip in pods))  # each picker keeps its own
    for path, wanted in (("/primary", sorted(pools["primary"].values())),
                         ("/secondary", sorted(pools["secondary"].values())),
                         ("/weighted", sorted(served))):  # each pool through its own rule, then the weighted rule
        traffic.consistently(traffic.send(target, pick=everyone, path=path),
                             lambda a, wanted=wanted: None if a.status == 200 and a.pod in wanted
                             else f"wanted 200 from one of {wanted}", what=f"T6: a request to {path}")
    answers = traffic.many(traffic.send(target, pick=everyone, path="/weighted"), n=N)
    wrong = [a.describe() for a in answers if a.status != 200 or a.pod not in served]
    assert not wrong, f"T6: {len(wrong)} of {N} requests to /weighted were not served (200) by either pool: {wrong[0]}"
    primary = sum(served[a.pod] == "primary" for a in answers)
    bounds = stats.accepted(N, WEIGHTS["primary"] / sum(WEIGHTS.values()))
    assert primary in bounds, (f"T6: {primary} of {N} requests to /weighted reached pool primary (weights: primary "
                               f"{WEIGHTS['primary']}, secondary {WEIGHTS['secondary']}); the rule wants "
                               f"{bounds.describe()}")
