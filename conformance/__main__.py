"""Run the InferencePool conformance suite, or one of its tools.

  inferencepool-conformance [OPTIONS]      run the whole suite (`python -m conformance [OPTIONS]` is the same):
                                           the same options as `pytest --pyargs conformance.tests [OPTIONS]`,
                                           the suite's (below) and pytest's (-n 3, -k EXPR, -x, ...); with
                                           no --kubeconfig, on the embedded cluster with the reference
                                           implementation. It prints the suite's version and the API
                                           revisions it knows first, and where the results went last.

  build [--no-epp]          build (or find in the cache) the control-plane binary and the
                            traffic tier's endpoint picker (upstream's EPP); print their paths
  cluster up [--no-crds] [--api-revision R[,R]]
                            start the embedded cluster, print its kubeconfig path
                            and keep it up until Ctrl-C
  coverage [pytest args]    print which tests check each SPEC rule
  tests [--json]            list the conformance tests: short name, tier, rules
  check-reports [DIR]       check a reports/ tree before publishing it
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading

from .runner import describe, run

COMMANDS = ("build", "cluster", "coverage", "tests", "check-reports")


def _help() -> str:
    from . import options

    parser = argparse.ArgumentParser(prog="inferencepool-conformance", usage="%(prog)s [OPTIONS] | %(prog)s "
                                     "{" + ",".join(COMMANDS) + "} ...", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter, add_help=False,
                                     epilog="Any pytest option goes too (pytest --help lists them). Write options "
                                            "that take a path with '=' (--kubeconfig=PATH).")
    parser.add_argument("-h", "--help", action="store_true", help="show this help and exit")
    parser.add_argument("--version", action="store_true",
                        help="print the suite's version and the API revisions it knows, and exit")

    class Groups:  # pytest's parser.getgroup(...).addoption(...), onto argparse: one list of options for both
        @staticmethod
        def getgroup(name: str, description: str = ""):
            group = parser.add_argument_group(description or name)
            group.addoption = group.add_argument
            return group

    options.add_options(Groups)
    return parser.format_help()


def _build(args) -> int:
    from .cluster import binary

    try:
        print(binary.ensure(), flush=True)
        if not args.no_epp:
            from .traffic import epp

            print(epp.ensure(), flush=True)
    except binary.BuildError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


def _cluster_up(args) -> int:
    from . import revisions
    from .cluster.binary import BuildError
    from .cluster.embedded import ClusterError, EmbeddedCluster

    names = [n.strip() for n in args.api_revision.split(",") if n.strip()]
    unknown = [n for n in names if n not in revisions.REVISIONS]
    if unknown or not names:
        print(f"error: unknown --api-revision {','.join(unknown) or args.api_revision!r} "
              f"(known: {', '.join(revisions.REVISIONS)})", file=sys.stderr)
        return 2
    apis = [revisions.REVISIONS[n].api.name for n in names]
    if len(set(apis)) < len(apis):
        print(f"error: --api-revision {args.api_revision}: at most one revision per API", file=sys.stderr)
        return 2
    crds = [] if args.no_crds else list(dict.fromkeys(
        p for n in names for p in revisions.REVISIONS[n].embedded_crds))
    cluster = EmbeddedCluster(crd_paths=crds)
    stop = threading.Event()
    # Explicit handlers: a shell script's background job starts with SIGINT ignored.
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    try:
        cluster.start(progress=lambda m: print(m, file=sys.stderr, flush=True))
        print(f"cluster up: {cluster.server}", file=sys.stderr)
        print(f"CRDs: {'none' if args.no_crds else 'InferencePool (' + ', '.join(names) + ') and Gateway API'}",
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
    return run(["--collect-only", "-q", "--rule-coverage", *args.pytest_args], banner=False)


def _tests(args) -> int:
    from .results import inventory

    code, tests, output = inventory.collect_here()
    if code != 0:
        print(output.strip() or f"collecting the suite failed (pytest exit {code})", file=sys.stderr)
        return 1
    if args.json:
        print(inventory.to_json(tests))
        return 0
    width = max((len(t.name) for t in tests), default=10)
    for t in sorted(tests, key=lambda t: t.name):
        print(f"{t.name:{width}}  {t.tier:8}  {' '.join(t.rules)}")
    print(f"{len(tests)} tests", file=sys.stderr)
    return 0


def _check_reports(args) -> int:
    from pathlib import Path

    from .results.publication import check_tree

    problems = check_tree(Path(args.directory))
    for p in problems:
        print(p)
    if problems:
        print(f"{len(problems)} problem(s) in {args.directory}", file=sys.stderr)
        return 1
    print(f"{args.directory}: ok", file=sys.stderr)
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] and argv[0] in ("-h", "--help"):
        print(_help(), end="")
        return 0
    if argv == ["--version"]:
        print(describe())
        return 0
    if not argv[:1] or argv[0] not in COMMANDS:
        return run(argv)
    return _command(argv)


def _command(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="inferencepool-conformance", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    build = sub.add_parser("build", help="build the control-plane binary and the endpoint picker")
    build.add_argument("--no-epp", action="store_true",
                       help="build the control plane only, not the traffic tier's endpoint picker")
    build.set_defaults(func=_build)
    cluster = sub.add_parser("cluster", help="run the embedded cluster on its own")
    csub = cluster.add_subparsers(dest="action", required=True)
    up = csub.add_parser("up", help="start it and keep it up until Ctrl-C")
    up.add_argument("--no-crds", action="store_true", help="install no CRDs")
    from .revisions import DEFAULT, REVISIONS

    up.add_argument("--api-revision", default=DEFAULT,
                    help="InferencePool API revisions whose CRDs to install, comma-separated, at most one per "
                         "API: "
                         + ", ".join(f"{r.name} ({r.title})" for r in REVISIONS.values()) + " (default: %(default)s)")
    up.set_defaults(func=_cluster_up)
    cov = sub.add_parser("coverage", help="print the rule coverage matrix")
    cov.add_argument("pytest_args", nargs=argparse.REMAINDER)
    cov.set_defaults(func=_coverage)
    tests = sub.add_parser("tests", help="list the conformance tests (short name, tier, rules)")
    tests.add_argument("--json", action="store_true", help="as JSON (what reports use to count tests that did not run)")
    tests.set_defaults(func=_tests)
    check = sub.add_parser("check-reports", help="check a reports/ tree before publishing it")
    check.add_argument("directory", nargs="?", default="reports", help="the tree to check (default: %(default)s)")
    check.set_defaults(func=_check_reports)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
