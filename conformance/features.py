"""Features a test may need from the implementation, and the reference implementation's names."""

FEATURES = frozenset({
    "SupportInferencePool",  # core: status.parent entries and conditions
    "SupportInferencePoolExternalNameRejection",  # core: the MUST NOT on ExternalName Services
})

REFERENCE_GATEWAY_CLASS = "reference"
REFERENCE_CONTROLLER = "inference.networking.x-k8s.io/reference-gateway"
