"""Features a test may need from the implementation, and the reference implementation's names."""

# Core: every implementation must support these; only --exempt-features leaves them out.
# The traffic tier (T1-T8): requests through the gateway's data plane follow the endpoint picker.
TRAFFIC_FEATURE = "SupportInferencePoolTraffic"
CORE_FEATURES = frozenset({
    "SupportInferencePool",  # status.parent entries and conditions, and the ExternalName MUST NOT
    TRAFFIC_FEATURE,  # every gateway forwards requests; --skip-traffic (or --exempt-features) leaves it out
})
FEATURES = CORE_FEATURES

REFERENCE_GATEWAY_CLASS = "reference"
REFERENCE_CONTROLLER = "inference.networking.x-k8s.io/reference-gateway"
