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
        self._revisions: dict[str, revisions.Revision | None] | None = None
        # Set at the first contact: one line per judged API naming the revision in use
        # and, per API whose installed CRD is not that revision's, the line saying so
        # (repeated with that API's failures).
        self.revision_lines: list[str] = []
        self.revision_mismatch: dict[str, str] = {}
        self.bundle_versions: dict[str, str] = {}  # API name -> the release its CRD's annotation names
        self._implementation: subprocess.Popen | None = None
        self._implementation_log: Path | None = None
        self.kubernetes_version: str | None = None
        self.run_id = secrets.token_hex(3)
        self._base_namespace: str | None = None
        self._deleting: list[str] = []
        self._unsure: list[str] = []  # namespaces whose create got no answer
        self._features: frozenset[str] | None = None
        # Per API: whether the implementation wrote any InferencePool status of it.
        self.silence: dict[str, Silence] = {api: Silence() for api in revisions.APIS}

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
            # Every expectation depends on the revisions: settle them, and say which
            # they are, at the first contact with the cluster.
            self._revisions = self._detect_revisions()
        return self._kube

    def _connect(self) -> Kube:
        if self.manager is None:
            EmbeddedManager.crd_paths = list(dict.fromkeys(
                path for rev in self.embedded_revisions() for path in rev.embedded_crds))
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
        for name in self.judged_apis:
            api = revisions.APIS[name]
            try:
                crd = self._kube.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", api.crd_name)
            except ApiError as e:
                pytest.exit(f"cannot read the InferencePool CRD {api.crd_name}: {_short(e)}",
                            returncode=EXIT_ENVIRONMENT)
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
        judged = ",".join(r.name for r in self.detected_revisions.values())
        argv = [a.replace("{kubeconfig}", str(self.manager.kubeconfig)).replace("{api_revision}", judged)
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
