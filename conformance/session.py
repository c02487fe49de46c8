"""What one pytest process knows about the cluster under test.

Everything is lazy: nothing touches a cluster until the first test asks for
it, so collecting, listing coverage or running pure unit tests starts nothing.
The one exception is a pytest-xdist run of the suite's tests on the embedded
cluster: there the controller starts the cluster and the implementation as
its session starts, while the workers start, and every worker uses them
(`ClusterHost`), rather than each worker starting a cluster of its own.
Input problems found here end the run with one line (`pytest.exit`): those of
the cluster before any test applies anything; under pytest-xdist, those of the
implementation at the first test that needs it (the tests of the API server
alone do not wait for the implementation to start).
"""

from __future__ import annotations

import ctypes
import fcntl
import json
import os
import secrets
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from kubernetes import config as k8s_config

from . import revisions
from .cluster.binary import BuildError
from .cluster.embedded import ClusterError
from .cluster.provider import EmbeddedManager, UserClusterManager
from .features import CORE_FEATURES, FEATURES, REFERENCE_CONTROLLER, REFERENCE_GATEWAY_CLASS, TRAFFIC_FEATURE
from .kube import ApiError, Kube
from .options import Options
from .topology import Silence
from .wait import retrying, wait_for

if TYPE_CHECKING:
    from .traffic.embedded import DataPlane

EXIT_ENVIRONMENT = 3  # the cluster cannot be used
EXIT_USAGE = 4  # pytest's own code for bad input
MANAGED_BY = {"app.kubernetes.io/managed-by": "inferencepool-conformance"}
HOST_KEY = "ipc_cluster_host"  # in pytest-xdist's workerinput: the directory of the controller's ClusterHost


class ImplementationExited(RuntimeError):
    """The implementation the suite started is gone: no test that needs it can pass."""


def _die_with_parent() -> None:
    # The implementation gets SIGTERM if pytest dies without stopping it.
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


@contextmanager
def cleanup_shielded(*, reraise: bool = True) -> Iterator[None]:
    """Let a Ctrl-C (or SIGTERM) that arrives during cleanup wait until the cleanup is done.

    A second one abandons the cleanup. With `reraise`, a deferred interrupt is
    raised afterwards, so the run still stops.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending: list[int] = []

    def defer(signum, frame):
        if pending:
            raise KeyboardInterrupt
        pending.append(signum)
        sys.stderr.write("\ninterrupted: finishing the cleanup in progress; interrupt again to abandon it\n")

    previous = {sig: signal.signal(sig, defer) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if pending and reraise:
        raise KeyboardInterrupt


class ClusterHost:
    """The embedded cluster and the implementation under test, shared by the pytest-xdist workers of a run.

    The controller starts them in a thread of its own as soon as its session
    starts, so that the cluster boots while the workers start and collect, and
    one cluster and one implementation serve every worker (as a user's cluster
    does under `-n`). It publishes in two stages, each a state file written
    under an exclusive lock that the thread holds from the start and lets go
    once the file is written: `cluster.json` when the API server is up (its
    kubeconfig), and `state.json` when the implementation is up too (or, in
    either, the line and exit code that end the run). A worker takes a lock
    shared, which blocks until then, and reads its file: the tests of the API
    server alone start while the implementation is still starting. The thread
    that started the implementation waits for it to exit and writes its exit
    code to `implementation.exit`, which workers look at before each status wait.
    """

    CLUSTER, STATE, EXITED = "cluster", "state", "implementation.exit"

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self._states: dict[str, dict] = {}

    def hold(self) -> dict[str, int]:
        """Take both locks exclusively (the controller, before any worker starts); their descriptors."""
        fds = {}
        for stage in (self.CLUSTER, self.STATE):
            fds[stage] = os.open(self.dir / f"{stage}.lock", os.O_RDWR | os.O_CREAT, 0o600)
            fcntl.flock(fds[stage], fcntl.LOCK_EX)
        return fds

    def publish(self, fd: int, stage: str, state: dict) -> None:
        tmp = self.dir / f"{stage}.json.tmp"
        tmp.write_text(json.dumps(state))
        os.rename(tmp, self.dir / f"{stage}.json")
        os.close(fd)  # lets go of the lock

    def cluster_state(self) -> dict:
        """The cluster's state, once the controller has published it (blocks until then)."""
        return self._read(self.CLUSTER)

    def state(self) -> dict:
        """The whole state (the implementation's too), once the controller has published it (blocks until then)."""
        return self._read(self.STATE)

    def _read(self, stage: str) -> dict:
        if stage not in self._states:
            fd = os.open(self.dir / f"{stage}.lock", os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_SH)
            finally:
                os.close(fd)
            try:
                self._states[stage] = json.loads((self.dir / f"{stage}.json").read_text())
            except (OSError, ValueError):
                self._states[stage] = {"exit": "the pytest-xdist controller ended before the embedded cluster "
                                               "was up", "returncode": EXIT_ENVIRONMENT}
        return self._states[stage]

    def exited(self, code: int) -> None:
        try:
            (self.dir / self.EXITED).write_text(str(code))
        except OSError:  # the run is over and its directory gone
            pass

    def exit_code(self) -> int | None:
        try:
            return int((self.dir / self.EXITED).read_text())
        except (OSError, ValueError):
            return None


class SuiteSession:
    def __init__(self, config: pytest.Config, opts: Options, user: UserClusterManager | None) -> None:
        self.config, self.opts, self.user = config, opts, user
        self.manager: EmbeddedManager | UserClusterManager | None = user
        self._kube: Kube | None = None
        self._revisions: dict[str, revisions.Revision | None] | None = None
        # Set at the first contact: one line per judged API naming the revision in use
        # and, per API whose installed CRD is not that revision's, the line saying so
        # (repeated with that API's failures).
        self.revision_lines: list[str] = []
        self.revision_mismatch: dict[str, str] = {}
        self.bundle_versions: dict[str, str] = {}  # API name -> the release its CRD's annotation names
        self._implementation: subprocess.Popen | None = None
        self._implementation_log: Path | None = None
        # The traffic tier's data plane on the embedded cluster (started with the implementation), or
        # why there is none; `_traffic_routes`: Gateway address:port -> where the machine reaches it.
        self.dataplane: DataPlane | None = None
        self._traffic_skip: str | None = None
        self._traffic_routes: dict[str, str] | None = None
        self.kubernetes_version: str | None = None
        self.run_id = secrets.token_hex(3)
        self._base_namespace: str | None = None
        self._shared_namespace: str | None = None
        self._deleting: list[str] = []
        self._unsure: list[str] = []  # namespaces whose create got no answer
        self._closed = False
        self._features: frozenset[str] | None = None
        self._brought_up: bool | None = None  # what bring_up_implementation did, once it has
        # Per API: whether the implementation wrote any InferencePool status of it.
        self.silence: dict[str, Silence] = {api: Silence() for api in revisions.APIS}
        self.unready_images: dict[str, str] = {}  # the traffic tier's images whose Pods never got Ready
        # The embedded cluster shared by pytest-xdist's workers: the controller hosts it (`_hosting`,
        # set while it starts); a worker uses the controller's (`host`).
        self.host: ClusterHost | None = None
        self._hosting: threading.Thread | None = None
        self._hosted = threading.Event()  # set once the hosting thread has published the state
        self._messages: list[str] = []  # progress lines of the hosting thread, shown by the main thread
        workerinput = getattr(config, "workerinput", None) or {}
        if workerinput.get(HOST_KEY):
            self.host = ClusterHost(Path(workerinput[HOST_KEY]))

    # -- cluster -------------------------------------------------------------

    def _progress(self, msg: str) -> None:
        if threading.current_thread() is not threading.main_thread():
            self._messages.append(msg)  # the terminal is the main thread's
            return
        self.show_progress()
        self._show(msg)

    def show_progress(self) -> None:
        """Show the lines the hosting thread has left (called from the main thread)."""
        while self._messages:
            self._show(self._messages.pop(0))

    def _show(self, msg: str) -> None:
        tr = self.config.pluginmanager.get_plugin("terminalreporter")
        if tr is None:
            print(msg, file=sys.stderr, flush=True)
            return
        # Called from a test's fixtures, where output is captured: show it now.
        capman = self.config.pluginmanager.get_plugin("capturemanager")
        if capman is None:
            tr.write_line(msg)
            return
        with capman.global_and_fixture_disabled():
            tr.ensure_newline()
            tr.write_line(msg)

    @property
    def kube(self) -> Kube:
        if self._kube is None:
            self._kube = self._connect()
            # Every expectation depends on the revisions: settle them, and say which
            # they are, at the first contact with the cluster.
            self._revisions = self._detect_revisions()
        return self._kube

    def _connect(self) -> Kube:
        if self.manager is not None:
            kubeconfig = str(self.manager.kubeconfig)
        elif self.host is not None and not self.hosting:
            kubeconfig = self._hosted_kubeconfig()
        else:
            kubeconfig = self._start_embedded()
        try:
            api = k8s_config.new_client_from_config(config_file=kubeconfig)
        except Exception as e:  # the kubernetes loader raises many types for bad files
            pytest.exit(f"cannot load the kubeconfig: {e}", returncode=EXIT_USAGE)
        kube = Kube(api)
        try:
            self.kubernetes_version = kube.request("GET", "/version", timeout=(5, 5))["gitVersion"]
        except Exception as e:
            server = getattr(self.user, "server", "the cluster")
            pytest.exit(f"cannot reach {server}: {_short(e)}; check --kubeconfig/--context and that the cluster is "
                        "running", returncode=EXIT_ENVIRONMENT)
        return kube

    def _start_embedded(self) -> str:
        """Start the embedded cluster of this run; its kubeconfig."""
        EmbeddedManager.crd_paths = list(dict.fromkeys(
            path for rev in self.embedded_revisions() for path in rev.embedded_crds))
        manager = EmbeddedManager(cluster_name="embedded")
        started = time.monotonic()
        self.manager = manager  # from now on stopped at the end, also when the start fails half-way
        try:
            manager.create(progress=self._progress)
        except (BuildError, ClusterError) as e:
            pytest.exit(f"cannot start the embedded cluster: {e}", returncode=EXIT_ENVIRONMENT)
        self._progress(f"embedded cluster ready in {time.monotonic() - started:.1f}s at {manager.cluster.server}")
        return str(manager.kubeconfig)

    def _hosted_kubeconfig(self) -> str:
        """The kubeconfig of the cluster the pytest-xdist controller started (waits until it is up)."""
        assert self.host is not None
        return self._from_host(self.host.cluster_state())["kubeconfig"]

    @staticmethod
    def _from_host(state: dict) -> dict:
        """A state the controller published; the run ends here when it says so."""
        if "exit" in state:
            pytest.exit(state["exit"], returncode=state.get("returncode", EXIT_ENVIRONMENT))
        return state

    # -- the cluster shared by pytest-xdist's workers -------------------------------

    def host_for_workers(self, directory: Path) -> None:
        """Start the embedded cluster and the implementation for the workers (the pytest-xdist
        controller, before its workers start); `directory` is handed to them."""
        self.host = ClusterHost(directory)
        fds = self.host.hold()
        self._hosting = threading.Thread(target=self._host, args=(fds,), name="ipc-cluster-host", daemon=True)
        self._hosting.start()

    def _host(self, fds: dict[str, int]) -> None:
        assert self.host is not None
        state: dict = {}
        try:
            kube = self.kube  # starts the cluster and settles the revisions, as a worker's first contact would
            state["kubeconfig"] = str(self.manager.kubeconfig)
            # The tests of the API server alone need nothing more: they start while the implementation does.
            self.host.publish(fds.pop(self.host.CLUSTER), self.host.CLUSTER, state)
            self.bring_up_implementation(kube)
            state["implementation"] = self._implementation is not None
            state["traffic_routes"] = self.dataplane.routes() if self.dataplane else {}
            state["traffic_skip"] = self._traffic_skip
            state["implementation_log"] = str(self._implementation_log or "")
        except pytest.exit.Exception as e:
            state = {"exit": e.msg, "returncode": e.returncode if e.returncode is not None else EXIT_ENVIRONMENT}
        except BaseException as e:  # say why to every worker, rather than let them wait
            state = {"exit": f"cannot start the embedded cluster: {_short(e)}", "returncode": EXIT_ENVIRONMENT}
        finally:
            if "exit" in state:  # the workers' own words do not reach the terminal
                self._messages.append(state["exit"])
            for stage, fd in fds.items():
                self.host.publish(fd, stage, state)
            self._hosted.set()
        # PR_SET_PDEATHSIG fires when the thread that started the implementation ends: this one
        # waits for the implementation, so it ends only after it (or with the process).
        if self._implementation is not None:
            self.host.exited(self._implementation.wait())

    @property
    def hosting(self) -> bool:
        """This process started the cluster for pytest-xdist's workers."""
        return self._hosting is not None

    def _host_started(self) -> None:
        """Wait until the hosting thread has started what it starts (or failed)."""
        if self._hosting is not None:
            self._hosted.wait()

    # -- the implementation under test ----------------------------------------------

    def bring_up_implementation(self, kube: Kube) -> bool:
        """On the embedded cluster: start the implementation under test (--implementation-command, or the
        reference implementation and its GatewayClass); True when the suite created the GatewayClass.

        Does nothing on a user's cluster, or when the pytest-xdist controller did it for the run; does it
        once.
        """
        if self._brought_up is None:
            self._brought_up = self._bring_up_implementation(kube)
        return self._brought_up

    def _bring_up_implementation(self, kube: Kube) -> bool:
        opts = self.opts
        if self.host is not None and not self.hosting:  # the controller brings it up: wait until it has
            self._from_host(self.host.state())
            return False
        if not opts.embedded:
            return False
        if opts.implementation_command or not opts.gateway_class:
            self._start_dataplane()
        else:
            self._traffic_skip = ("traffic tier skipped: on the embedded cluster, only an implementation the suite "
                                  "starts (--implementation-command) is handed the data plane to program")
        if opts.implementation_command:
            self.start_implementation(opts.implementation_command)
        elif not opts.gateway_class:
            # The reference implementation writes status as the installed revision spells it, and
            # programs the data plane's Envoy when there is one (TLS to the EPP, as upstream's serves).
            judged = "".join(f" --api-revision {r.name}" for r in self.detected_revisions.values())
            plane = ("" if self.dataplane is None else " --epp-tls --envoy-config-dir {envoy_config_dir}"
                     + "".join(f" --gateway-address {a}" for a in self.dataplane.gateway_addresses))
            self.start_implementation(f"{sys.executable} -m reference_gateway --kubeconfig {{kubeconfig}} "
                                      f"--controller-name {REFERENCE_CONTROLLER}{judged}{plane}")
            kube.create({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
                         "metadata": {"name": REFERENCE_GATEWAY_CLASS, "labels": dict(MANAGED_BY)},
                         "spec": {"controllerName": REFERENCE_CONTROLLER}})
            return True
        return False

    @property
    def connected_kube(self) -> Kube | None:
        """The client once a test connected, else None (never connects: for reports)."""
        return self._kube if self._revisions is not None else None

    @property
    def judged_apis(self) -> list[str]:
        """The APIs this run judges, known before any contact with the cluster (tests are
        parametrized by them): those of --api-revision; on the embedded cluster, those of its
        default revisions; else every API, each judged if its CRD is installed."""
        if self.opts.api_revisions:
            names = [revisions.REVISIONS[r].api.name for r in self.opts.api_revisions]
        elif self.opts.embedded:
            names = [revisions.REVISIONS[r].api.name for r in revisions.DEFAULTS]
        else:
            names = list(revisions.APIS)
        return [a for a in revisions.APIS if a in names]  # in the registry's order

    @property
    def detected_revisions(self) -> dict[str, revisions.Revision]:
        """API name -> the revision judged, once a test needed them, else {} (never detects: for reports)."""
        return {api: rev for api, rev in (self._revisions or {}).items() if rev is not None}

    def embedded_revisions(self) -> list[revisions.Revision]:
        """The revisions whose CRDs the embedded cluster installs."""
        return [revisions.REVISIONS[r] for r in self.opts.api_revisions or revisions.DEFAULTS]

    def revision_for(self, api: str) -> revisions.Revision | None:
        """The revision of `api` this run judges, or None when its CRD is not installed."""
        if self._revisions is None:
            _ = self.kube  # the first contact settles the revisions
        assert self._revisions is not None
        return self._revisions.get(api)

    def _detect_revisions(self) -> dict[str, revisions.Revision | None]:
        """For each judged API, the revision whose expectations the run uses; says which in one line each.

        Detected from the installed CRD's schema unless --api-revision forces
        one. A forced revision the CRD does not match is a mismatch: the run
        goes on (the user asked for it) and every failure says so.
        """
        assert self._kube is not None
        found: dict[str, revisions.Revision | None] = {}
        lines: list[str] = []
        for name, api in revisions.APIS.items():
            judged = name in self.judged_apis  # else left out by --api-revision: said when installed
            try:
                crd = self._kube.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", api.crd_name)
            except ApiError as e:
                if not judged:
                    continue  # not worth ending the run for
                pytest.exit(f"cannot read the InferencePool CRD {api.crd_name}: {_short(e)}",
                            returncode=EXIT_ENVIRONMENT)
            if not judged:
                if crd is not None:
                    lines.append(self._unjudged_line(name, crd))
                continue
            forced = next((revisions.REVISIONS[r] for r in self.opts.api_revisions
                           if revisions.REVISIONS[r].api is api), None)
            if crd is None:
                if forced is not None:
                    pytest.exit(f"--api-revision {forced.name}: the InferencePool CRD of API {name} "
                                f"({api.crd_name}) is not installed on the cluster; install the CRD of your GIE "
                                "release first", returncode=EXIT_USAGE)
                found[name] = None
                lines.append(f"API {name}: not installed ({api.crd_name}); its tests are not-applicable")
                continue
            found[name] = self._judged_revision(api, crd, forced, lines)
        if not any(found.values()):
            pytest.exit(f"no InferencePool CRD is installed on the cluster (looked for "
                        f"{', '.join(revisions.APIS[a].crd_name for a in found)}); install the CRD of your GIE "
                        "release first", returncode=EXIT_USAGE)
        self.revision_lines = lines
        for line in lines:
            self._progress(line)
        return found

    def _unjudged_line(self, name: str, crd: dict) -> str:
        """The line for an installed InferencePool API that --api-revision leaves out: the run says what it
        found, not only what it judges."""
        detected = revisions.detect(crd)
        what = f"revision {detected.name} ({detected.title})" if detected else "of no known revision"
        return (f"API {name}: installed, {what}; not judged: --api-revision {','.join(self.opts.api_revisions)} "
                f"names only API {', '.join(self.judged_apis)}")

    def _judged_revision(self, api: revisions.Api, crd: dict, forced: revisions.Revision | None,
                         lines: list[str]) -> revisions.Revision:
        detected = revisions.detect(crd)
        shape = revisions.describe(revisions.fingerprint(crd))
        bundle = revisions.bundle_version(crd)
        if bundle:
            self.bundle_versions[api.name] = bundle
        release = f", release {bundle} (bundle-version annotation)" if bundle else ""
        installed = f"{detected.name} ({detected.title})" if detected else f"of no known revision ({shape})"
        if forced is not None:
            if detected is forced:
                lines.append(f"API {api.name}: revision {forced.name} ({forced.title}){release}, forced by "
                             "--api-revision; the installed CRD matches it")
            else:
                self.revision_mismatch[api.name] = (
                    f"API revision mismatch: --api-revision forces {forced.name}, but the installed "
                    f"{api.crd_name} CRD is {installed}; tests expect what {forced.name} says")
                lines.append(self.revision_mismatch[api.name])
            return forced
        if detected is not None:
            lines.append(f"API {api.name}: revision {detected.name} ({detected.title}){release}, detected from the "
                         "installed CRD")
            return detected
        known = ", ".join(r.name for r in revisions.revisions_of(api))
        if not self.opts.allow_crds_mismatch:
            pytest.exit(f"the installed {api.crd_name} CRD matches no known revision of API {api.name} ({shape}; "
                        f"known: {known}); pass --api-revision to choose one or --allow-crds-mismatch to go on",
                        returncode=EXIT_USAGE)
        chosen = revisions.revisions_of(api)[-1]
        self.revision_mismatch[api.name] = (
            f"API revision mismatch: the installed {api.crd_name} CRD matches no known revision ({shape}); with "
            f"--allow-crds-mismatch, tests expect what {chosen.name} ({chosen.title}) says")
        lines.append(self.revision_mismatch[api.name])
        return chosen

    # -- features ------------------------------------------------------------------

    def supported_features(self) -> frozenset[str]:
        """Features to test: --all-features, --supported-features, or the GatewayClass's own list."""
        if self._features is None:
            opts = self.opts
            if opts.all_features:
                chosen = set(FEATURES)
            elif opts.supported_features:
                chosen = set(opts.supported_features) | set(CORE_FEATURES)
            else:
                chosen = set(CORE_FEATURES)
                gwc = self.kube.get("gateway.networking.k8s.io/v1", "GatewayClass",
                                    opts.gateway_class or REFERENCE_GATEWAY_CLASS)
                chosen |= {f.get("name") for f in ((gwc or {}).get("status") or {}).get("supportedFeatures") or []
                           if isinstance(f, dict)} & FEATURES
            self._features = frozenset(chosen - set(opts.exempt_features))
        return self._features

    # -- namespaces --------------------------------------------------------------

    def create_namespace(self, stem: str) -> str:
        """A new namespace labelled as the suite's (plus --namespace-labels/-annotations)."""
        name = f"ipc-{stem[:40].strip('-')}-{secrets.token_hex(3)}"
        try:
            self.kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {
                "name": name,
                "labels": {**self.opts.namespace_labels, **MANAGED_BY, "inferencepool-conformance/run": self.run_id},
                "annotations": dict(self.opts.namespace_annotations)}})
        except BaseException:  # a lost connection, or Ctrl-C in the middle of the request
            # The request may have reached the API server: the namespace may
            # exist, and is ours to delete at the end.
            self._unsure.append(name)
            raise
        return name

    def delete_namespace(self, name: str) -> None:
        """Delete what the suite created in a namespace and wait until it is gone; the namespace
        itself is deleted too, or, on the embedded cluster, left to go with the cluster.

        The namespaces are waited for at the end of the run: upstream's
        namespace controller holds every deletion for 5 s, and namespaces are
        never reused, so no test waits on another's. The embedded cluster is
        thrown away whole at the end, so there the namespace controller is not
        given that work at all (it costs the API server far more than the
        test's own requests); what the implementation under test sees is the
        same: each test's objects go at its end.
        """
        with cleanup_shielded():
            self.delete_objects(name, self.kube.created.pop(name, []))
            if not self.opts.embedded:
                self._delete_namespace_itself(name)

    def delete_objects(self, namespace: str, created: list[tuple[str, str, str]]) -> None:
        """Delete these objects of a namespace and wait until each is gone (those the server
        removed at once are not looked for again); the objects are independent, so the requests are
        in flight together."""
        kube = self.kube
        deadline = time.monotonic() + self.opts.timeouts.DeleteTimeout

        def delete(ref: tuple[str, str, str]) -> dict | None:
            # A delete is safe to repeat: retry it through a restarting API server.
            for attempt in retrying(deadline):
                with attempt:
                    return kube.delete(*ref, namespace)

        def gone(ref: tuple[str, str, str]) -> None:
            api_version, kind, obj_name = ref
            wait_for(kube, api_version, kind, obj_name, namespace, lambda o: o is None,
                     timeout=self.opts.timeouts.DeleteTimeout, what=f"{kind} {namespace}/{obj_name} to be deleted",
                     expected="the object is gone")

        refs = list(reversed(created))
        answers = kube.concurrently(delete, refs)
        # Only what the server kept (finalizers pending, a grace period) is waited for.
        kube.concurrently(gone, [ref for ref, answer in zip(refs, answers, strict=True) if not kube.removed(answer)])

    def _delete_namespace(self, name: str) -> None:
        self.delete_objects(name, self.kube.created.pop(name, []))
        self._delete_namespace_itself(name)

    def _delete_namespace_itself(self, name: str) -> None:
        for attempt in retrying(time.monotonic() + self.opts.timeouts.DeleteTimeout):
            with attempt:
                gone = not self.kube.delete("v1", "Namespace", name)
        if not gone:
            self._deleting.append(name)

    def wait_namespaces_gone(self) -> None:
        while self._deleting:
            name = self._deleting[0]
            wait_for(self.kube, "v1", "Namespace", name, None, lambda o: o is None,
                     timeout=self.opts.timeouts.NamespacesMustBeReady, what=f"namespace {name} to be deleted",
                     expected="the namespace is gone")
            self._deleting.pop(0)

    @property
    def base_namespace(self) -> str:
        """A namespace shared by tests that change nothing in it (dry-run requests)."""
        if self._base_namespace is None:
            self._base_namespace = self.create_namespace("base")
        return self._base_namespace

    @property
    def shared_namespace(self) -> str:
        """A namespace shared by tests whose objects are named for the test alone (the schema cases
        that persist their pool); each test deletes its own objects at its end."""
        if self._shared_namespace is None:
            self._shared_namespace = self.create_namespace("shared")
        return self._shared_namespace

    # -- implementation under test ----------------------------------------------

    def _start_dataplane(self) -> None:
        """The traffic tier's data plane (sandbox, kubelet stand-in, EPP build, Envoy), unless the tier
        is off or cannot run here; then `_traffic_skip` says why, in one line."""
        if self.opts.skip_traffic or TRAFFIC_FEATURE in self.opts.exempt_features:
            self._traffic_skip = "not-supported: the traffic tier is off (--skip-traffic or --exempt-features)"
            return
        # Imported here: only the process that starts the data plane needs it (a worker's start is
        # on the run's critical path, and these modules cost it about 30 ms of CPU).
        from .traffic import netns
        from .traffic.embedded import DataPlane
        from .traffic.envoy import EnvoyNotFound
        from .traffic.netns import SandboxUnavailable

        if reason := netns.available():
            self._traffic_skip = reason
            return
        assert self.manager is not None and self.manager.cluster is not None
        started = time.monotonic()
        plane = DataPlane(self.manager.cluster.server, self.manager.kubeconfig,
                          model_server_image=self.opts.model_server_image, epp_image=self.opts.epp_image,
                          sentinel_image=self.opts.sentinel_image,
                          progress=self._progress)
        try:
            plane.start()
        except (BuildError, EnvoyNotFound, SandboxUnavailable) as e:
            self._traffic_skip = f"traffic tier skipped: {_short(e)}"
            return
        self.dataplane = plane
        self._progress(f"traffic data plane ready in {time.monotonic() - started:.1f}s (Envoy, endpoint pickers "
                       "and model servers in a network sandbox)")

    def traffic_routes(self) -> dict[str, str]:
        """Gateway "address:port" -> the "address:port" this process connects to for it (embedded cluster:
        a bridge out of the sandbox); empty on a user's cluster, where Gateway addresses are reached as
        they are. pytest.skip when the tier cannot run."""
        if self.opts.skip_traffic:
            pytest.skip("not-supported: the traffic tier is off (--skip-traffic)")
        if self._traffic_routes is None:
            if self.host is not None and not self.hosting:
                state = self._from_host(self.host.state())
                self._traffic_routes, self._traffic_skip = state.get("traffic_routes") or {}, state.get("traffic_skip")
            else:
                self._host_started()
                self._traffic_routes = self.dataplane.routes() if self.dataplane else {}
        if self._traffic_skip:
            pytest.skip(self._traffic_skip)
        return self._traffic_routes

    def start_implementation(self, command: str) -> None:
        """Start the implementation under test against the embedded cluster (inside the traffic
        sandbox when there is one: it is handed the Gateway addresses, which exist only there)."""
        assert self.manager is not None and self.manager.kubeconfig is not None
        judged = ",".join(r.name for r in self.detected_revisions.values())
        values = {"kubeconfig": str(self.manager.kubeconfig), "api_revision": judged,
                  **(self.dataplane.placeholders() if self.dataplane else {})}
        argv = []
        for a in shlex.split(command):
            for key, value in values.items():
                a = a.replace("{" + key + "}", value)
            argv.append(a)
        self._implementation_log = Path(self.manager.kubeconfig).parent / "implementation.log"
        with open(self._implementation_log, "wb") as out:
            try:
                # PR_SET_PDEATHSIG fires when the forking *thread* ends: from the main thread, or
                # from the hosting thread, which lives as long as the implementation.
                main = threading.current_thread() in (threading.main_thread(), self._hosting)
                kw = {"stdin": subprocess.DEVNULL, "stdout": out, "stderr": subprocess.STDOUT,
                      "preexec_fn": _die_with_parent if main else None}
                self._implementation = (self.dataplane.start_implementation(argv, **kw) if self.dataplane
                                        else subprocess.Popen(argv, **kw))
            except OSError as e:
                pytest.exit(f"cannot start the implementation ({argv[0]}): {e.strerror}", returncode=EXIT_USAGE)

    @property
    def implementation_log(self) -> Path | None:
        """The log (standard output and error) of the implementation this process started, if any."""
        return self._implementation_log if self._implementation is not None else None

    @property
    def started_implementation(self) -> bool:
        """The suite started the implementation under test (this process, or the pytest-xdist controller)."""
        if self._implementation is not None:
            return True
        if self.host is not None and not self.hosting and self.opts.embedded:
            return bool(self._from_host(self.host.state()).get("implementation"))
        return False

    def check_implementation(self) -> None:
        """Raise ImplementationExited when the implementation the suite started has exited."""
        if self._implementation is not None:
            code = self._implementation.poll()
            log = self._implementation_log
        elif self.host is not None and not self.hosting:
            code = self.host.exit_code()
            log = Path(self.host.state().get("implementation_log") or "") if code is not None else None
        else:
            return
        if code is None:
            return
        assert log is not None
        try:
            tail = log.read_text(errors="replace").strip().splitlines()[-10:]
        except OSError:
            tail = ["(its log is gone)"]
        raise ImplementationExited(
            f"the implementation under test exited with code {code} during the run; tests that need it "
            "cannot pass (its last log lines follow)\n" + "\n".join(tail))

    # -- teardown --------------------------------------------------------------

    def close(self) -> None:
        """Delete what the run left to the end, stop what it started; once (a second call does nothing)."""
        if self._closed:
            return
        self._closed = True
        with cleanup_shielded(reraise=False):  # the run is ending anyway
            self._close()

    def _close(self) -> None:
        self._host_started()  # a cluster still starting is stopped once it is up
        self.show_progress()
        try:
            # An embedded cluster is thrown away whole: no need to delete or watch anything in it.
            if self._kube is not None and not self.opts.embedded:
                if self._base_namespace is not None and self.opts.cleanup_base_resources:
                    self._delete_namespace(self._base_namespace)
                if self._shared_namespace is not None and self.opts.cleanup_test_resources:
                    self._delete_namespace(self._shared_namespace)
                for name in self._unsure:
                    if self.opts.cleanup_test_resources:
                        self._delete_namespace(name)
                self.wait_namespaces_gone()
        except Exception as e:  # the run is over; say what is left rather than hide it
            print(f"cleanup incomplete, namespaces left: {', '.join(self._deleting)}: {_short(e)}", file=sys.stderr)
        if self._implementation is not None and self._implementation.poll() is None:
            self._implementation.terminate()
            try:
                self._implementation.wait(10)
            except subprocess.TimeoutExpired:
                self._implementation.kill()
                self._implementation.wait()
        if self.dataplane is not None:
            self.dataplane.close()
            self.dataplane = None
        if self.manager is not None:
            self.manager.delete()  # embedded: stop the cluster; user: remove our kubeconfig copy


def _short(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[-1] if text else type(e).__name__
