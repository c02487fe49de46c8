"""Every test of the profile, so a report can say which ones did not run.

A run collects only what its arguments name (a file, `-k`, `--run-test`).
To count the tests it left out, the report needs the suite's whole list:
`describe` turns a collected item into a `ProfileTest`, `scope` tells whether
a run's arguments cover the whole suite, and `collect` gets the whole list
from a separate collection (`python -m conformance tests --json`) when they
do not, or when the process writing the report collected nothing itself (the
pytest-xdist controller).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ..features import CORE_FEATURES
from .report import ProfileTest, key_of, short_name, tier_of

SUITE_DIR = Path(__file__).resolve().parent.parent / "tests"


def api_of(item: pytest.Item) -> str | None:
    """The InferencePool API an item judges (its `api_revision` parameter), if any."""
    callspec = getattr(item, "callspec", None)
    return None if callspec is None else callspec.params.get("api_revision")


def of_another_api(item: pytest.Item) -> bool:
    """Whether a parameter of the item (a schema case, say) belongs to an API other than the item's:
    such a pairing is no test at all (the plugin drops it from the collection)."""
    api = api_of(item)
    return api is not None and any(isinstance(getattr(v, "api", None), str) and v.api != api
                                   for v in item.callspec.params.values())


def describe(item: pytest.Item) -> ProfileTest | None:
    """The profile test an item is, or None for a test outside the profile (no rule marker)."""
    if of_another_api(item):
        return None
    rules = tuple(dict.fromkeys(r for m in item.iter_markers("rule") for r in m.args))
    features = tuple(sorted({f for m in item.iter_markers("features") for f in m.args}))
    tier = tier_of(rules, features, CORE_FEATURES)
    if tier is None:
        return None
    api = str(api_of(item) or "")
    return ProfileTest(key=key_of(item.nodeid), name=_without_api(short_name(item.nodeid), api), tier=tier,
                       rules=rules, features=features, api=api)


def _without_api(name: str, api: str) -> str:
    """A report's name of a test: one report per API, so the API's id is left out of it."""
    if not api:
        return name
    return name.replace(f"[{api}]", "").replace(f"[{api}-", "[")


def _module_path(name: str) -> Path | None:
    """The file or package directory of a dotted module name (for --pyargs), if importable."""
    import importlib.util

    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin:
        return None
    origin = Path(spec.origin)
    return origin.parent if origin.name == "__init__.py" else origin


def scope(args: list[str], invocation_dir: Path, suite_dir: Path = SUITE_DIR, pyargs: bool = False) -> str:
    """'full' if the arguments collect the whole suite, 'partial' if only part of it, else 'none'."""
    result = "none"
    for arg in args:
        path_part, _, rest = arg.partition("::")
        path = Path(path_part)
        if pyargs and not (invocation_dir / path).exists():
            path = _module_path(path_part) or path
        if not path.is_absolute():
            path = invocation_dir / path
        try:
            path = path.resolve()
        except OSError:
            continue
        if not rest and (path == suite_dir or suite_dir.is_relative_to(path)):
            return "full"
        if path.is_relative_to(suite_dir):
            result = "partial"
    return result


def to_json(tests: list[ProfileTest]) -> str:
    return json.dumps([{"key": t.key, "name": t.name, "tier": t.tier, "rules": list(t.rules), "api": t.api,
                        "features": list(t.features)} for t in tests], indent=1)


def from_json(text: str) -> list[ProfileTest]:
    return [ProfileTest(key=d["key"], name=d["name"], tier=d["tier"], rules=tuple(d["rules"]),
                        features=tuple(d["features"]), api=d.get("api", "")) for d in json.loads(text)]


class _Collector:
    def __init__(self) -> None:
        self.tests: list[ProfileTest] = []

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        self.tests = [t for t in map(describe, items) if t is not None]


def collect_here(suite_dir: Path = SUITE_DIR) -> tuple[int, list[ProfileTest], str]:
    """Collect the suite in this process: (pytest exit code, tests, pytest's output)."""
    collector = _Collector()
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                            "-p", "no:allure_pytest", str(suite_dir)], plugins=[collector])
    return int(code), collector.tests, out.getvalue()


def start(cwd: Path) -> subprocess.Popen:
    """Start collecting the whole suite in a child process (read it with `finish`).

    The child gets its own session, so a Ctrl-C meant for the run does not stop
    it, and no kubeconfig or extra pytest options: it only collects.
    """
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "PYTEST_ADDOPTS")}
    return subprocess.Popen([sys.executable, "-m", "conformance", "tests", "--json"], cwd=cwd, env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)


def finish(proc: subprocess.Popen, timeout: float = 120) -> tuple[list[ProfileTest] | None, str]:
    """The child's list, or (None, why not)."""
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return None, f"collecting the whole suite took more than {timeout:g}s"
    if proc.returncode != 0:
        last = (err.strip().splitlines() or out.strip().splitlines() or ["no output"])[-1]
        return None, f"collecting the whole suite failed (exit {proc.returncode}): {last}"
    try:
        return from_json(out), ""
    except (ValueError, KeyError, TypeError) as e:
        return None, f"collecting the whole suite gave unreadable output: {e}"
