"""Bad input gets one clear line and a non-zero exit, before anything touches a cluster."""

import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from kubernetes import config

from conformance.cluster.embedded import EmbeddedCluster
from conformance.kube import Kube
from conformance.revisions import GATEWAY_API_CRDS, REVISIONS

from .crd_swap import install, uninstall
from .suite_run import SUITE_LABEL

REPO = Path(__file__).resolve().parents[1]


def run_suite(*args, cwd=REPO, timeout=120):
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
                          cwd=cwd, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("input")
    (d / "malformed.yaml").write_text("gateway-class: [unclosed\n")
    (d / "unknown-key.yaml").write_text("gatewayClassName: x\n")
    (d / "number-version.yaml").write_text("organization: acme\nversion: 1.10\n")
    (d / "kubeconfig").write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "a",
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
        "users": [{"name": "u", "user": {"token": "not-a-real-token"}}],
        "contexts": [{"name": "a", "context": {"cluster": "c", "user": "u"}}]}))
    return d


REPORT_META = ["--organization=acme", "--project=gw", "--url=https://example.com/gw", "--contact=@acme/gw"]

CASES = [
    (["--timeout-config-overrides=Bogus:5"], "unknown timeout 'Bogus'"),
    (["--timeout-config-overrides=CreateTimeout:soon"], "not a number of seconds"),
    (["--timeout-config-overrides=CreateTimeout"], "is not Name:seconds"),
    (["--supported-features=NoSuchFeature"], "unknown feature(s) NoSuchFeature"),
    (["--supported-features=SupportInferencePool,,"], "has an empty entry"),
    (["--exempt-features=Nope"], "unknown feature(s) Nope"),
    (["--conformance-options-file={d}/missing.yaml"], "cannot read it"),
    (["--conformance-options-file={d}/malformed.yaml"], "not valid YAML"),
    (["--conformance-options-file={d}/unknown-key.yaml"], "unknown option(s) gatewayClassName"),
    (["--kubeconfig={d}/missing-kubeconfig"], "does not exist"),
    (["--kubeconfig={d}/kubeconfig", "--context=elsewhere"], "context 'elsewhere' is not in the kubeconfig"),
    (["--report-output=/nonexistent-dir/report.yaml"], "does not exist or is not writable"),
    (["--cleanup-test-resources=maybe"], "is not a boolean"),
    (["--api-revision=v9"], "--api-revision=v9: unknown"),
    (["--run-test=no_such_test"], "unknown test 'no_such_test'"),
    (["--skip-tests=pool_accepted,nope"], "unknown test 'nope'"),
    (["--namespace-labels=bad key=x"], "is not a valid label or annotation key"),
    (["--namespace-labels=team"], "is not key=value"),
    (["--conformance-profiles=GATEWAY-HTTP"], "unknown profile(s) GATEWAY-HTTP"),
    (["--all-features", "--supported-features=SupportInferencePool"], "exclude each other"),
    (["--context=a"], "--context needs a kubeconfig"),
    # Report options: a report is refused before anything runs unless it can name the implementation.
    (["--report-output={d}/report.yaml"], "a ConformanceReport needs the implementation's metadata; missing: "
     "--organization, --project, --url, --implementation-version, --contact"),
    (["--organization=acme", "--implementation-version=v1"], "missing: --project, --url, --contact"),
    (["--report-output={d}"], "is a directory"),
    (["--mode=a/b"], "--mode='a/b' names the report file"),
    (["--mode="], "--mode is empty"),
    ([*REPORT_META, "--implementation-version=1.0 beta"], "--implementation-version='1.0 beta' names the report file"),
    ([*REPORT_META[:3], "--contact=@a/b,,", "--implementation-version=v1"], "--contact='@a/b,,' has an empty entry"),
    (["--conformance-options-file={d}/number-version.yaml"], "--implementation-version: 1.1 was read as a number"),
    (["--results-dir={d}/malformed.yaml/sub"], "--results-dir={d}/malformed.yaml/sub: cannot create it"),
    (["--conformance-debug=maybe"], "--conformance-debug='maybe' is not a boolean"),
    (["--skip-provisional-tests=sometimes"], "is not a boolean"),
    (["--model-server-image=Echo Server:1"], "--model-server-image='Echo Server:1' is not an image reference"),
    (["--sentinel-image=BusyBox"], "--sentinel-image='BusyBox' is not an image reference"),
]


@pytest.mark.parametrize(("args", "message"), CASES, ids=[c[0][0].split("=")[0].lstrip("-") + f"-{i}"
                                                          for i, c in enumerate(CASES)])
def test_bad_option(files, args, message):
    result = run_suite(*[a.format(d=files) for a in args], "conformance/tests/test_pool_accepted.py",
                       timeout=60)
    assert result.returncode != 0
    errors = [line for line in result.stderr.splitlines() if line.startswith("ERROR:")]
    assert len(errors) == 1, result.stderr
    assert message.format(d=files) in errors[0], errors[0]
    assert "passed" not in result.stdout


def test_path_value_given_apart_is_named(files):
    """`--kubeconfig PATH` outside the checkout would make pytest lose the suite's configuration."""
    result = run_suite("--kubeconfig", str(files / "kubeconfig"), timeout=60)
    assert result.returncode == 4, result.stdout + result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("ERROR:")]
    assert errors == [f"ERROR: write --kubeconfig={files / 'kubeconfig'} with '=': given apart, pytest took "
                      f"{files / 'kubeconfig'} for a test path and lost the suite's configuration"], result.stderr


def test_unreachable_cluster_is_one_line_at_once(files):
    """The run stops at the first refused connection: one line, no retries, no test run. A suite that
    retried or waited would overrun the subprocess's bound (60 s; 4 s idle, 17 s on a loaded CI machine)
    and fail here with TimeoutExpired; the time itself is not asserted, since load stretches it."""
    result = run_suite(f"--kubeconfig={files / 'kubeconfig'}", "conformance/tests/test_schema.py", timeout=60)
    assert result.returncode == 3, result.stdout + result.stderr
    assert result.stdout.count("cannot reach https://127.0.0.1:1") == 1, result.stdout
    assert " passed" not in result.stdout


def test_missing_crds_and_missing_gateway_class():
    up = subprocess.Popen([sys.executable, "-m", "conformance", "cluster", "up", "--no-crds"], cwd=REPO,
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        kubeconfig = up.stdout.readline().strip()
        result = run_suite(f"--kubeconfig={kubeconfig}", "conformance/tests/test_schema.py")
        assert result.returncode == 4, result.stdout + result.stderr
        assert ("no InferencePool CRD is installed on the cluster (looked for "
                "inferencepools.inference.networking.x-k8s.io, inferencepools.inference.networking.k8s.io)"
                in result.stdout), result.stdout
    finally:
        up.terminate()
        up.wait(30)


def test_gateway_class_that_does_not_exist():
    result = run_suite("--gateway-class=no-such-class", "conformance/tests/test_pool_accepted.py")
    assert result.returncode == 4, result.stdout + result.stderr
    assert "GatewayClass 'no-such-class' does not exist" in result.stdout


@pytest.mark.parametrize("args, line", [
    (["--gateway-class=no-such-class"], "GatewayClass 'no-such-class' does not exist on the cluster"),
    (["--implementation-command=/nonexistent/implementation"],
     "cannot start the implementation (/nonexistent/implementation): No such file or directory"),
], ids=["gateway-class", "implementation-command"])
def test_a_worker_ends_the_run_with_the_line_and_the_code(args, line):
    """Under pytest-xdist (README command 1) the test that finds the problem runs in a worker, after
    the tests of the API server alone have begun: the run still ends with the one line and exit
    code 4, not with pytest-xdist's internal error."""
    result = run_suite("-n", "2", "--skip-traffic", *args, "conformance/tests/test_schema.py",
                       "conformance/tests/test_pool_accepted.py")
    assert result.returncode == 4, result.stdout + result.stderr
    assert f"Exit: {line}" in result.stdout, result.stdout
    assert "INTERNALERROR" not in result.stdout + result.stderr, result.stdout + result.stderr
    assert "the run ended early (exit status 4)" in result.stdout, result.stdout


@pytest.fixture(scope="module")
def bare_cluster():
    """A cluster with the Gateway API CRDs and no InferencePool CRD; the tests add what they need."""
    with EmbeddedCluster(crd_paths=[GATEWAY_API_CRDS]) as c:
        yield c, Kube(config.new_client_from_config(config_file=str(c.kubeconfig)))


def test_crd_of_no_known_revision(bare_cluster):
    cluster, kube = bare_cluster
    crd = yaml.safe_load(REVISIONS["seed"].crd.read_text())
    # A revision of its own: conditions that default to a type no known revision uses.
    status = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"]
    status["properties"]["parent"]["items"]["properties"]["conditions"]["default"][0]["type"] = "Pending"
    assert install(kube, crd) is None
    try:
        result = run_suite(f"--kubeconfig={cluster.kubeconfig}", "conformance/tests/test_schema.py")
        assert result.returncode == 4, result.stdout + result.stderr
        assert ("the installed inferencepools.inference.networking.x-k8s.io CRD matches no known revision of API "
                "v1alpha2") in result.stdout, result.stdout
        assert " passed" not in result.stdout
        assert kube.list("v1", "Namespace", None, label_selector=SUITE_LABEL)["items"] == []  # nothing applied
    finally:
        uninstall(kube)


def test_gateway_class_of_a_controller_that_is_not_running(bare_cluster):
    cluster, kube = bare_cluster
    assert install(kube, yaml.safe_load(REVISIONS["seed"].crd.read_text())) is None
    kube.create({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
                 "metadata": {"name": "nobodys"}, "spec": {"controllerName": "example.com/not-running"}})
    try:
        result = run_suite(f"--kubeconfig={cluster.kubeconfig}", "--gateway-class=nobodys",
                           "--timeout-config-overrides=GWCMustBeAccepted:3",
                           "conformance/tests/test_pool_accepted.py")
        assert result.returncode == 4, result.stdout + result.stderr
        assert ("GatewayClass 'nobodys' was not Accepted within 3s; is its controller (example.com/not-running) "
                "running") in result.stdout
        assert " passed" not in result.stdout
    finally:
        kube.delete("gateway.networking.k8s.io/v1", "GatewayClass", "nobodys")
        uninstall(kube)
