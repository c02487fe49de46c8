"""The whole suite, run as a user runs it, passes on the embedded default with the reference implementation."""

import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_suite_passes_on_embedded_default(tmp_path):
    junit = tmp_path / "junit.xml"
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={junit}"],
                            cwd=REPO, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    suite = ET.parse(junit).getroot().find("testsuite")
    counts = {k: int(suite.get(k)) for k in ("tests", "failures", "errors", "skipped")}
    assert counts["failures"] == counts["errors"] == 0, counts
    assert counts["tests"] >= 140 and counts["skipped"] == 0, counts
