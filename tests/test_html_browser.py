"""The HTML page opens in a real headless browser (Debian's chromium) and shows the results."""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import tempfile
from pathlib import Path

import pytest

from conformance.results import artifacts as results
from conformance.results import html_report, report
from conformance.results.report import ProfileTest

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]
_install_problem: list[str] = []


def chromium() -> str:
    """The chromium binary; installed with apt-get when missing (as .ci/run does), else the test skips."""
    found = shutil.which("chromium") or ("/usr/bin/chromium" if os.path.exists("/usr/bin/chromium") else None)
    if found:
        return found
    if not _install_problem:
        problem = "apt-get is not available, or this is not root"
        if shutil.which("apt-get") and os.geteuid() == 0:
            env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
            for cmd in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", "chromium"]):
                done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
                if done.returncode != 0:
                    problem = f"{' '.join(cmd)} failed: {(done.stderr.strip().splitlines() or ['?'])[-1]}"
                    break
            else:
                if os.path.exists("/usr/bin/chromium"):
                    return "/usr/bin/chromium"
                problem = "apt-get installed chromium, but /usr/bin/chromium is not there"
        _install_problem.append(problem)
    pytest.skip(f"chromium is not installed and cannot be installed here: {_install_problem[0]}")


def _run(args: list[str], timeout: float = 120) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory(prefix="chromium-") as profile:
        return subprocess.run([chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args],
                              capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def dump_dom(page: Path) -> str:
    """The page's DOM after its script ran, as chromium serialises it."""
    done = _run(["--virtual-time-budget=5000", "--dump-dom", page.resolve().as_uri()])
    assert done.returncode == 0 and "<html" in done.stdout, done.stderr[-2000:]
    return done.stdout


def screenshot(page: Path, out: Path) -> tuple[int, int]:
    done = _run(["--window-size=1280,900", f"--screenshot={out}", page.resolve().as_uri()])
    assert done.returncode == 0 and out.is_file(), done.stderr[-2000:]
    head = out.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", head[16:24])


def test_page_opens_and_shows_the_results(tmp_path):
    tests = [ProfileTest(key=f"t.py::test_{n}", name=n, tier="core", rules=("C1",)) for n in ("a", "b", "c")]
    profile = report.count(tests, {"t.py::test_a": ("passed", ""), "t.py::test_b": ("failed", "boom")})
    rows = [html_report.Row("a", "t.py::test_a", "core", "passed", ("C1",), ("status",), 0.5),
            html_report.Row("b", "t.py::test_b", "core", "failed", ("C2",), ("status",), 3.0,
                            "timed out after 3.0s waiting for InferencePool ns/pool",
                            "E   conformance.wait.WaitTimeout: timed out after 3.0s", "Implementation defect",
                            [results.Attachment("last observed object", "kind: InferencePool")]),
            html_report.Row("c", "t.py::test_c", "core", "not-run", reason="deselected")]
    facts = results.Facts(kubernetes_version="v1.35.4", api_revision="seed", gateway_class="reference")
    page = tmp_path / "report.html"
    page.write_text(html_report.render(title="InferencePool conformance", facts=facts, implementation="acme/gw v1",
                                       mode="default", date="2025-01-31T12:00:00Z", profiles=[profile], rows=rows))
    dom = dump_dom(page)
    assert 'data-ready="true"' in dom  # the script ran
    assert "3 of 3 tests shown" in dom
    assert 'id="overall">failure<' in dom
    assert "timed out after 3.0s waiting for InferencePool" in dom and "last observed object" in dom
    assert "v1.35.4" in dom
    width, height = screenshot(page, tmp_path / "page.png")
    assert (width, height) == (1280, 900)
    assert (tmp_path / "page.png").stat().st_size > 10_000  # more than a blank page
