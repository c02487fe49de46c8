"""Upstream options that change what runs: --skip-provisional-tests (on a throwaway test file)."""

import subprocess
import sys

TESTS = '''
import pytest

@pytest.mark.provisional
@pytest.mark.rule("S1")
def test_provisional():
    pass

@pytest.mark.rule("S2")
def test_settled():
    pass
'''


def run(tmp_path, *args):
    (tmp_path / "test_p.py").write_text(TESTS)
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", *args],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)


def test_skip_provisional_tests(tmp_path):
    skipped = run(tmp_path, "test_p.py", "--skip-provisional-tests")
    assert skipped.returncode == 0, skipped.stdout + skipped.stderr
    assert "skipped by --skip-provisional-tests" in skipped.stdout and "1 passed, 1 skipped" in skipped.stdout
    # The options-file spelling, and the default: provisional tests run.
    (tmp_path / "opts.yaml").write_text("skip-provisional-tests: false\n")
    ran = run(tmp_path, "test_p.py", f"--conformance-options-file={tmp_path / 'opts.yaml'}")
    assert "2 passed" in ran.stdout, ran.stdout + ran.stderr
    # The suite's report plugin writes nothing for tests outside the suite.
    assert not (tmp_path / "reports").exists()


def test_bare_boolean_flag_before_a_path_means_true(tmp_path):
    # Go's flag meaning: a bare boolean flag is true and leaves the next argument alone.
    result = run(tmp_path, "--skip-provisional-tests", "test_p.py")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 passed, 1 skipped" in result.stdout


def test_boolean_flag_with_a_value_that_is_not_one(tmp_path):
    result = run(tmp_path, "--skip-provisional-tests=test_p.py")
    assert result.returncode == 4
    assert "is not a boolean" in result.stderr
