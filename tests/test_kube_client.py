"""The suite's client (and the reference implementation's) renews expiring credentials, but not
before every request.

The kubernetes client runs a kubeconfig's credential refresh before each
request, and for a bearer token that re-applies the whole kubeconfig (some
45 µs a request). Both run it at most once a second; the kubeconfig loader
renews a token 5 minutes before it expires, so a token is still renewed in
time. Here an exec credential plugin hands out a new token on each call, each
already inside those 5 minutes, so every refresh that runs renews it.
"""

from __future__ import annotations

import sys
import textwrap
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest
import yaml
from kubernetes import config

import reference_gateway.__main__ as reference_main
from conformance import kube as kube_module
from conformance.kube import REFRESH_INTERVAL, Kube

PLUGIN = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    count = Path(sys.argv[1])
    n = int(count.read_text()) + 1 if count.exists() else 1
    count.write_text(str(n))
    print(json.dumps({"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",
                      "status": {"token": f"token-{n}", "expirationTimestamp": sys.argv[2]}}))
""")


def _kubeconfig(tmp_path) -> tuple[str, callable]:
    """A kubeconfig whose user's token comes from an exec plugin, and how often the plugin ran."""
    plugin, count = tmp_path / "plugin.py", tmp_path / "calls"
    plugin.write_text(PLUGIN)
    soon = (datetime.now(UTC) + timedelta(minutes=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
        "users": [{"name": "u", "user": {"exec": {
            "apiVersion": "client.authentication.k8s.io/v1", "command": sys.executable,
            "args": [str(plugin), str(count), soon], "interactiveMode": "Never"}}}]}))
    return str(kubeconfig), lambda: int(count.read_text())


CLIENTS = {
    "suite": (kube_module, lambda path: Kube(config.new_client_from_config(config_file=path)).api),
    "reference": (reference_main, reference_main.api_client),
}


@pytest.mark.parametrize("client", CLIENTS)
def test_an_expiring_token_is_renewed_at_most_once_a_second(client, tmp_path, monkeypatch):
    module, make = CLIENTS[client]
    clock = [1000.0]
    monkeypatch.setattr(module, "time", SimpleNamespace(monotonic=lambda: clock[0]))
    kubeconfig, calls = _kubeconfig(tmp_path)
    configuration = make(kubeconfig).configuration
    assert calls() == 1, "loading the kubeconfig ran the plugin once"

    tokens = {configuration.get_api_key_with_prefix("BearerToken") for _ in range(20)}
    assert (calls(), tokens) == (2, {"Bearer token-2"}), (
        f"20 requests within a second ran the plugin {calls() - 1} times, tokens {tokens}")

    clock[0] += REFRESH_INTERVAL
    assert configuration.get_api_key_with_prefix("BearerToken") == "Bearer token-3", "no renewal after a second"
    assert configuration.get_api_key_with_prefix("BearerToken") == "Bearer token-3"
    assert calls() == 3


def test_a_second_client_on_the_same_configuration_refreshes_as_sparingly(tmp_path, monkeypatch):
    monkeypatch.setattr(kube_module, "time", SimpleNamespace(monotonic=lambda: 1000.0))
    kubeconfig, calls = _kubeconfig(tmp_path)
    api = CLIENTS["suite"][1](kubeconfig)
    Kube(api)
    for _ in range(5):
        api.configuration.get_api_key_with_prefix("BearerToken")
    assert calls() == 2
