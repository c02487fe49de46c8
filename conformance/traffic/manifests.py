"""The traffic tier's topologies (manifests/traffic/), filled in for one test.

Why a loader of their own: a traffic topology names more than a status one (the EPP image, the EPP's
ports, the failure mode), and its EPP ports must differ between the tests that run at the same time:
on the embedded cluster every Pod shares the sandbox's one network namespace. Pools are written in the
GA API's shape and spelled by the API under test, as in the status tier.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Mapping
from dataclasses import dataclass

import yaml

from ..data import MANIFESTS
from ..options import DEFAULT_SENTINEL_IMAGE
from ..revisions import Api

TRAFFIC_MANIFESTS = MANIFESTS / "traffic"
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml: a tenth of the pure-Python loader's time
_FIRST_PORT = 20000  # EPP ports are taken from here up, three per EPP, a block per process
_BLOCK = 3000
# The EPPs a manifest may hold, by the prefix of their port placeholders: {epp_port}, {epp_health_port},
# {epp_metrics_port} for the first, {epp2_port}, ... for a second (two-pools.yaml: a picker per pool).
EPPS = ("epp", "epp2")
_counter = itertools.count()


@dataclass(frozen=True)
class EppPorts:
    grpc: int
    health: int
    metrics: int


def epp_ports() -> EppPorts:
    """Three ports no other EPP of this run uses (pytest-xdist workers get blocks of their own)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    block = int(worker[2:]) if worker[2:].isdigit() else 0
    base = _FIRST_PORT + block * _BLOCK + (3 * next(_counter)) % _BLOCK
    return EppPorts(base, base + 1, base + 2)


def load(name: str, *, namespace: str, gateway_class: str, api: Api, model_server_image: str, epp_image: str,
         failure_mode: str = "FailClose", ports: dict[str, EppPorts] | None = None,
         sentinel_image: str = DEFAULT_SENTINEL_IMAGE, values: Mapping[str, object] | None = None) -> list[dict]:
    """The objects of manifests/traffic/<name> in `namespace`, placeholders filled in (`values`: those a
    test knows only once it runs, such as {picker_address}). Each EPP the manifest names (EPPS) gets
    ports of its own from `epp_ports`, kept in `ports` when given (by EPP: files loaded with the same
    dict, such as an overlay and its base, share them)."""
    text = (TRAFFIC_MANIFESTS / name).read_text()
    ports = {} if ports is None else ports
    named = [p for p in EPPS if "{" + p + "_port}" in text]
    for p in named:
        if p not in ports:
            ports[p] = epp_ports()
    epp_values = {f"{p}_{what}": getattr(ports[p], field) for p in named
                  for what, field in (("port", "grpc"), ("health_port", "health"), ("metrics_port", "metrics"))}
    values = {"gateway_class": gateway_class, "model_server_image": model_server_image, "epp_image": epp_image,
              **epp_values, "failure_mode": failure_mode, "namespace": namespace, "inference_group": api.group,
              "sentinel_image": sentinel_image, **(values or {})}
    for key, value in values.items():
        text = text.replace("{" + key + "}", str(value))
    docs = [api.spell_pool(d) if d.get("kind") == "InferencePool" else d
            for d in yaml.load_all(text, Loader=_Loader) if d]
    for d in docs:
        d["metadata"]["namespace"] = d["metadata"].get("namespace") or namespace
    return docs
