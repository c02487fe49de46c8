"""Command line: `python -m conformance {build,cluster,coverage}`.

  build                     build (or find in the cache) the control-plane binary
  cluster up [--no-crds] [--api-revision R]
                            start the embedded cluster, print its kubeconfig path
                            and keep it up until Ctrl-C
  coverage [pytest args]    print which tests check each SPEC rule
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading


def _build(_args) -> int:
    from .cluster import binary

    try:
        print(binary.ensure())
    except binary.BuildError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


def _cluster_up(args) -> int:
    from . import revisions
    from .cluster.binary import BuildError
    from .cluster.embedded import ClusterError, EmbeddedCluster

    if args.api_revision not in revisions.REVISIONS:
        print(f"error: unknown --api-revision {args.api_revision} (known: {', '.join(revisions.REVISIONS)})",
              file=sys.stderr)
        return 2
    crds = [] if args.no_crds else revisions.REVISIONS[args.api_revision].embedded_crds
    cluster = EmbeddedCluster(crd_paths=crds)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        cluster.start(progress=lambda m: print(m, file=sys.stderr, flush=True))
        print(f"cluster up: {cluster.server}", file=sys.stderr)
        print(f"CRDs: {'none' if args.no_crds else 'InferencePool (' + args.api_revision + ') and Gateway API'}",
              file=sys.stderr)
        print(cluster.kubeconfig, flush=True)  # stdout: just the path, for scripts
        print("press Ctrl-C to stop", file=sys.stderr, flush=True)
        stop.wait()
    except KeyboardInterrupt:
        pass
    except (BuildError, ClusterError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    finally:
        cluster.stop()
    return 0


def _coverage(args) -> int:
    import subprocess

    return subprocess.call([sys.executable, "-m", "pytest", "--collect-only", "-q", "--rule-coverage",
                            *args.pytest_args])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m conformance", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("build", help="build the control-plane binary").set_defaults(func=_build)
    cluster = sub.add_parser("cluster", help="run the embedded cluster on its own")
    csub = cluster.add_subparsers(dest="action", required=True)
    up = csub.add_parser("up", help="start it and keep it up until Ctrl-C")
    up.add_argument("--no-crds", action="store_true", help="install no CRDs")
    up.add_argument("--api-revision", default="seed", help="InferencePool API revision of the CRD to install")
    up.set_defaults(func=_cluster_up)
    cov = sub.add_parser("coverage", help="print the rule coverage matrix")
    cov.add_argument("pytest_args", nargs=argparse.REMAINDER)
    cov.set_defaults(func=_coverage)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
