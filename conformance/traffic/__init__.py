"""The traffic tier: what a gateway does with requests to an InferencePool (SPEC section 10, rules T1-T8).

Some promises of the API are about requests, not resources: FailOpen and FailClose, "MUST NOT support
ExternalName Services", the extension's default port 9002. Only requests sent through a data plane can
judge those, so this tier runs one on this machine: backends that stand in for model-server pods, an
endpoint picker (EPP), and a gateway proxy in front of them.

Those processes are handed pod and Service addresses (10.x), which exist on no network the suite
owns. An EPP that polls them outside a sandbox would send packets through the machine's default route
to whoever holds those addresses there. So the tier's first part, and the only one so far, is the
network sandbox and its guard (`netns`): a network namespace with nothing but loopback, and a single
door, `netns.start_process`, through which every traffic process is started and which refuses a
process handed a non-loopback address unless it starts inside that namespace. Where no namespace can
be made, the tier is skipped with one line (`netns.available()`), never run outside one.

Parts to come: the backends, the EPP, the gateway proxy, and the T1-T8 tests that drive them.
"""
