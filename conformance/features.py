"""Features a test may need from the implementation, and the reference implementation's names."""

# Core: every implementation must support these; only --exempt-features leaves them out.
CORE_FEATURES = frozenset({
    "SupportInferencePool",  # status.parent entries and conditions, and the ExternalName MUST NOT
})
FEATURES = CORE_FEATURES

REFERENCE_GATEWAY_CLASS = "reference"
REFERENCE_CONTROLLER = "inference.networking.x-k8s.io/reference-gateway"
