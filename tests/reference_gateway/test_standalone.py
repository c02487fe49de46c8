"""The reference gateway stands alone (it does not import the suite that judges it), and its command line."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from reference_gateway.__main__ import parse_args

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "reference_gateway"


@pytest.mark.parametrize("path", sorted(PACKAGE.glob("*.py")), ids=lambda p: p.name)
def test_no_module_imports_the_suite(path):
    tree = ast.parse(path.read_text(), str(path))
    imported = [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    imported += [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    assert not [m for m in imported if m.split(".")[0] == "conformance"]


def test_it_runs_where_the_suite_cannot_be_imported():
    blocked = ("import sys; sys.modules['conformance'] = None; import runpy; sys.argv = ['x', '--help']; "
               "runpy.run_module('reference_gateway', run_name='__main__')")
    done = subprocess.run([sys.executable, "-c", blocked], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "--api-revision NAME" in done.stdout


def names(argv):
    return [r.name for r in parse_args(argv).revisions]


def test_api_revision_defaults_to_the_seed():
    assert names([]) == ["seed"]


def test_api_revision_once_per_api_group():
    assert names(["--api-revision", "v1.6"]) == ["v1.6"]
    assert names(["--api-revision", "seed", "--api-revision", "v1.6"]) == ["seed", "v1.6"]
    assert names(["--api-revision", "v1.4", "--api-revision", "v0.5"]) == ["v1.4", "v0.5"]


@pytest.mark.parametrize("argv", [
    ["--api-revision", "seed", "--api-revision", "v0.5"],
    ["--api-revision", "v1.0", "--api-revision", "v1.6"],
    ["--api-revision", "v1.7"],
])
def test_api_revision_refused(argv, capsys):
    with pytest.raises(SystemExit) as exit_:
        parse_args(argv)
    assert exit_.value.code == 2
    assert "--api-revision" in capsys.readouterr().err


@pytest.mark.parametrize("flag,value", [("--slow-seconds", "-1"), ("--cache-lag-seconds", "-0.5"),
                                        ("--rewrite-seconds", "0")])
def test_a_behaviour_time_out_of_range_is_one_line(flag, value, capsys):
    with pytest.raises(SystemExit) as exit_:
        parse_args([flag, value])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert f"{flag} must" in err and "Traceback" not in err, err
