"""What one pytest process knows about the cluster under test.

Everything is lazy: nothing touches a cluster until the first test asks for
it, so collecting, listing coverage or running pure unit tests starts nothing.
Input problems found here end the run with one line (`pytest.exit`) before
any test applies anything.
"""

from __future__ import annotations

import ctypes
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

import pytest
from kubernetes import config as k8s_config

from . import revisions
from .cluster.binary import BuildError
from .cluster.embedded import ClusterError
from .cluster.provider import EmbeddedManager, UserClusterManager
from .features import CORE_FEATURES, FEATURES, REFERENCE_GATEWAY_CLASS
from .kube import ApiError, Kube
from .options import Options
from .topology import Silence
from .wait import retrying, wait_for

EXIT_ENVIRONMENT = 3  # the cluster cannot be used
EXIT_USAGE = 4  # pytest's own code for bad input
MANAGED_BY = {"app.kubernetes.io/managed-by": "inferencepool-conformance"}


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


class SuiteSession:
    def __init__(self, config: pytest.Config, opts: Options, user: UserClusterManager | None) -> None:
        self.config, self.opts, self.user = config, opts, user
        self.manager: EmbeddedManager | UserClusterManager | None = user
        self._kube: Kube | None = None
        self._revision: revisions.Revision | None = None
        # Set at the first contact: the line naming the revision in use and, when
        # it is not the installed CRD's, the line saying so (repeated with failures).
        self.revision_line: str | None = None
        self.revision_mismatch: str | None = None
        self._implementation: subprocess.Popen | None = None
        self._implementation_log: Path | None = None
        self.kubernetes_version: str | None = None
        self.run_id = secrets.token_hex(3)
        self._base_namespace: str | None = None
        self._deleting: list[str] = []
        self._unsure: list[str] = []  # namespaces whose create got no answer
        self._features: frozenset[str] | None = None
        self.silence = Silence()  # whether the implementation wrote any InferencePool status

    # -- cluster -------------------------------------------------------------

    def _progress(self, msg: str) -> None:
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
            # Every expectation depends on the revision: settle it, and say which
            # it is, at the first contact with the cluster.
            self._revision = self._detect_revision()
        return self._kube

    def _connect(self) -> Kube:
        if self.manager is None:
            EmbeddedManager.crd_paths = self.revision_for_embedded().embedded_crds
            manager = EmbeddedManager(cluster_name="embedded")
            started = time.monotonic()
            try:
                manager.create(progress=self._progress)
            except (BuildError, ClusterError) as e:
                pytest.exit(f"cannot start the embedded cluster: {e}", returncode=EXIT_ENVIRONMENT)
            self.manager = manager
            self._progress(f"embedded cluster ready in {time.monotonic() - started:.1f}s at {manager.cluster.server}")
        try:
            api = k8s_config.new_client_from_config(config_file=str(self.manager.kubeconfig))
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

    @property
    def connected_kube(self) -> Kube | None:
        """The client once a test connected, else None (never connects: for reports)."""
        return self._kube

    @property
    def detected_revision(self) -> revisions.Revision | None:
        """The API revision once a test needed it, else None (never detects: for reports)."""
        return self._revision

    def revision_for_embedded(self) -> revisions.Revision:
        return revisions.REVISIONS[self.opts.api_revision or revisions.DEFAULT]

    @property
    def revision(self) -> revisions.Revision:
        if self._revision is None:
            _ = self.kube  # the first contact settles the revision
        assert self._revision is not None
        return self._revision

    def _detect_revision(self) -> revisions.Revision:
        """The revision whose expectations the run uses; says which in one line.

        Detected from the installed CRD's schema unless --api-revision forces
        one. A forced revision the CRD does not match is a mismatch: the run
        goes on (the user asked for it) and every failure says so.
        """
        assert self._kube is not None
        try:
            crd = self._kube.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", revisions.CRD_NAME)
        except ApiError as e:
            pytest.exit(f"cannot read the InferencePool CRD: {_short(e)}", returncode=EXIT_ENVIRONMENT)
        if crd is None:
            pytest.exit(f"the InferencePool CRD ({revisions.CRD_NAME}) is not installed on the cluster; "
                        "install the CRD of your GIE release first", returncode=EXIT_USAGE)
        detected = revisions.detect(crd)
        shape = revisions.describe(revisions.fingerprint(crd))
        installed = f"{detected.name} ({detected.title})" if detected else f"of no known revision ({shape})"
        if self.opts.api_revision:
            chosen = revisions.REVISIONS[self.opts.api_revision]
            if detected is chosen:
                self.revision_line = (f"API revision: {chosen.name} ({chosen.title}), forced by --api-revision; "
                                      "the installed CRD matches it")
            else:
                self.revision_mismatch = (f"API revision mismatch: --api-revision forces {chosen.name}, but the "
                                          f"installed InferencePool CRD is {installed}; tests expect what "
                                          f"{chosen.name} says")
        elif detected is not None:
            chosen = detected
            self.revision_line = f"API revision: {chosen.name} ({chosen.title}), detected from the installed CRD"
        else:
            if not self.opts.allow_crds_mismatch:
                pytest.exit(f"the installed InferencePool CRD matches no known API revision ({shape}; known: "
                            f"{', '.join(revisions.REVISIONS)}); pass --api-revision to choose one or "
                            "--allow-crds-mismatch to go on", returncode=EXIT_USAGE)
            chosen = revisions.REVISIONS[revisions.DEFAULT]
            self.revision_mismatch = (f"API revision mismatch: the installed InferencePool CRD matches no known "
                                      f"revision ({shape}); with --allow-crds-mismatch, tests expect what "
                                      f"{chosen.name} ({chosen.title}) says")
        self.revision_line = self.revision_line or self.revision_mismatch
        self._progress(self.revision_line)
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
        """Delete what the suite created in a namespace, wait until it is gone, then delete the namespace.

        The namespace itself is waited for at the end of the run: upstream's
        namespace controller holds every deletion for 5 s, and namespaces are
        never reused, so no test waits on another's.
        """
        with cleanup_shielded():
            self._delete_namespace(name)

    def _delete_namespace(self, name: str) -> None:
        kube = self.kube
        created = kube.created.pop(name, [])
        # A delete is safe to repeat: retry it through a restarting API server.
        deadline = time.monotonic() + self.opts.timeouts.DeleteTimeout
        for api_version, kind, obj_name in reversed(created):
            for attempt in retrying(deadline):
                with attempt:
                    kube.delete(api_version, kind, obj_name, name)
        for api_version, kind, obj_name in reversed(created):
            wait_for(kube, api_version, kind, obj_name, name, lambda o: o is None,
                     timeout=self.opts.timeouts.DeleteTimeout, what=f"{kind} {name}/{obj_name} to be deleted",
                     expected="the object is gone")
        for attempt in retrying(time.monotonic() + self.opts.timeouts.DeleteTimeout):
            with attempt:
                gone = not kube.delete("v1", "Namespace", name)
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

    # -- implementation under test ----------------------------------------------

    def start_implementation(self, command: str) -> None:
        """Start the implementation under test against the embedded cluster."""
        assert self.manager is not None and self.manager.kubeconfig is not None
        argv = [a.replace("{kubeconfig}", str(self.manager.kubeconfig)).replace("{api_revision}", self.revision.name)
                for a in shlex.split(command)]
        self._implementation_log = Path(self.manager.kubeconfig).parent / "implementation.log"
        with open(self._implementation_log, "wb") as out:
            try:
                # PR_SET_PDEATHSIG fires when the forking *thread* ends, so only from the main thread.
                main = threading.current_thread() is threading.main_thread()
                self._implementation = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out,
                                                        stderr=subprocess.STDOUT,
                                                        preexec_fn=_die_with_parent if main else None)
            except OSError as e:
                pytest.exit(f"cannot start the implementation ({argv[0]}): {e.strerror}", returncode=EXIT_USAGE)

    @property
    def started_implementation(self) -> bool:
        return self._implementation is not None

    def check_implementation(self) -> None:
        """Raise ImplementationExited when the implementation the suite started has exited."""
        code = None if self._implementation is None else self._implementation.poll()
        if code is None:
            return
        assert self._implementation_log is not None
        tail = self._implementation_log.read_text(errors="replace").strip().splitlines()[-10:]
        raise ImplementationExited(
            f"the implementation under test exited with code {code} during the run; tests that need it "
            "cannot pass (its last log lines follow)\n" + "\n".join(tail))

    # -- teardown --------------------------------------------------------------

    def close(self) -> None:
        with cleanup_shielded(reraise=False):  # the run is ending anyway
            self._close()

    def _close(self) -> None:
        try:
            if self._base_namespace is not None and self.opts.cleanup_base_resources:
                self._delete_namespace(self._base_namespace)
            for name in self._unsure:
                if self.opts.cleanup_test_resources:
                    self._delete_namespace(name)
            # An embedded cluster is thrown away whole: no need to watch it tidy up.
            if self._kube is not None and not self.opts.embedded:
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
        if self.manager is not None:
            self.manager.delete()  # embedded: stop the cluster; user: remove our kubeconfig copy


def _short(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[-1] if text else type(e).__name__
