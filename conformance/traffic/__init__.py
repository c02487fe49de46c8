"""The traffic tier: what a gateway does with requests to an InferencePool (SPEC section 10, rules T1-T8).

Some promises of the API are about requests, not resources: FailOpen and FailClose, "MUST NOT support
ExternalName Services", the extension's default port 9002. Only requests sent through a data plane can
judge those, so this tier runs one on this machine: backends that stand in for model-server pods, an
endpoint picker (EPP), and a gateway proxy in front of them.

Those processes are handed pod and Service addresses (10.x), which exist on no network the suite
owns. So on the embedded cluster every one of them runs inside a network namespace of the suite's own
(`netns.Sandbox`, with nothing but loopback), started through one door, `netns.start_process`, which
refuses a process handed a non-loopback address outside it. Where no namespace can be made, the tier is
skipped with one line (`netns.available()`), never run outside one.

The parts: `netns` (the sandbox and the guard), `bridge` (the API server reachable inside, a Gateway's
listener reachable outside), `kubelet` (runs the traffic manifests' Pods as processes on pod addresses;
`forkserver` forks the suite's own programs for it from a warm interpreter inside the sandbox),
`backend` (the model server they run; `h2c`, its cleartext HTTP/2 for h2c pools: rule T8) and
`sentinel` (a listener that exits on its first connection, so that the Kubernetes API shows it: rule
T5), `epp` (upstream's endpoint picker, built from the Go module proxy), `envoy` (the real data plane
the implementation under test programs), `embedded` (all of them as one `DataPlane`, started with the
implementation), `manifests` (the topologies of manifests/traffic/), `client` and `stats` (requests,
consistency, the binomial tolerance of weighted splits), and `tier` (what a traffic test holds: the
`traffic` fixture, and a `Sentinel` it deploys).
"""
