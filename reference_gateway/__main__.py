"""Command line: `python -m reference_gateway --kubeconfig PATH [options]`."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading

from kubernetes import client, config

from conformance.kube import Kube

from . import faults
from .cache import Cache
from .controller import Controller
from .model import DEFAULT_CONTROLLER
from .revisions import DEFAULT, REVISIONS

log = logging.getLogger("reference_gateway")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m reference_gateway",
        description="A status-only reference gateway controller for the InferencePool API. "
                    "Logs one line per status write; stops on SIGINT or SIGTERM.")
    p.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
    p.add_argument("--controller-name", default=DEFAULT_CONTROLLER,
                   help="the GatewayClass spec.controllerName this controller answers to (default: %(default)s)")
    p.add_argument("--gateway-class",
                   help="reconcile only this GatewayClass (it must name the controller); "
                        "default: every class that does")
    p.add_argument("--api-revision", choices=sorted(REVISIONS), default=DEFAULT,
                   help="the InferencePool CRD revision installed in the cluster (default: %(default)s)")
    p.add_argument("--fault", action="append", default=[], choices=sorted(faults.FAULTS), metavar="NAME",
                   help="switch on a deliberate mistake (repeatable): " + ", ".join(sorted(faults.FAULTS)))
    p.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    return p.parse_args(argv)


def api_client(kubeconfig: str | None) -> client.ApiClient:
    cfg = client.Configuration()
    config.load_kube_config(config_file=kubeconfig, client_configuration=cfg)
    # Five watches hold a connection each; leave room for the writes.
    cfg.connection_pool_maxsize = 16
    return client.ApiClient(cfg)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(stream=sys.stderr, level=args.log_level,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # The watch threads report connection problems themselves, once per retry.
    logging.getLogger("urllib3").setLevel(logging.ERROR)
    faults.activate(args.fault)
    if args.fault:
        log.warning("faults switched on: %s", ", ".join(sorted(args.fault)))

    stop = threading.Event()

    def on_signal(signum, _frame) -> None:
        log.info("received %s; stopping", signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    kube = Kube(api_client(args.kubeconfig))
    cache = Cache(args.controller_name, args.gateway_class)
    controller = Controller(kube, cache, REVISIONS[args.api_revision])
    log.info("starting: controller %s, API revision %s%s", args.controller_name, args.api_revision,
             f", GatewayClass {args.gateway_class}" if args.gateway_class else "")
    controller.start()
    while not stop.wait(1.0):  # the timeout keeps the main thread responsive to signals
        pass
    controller.stop()
    log.info("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
