"""A Service switched to ExternalName flips ResolvedRefs to False, and back to True (X2)."""

import pytest

pytestmark = [pytest.mark.rule("X2"), pytest.mark.features("SupportInferencePool")]


def test_externalname_switch(topology):
    topology.apply_file("pool-with-route.yaml")
    topology.wait_pool_condition("ResolvedRefs", "True", "ResolvedRefs")
    # A ClusterIP Service becomes ExternalName only without its cluster IPs and ports.
    topology.patch("Service", "picker",
                   {"spec": {"type": "ExternalName", "externalName": "picker.example.com",
                             "clusterIP": None, "clusterIPs": None, "ports": None, "selector": None}})
    topology.wait_pool_condition("ResolvedRefs", "False", "InvalidExtensionRef")
    topology.patch("Service", "picker",
                   {"spec": {"type": "ClusterIP", "externalName": None, "selector": {"app": "endpoint-picker"},
                             "ports": [{"name": "grpc-ext-proc", "protocol": "TCP", "port": 9002}]}})
    topology.wait_pool_condition("ResolvedRefs", "True", "ResolvedRefs")
