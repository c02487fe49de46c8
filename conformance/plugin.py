"""The InferencePool conformance pytest plugin.

Public surface (what tests use):

* fixtures `kube` (a `conformance.kube.Kube` on the cluster under test),
  `api_revision` (a `conformance.revisions.Revision`), `timeouts` (the
  `TimeoutConfig`), `namespace` (a fresh namespace per test; what the test
  created in it is deleted and waited for afterwards), `shared_namespace`
  (one namespace for tests whose objects are named for the test alone; each
  test's objects are deleted afterwards), `gateway_class` (the accepted
  GatewayClass of the implementation under test), `topology` (a
  `conformance.topology.Topology` in the test's namespace), `traffic` (a
  `conformance.traffic.tier.Traffic` on that topology) and `should` (checks
  of the API's SHOULDs, reported and never failed: `conformance.should`);
* markers `rule("S1", ...)` (the SPEC rules a test checks),
  `features("SupportInferencePool", ...)` and `api_revision_has("field", ...)`
  (the test applies only to API revisions whose `Revision` has these fields
  true; on others it is skipped as not-applicable), and `slow` (the test
  waits for the clock: it runs first).

Under pytest-xdist on the embedded cluster, the controller starts the cluster
and the implementation once for all workers (`session.ClusterHost`).
"""

from __future__ import annotations

import gc
import shutil
import signal
import sys
from pathlib import Path

import pytest

from . import data, options, revisions, rules, runner
from .cluster import scratch
from .cluster.provider import KubeconfigError, UserClusterManager
from .features import FEATURES, REFERENCE_GATEWAY_CLASS
from .results import evidence, inventory
from .results.reporting import ReportPlugin
from .revisions import NOT_APPLICABLE_PREFIX, REVISIONS, Revision
from .session import EXIT_USAGE, HOST_KEY, SuiteSession
from .topology import SILENT
from .wait import WaitTimeout, trim, wait_for

SESSION = pytest.StashKey[SuiteSession]()
XDIST_CHUNK = 4  # tests pytest-xdist sends a worker at a time (its --maxschedchunk), unless told otherwise
HOST_DIR = pytest.StashKey[Path]()  # the pytest-xdist controller's: where its workers find the shared cluster
WORKER_EXIT = "ipc_exit"  # in a pytest-xdist worker's workeroutput: the line and exit code it ended the run with
WORKER_ENDED = pytest.StashKey[list]()  # the controller's: the first of those


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config, parser: pytest.Parser, args: list[str]) -> None:
    options.bare_bools_to_true(args)  # called for installed plugins, before the command line is parsed
    joined = options.path_values_taken_for_tests(args)
    if joined and early_config.inipath is None:
        raise pytest.UsageError(f"write {joined} with '=': given apart, pytest took {joined.split('=', 1)[1]} "
                                "for a test path and lost the suite's configuration")
    # A run of the installed suite (`pytest --pyargs conformance.tests` from anywhere) has none of the
    # checkout's pytest configuration: what of it the suite relies on, it sets itself. Its markers are
    # registered in pytest_configure and checked in pytest_collection_modifyitems (strict markers); here,
    # no cache directory (-p no:cacheprovider) in the directory the run starts from.
    ns = early_config.known_args_namespace
    if inventory.scope(list(getattr(ns, "file_or_dir", None) or []), Path(early_config.invocation_params.dir),
                       pyargs=bool(getattr(ns, "pyargs", False))) != "none":
        if not early_config.pluginmanager.is_blocked("cacheprovider"):
            early_config.pluginmanager.consider_pluginarg("no:cacheprovider")


def pytest_addoption(parser: pytest.Parser) -> None:
    options.add_options(parser)


# The markers the suite's tests use, registered by the plugin itself (a run of the installed suite
# has no configuration file to register them): name -> the line `pytest --markers` shows.
MARKERS = {
    "rule": "rule(*ids): the SPEC rules this test checks",
    "features": "features(*names): the features this test needs from the implementation",
    "api_revision_has": "api_revision_has(*fields): the API revision fields (conformance.revisions.Revision) "
                        "this test needs to be true",
    "provisional": "provisional: behaviour not settled upstream yet (--skip-provisional-tests skips it)",
    "slow": "slow: spends seconds waiting for the clock rather than the cluster (under pytest-xdist it runs "
            "first, so that another worker works meanwhile)",
    "k8s": "k8s: pytest-kubernetes cluster marker",
}


@pytest.hookimpl(tryfirst=True)  # before junitxml and allure read their output options
def pytest_configure(config: pytest.Config) -> None:
    for line in MARKERS.values():
        config.addinivalue_line("markers", line)
    missing = data.problem()
    if missing and inventory.scope(list(config.args), Path(config.invocation_params.dir),
                                   pyargs=bool(config.option.pyargs)) != "none":
        raise pytest.UsageError(missing)
    try:
        opts = options.from_config(config, FEATURES,
                                   known_revisions={name: rev.api.name for name, rev in REVISIONS.items()})
        user = UserClusterManager(opts.kubeconfig, opts.context) if opts.kubeconfig else None
    except (options.OptionError, KubeconfigError) as e:
        raise pytest.UsageError(str(e)) from None
    if opts.fail_fast:
        config.option.maxfail = 1
    if opts.debug:  # every API request (urllib3's log) and every wait, shown live
        config.option.log_cli_level = config.option.log_cli_level or "DEBUG"
        config.option.log_level = config.option.log_level or "DEBUG"
    config.stash[SESSION] = SuiteSession(config, opts, user)
    config.pluginmanager.register(ReportPlugin(config, config.stash[SESSION]), "ipc-report")
    config.pluginmanager.register(_Order(), "ipc-order")
    if getattr(config.option, "maxschedchunk", 0) is None and _runs_suite(config):
        # pytest-xdist hands each worker a quarter of its share at once, in collection order; a few
        # tests at a time instead keep both workers busy to the end (the status tests take 10 to
        # 100 times as long as the schema cases, and the slow ones much longer).
        config.option.maxschedchunk = XDIST_CHUNK
    # A CI runner stops jobs with SIGTERM: turn it into Ctrl-C so cleanup still runs.
    if hasattr(signal, "SIGTERM") and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _interrupt)
    _freeze_heap()


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def _freeze_heap() -> None:
    """Keep what lives for the whole session (the modules imported, the tests collected) out of the
    garbage collector's full collections.

    The kubernetes client's modules alone leave some 80,000 objects that the collector tracks; every
    full collection walks them all, and pytest runs two more as each process ends. Measured per
    pytest process of a run without the traffic tier: 0.35-0.6 s of CPU in the collector, against
    about 0.1 s with the heap frozen after imports and after collection (docs/performance.md,
    "Garbage collection"). Nothing frozen is ever freed, and none of it would be."""
    gc.freeze()


def _order(item: pytest.Item) -> int:
    if item.get_closest_marker("slow"):
        return 0
    return 1 if "gateway_class" not in getattr(item, "fixturenames", ()) else 2


class _Order:
    """Under pytest-xdist the `slow` tests run first, then the tests of the API server alone (schema,
    defaulting, the CRD), then those that need the implementation; otherwise as collected (pytest
    groups them by API).

    The slow tests go to one worker, which sits them out while the others work. On the embedded
    cluster, the controller manager starts controllers a second or so after the API server is ready
    (it waits for the API server's bootstrap hooks), and no status test can begin before it has
    made a namespace's default ServiceAccount: the other workers spend that second on the API
    server's own tests rather than waiting."""

    @pytest.hookimpl(trylast=True)  # after pytest's own reordering, and after deselection
    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        if hasattr(config, "workerinput"):
            items.sort(key=_order)  # stable


def pytest_sessionfinish(session: pytest.Session) -> None:
    # A pytest-xdist worker cleans up before it tells the controller it has finished: once told,
    # the controller tears the workers down, and one still waiting for its namespaces to go
    # (5 s and more on a real cluster) would get a SIGINT after 5 s and be ended 10 s later.
    suite = session.config.stash.get(SESSION, None)
    if suite is not None and hasattr(session.config, "workerinput"):
        suite.close()


def pytest_unconfigure(config: pytest.Config) -> None:
    session = config.stash.get(SESSION, None)
    if session is not None:
        session.close()
    host_dir = config.stash.get(HOST_DIR, None)
    if host_dir is not None:
        shutil.rmtree(host_dir, ignore_errors=True)


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist starts its workers (its own hook comes last)
def pytest_sessionstart(session: pytest.Session) -> None:
    config = session.config
    if not hasattr(config, "workerinput"):
        _sweep(config)
    if _hosts_for_workers(config):
        config.stash[HOST_DIR] = scratch.mkdtemp("host")
        config.stash[SESSION].host_for_workers(config.stash[HOST_DIR])
        config.pluginmanager.register(_HostProgress(config.stash[SESSION]), "ipc-host-progress")
    elif _controls_workers_on_a_users_cluster(config):
        # The workers connect on their own, and what they print is not shown: the controller reads
        # the installed APIs once itself, so the run says at its start what it found and judges
        # (and an unreachable cluster or a missing CRD ends it with one line, before any worker).
        _ = config.stash[SESSION].kube


def _sweep(config: pytest.Config) -> None:
    """Remove what runs killed earlier left in the temporary directory (conformance/cluster/scratch.py)."""
    removed = scratch.sweep()
    tr = config.pluginmanager.get_plugin("terminalreporter")
    if removed and tr is not None:
        tr.write_line(f"removed {len(removed)} director{'y' if len(removed) == 1 else 'ies'} that killed runs left "
                      f"in {removed[0].parent}: {', '.join(p.name for p in removed)}")


def _controls_suite_workers(config: pytest.Config) -> bool:
    """A pytest-xdist controller whose workers will run the suite's tests."""
    return (config.pluginmanager.has_plugin("dsession") and not config.getoption("rule_coverage")
            and _runs_suite(config))


def _hosts_for_workers(config: pytest.Config) -> bool:
    """A pytest-xdist controller whose workers will run the suite's tests on the embedded cluster:
    it starts the cluster (and the implementation) once, for all of them, at once."""
    return (_controls_suite_workers(config) and config.stash[SESSION].opts.embedded
            and all(str(tx).startswith("popen") for tx in config.getoption("tx") or ()))  # workers on this machine


def _controls_workers_on_a_users_cluster(config: pytest.Config) -> bool:
    return _controls_suite_workers(config) and not config.stash[SESSION].opts.embedded


def _runs_suite(config: pytest.Config) -> bool:
    """The run's arguments name the suite's tests (all or some)."""
    return inventory.scope(list(config.args), Path(config.invocation_params.dir),
                           pyargs=bool(config.option.pyargs)) != "none"


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:
    host_dir = node.config.stash.get(HOST_DIR, None)
    if host_dir is not None:
        node.workerinput[HOST_KEY] = str(host_dir)


class _HostProgress:
    """Shows, from the main thread, what the thread starting the shared cluster had to say."""

    def __init__(self, suite: SuiteSession) -> None:
        self.suite = suite

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.suite.show_progress()


def pytest_report_header(config: pytest.Config) -> list[str]:
    session = config.stash.get(SESSION, None)
    if session is None:
        return []
    opts = session.opts
    if session.user is not None:
        where = f"cluster: {session.user.server} (context {session.user.context_name})"
    else:
        where = "cluster: embedded control plane, started on first use"
    return [*runner.describe().splitlines(), where, f"gateway class: {opts.gateway_class or REFERENCE_GATEWAY_CLASS}"
            + (" (reference implementation)" if opts.embedded and not opts.gateway_class else "")]


@pytest.hookimpl(tryfirst=True)  # before the parametrize markers: the API comes first in test ids
def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Each test that judges an API runs once per API the run judges, the API's name in its id."""
    if "api_revision" in metafunc.fixturenames:
        apis = metafunc.config.stash[SESSION].judged_apis
        metafunc.parametrize("api_revision", apis, ids=apis, indirect=True, scope="session")


def short_name(item: pytest.Item) -> str:
    """The upstream-style short name of a test: its function name without `test_`."""
    return getattr(item, "originalname", item.name).removeprefix("test_")


def unregistered_markers(config: pytest.Config, items: list[pytest.Item]) -> list[str]:
    """The markers on the suite's tests that nothing registered (what --strict-markers refuses)."""
    registered = {line.split(":", 1)[0].split("(", 1)[0].strip() for line in config.getini("markers")}
    return sorted({m.name for item in items if item.path.is_relative_to(inventory.SUITE_DIR)
                   for m in item.iter_markers()} - registered)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # A case of one API's data with another API is no test: such pairs are dropped, not deselected.
    items[:] = [i for i in items if not inventory.of_another_api(i)]
    unregistered = unregistered_markers(config, items)
    if unregistered:
        raise pytest.UsageError(f"the suite's tests use unregistered marker(s): {', '.join(unregistered)}")
    unknown = sorted({r for item in items for m in item.iter_markers("rule") for r in m.args} - set(rules.RULES))
    if unknown:
        raise pytest.UsageError(f"tests name unknown rule(s): {', '.join(unknown)}")
    fields = {f for item in items for m in item.iter_markers("api_revision_has") for f in m.args}
    sample = next(iter(REVISIONS.values()))
    unknown = sorted(f for f in fields if not hasattr(sample, f))
    if unknown:
        raise pytest.UsageError(f"api_revision_has names unknown Revision field(s): {', '.join(unknown)}")
    opts = config.stash[SESSION].opts
    suite_items = [i for i in items if i.get_closest_marker("rule")]
    known = {short_name(i) for i in suite_items}
    for name in [opts.run_test, *opts.skip_tests]:
        if name and name not in known:
            raise pytest.UsageError(f"unknown test {name!r} in --run-test/--skip-tests "
                                    f"(known: {', '.join(sorted(known))})")
    if opts.run_test:
        keep = [i for i in items if short_name(i) == opts.run_test or i not in suite_items]
        config.hook.pytest_deselected(items=[i for i in items if i not in keep])
        items[:] = keep
    for item in items:
        if short_name(item) in opts.skip_tests:
            item.add_marker(pytest.mark.skip(reason=f"skipped by --skip-tests {short_name(item)}"))
        elif opts.skip_provisional_tests and item.get_closest_marker("provisional"):
            item.add_marker(pytest.mark.skip(reason="skipped by --skip-provisional-tests"))


@pytest.hookimpl(tryfirst=True)  # a test the revision does not have skips before its fixtures run
def pytest_runtest_setup(item: pytest.Item) -> None:
    revision_needs = [f for m in item.iter_markers("api_revision_has") for f in m.args]
    api = inventory.api_of(item)
    if revision_needs and api is not None:
        revision = item.config.stash[SESSION].revision_for(api)
        if revision is not None:  # else the api_revision fixture says the API is not installed
            skip_unless_revision_has(revision, *revision_needs)
    needed = {f for m in item.iter_markers("features") for f in m.args}
    if needed:
        missing = needed - item.config.stash[SESSION].supported_features()
        if missing:
            pytest.skip(f"not-supported: the implementation does not support {', '.join(sorted(missing))}")


def skip_unless_revision_has(revision: Revision, *fields: str) -> None:
    missing = [f for f in fields if not getattr(revision, f)]
    if missing:
        pytest.skip(f"{NOT_APPLICABLE_PREFIX} API revision {revision.name} ({revision.title}) has no "
                    f"{', '.join(missing)}")


def pytest_collection_finish(session: pytest.Session) -> None:
    _freeze_heap()
    if session.config.getoption("rule_coverage"):
        tr = session.config.pluginmanager.get_plugin("terminalreporter")
        for line in rules.format_matrix(rules.matrix(session.items)):
            tr.write_line(line)
        pytest.exit("rule coverage printed", returncode=0)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    """A test that ends the run (`pytest.exit`: a GatewayClass that never gets Accepted, an implementation
    that does not start) ends it from a pytest-xdist worker too.

    pytest-xdist cannot end a run from a worker in the middle of a test: its controller counts the
    test as crashed, stops with an internal error, and the line is lost. Such a worker stops after
    this test instead and hands the line and the exit code to the controller, which ends the run with
    them (`pytest_runtestloop`); the other workers stop after their current test."""
    try:
        return (yield)
    except pytest.exit.Exception as e:
        if not hasattr(item.config, "workeroutput"):
            raise
        item.session.shouldstop = e.msg
        item.config.workeroutput[WORKER_EXIT] = [e.msg, e.returncode]
        return True


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:
    ended = (getattr(node, "workeroutput", None) or {}).get(WORKER_EXIT)
    if ended and WORKER_ENDED not in node.config.stash:
        node.config.stash[WORKER_ENDED] = ended


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtestloop(session: pytest.Session):
    try:
        return (yield)
    except KeyboardInterrupt:  # pytest-xdist's Interrupted, once a worker has stopped the run
        ended = session.config.stash.get(WORKER_ENDED, None)
        if ended is None:
            raise
        pytest.exit(ended[0], returncode=ended[1])


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call):
    report = yield
    item.stash.setdefault(evidence.REPORTS, {})[report.when] = report
    mismatch = item.config.stash[SESSION].revision_mismatch.get(inventory.api_of(item))
    if report.failed and mismatch:
        report.sections.append(("API revision", mismatch))
    if report.failed and call.excinfo is not None and isinstance(call.excinfo.value, WaitTimeout):
        evidence.attach_yaml("last observed object", call.excinfo.value.last)
    return report


def pytest_terminal_summary(terminalreporter, exitstatus, config: pytest.Config) -> None:
    if exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED and options.given_on_command_line(
            config.invocation_params.args):
        terminalreporter.write_line("no conformance test was collected: name the suite, "
                                    "`pytest --pyargs conformance.tests ...`, or run `inferencepool-conformance ...`",
                                    yellow=True, bold=True)
    session = config.stash.get(SESSION, None)
    if session is not None:
        session.show_progress()  # what starting the shared cluster had to say, if not shown yet
    for line in (session.revision_mismatch.values() if session is not None else ()):
        terminalreporter.write_line(line, yellow=True, bold=True)
    # Said once, also under xdist (where each worker found it on its own).
    silent = next((line[line.index(SILENT):].split("; ")[0] for r in terminalreporter.stats.get("failed", [])
                   for line in (getattr(r, "longreprtext", "") or "").splitlines() if SILENT in line), None)
    if silent:
        terminalreporter.write_line(silent, red=True, bold=True)


# -- fixtures ------------------------------------------------------------------


@pytest.fixture(scope="session")
def suite(pytestconfig: pytest.Config) -> SuiteSession:
    return pytestconfig.stash[SESSION]


@pytest.fixture(scope="session")
def kube(suite: SuiteSession):
    return suite.kube


@pytest.fixture(scope="session")
def api_revision(request: pytest.FixtureRequest, suite: SuiteSession):
    """The revision of the API the test judges (tests are parametrized by API: `[v1alpha2]`, `[v1]`)."""
    api = request.param
    revision = suite.revision_for(api)
    if revision is None:
        pytest.skip(f"{NOT_APPLICABLE_PREFIX} API {api} ({revisions.APIS[api].crd_name}) is not installed on the "
                    "cluster")
    return revision


@pytest.fixture(scope="session")
def timeouts(suite: SuiteSession):
    return suite.opts.timeouts


@pytest.fixture
def namespace(request: pytest.FixtureRequest, suite: SuiteSession) -> str:
    """A namespace of the test's own; what the test created in it is deleted afterwards and waited
    for, and on a user's cluster the namespace too (waited for at the end of the run)."""
    yield from _own_namespace(request, suite, request.node.originalname.removeprefix("test_").replace("_", "-"))


@pytest.fixture
def gateway_namespace(request: pytest.FixtureRequest, suite: SuiteSession) -> str:
    """A second namespace of the test's own, for Gateways apart from the routes and pools (C14)."""
    yield from _own_namespace(request, suite, "gateways")


def _own_namespace(request: pytest.FixtureRequest, suite: SuiteSession, stem: str):
    name = suite.create_namespace(stem)
    yield name
    failed = any(r.failed for r in request.node.stash.get(evidence.REPORTS, {}).values())
    if failed:
        evidence.attach_failure_state(suite.kube, name)
    if not suite.opts.cleanup_test_resources:
        sys.stderr.write(f"\nkept namespace {name} (--cleanup-test-resources=false)\n")
        return
    suite.delete_namespace(name)


@pytest.fixture
def shared_namespace(request: pytest.FixtureRequest, suite: SuiteSession) -> str:
    """A namespace the session's tests share, for a test whose objects are named for it alone (a
    schema case that persists its pool); what the test created in it is deleted afterwards and
    waited for. (A namespace per such test would cost far more than the test itself.)"""
    name = suite.shared_namespace
    created = suite.kube.created.setdefault(name, [])
    before = len(created)
    yield name
    mine = created[before:]
    del created[before:]
    if any(r.failed for r in request.node.stash.get(evidence.REPORTS, {}).values()):
        _attach_objects(suite.kube, name, mine)
    if not suite.opts.cleanup_test_resources:
        sys.stderr.write(f"\nkept {', '.join(f'{kind} {name}/{obj}' for _, kind, obj in mine)} "
                         "(--cleanup-test-resources=false)\n")
        return
    suite.delete_objects(name, mine)


def _attach_objects(kube, namespace: str, refs: list[tuple[str, str, str]]) -> None:
    """A failed test's objects in a shared namespace, as the server has them now, and their events."""
    observed = []
    for api_version, kind, obj_name in refs:
        try:
            obj = kube.get(api_version, kind, obj_name, namespace)
        except Exception as e:  # evidence is best effort: never hide the test's own failure
            obj = {"error": f"could not read {kind} {obj_name}: {e}"}
        observed.append(trim(obj) if obj is not None else {"kind": kind, "name": obj_name, "state": "gone"})
    if observed:
        evidence.attach_yaml(f"last observed objects in {namespace}", observed)
    names = {obj_name for _, _, obj_name in refs}
    try:
        events = [e for e in kube.list("v1", "Event", namespace).get("items", [])
                  if (e.get("involvedObject") or {}).get("name") in names]
    except Exception as e:
        events = [{"error": f"could not list events: {e}"}]
    if events:
        evidence.attach_yaml(f"events of these objects in {namespace}", [
            {k: e.get(k) for k in ("type", "reason", "message", "involvedObject", "count", "lastTimestamp")}
            if "error" not in e else e for e in events])


@pytest.fixture(scope="session")
def base_namespace(suite: SuiteSession) -> str:
    """A namespace shared by tests that persist nothing in it (dry-run requests)."""
    return suite.base_namespace


@pytest.fixture(scope="session")
def gateway_class(suite: SuiteSession, kube, timeouts) -> str:
    """The implementation's GatewayClass, once it is Accepted."""
    opts = suite.opts
    name = opts.gateway_class or REFERENCE_GATEWAY_CLASS
    created = suite.bring_up_implementation(kube)  # on the embedded cluster
    found = kube.get("gateway.networking.k8s.io/v1", "GatewayClass", name)
    if found is None and suite.started_implementation and not created:
        # An implementation the suite just started may install its own class (as Istio does).
        try:
            found = wait_for(kube, "gateway.networking.k8s.io/v1", "GatewayClass", name, None,
                             lambda o: o is not None, timeout=timeouts.GWCMustBeAccepted,
                             what=f"GatewayClass {name} to exist", expected="the implementation installs it")
        except WaitTimeout:
            pass
    if found is None:
        pytest.exit(f"GatewayClass {name!r} does not exist on the cluster; install your implementation "
                    "or pass --gateway-class with an existing class", returncode=EXIT_USAGE)
    try:
        wait_for(kube, "gateway.networking.k8s.io/v1", "GatewayClass", name, None,
                 lambda o: o is not None and _condition_true(o, "Accepted"),
                 timeout=timeouts.GWCMustBeAccepted, what=f"GatewayClass {name} to be Accepted",
                 expected="status.conditions Accepted=True")
    except WaitTimeout:
        # No status test can pass: say so once, rather than once per test.
        pytest.exit(f"GatewayClass {name!r} was not Accepted within {timeouts.GWCMustBeAccepted:g}s; is its "
                    f"controller ({found['spec'].get('controllerName')}) running, and is it the implementation "
                    "under test?", returncode=EXIT_USAGE)
    yield name
    if created and opts.cleanup_base_resources:
        kube.delete("gateway.networking.k8s.io/v1", "GatewayClass", name)


@pytest.fixture
def topology(suite: SuiteSession, kube, namespace, gateway_class, api_revision, timeouts):
    """Apply and watch status-test objects in the test's own namespace."""
    from .topology import Topology

    alive = suite.check_implementation if suite.started_implementation else None
    if alive is not None:
        alive()  # fail at once, not after a wait's whole timeout
    # The topology's model-server Pods are admitted only once the namespace's default
    # ServiceAccount exists, which the cluster creates shortly after the namespace.
    wait_for(kube, "v1", "ServiceAccount", "default", namespace, lambda o: o is not None,
             timeout=timeouts.NamespacesMustBeReady, what=f"ServiceAccount {namespace}/default",
             expected="the namespace's default ServiceAccount exists (Pods need it)")
    return Topology(kube, namespace, gateway_class, api_revision, timeouts, alive, suite.silence[api_revision.api.name],
                    suite.opts.model_server_image)


@pytest.fixture
def traffic(suite: SuiteSession, topology):
    """A traffic test's topology and requests (conformance.traffic.tier); skipped, with the reason, when the
    traffic tier is off or cannot run here."""
    from .traffic.tier import Traffic

    return Traffic(topology, suite.traffic_routes(), suite.opts.model_server_image, suite.opts.epp_image,
                   suite.opts.sentinel_image, unready_images=suite.unready_images)


@pytest.fixture
def should(request: pytest.FixtureRequest):
    """`with should("what"):` checks a SHOULD of the API: an assertion failing in the block is reported
    (conformance.should), never failed."""
    from .should import Should

    return Should(request.node)


def _condition_true(obj: dict, ctype: str) -> bool:
    return any(c.get("type") == ctype and c.get("status") == "True"
               for c in (obj.get("status") or {}).get("conditions") or [])
