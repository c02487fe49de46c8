"""Real runs of the suite leave faithful reports: full (under xdist), partial, failing and interrupted.

The partial, failing and interrupted runs share one cluster started with
`python -m conformance cluster up`, as an implementer's CI would bring its
own, with the reference gateway running under a GatewayClass of its own and
a deliberate fault (it accepts ExternalName Services, which X1/X2 forbid).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml
from kubernetes import config as k8s_config

from conformance.kube import Kube
from conformance.results import report

from .suite_run import SUITE_LABEL
from .test_html_browser import dump_dom

REPO = Path(__file__).resolve().parents[1]
META = ["--organization=acme", "--project=gw", "--url=https://example.com/gw", "--implementation-version=v1.2.0",
        "--contact=@acme/gw"]
FAULTY_CONTROLLER = "example.com/faulty-gateway"


def suite_cmd(*args) -> list[str]:
    return [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args]


def run_suite(*args, timeout=900) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "PYTEST_ADDOPTS")}
    return subprocess.run(suite_cmd(*args), cwd=REPO, capture_output=True, text=True, timeout=timeout, env=env)


def junit_counts(path: Path) -> dict[str, int]:
    root = ET.parse(path).getroot()
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    return {k: int(suite.get(k)) for k in ("tests", "failures", "errors", "skipped")}


def junit_cases(path: Path) -> dict[str, ET.Element]:
    root = ET.parse(path).getroot()
    return {f"{c.get('classname')}::{c.get('name')}": c for c in root.iter("testcase")}


def load_report(path: Path) -> dict:
    text = path.read_text()
    doc = yaml.safe_load(text)
    assert set(doc) == report.TOP_KEYS
    assert report.validate(doc) == [], report.validate(doc)
    assert text == report.dump(doc)  # as the suite writes it, for upload unmodified
    return doc


def whole_suite() -> list[report.ProfileTest]:
    from conformance.results import inventory

    out = subprocess.run([sys.executable, "-m", "conformance", "tests", "--json"], cwd=REPO, capture_output=True,
                         text=True, timeout=300, check=True).stdout
    return inventory.from_json(out)


@pytest.fixture(scope="module")
def suite_tests():
    return whole_suite()


@pytest.fixture(scope="module")
def profile(suite_tests):
    """The tests of one API's report: v1alpha2's (the faulty cluster has only its CRD)."""
    return [t for t in suite_tests if t.api in ("", "v1alpha2")]


# -- the whole suite, under pytest-xdist ---------------------------------------------------


def test_full_run_under_xdist_matches_junit(tmp_path, suite_tests):
    """The controller process starts the embedded cluster and the implementation for both workers,
    writes one report per judged API (the embedded default: v1alpha2 seed and v1 v1.6), and keeps
    the log of the implementation it started beside the results."""
    result = run_suite("-n", "2", "-q", f"--results-dir={tmp_path}", f"--report-output={tmp_path}/r.yaml", *META,
                       timeout=1500)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "reference_gateway: starting: controller" in (tmp_path / "implementation.log").read_text()
    counts = junit_counts(tmp_path / "junit.xml")
    assert counts["failures"] == counts["errors"] == 0
    cases = junit_cases(tmp_path / "junit.xml")
    for api, version in (("v1alpha2", "v0.0.0-seed"), ("v1", "v1.6.0")):
        doc = load_report(tmp_path / f"r-{api}.yaml")
        [p] = doc["profiles"]
        stats = p["core"]["statistics"]
        mine = {k: c for k, c in cases.items() if f"[{api}]" in k or f"[{api}-" in k}
        skipped = [c for c in mine.values() if c.find("skipped") is not None]
        not_applicable = [c for c in skipped if (c.find("skipped").get("message") or "").startswith("not-applicable:")]
        assert stats == {"Passed": len(mine) - len(skipped), "Failed": 0,
                         "Skipped": len(skipped) - len(not_applicable)}, (api, stats)
        assert stats["Passed"] + len(not_applicable) == len([t for t in suite_tests if t.api == api])
        assert p["core"]["result"] == "success" and "skippedTests" not in p["core"]
        # Facts of the workers' clusters came to the controller.
        assert doc["gatewayAPIVersion"] == "v1.3.0" and doc["gatewayAPIChannel"] == "standard"
        assert doc["GatewayAPIInferenceExtensionVersion"] == version and doc["mode"] == "default"
    properties = (tmp_path / "allure-results" / "environment.properties").read_text()
    env = dict(line.split("=", 1) for line in properties.splitlines())
    assert env["Kubernetes.version"].startswith("v1.") and env["API.revision"].startswith("v1alpha2 seed, v1 v1.6")
    assert env["GatewayClass"] == "reference" and env["Implementation"] == "acme/gw v1.2.0"
    assert (tmp_path / "allure-results" / "categories.json").is_file()
    # Labels by API revision, area and rule, in JUnit and in Allure.
    case = cases["conformance.tests.test_pool_accepted::test_pool_accepted[v1alpha2]"]
    props = {p.get("name"): p.get("value") for p in case.iter("property")}
    assert props == {"conformance": "core", "area": "status", "rule": "C1 C2 C3", "api_revision": "seed"}
    results = list((tmp_path / "allure-results").glob("*-result.json"))
    assert len(results) == counts["tests"]
    labels = [label for r in results for label in yaml.safe_load(r.read_text())["labels"]]
    assert {"name": "api_revision", "value": "seed"} in labels and {"name": "area", "value": "schema"} in labels
    assert (tmp_path / "report.html").stat().st_size > 10_000


# -- a cluster of the implementer's own, with a faulty implementation ------------------------


@pytest.fixture(scope="module")
def faulty_cluster(tmp_path_factory):
    """(kubeconfig, GatewayClass) of a running cluster whose implementation accepts ExternalName Services."""
    logs = tmp_path_factory.mktemp("faulty")
    up = subprocess.Popen([sys.executable, "-m", "conformance", "cluster", "up"], cwd=REPO, stdout=subprocess.PIPE,
                          stderr=open(logs / "cluster.log", "w"), text=True)
    gateway = None
    try:
        kubeconfig = up.stdout.readline().strip()
        assert kubeconfig, (logs / "cluster.log").read_text()[-2000:]
        kube = Kube(k8s_config.new_client_from_config(config_file=kubeconfig))
        kube.create({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
                     "metadata": {"name": "faulty"}, "spec": {"controllerName": FAULTY_CONTROLLER}})
        gateway = subprocess.Popen([sys.executable, "-m", "reference_gateway", "--kubeconfig", kubeconfig,
                                    "--controller-name", FAULTY_CONTROLLER, "--fault", "accept-externalname"],
                                   cwd=REPO, stdout=subprocess.DEVNULL, stderr=open(logs / "gateway.log", "w"))
        yield kubeconfig, "faulty"
    finally:
        for proc in (gateway, up):
            if proc is not None:
                proc.terminate()
                proc.wait(60)


def on_faulty(cluster, *args, timeouts: str = "InferencePoolMustHaveCondition:8") -> list[str]:
    kubeconfig, gateway_class = cluster
    return [f"--kubeconfig={kubeconfig}", f"--gateway-class={gateway_class}", "--api-revision=seed",
            f"--timeout-config-overrides={timeouts}", "--skip-traffic", *args]


def test_k_run_with_failures_is_reported_faithfully(tmp_path, faulty_cluster, profile):
    result = run_suite("-q", "-k", "(pool_accepted or externalname) and not traffic", f"--results-dir={tmp_path}",
                       *on_faulty(faulty_cluster, *META))
    assert result.returncode == 1, result.stdout[-4000:] + result.stderr[-2000:]
    doc = load_report(tmp_path / "v1.2.0-default-gateway-report.yaml")  # the default name, in the results dir
    core = doc["profiles"][0]["core"]
    counts = junit_counts(tmp_path / "junit.xml")
    failed = sorted(name.rsplit("::", 1)[1].removeprefix("test_").replace("[v1alpha2]", "") for name, case in
                    junit_cases(tmp_path / "junit.xml").items() if case.find("failure") is not None)
    assert counts["tests"] == 3 and counts["failures"] >= 1 and counts["errors"] == counts["skipped"] == 0, counts
    assert set(failed) <= {"externalname", "externalname_switch"}  # the fault breaks X1/X2, nothing else
    assert core["result"] == "failure"
    assert core["failedTests"] == failed
    assert core["statistics"] == {"Passed": 3 - len(failed), "Failed": len(failed), "Skipped": len(profile) - 3}
    assert "pool_accepted" not in core["skippedTests"] and "two_gateways" in core["skippedTests"]
    assert f"Partial run: {len(profile) - 3} test(s)" in doc["profiles"][0]["summary"]
    assert doc["gatewayAPIVersion"] == "v1.3.0"
    env = (tmp_path / "allure-results" / "environment.properties").read_text()
    assert "GatewayClass=faulty" in env and "Cluster=https://127.0.0.1:" in env
    # The page opens in a real browser and shows the failures, with their category and evidence.
    dom = dump_dom(tmp_path / "report.html")
    assert 'data-ready="true"' in dom
    assert f"{len(profile)} of {len(profile)} tests shown" in dom
    assert dom.count("data-outcome=\"failed\"") == len(failed) and "Implementation defect" in dom
    assert "applied manifests" in dom and "last observed object" in dom


def test_run_test_is_reported_as_partial(tmp_path, faulty_cluster, profile):
    result = run_suite("-q", "--run-test=pool_accepted", f"--results-dir={tmp_path}", "--conformance-debug",
                       f"--report-output={tmp_path}/r.yaml", *on_faulty(faulty_cluster, *META))
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    core = load_report(tmp_path / "r.yaml")["profiles"][0]["core"]
    assert junit_counts(tmp_path / "junit.xml") == {"tests": 1, "failures": 0, "errors": 0, "skipped": 0}
    assert core["result"] == "partial"  # one test passing alone is no full success
    assert core["statistics"] == {"Passed": 1, "Failed": 0, "Skipped": len(profile) - 1}
    assert "ConformanceReport: " in result.stdout and "deselected" in result.stdout
    # --conformance-debug: every wait and API request is logged as it happens.
    assert "waiting up to" in result.stdout and '"GET /apis/' in result.stdout


def test_interrupted_run_still_leaves_a_report(tmp_path, faulty_cluster, profile):
    """SIGINT in the middle of a run: the report is written and does not read as success."""
    # The second test waits for a status the faulty implementation never writes, and its wrong answer
    # must stand still for 300 s before the test fails: the interrupt lands in the middle of it, however
    # slowly this machine gets there.
    proc = subprocess.Popen(suite_cmd("-v", "-k", "extension_ref_transitions or test_externalname and not switch",
                                      f"--results-dir={tmp_path}", f"--report-output={tmp_path}/r.yaml",
                                      *on_faulty(faulty_cluster, *META,
                                                 timeouts="InferencePoolMustHaveCondition:300;StatusSettleWindow:300")),
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seen = []
    deadline = time.monotonic() + 600
    for line in proc.stdout:
        seen.append(line)
        if " PASSED" in line:  # the first test is done and the next has started
            time.sleep(0.5)
            proc.send_signal(signal.SIGINT)
            break
        assert time.monotonic() < deadline, "".join(seen)
    out = "".join(seen) + proc.stdout.read()
    assert proc.wait(300) == pytest.ExitCode.INTERRUPTED, out[-4000:]
    doc = load_report(tmp_path / "r.yaml")
    core = doc["profiles"][0]["core"]
    assert core["result"] == "partial" and core["statistics"]["Failed"] == 0
    stats = core["statistics"]
    assert stats["Passed"] >= 1 and stats["Skipped"] == len(profile) - stats["Passed"]
    assert "interrupted" in doc["profiles"][0]["summary"] or "did not run" in doc["profiles"][0]["summary"]
    assert "conformance results" in out and (tmp_path / "report.html").is_file()
    assert (tmp_path / "junit.xml").is_file()
    # Cleanup ran to the end: no namespace of the suite is left on the cluster.
    kube = Kube(k8s_config.new_client_from_config(config_file=faulty_cluster[0]))
    left = kube.list("v1", "Namespace", None, label_selector=SUITE_LABEL)
    assert [ns["metadata"]["name"] for ns in left["items"]] == []


def test_run_stopped_by_pytest_exit_still_leaves_a_report(tmp_path, profile):
    """An unreachable cluster ends the run from a fixture (pytest.exit); the report says nothing passed.

    The metadata comes from an options file, with the upstream option names.
    """
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "a",
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
        "users": [{"name": "u", "user": {"token": "not-a-real-token"}}],
        "contexts": [{"name": "a", "context": {"cluster": "c", "user": "u"}}]}))
    options = tmp_path / "options.yaml"
    options.write_text(yaml.safe_dump({"organization": "acme", "project": "gw", "url": "https://example.com/gw",
                                       "version": "v1.2.0", "contact": ["@acme/gw", "gw@example.com"],
                                       "mode": "experimental", "report-output": str(tmp_path / "r.yaml")}))
    result = run_suite("-q", f"--kubeconfig={kubeconfig}", f"--conformance-options-file={options}",
                       f"--results-dir={tmp_path}", "conformance/tests/test_pool_accepted.py", timeout=120)
    assert result.returncode == 3, result.stdout[-3000:] + result.stderr[-2000:]
    # The cluster never answered: one report per API the run was to judge, each saying so.
    assert (tmp_path / "r-v1.yaml").is_file()
    doc = load_report(tmp_path / "r-v1alpha2.yaml")
    assert doc["mode"] == "experimental" and doc["implementation"]["contact"] == ["@acme/gw", "gw@example.com"]
    core = doc["profiles"][0]["core"]
    assert core["result"] == "partial"
    assert core["statistics"] == {"Passed": 0, "Failed": 0, "Skipped": len(profile)}
    assert "ended early (exit status 3)" in doc["profiles"][0]["summary"]
    assert doc["gatewayAPIVersion"] == "unknown"  # the cluster never answered
