"""The embedded cluster's data plane: one sandbox holding the pods, the endpoint pickers and a real Envoy.

Why one object: on a user's cluster the traffic tier only applies manifests and sends requests to the
Gateway's address; the cluster runs the Pods and the gateway runs its proxy. The embedded cluster has
neither a kubelet nor a proxy, so the suite brings both, and they must come up in order and go down
together, inside one network namespace (docs/traffic.md):

1. the `netns.Sandbox`, with the Gateway addresses on its lo (pod addresses come per Pod);
2. an `ApiBridge`, so the API server's URL (and so the cluster's kubeconfig) works inside;
3. the `Kubelet` stand-in, running the Pods labelled `TRAFFIC_LABEL` (the traffic manifests' Pods:
   model servers as `conformance.traffic.backend`, the EPP image as upstream's EPP built from the Go
   module proxy, `epp.ensure()`, the sentinel image's `nc -l -p PORT -e false` as
   `conformance.traffic.sentinel`);
4. Envoy, configured from files in `envoy_dir` that the implementation under test writes
   (`{envoy_config_dir}` in --implementation-command; the reference gateway's --envoy-config-dir);
5. one `Bridge` out of the sandbox per Gateway address, so the suite (and every pytest-xdist worker)
   reaches a Gateway's listener from the machine's loopback: `reach(address, port)`.

The implementation under test is started inside the same sandbox (`start_implementation`), with the
Gateway addresses it may give out (`{gateway_addresses}`): it is handed addresses that exist only there.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from ..cluster import pki, scratch
from ..options import DEFAULT_EPP_IMAGE, DEFAULT_SENTINEL_IMAGE
from . import delay as slow
from . import epp
from .bridge import ApiBridge, Bridge
from .envoy import Envoy
from .kubelet import Container, Kubelet, Launch, Unsupported, image_repository, model_server, sentinel
from .netns import Sandbox, start_process

# The label that hands a Pod to the kubelet stand-in: the traffic manifests' Pods carry it, the status
# tier's do not (they stay Pending, which is all the status rules need).
TRAFFIC_LABEL = "inference-conformance/traffic"
# The addresses the gateway may give its Gateways (one each): on the sandbox's lo, nowhere else.
GATEWAY_ADDRESSES = tuple(f"10.245.0.{i}" for i in range(1, 9))
GATEWAY_PORT = 80  # the traffic manifests' Gateway listener port
EPP_DELAY_ENV = "IPC_EPP_DELAY"  # seconds: every EPP answers that late (a slow picker; see delay.py)


def epp_program(binary: str, kubeconfig: str, cert_dir: str | None = None, delay: float = 0.0) -> callable:
    """The kubelet's program for the EPP image: upstream's EPP binary with the container's own arguments,
    its --config-file mapped to the file the kubelet wrote from the ConfigMap, and the cluster's
    kubeconfig (a Pod would read its ServiceAccount instead).

    With `cert_dir` (tls.crt and tls.key), an EPP that serves TLS and names no certificate of its own gets
    `--cert-path` to it: otherwise every EPP makes a self-signed 4096-bit RSA key as it starts, which
    costs 0.2-2.6 s of CPU on this kind of machine, each time. Its clients do not verify it either way.

    With `delay` (seconds, more than 0) the EPP is a slow one: it runs behind `conformance.traffic.delay`,
    which listens on its gRPC port and passes each of its answers on that much later; the EPP itself
    listens on that port plus delay.TARGET_OFFSET.
    """

    def run(c: Container) -> Launch:
        args, files, ports = [], [], {}
        raw = list(c.spec.get("args") or [])
        i = 0
        while i < len(raw):
            arg = raw[i]
            name, eq, value = arg.partition("=")
            if not eq and name.startswith("--") and i + 1 < len(raw) and not raw[i + 1].startswith("--"):
                value, i = raw[i + 1], i + 1
            if name == "--config-file":
                value = c.local_path(value)
                files.append(value)
            if name in ("--grpc-port", "--grpc-health-port"):
                ports[name] = int(value)
            args.append(f"{name}={value}" if value or eq else name)
            i += 1
        if not any(a.startswith("--tracing") for a in args):
            args.append("--tracing=false")  # no trace collector here
        if cert_dir and "--secure-serving=false" not in args and not any(a.startswith("--cert-path") for a in args):
            args.append(f"--cert-path={cert_dir}")
        if c.spec.get("command"):
            raise Unsupported(f"container {c.name}: a command other than the EPP's own is not supported here")
        grpc_port = ports.get("--grpc-port", epp.GRPC_PORT)
        argv = [binary, *args]
        if delay > 0:
            hidden = grpc_port + slow.TARGET_OFFSET
            argv = [sys.executable, "-I", "-S", slow.__file__, "--port", str(grpc_port), "--target", str(hidden),
                    "--seconds", f"{delay:g}", "--",
                    binary, *(a for a in args if not a.startswith("--grpc-port")), f"--grpc-port={hidden}"]
        return Launch(argv=argv, env={"KUBECONFIG": kubeconfig}, files=files,
                      ports=[grpc_port, ports.get("--grpc-health-port", epp.HEALTH_PORT)])

    return run


class DataPlane:
    """The sandbox and what runs in it for the traffic tier of the embedded cluster; a context manager."""

    def __init__(self, server_url: str, kubeconfig: str | os.PathLike, *, model_server_image: str,
                 epp_image: str = DEFAULT_EPP_IMAGE, sentinel_image: str = DEFAULT_SENTINEL_IMAGE,
                 gateway_addresses: Sequence[str] = GATEWAY_ADDRESSES, gateway_port: int = GATEWAY_PORT,
                 epp_delay: float | None = None, progress=None):
        self.server_url = server_url
        self.kubeconfig = str(kubeconfig)
        self.model_server_image = model_server_image
        self.epp_image = epp_image
        self.sentinel_image = sentinel_image
        self.gateway_addresses = tuple(gateway_addresses)
        self.gateway_port = gateway_port
        # A slow picker (`epp_program`'s delay): the meta-test's benign run sets IPC_EPP_DELAY.
        self.epp_delay = float(os.environ.get(EPP_DELAY_ENV) or 0) if epp_delay is None else epp_delay
        self.progress = progress
        self.dir: Path | None = None
        self.sandbox: Sandbox | None = None
        self.api: ApiBridge | None = None
        self.kubelet: Kubelet | None = None
        self.envoy: Envoy | None = None
        self.exits: dict[str, Bridge] = {}  # "address:port" -> its bridge out of the sandbox

    def __enter__(self) -> DataPlane:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def envoy_dir(self) -> Path:
        assert self.dir is not None
        return self.dir / "envoy"

    def start(self) -> DataPlane:
        binary = epp.ensure(self.progress)  # may build (minutes, once): before anything runs
        self.dir = scratch.mkdtemp("dataplane")
        try:
            self.sandbox = Sandbox()
            self.sandbox.start()
            self.sandbox.add_address(*self.gateway_addresses)
            self.api = ApiBridge(self.sandbox, self.server_url).start()
            self.kubelet = Kubelet(self.kubeconfig, self.sandbox, label_selector=TRAFFIC_LABEL,
                                   log_dir=self.dir / "pods")
            self.kubelet.register(self.model_server_image, model_server)
            cert = pki.self_signed_server(self.dir / "epp-tls", "endpoint-picker")
            self.kubelet.register(image_repository(self.epp_image),
                                  epp_program(str(binary), self.kubeconfig, str(cert.cert.parent), self.epp_delay))
            self.kubelet.register(image_repository(self.sentinel_image), sentinel)
            self.kubelet.start()
            self.envoy = Envoy(self.sandbox, self.envoy_dir)
            self.envoy.start()
            self.envoy.wait_ready()
            for address in self.gateway_addresses:
                self.exits[f"{address}:{self.gateway_port}"] = Bridge.out_of(
                    self.sandbox, self.gateway_port, host=address).start()
        except BaseException:
            self.close()
            raise
        return self

    def routes(self) -> dict[str, str]:
        """Where the machine reaches each Gateway address: "10.245.0.1:80" -> "unix:<its bridge's socket>"
        (`client.post(..., via=)`). The socket, not the bridge's loopback port, so that a request crosses
        one byte pump (the bridge's process inside), not two."""
        return {inside: f"unix:{b.socket}" for inside, b in self.exits.items()}

    def placeholders(self) -> dict[str, str]:
        """What --implementation-command may name: the Envoy config directory and the Gateway addresses."""
        return {"envoy_config_dir": str(self.envoy_dir), "gateway_addresses": ",".join(self.gateway_addresses)}

    def start_implementation(self, argv: list[str], **popen_kw) -> subprocess.Popen:
        """Start the implementation under test inside the sandbox (it is handed the Gateway addresses)."""
        assert self.sandbox is not None
        return start_process(argv, sandbox=self.sandbox, **popen_kw)

    def close(self) -> None:
        for bridge in self.exits.values():
            bridge.close()
        self.exits.clear()
        for part in (self.envoy, self.kubelet, self.api):
            if part is not None:
                try:
                    part.stop() if isinstance(part, Envoy) else part.close()
                except Exception:  # noqa: BLE001 - the rest must still go
                    pass
        self.envoy = self.kubelet = self.api = None
        if self.sandbox is not None:
            self.sandbox.close()
            self.sandbox = None
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None
