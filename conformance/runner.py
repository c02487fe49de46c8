"""Run the suite from any directory: what `inferencepool-conformance` and `python -m conformance` do.

`run` calls pytest with the suite's options and pytest's, and with what a checkout's
pytest configuration (pyproject.toml) gives a run there. This module is also the pytest
plugin (`-p conformance.runner`) that collects the installed suite when the command line
names no tests: loaded from the command line, so pytest-xdist's workers, which parse the
same command line, load it too.
"""

from __future__ import annotations

import pytest

SUITE = "conformance.tests"  # what a run collects unless its arguments name tests
# This process imported the package before pytest could mark it for assertion rewriting; the
# modules tests use are not imported yet, so they are rewritten all the same, and pytest's
# warning about it says nothing. (A literal prefix of the message, as -W takes it.)
_ALREADY_IMPORTED = "Module already imported so cannot be rewritten; conformance"


def run(argv: list[str], banner: bool = True) -> int:
    """Run the suite with pytest: `argv` are the suite's and pytest's options (and tests, if any)."""
    if banner:
        print(describe(), flush=True)
    # The suite's plugin (also with plugin autoloading off), strict markers, no cache directory,
    # plain asserts (the suite's each carry their message; rewriting them costs each process CPU).
    return int(pytest.main(["--pyargs", "-p", "conformance.plugin", "-p", __name__, "-p", "no:cacheprovider",
                            "--strict-markers", "--assert=plain",
                            "-W", f"ignore:{_ALREADY_IMPORTED}:pytest.PytestAssertRewriteWarning", *argv]))


def describe() -> str:
    """The suite's version, where it runs from, and the API revisions it knows."""
    from . import data, version
    from .revisions import REVISIONS

    where = "installed package" if data.installed() else "checkout"
    return "\n".join([f"inferencepool-conformance {version()} ({where}: {data.PACKAGE})",
                      "API revisions it knows: " + "; ".join(f"{r.name} ({r.title})" for r in REVISIONS.values())])


@pytest.hookimpl(trylast=True)  # after the suite's plugin has given bare boolean flags their value
def pytest_load_initial_conftests(early_config: pytest.Config, parser: pytest.Parser, args: list[str]) -> None:
    if not getattr(parser.parse_known_args(args), "file_or_dir", None):
        args.append(SUITE)
