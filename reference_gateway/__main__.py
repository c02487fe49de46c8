"""Command line: `python -m reference_gateway --kubeconfig PATH [options]`."""

from __future__ import annotations

import argparse
import ipaddress
import logging
import signal
import sys
import textwrap
import threading
import time
from pathlib import Path

from kubernetes import client, config

from . import behaviours, dataplane, faults
from .cache import Cache
from .controller import Controller
from .kube import ApiError, Kube
from .model import DEFAULT_CONTROLLER, FIXED_RESOURCES
from .revisions import APIS, DEFAULT, REVISIONS, choose, revisions_by_api

log = logging.getLogger("reference_gateway")
GATEWAY_CLASS = FIXED_RESOURCES["GatewayClass"]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m reference_gateway",
        description="A status-only reference gateway controller for the InferencePool API. "
                    "Logs one line per status write; stops on SIGINT or SIGTERM.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="benign behaviours (--behaviour):\n" + "\n".join(
            textwrap.fill(f"{name}: {text}", 100, initial_indent="  ", subsequent_indent="    ")
            for name, text in sorted(behaviours.BEHAVIOURS.items())))
    p.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
    p.add_argument("--controller-name", default=DEFAULT_CONTROLLER,
                   help="the GatewayClass spec.controllerName this controller answers to (default: %(default)s)")
    p.add_argument("--gateway-class",
                   help="reconcile only this GatewayClass (it must name the controller); "
                        "default: every class that does")
    p.add_argument("--install-gateway-class", action="store_true",
                   help="create the GatewayClass --gateway-class names (for --controller-name) when it does not "
                        "exist, as some implementations install their own; it is deleted at exit if created")
    p.add_argument("--api-revision", action="append", type=_names, metavar="NAME",
                   help="the InferencePool CRD revision installed in the cluster, of one API group; repeat it "
                        "(or give a comma-separated list), at most once per group, to reconcile the pools of "
                        "both APIs (default: "
                        f"{DEFAULT}). " + "; ".join(
                            f"{APIS[group].api_version}: {', '.join(names)}"
                            for group, names in revisions_by_api().items()))
    p.add_argument("--fault", action="append", default=[], choices=sorted(faults.FAULTS), metavar="NAME",
                   help="switch on a deliberate mistake (repeatable): " + ", ".join(sorted(faults.FAULTS)))
    p.add_argument("--behaviour", action="append", default=[], choices=sorted(behaviours.BEHAVIOURS),
                   metavar="NAME",
                   help="switch on a benign (conformant but unusual) behaviour (repeatable): "
                        + ", ".join(sorted(behaviours.BEHAVIOURS)) + " (described below)")
    p.add_argument("--slow-seconds", type=float, default=behaviours.DEFAULT_SLOW_SECONDS, metavar="SECONDS",
                   help="with --behaviour slow: seconds between an event and the status write; with --behaviour "
                        "slow-dataplane: between a change and the data plane's configuration (default: %(default)g)")
    p.add_argument("--rewrite-seconds", type=float, default=behaviours.DEFAULT_REWRITE_SECONDS, metavar="SECONDS",
                   help="with --behaviour frequent-rewrites: seconds between two rewrites (default: %(default)g)")
    p.add_argument("--cache-lag-seconds", type=float, default=behaviours.DEFAULT_CACHE_LAG_SECONDS,
                   metavar="SECONDS", help="with --behaviour lagging-cache: how late the most lagging resource's "
                   "changes reach the cache (default: %(default)g)")
    p.add_argument("--envoy-config-dir", metavar="DIR",
                   help="also program an Envoy: write its listeners and clusters to DIR/lds.json and DIR/cds.json "
                        "(an Envoy bootstrapped to read them from files takes them up; see README.md); "
                        "without it, status only")
    p.add_argument("--gateway-address", action="append", type=_names, metavar="IP",
                   help="with --envoy-config-dir: an address Envoy's listeners bind to, one per Gateway, reported in "
                        "its status.addresses; repeat it (or give a comma-separated list) for more Gateways "
                        f"(default: {dataplane.DEFAULT_ADDRESS})")
    p.add_argument("--epp-tls", action="store_true",
                   help="with --envoy-config-dir: talk TLS to the endpoint picker (its certificate is not verified)")
    p.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    p.add_argument("--log-file", metavar="PATH", help="write the log to PATH as well as to standard error")
    args = p.parse_args(argv)
    args.api_revision = [n for names in args.api_revision or [] for n in names]
    args.gateway_address = [a for addresses in args.gateway_address or [] for a in addresses]
    for name in args.api_revision:
        if name not in REVISIONS:
            p.error(f"--api-revision: unknown revision {name!r} (choose from {', '.join(REVISIONS)})")
    if args.install_gateway_class and not args.gateway_class:
        p.error("--install-gateway-class needs --gateway-class")
    if not args.envoy_config_dir and (args.gateway_address or args.epp_tls):
        p.error("--gateway-address and --epp-tls need --envoy-config-dir")
    for address in args.gateway_address or []:
        try:
            ipaddress.ip_address(address)
        except ValueError:
            p.error(f"--gateway-address: {address!r} is not an IP address")
    for flag in ("slow_seconds", "cache_lag_seconds"):
        if getattr(args, flag) < 0:
            p.error(f"--{flag.replace('_', '-')} must not be negative, not {getattr(args, flag):g}")
    if args.rewrite_seconds <= 0:
        p.error(f"--rewrite-seconds must be more than 0, not {args.rewrite_seconds:g}")
    try:
        args.revisions = choose(args.api_revision or [DEFAULT])
    except ValueError as e:
        p.error(f"--api-revision: {e}")
    return args


def _names(value: str) -> list[str]:
    """A comma-separated list (as a suite's `{api_revision}` or `{gateway_addresses}` expands)."""
    return [v for v in value.split(",") if v]


def install_gateway_class(kube: Kube, name: str, controller_name: str) -> bool:
    """Create GatewayClass `name` for this controller unless it exists; True when created here."""
    if kube.get(GATEWAY_CLASS, name) is not None:
        return False
    try:
        kube.request("POST", GATEWAY_CLASS.path(), body={
            "apiVersion": GATEWAY_CLASS.api_version, "kind": "GatewayClass",
            "metadata": {"name": name}, "spec": {"controllerName": controller_name}})
    except ApiError as e:
        if e.status == 409:  # created meanwhile by someone else
            return False
        raise
    log.info("created GatewayClass %s", name)
    return True


def api_client(kubeconfig: str | None) -> client.ApiClient:
    cfg = client.Configuration()
    config.load_kube_config(config_file=kubeconfig, client_configuration=cfg)
    # Five or six watches hold a connection each; leave room for the writes.
    cfg.connection_pool_maxsize = 16
    if cfg.refresh_api_key_hook is not None:
        # The client would re-apply the kubeconfig before each request (and the loader's
        # refresh puts itself back each time); a token is renewed minutes before it
        # expires, so once a second is plenty.
        renew, renewed = cfg.refresh_api_key_hook, [float("-inf")]

        def renew_at_most_each_second(c: client.Configuration) -> None:
            nonlocal renew
            if time.monotonic() - renewed[0] >= 1.0:
                renewed[0] = time.monotonic()
                renew(c)
                if c.refresh_api_key_hook not in (None, renew_at_most_each_second):
                    renew = c.refresh_api_key_hook
                c.refresh_api_key_hook = renew_at_most_each_second
        cfg.refresh_api_key_hook = renew_at_most_each_second
    return client.ApiClient(cfg)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    handlers = [logging.StreamHandler(sys.stderr)] + ([logging.FileHandler(args.log_file)] if args.log_file else [])
    logging.basicConfig(handlers=handlers, level=args.log_level,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # The watch threads report connection problems themselves, once per retry.
    logging.getLogger("urllib3").setLevel(logging.ERROR)
    faults.activate(args.fault)
    if args.fault:
        log.warning("faults switched on: %s", ", ".join(sorted(args.fault)))
    behaviours.activate(args.behaviour, slow_seconds=args.slow_seconds, rewrite_seconds=args.rewrite_seconds,
                        cache_lag_seconds=args.cache_lag_seconds)
    if args.behaviour:
        log.warning("benign behaviours switched on: %s%s", ", ".join(sorted(args.behaviour)),
                    f" (slow: {args.slow_seconds:g}s)" if {"slow", "slow-dataplane"} & set(args.behaviour) else "")

    stop = threading.Event()

    def on_signal(signum, _frame) -> None:
        log.info("received %s; stopping", signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    kube = Kube(api_client(args.kubeconfig))
    cache = Cache(args.controller_name, args.gateway_class, args.revisions)
    plane = None
    if args.envoy_config_dir:
        plane = dataplane.Dataplane(cache, dataplane.Options(
            Path(args.envoy_config_dir).resolve(), tuple(args.gateway_address or [dataplane.DEFAULT_ADDRESS]),
            epp_tls=args.epp_tls))
    controller = Controller(kube, cache, plane)
    log.info("starting: controller %s, API revision(s) %s%s%s", args.controller_name,
             ", ".join(f"{r.name} ({r.api.api_version})" for r in args.revisions),
             f", GatewayClass {args.gateway_class}" if args.gateway_class else "",
             f", Envoy configuration in {plane.options.config_dir} for {', '.join(plane.options.addresses)}"
             if plane else "")
    installed = args.install_gateway_class and install_gateway_class(kube, args.gateway_class, args.controller_name)
    controller.start()
    while not stop.wait(1.0):  # the timeout keeps the main thread responsive to signals
        pass
    controller.stop()
    if installed:
        kube.request("DELETE", GATEWAY_CLASS.path(None, args.gateway_class))
        log.info("deleted GatewayClass %s", args.gateway_class)
    log.info("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
