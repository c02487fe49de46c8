"""A reference gateway controller for the InferencePool API (v1alpha2 and v1): status only, no data plane.

It reconciles GatewayClasses naming its controller, their Gateways, the
HTTPRoutes attached to those Gateways and the InferencePools those routes
send to, and writes the status the API asks for. Run it with
`python -m reference_gateway --kubeconfig PATH`.
"""
