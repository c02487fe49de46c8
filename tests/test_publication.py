"""The reports/ checker (`python -m conformance check-reports`), on folders made here."""

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conformance.results import report
from conformance.results.publication import check_tree
from conformance.results.report import ProfileTest

REPO = Path(__file__).resolve().parents[1]
META = {"organization": "acme", "project": "gw", "url": "https://example.com/gw", "version": "v1.2.0",
        "contact": ["@acme/gw"]}

README = """# acme gw

| Extension Version | Profile | Implementation Version | Mode | Report |
|---|---|---|---|---|
| v0.0.0-seed | Gateway | v1.2.0 | default | [report](./v1.2.0-default-gateway-report.yaml) |

## Reproduce

```sh
pytest --gateway-class gw --report-output v1.2.0-default-gateway-report.yaml
```
"""


def make_tree(root: Path, readme: str = README, version: str = "v0.0.0-seed") -> Path:
    tests = [ProfileTest(key="t.py::test_a", name="a", tier="core", rules=("C1",))]
    doc = report.build(implementation=META, extension_version=version, gateway_api_version="v1.3.0",
                       gateway_api_channel="standard", mode="default",
                       profiles=[report.count(tests, {"t.py::test_a": ("passed", "")})], date="2025-01-31T12:00:00Z")
    folder = root / version / "gateway" / "acme-gw"
    folder.mkdir(parents=True)
    (folder / report.file_name(doc)).write_text(report.dump(doc))
    (folder / "README.md").write_text(readme)
    return folder


def test_a_good_tree_passes(tmp_path):
    make_tree(tmp_path)
    (tmp_path / "out").mkdir()  # run results live here and are ignored
    (tmp_path / "README.md").write_text("rules")
    assert check_tree(tmp_path) == []


def test_reports_of_both_apis_pass(tmp_path):
    """A run that judged both APIs publishes one report per API, each under its GIE release."""
    make_tree(tmp_path)
    make_tree(tmp_path, README.replace("v0.0.0-seed", "v1.6.0"), version="v1.6.0")
    assert check_tree(tmp_path) == []
    (tmp_path / "v1.6.0" / "gateway" / "acme-gw" / "README.md").write_text(README)  # names the wrong release
    assert any("v1.6.0" in p for p in check_tree(tmp_path)), check_tree(tmp_path)


def _edit_report(folder: Path, fn) -> None:
    path = folder / "v1.2.0-default-gateway-report.yaml"
    doc = yaml.safe_load(path.read_text())
    fn(doc)
    path.write_text(report.dump(doc))


@pytest.mark.parametrize(("damage", "problem"), [
    (lambda f: (f / "README.md").unlink(), "README.md: is missing"),
    (lambda f: (f / "README.md").write_text(README.replace("## Reproduce", "## Notes")), "no \"Reproduce\" section"),
    (lambda f: (f / "README.md").write_text(README.split("## Reproduce")[0] + "## Reproduce\n\nrun it\n"),
     "has no command block"),
    (lambda f: (f / "README.md").write_text(README.replace("| v1.2.0 | default", "| v1.1.0 | default")),
     "implementation version is 'v1.1.0', the report says 'v1.2.0'"),
    (lambda f: (f / "README.md").write_text(README.replace("(./v1.2.0-default", "(./v9-default")),
     "which is not a report in this folder"),
    (lambda f: (f / "README.md").write_text(README.replace("| Mode |", "| Kind |")), "README.md: has no table"),
    (lambda f: (f / "v1.2.0-default-gateway-report.yaml").rename(f / "v1-report.yaml"), "file name should be"),
    (lambda f: (f / "notes.txt").write_text("x"), "notes.txt: unexpected"),
    (lambda f: (f / "v1.2.0-default-gateway-report.yaml").write_text(
        (f / "v1.2.0-default-gateway-report.yaml").read_text().replace("Passed: 1", "Passed:   1")),
     "not as the suite wrote it"),
    (lambda f: _edit_report(f, lambda d: d["profiles"][0]["core"]["statistics"].update(Skipped=2)), "does not follow"),
    (lambda f: _edit_report(f, lambda d: d.update(GatewayAPIInferenceExtensionVersion="v0.3.0")),
     "but the folder is v0.0.0-seed"),
    (lambda f: _edit_report(f, lambda d: d["implementation"].pop("contact")), "missing key(s) contact"),
    (lambda f: (f / "v1.2.0-default-gateway-report.yaml").write_text("a: [\n"), "not valid YAML"),
    (lambda f: f.parent.rename(f.parent.parent / "http"), "expected a profile folder"),
])
def test_damage_is_found(tmp_path, damage, problem):
    folder = make_tree(tmp_path)
    damage(folder)
    problems = check_tree(tmp_path)
    assert any(problem in p for p in problems), problems


def test_command_line(tmp_path):
    make_tree(tmp_path)
    ok = subprocess.run([sys.executable, "-m", "conformance", "check-reports", str(tmp_path)], cwd=REPO,
                        capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0 and ok.stdout == "", ok.stdout + ok.stderr
    (tmp_path / "v0.0.0-seed" / "gateway" / "acme-gw" / "README.md").unlink()
    bad = subprocess.run([sys.executable, "-m", "conformance", "check-reports", str(tmp_path)], cwd=REPO,
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 1 and "README.md: is missing" in bad.stdout


def test_ci_workflow_example_uses_real_options():
    """docs/github-actions-conformance.yaml parses, installs the suite at a pinned release instead of
    checking it out, passes only suite options that exist, and uploads the results directory."""
    import re

    from conformance.options import _FLAGS, CLI_NAMES

    workflow = yaml.safe_load((REPO / "docs" / "github-actions-conformance.yaml").read_text())
    job = workflow["jobs"]["conformance"]
    steps = job["steps"]
    runs = "\n".join(s.get("run", "") for s in steps)
    assert re.fullmatch(r"\d+\.\d+\.\d+", str(job["env"]["SUITE_VERSION"]))
    assert 'pip install "inferencepool-conformance==${SUITE_VERSION}"' in runs
    checkouts = [s for s in steps if str(s.get("uses", "")).startswith("actions/checkout")]
    assert all("repository" not in (s.get("with") or {}) for s in checkouts)  # the suite is not cloned
    command = runs.split("inferencepool-conformance \\", 1)[1].split("\n\n")[0]
    used = set(re.findall(r"(?<![\w-])--([a-z][a-z-]+)", command))
    assert used and used <= {CLI_NAMES.get(n, n) for n in _FLAGS}, used
    assert '--results-dir="$RESULTS"' in command
    uploads = [s for s in steps if str(s.get("uses", "")).startswith("actions/upload-artifact")]
    assert all(s.get("if") == "always()" for s in uploads)  # also after failed tests
    assert "${{ env.RESULTS }}" in [s["with"]["path"] for s in uploads]  # the whole results directory
