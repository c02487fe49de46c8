"""What every run of the suite publishes: the pytest side of `report.py`.

`ReportPlugin` is registered by `plugin.py`'s `pytest_configure`. On the
process that writes results (pytest itself, or the pytest-xdist controller;
never an xdist worker) it writes, at the end of every run that ran the
conformance tests, also a failed, interrupted or stopped one:

* the ConformanceReport YAML (`--report-output`, or the results directory
  when the implementation's metadata is given);
* JUnit XML (pytest's `--junitxml`, defaulted into the results directory);
* Allure results (`--alluredir`, defaulted likewise) with our
  `environment.properties` and `categories.json`;
* `report.html`, a self-contained page of the results.

The results directory is `--results-dir`, by default
`reports/out/<UTC time>-<run id>/` under the rootdir, with `reports/out/latest`
pointing at the newest. Every process labels its tests (JUnit properties and
Allure labels: area, rule, API revision, tier) and records what it learned
about the cluster; xdist workers send that to the controller in
`config.workeroutput`.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest
import yaml

from .. import revisions, should
from ..features import REFERENCE_GATEWAY_CLASS
from . import artifacts, html_report, inventory
from . import report as cr
from .artifacts import Facts
from .report import Phase, ProfileTest, key_of

FACTS_KEY = "ipc_facts"  # in xdist's workeroutput
TESTS_KEY = "ipc_tests"  # in xdist's workeroutput: what the worker collected (before deselection), as JSON
GATEWAYS_CRD = "gateways.gateway.networking.k8s.io"
BUNDLE_VERSION = "gateway.networking.k8s.io/bundle-version"
CHANNEL = "gateway.networking.k8s.io/channel"


def default_results_dir(rootpath: Path, run_id: str, now: float | None = None) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(now))
    return rootpath / "reports" / "out" / f"{stamp}-{run_id}"


def facts_from_crd(crd: dict | None) -> tuple[str, str]:
    """(bundle version, channel) from a Gateway API CRD's annotations."""
    annotations = ((crd or {}).get("metadata") or {}).get("annotations") or {}
    return annotations.get(BUNDLE_VERSION) or "unknown", annotations.get(CHANNEL) or "unknown"


def embedded_gateway_api() -> tuple[str, str]:
    """(bundle version, channel) of the Gateway API CRDs the embedded cluster installs."""
    path = revisions.GATEWAY_API_CRDS / "gateway.networking.k8s.io_gateways.yaml"
    try:
        return facts_from_crd(yaml.safe_load(path.read_text()))
    except (OSError, yaml.YAMLError):
        return "unknown", "unknown"


KEEP_RUNS = 20  # default results directories kept under reports/out/
_RUN_DIR = re.compile(r"^\d{8}-\d{6}-[0-9a-f]+$")


def prune_results(parent: Path, keep: int) -> list[Path]:
    """Remove all but the newest `keep` default results directories (by name, which sorts by time)."""
    runs = sorted(p for p in parent.iterdir() if p.is_dir() and not p.is_symlink() and _RUN_DIR.match(p.name))
    removed = runs[:-keep] if keep > 0 else runs
    for p in removed:
        shutil.rmtree(p, ignore_errors=True)
    return removed


def _atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


class _Record:
    """What the reporting process saw of one test."""

    def __init__(self, nodeid: str) -> None:
        self.nodeid = nodeid
        self.phases: list[Phase] = []
        self.duration = 0.0
        self.text = ""
        self.assertion = True
        self.properties: dict[str, str] = {}


class ReportPlugin:
    def __init__(self, config: pytest.Config, suite) -> None:
        self.config, self.suite, self.opts = config, suite, suite.opts
        self.worker = hasattr(config, "workerinput")
        self.scope = inventory.scope(list(config.args), Path(config.invocation_params.dir),
                                     pyargs=bool(getattr(config.option, "pyargs", False)))
        quiet_run = any(getattr(config.option, name, False)
                        for name in ("collectonly", "help", "version", "rule_coverage", "markers", "fixtures"))
        self.publish = not self.worker and not quiet_run and self.scope != "none"
        self.results_dir = self._path(self.opts.results_dir) if self.opts.results_dir else \
            default_results_dir(config.rootpath, suite.run_id)
        self.report_path = self._path(self.opts.report_output) if self.opts.report_output else None
        # One run ID labels every Allure result of the run, also the xdist workers' ones.
        self.run_id = config.workerinput.get("ipc_run_id", suite.run_id) if self.worker else suite.run_id
        if self.publish:
            if not config.option.xmlpath:
                config.option.xmlpath = str(self.results_dir / "junit.xml")
            if hasattr(config.option, "allure_report_dir") and not config.option.allure_report_dir:
                config.option.allure_report_dir = str(self.results_dir / "allure-results")
        elif self.worker and config.workerinput.get("ipc_allure_dir") and hasattr(config.option, "allure_report_dir"):
            # Workers parse the command line again: give them the controller's Allure directory.
            config.option.allure_report_dir = config.workerinput["ipc_allure_dir"]
        self.allure_dir = Path(config.option.allure_report_dir).resolve() if getattr(
            config.option, "allure_report_dir", None) else None
        self.profile_tests: dict[str, ProfileTest] = {}  # what this process collected, before deselection
        self.deselected: set[str] = set()
        self.selected: set[str] | None = None
        self.selected_by_workers = False  # then deselected tests look like tests never selected
        self.records: dict[str, _Record] = {}
        self.started: set[str] = set()
        self.facts: Facts | None = None
        self.worker_facts: list[Facts] = []
        self.worker_tests: list[ProfileTest] | None = None
        self._inventory_proc = None
        self.lines: list[str] = []

    def _path(self, p: Path) -> Path:
        return p if p.is_absolute() else Path(self.config.invocation_params.dir) / p

    @property
    def _allure_on(self) -> bool:
        return self.config.pluginmanager.get_plugin("allure_listener") is not None

    # -- labels ------------------------------------------------------------------

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        allure_on = self._allure_on
        for item in items:
            info = inventory.describe(item)
            if info is None:
                continue
            self.profile_tests[info.key] = info
            item.user_properties += [("conformance", info.tier), ("area", " ".join(info.areas)),
                                     ("rule", " ".join(info.rules))]
            if allure_on:
                labels = {"area": info.areas, "feature": info.areas, "rule": info.rules, "story": info.rules,
                          "conformance": (info.tier,), "nodeid": (item.nodeid,), "run": (self.run_id,)}
                for label_type, values in labels.items():
                    item.add_marker(pytest.mark.allure_label(*values, label_type=label_type))
        if self.worker:
            self.config.workeroutput[TESTS_KEY] = inventory.to_json(list(self.profile_tests.values()))

    def pytest_deselected(self, items) -> None:
        self.deselected.update(key_of(i.nodeid) for i in items)

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.selected = {key_of(i.nodeid) for i in session.items}

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node, ids) -> None:
        if self.selected is None:
            self.selected = {key_of(i) for i in ids}
            self.selected_by_workers = True

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_teardown(self, item: pytest.Item) -> None:
        callspec = getattr(item, "callspec", None)
        api = callspec.params.get("api_revision") if callspec is not None else None
        rev = self.suite.detected_revisions.get(api) if api else None
        if rev is None or not item.get_closest_marker("rule"):
            return
        item.user_properties.append(("api_revision", rev.name))
        if self._allure_on:
            item.add_marker(pytest.mark.allure_label(rev.name, label_type="api_revision"))
            item.add_marker(pytest.mark.allure_label(f"API revision {rev.name}", label_type="epic"))

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item, call):
        rep = yield
        if rep.failed and call.excinfo is not None:
            # Carried to the xdist controller with the report: assertion -> "failed", else "broken".
            rep.ipc_assertion = isinstance(call.excinfo.value, (AssertionError, pytest.fail.Exception))
        return rep

    # -- facts -----------------------------------------------------------------------

    def _capture_facts(self) -> None:
        """Record the cluster's facts once a test has connected and the revision is known."""
        if self.facts is not None:
            return
        kube, judged = self.suite.connected_kube, self.suite.detected_revisions
        if kube is None or not judged:
            return
        try:
            crd = kube.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", GATEWAYS_CRD)
        except Exception:  # facts are best effort; the run goes on
            crd = None
        bundle, channel = facts_from_crd(crd)
        self.facts = Facts(kubernetes_version=self.suite.kubernetes_version or "unknown",
                           gateway_api_version=bundle, gateway_api_channel=channel, cluster=self._cluster(),
                           gateway_class=self._gateway_class(), source="cluster")
        # The release an upstream CRD's bundle-version annotation names is more exact than
        # the oldest release of the revision's schema.
        self.facts.judge({api: (rev.name, rev.title, self.suite.bundle_versions.get(api, rev.extension_version))
                          for api, rev in judged.items()})
        if self.worker:
            self.config.workeroutput[FACTS_KEY] = self.facts.to_dict()

    def _cluster(self) -> str:
        user = self.suite.user
        if user is not None:
            return f"{user.server} (context {user.context_name})"
        return "embedded control plane"

    def _gateway_class(self) -> str:
        return self.opts.gateway_class or REFERENCE_GATEWAY_CLASS

    def _static_facts(self) -> Facts:
        """What can be said without a connection: all of it for the embedded cluster."""
        facts = Facts(cluster=self._cluster(), gateway_class=self._gateway_class(), source="static")
        if self.opts.embedded:
            from ..cluster import binary

            facts.judge({rev.api.name: (rev.name, rev.title, rev.extension_version)
                         for rev in self.suite.embedded_revisions()})
            facts.gateway_api_version, facts.gateway_api_channel = embedded_gateway_api()
            try:
                facts.kubernetes_version = binary.kubernetes_version()
            except Exception:
                pass
        elif self.opts.api_revisions:
            facts.judge({rev.api.name: (rev.name, rev.title, rev.extension_version)
                         for rev in map(revisions.REVISIONS.get, self.opts.api_revisions)})
        return facts

    def pytest_runtest_logfinish(self, nodeid, location) -> None:
        self._capture_facts()

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node) -> None:
        node.workerinput["ipc_run_id"] = self.run_id
        if self.allure_dir is not None:
            node.workerinput["ipc_allure_dir"] = str(self.allure_dir)

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node, error) -> None:
        output = getattr(node, "workeroutput", None) or {}
        if data := output.get(FACTS_KEY):
            self.worker_facts.append(Facts.from_dict(data))
        if self.worker_tests is None and (tests := output.get(TESTS_KEY)):
            self.worker_tests = inventory.from_json(tests)

    def run_facts(self) -> Facts:
        self._capture_facts()
        if self.facts is not None:
            return self.facts
        if self.worker_facts:
            return self.worker_facts[0]
        return self._static_facts()

    # -- outcomes ----------------------------------------------------------------------

    @property
    def _xdist_controller(self) -> bool:
        return self.config.pluginmanager.has_plugin("dsession")

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        # A pytest-xdist controller collects nothing itself: a run of the whole suite gets the list from
        # its workers (each collects all of it), one of a part from a collection of its own.
        if self.publish and self.scope == "partial":
            self._inventory_proc = inventory.start(self.config.rootpath)

    def pytest_runtest_logstart(self, nodeid, location) -> None:
        self.started.add(key_of(nodeid))

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if not self.publish:
            return
        rec = self.records.setdefault(key_of(report.nodeid), _Record(report.nodeid))
        reason = ""
        if report.skipped:
            reason = cr.skip_reason(report.longrepr)
        elif report.failed:
            text = report.longreprtext or ""
            rec.text += ("\n\n" if rec.text else "") + (f"[{report.when}]\n" if report.when != "call" else "") + text
            rec.assertion = rec.assertion and bool(getattr(report, "ipc_assertion", False))
            reason = _first_error_line(text)
        rec.phases.append(Phase(report.when, report.outcome, reason))
        rec.duration += report.duration
        for k, v in report.user_properties:
            rec.properties[str(k)] = str(v)

    # -- writing -------------------------------------------------------------------------

    def _inventory(self) -> tuple[list[ProfileTest], list[str]]:
        """Every test of the profile, and notes when the list is not complete."""
        notes = []
        if self._inventory_proc is None and self._xdist_controller:
            if self.worker_tests is not None:
                return self._with_ran(list(self.worker_tests)), notes
            self._inventory_proc = inventory.start(self.config.rootpath)  # no worker said: collect it now
        if self._inventory_proc is not None:
            tests, problem = inventory.finish(self._inventory_proc)
            if tests is None:
                notes.append(problem)
                tests = list(self.profile_tests.values())
                if self.scope != "full" or not tests:
                    # Tests outside this run's selection exist, but nobody can name them.
                    tests.append(ProfileTest(key="(unlisted)", name="(tests outside this run's selection: "
                                             "the whole list could not be collected)", tier="core"))
        else:
            tests = list(self.profile_tests.values())
        return self._with_ran(tests), notes

    def _with_ran(self, tests: list[ProfileTest]) -> list[ProfileTest]:
        """`tests`, and every test that ran and is not among them (a test that ran is counted, listed or not)."""
        known = {t.key for t in tests}
        for key, rec in self.records.items():
            if key not in known and rec.properties.get("conformance") in ("core", "extended"):
                tests.append(ProfileTest(key=key, name=cr.short_name(rec.nodeid),
                                         tier=rec.properties["conformance"],
                                         rules=tuple(rec.properties.get("rule", "").split())))
        return tests

    def _not_run_notes(self, tests: list[ProfileTest], outcomes: dict,
                       exitstatus: int) -> tuple[dict[str, str], list[str]]:
        """Why each test of the profile without an outcome did not run, and a count per reason."""
        why: dict[str, str] = {}
        for t in tests:
            if t.key in outcomes:
                continue
            if t.key in self.deselected:
                why[t.key] = "deselected (-k, -m, --deselect or --run-test)"
            elif self.selected is not None and t.key not in self.selected:
                why[t.key] = ("not selected by the run's arguments, or deselected" if self.selected_by_workers
                              else "not selected by the run's arguments")
            elif exitstatus == pytest.ExitCode.INTERRUPTED:
                why[t.key] = "not reached: the run was interrupted"
            else:
                why[t.key] = f"not reached: the run ended early (exit status {int(exitstatus)})"
        per_reason: dict[str, int] = defaultdict(int)
        for reason in why.values():
            per_reason[reason] += 1
        return why, [f"{n} {reason}" for reason, n in per_reason.items()]

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus) -> None:
        if not self.publish:
            return
        if not self.records and not self.started and exitstatus != pytest.ExitCode.INTERRUPTED:
            return  # nothing ran (a usage error, or collection found no test): nothing to report
        try:
            self._write(session, exitstatus)
        except Exception as e:  # never lose the run's own result to a reporting bug
            self.lines.append(f"ERROR: writing the results failed: {type(e).__name__}: {e}")
            if session.exitstatus == 0:
                session.exitstatus = pytest.ExitCode.INTERNAL_ERROR
        tr = self.config.pluginmanager.get_plugin("terminalreporter")
        if tr is not None:
            if getattr(getattr(tr, "_tw", None), "width_of_current_line", 0):
                tr.write("\n")  # after pytest's progress dots
            tr.write_sep("-", "conformance results")
            for line in self.lines:
                tr.write_line(line)
        else:
            print("\n".join(self.lines), file=sys.stderr)

    def _write(self, session: pytest.Session, exitstatus) -> None:
        tests, notes = self._inventory()
        outcomes = {key: cr.outcome_of(rec.phases) for key, rec in self.records.items()}
        why_not_run, run_notes = self._not_run_notes(tests, outcomes, exitstatus)
        notes = run_notes + notes
        facts = self.run_facts()
        # One profile result (and ConformanceReport) per judged API, of that API's tests.
        # Before any contact with the cluster, the APIs the run was to judge (their releases unknown).
        apis = list(facts.judged) or self.suite.judged_apis or [""]
        profiles = {api: cr.count([t for t in tests if not api or t.api in ("", api)], outcomes) for api in apis}
        opts = self.opts
        implementation = {"organization": opts.organization, "project": opts.project, "url": opts.url,
                          "version": opts.version, "contact": list(opts.contact)}
        impl_text = (f"{opts.organization}/{opts.project} {opts.version}" if opts.project
                     else f"GatewayClass {facts.gateway_class}")
        date = cr.rfc3339()
        for api, profile in profiles.items():
            core = profile.core
            judged = f" ({api} {facts.judged.get(api, {}).get('revision', 'unknown')})" if api else ""
            self.lines.append(f"{profile.name}{judged} core: {core.result} (Passed {len(core.passed)}, "
                              f"Failed {len(core.failed)}, Skipped {len(core.skipped)})"
                              + (f"; {'; '.join(notes)}" if notes else ""))
        # Whose problem each failure is: the implementation's, or the environment's.
        per_category: dict[str, int] = defaultdict(int)
        for key, rec in self.records.items():
            cat = artifacts.categorize(outcomes[key][0], rec.assertion, rec.text)
            if cat is not None:
                per_category[cat.name] += 1
        if per_category:
            self.lines.append("Failures by category: " + "; ".join(f"{name}: {n}" for name, n in per_category.items()))
        # The API's SHOULDs the implementation does not meet: reported, never counted as failures.
        not_met = sorted((cr.short_name(rec.nodeid), rec.properties[should.PROPERTY]) for rec in self.records.values()
                         if should.PROPERTY in rec.properties)
        if not_met:
            self.lines.append(f"SHOULD not met (reported, not failed): {len(not_met)}")
            self.lines.extend(f"  {name}: {line}" for name, line in not_met)
        self.lines.append(f"Results: {self.results_dir}")
        log = self.suite.implementation_log
        if log is not None and log.exists():  # what the implementation the suite started said, so far
            self.results_dir.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(log, self.results_dir / "implementation.log")

        # The ConformanceReport.
        missing = cr.missing_metadata(implementation)
        if missing:
            self.lines.append("ConformanceReport: not written, the implementation's metadata is not given "
                              "(--organization, --project, --url, --implementation-version, --contact)")
        else:
            for api, profile in profiles.items():
                version = facts.judged.get(api, {}).get("extension_version", "unknown") if api else \
                    facts.extension_version
                doc = cr.build(implementation=implementation, extension_version=version,
                               gateway_api_version=facts.gateway_api_version,
                               gateway_api_channel=facts.gateway_api_channel, mode=opts.mode, profiles=[profile],
                               date=date, notes=tuple(run_notes))
                path = self._report_file(doc, api, several=len(profiles) > 1)
                _atomic_write(path, cr.dump(doc))
                self.lines.append(f"ConformanceReport{f' ({api})' if len(profiles) > 1 else ''}: {path}")

        # Allure's environment and categories, next to the workers' results.
        if self.allure_dir is not None:
            self.allure_dir.mkdir(parents=True, exist_ok=True)
            _atomic_write(self.allure_dir / "environment.properties",
                          artifacts.environment_properties(facts, impl_text, opts.mode))
            _atomic_write(self.allure_dir / "categories.json", artifacts.categories_json())
            self.lines.append(f"Allure results: {self.allure_dir}")
        if self.config.option.xmlpath:
            self.lines.append(f"JUnit XML: {self._path(Path(self.config.option.xmlpath))}")

        # The HTML page.
        attachments = self._attachments()
        rows = []
        for t in tests:
            rec = self.records.get(t.key)
            if rec is None:
                rows.append(html_report.Row(t.name, t.key, t.tier, "not-run", t.rules, t.areas,
                                            reason=why_not_run.get(t.key, "")))
                continue
            outcome, reason = outcomes[t.key]
            if should.PROPERTY in rec.properties and not reason:
                reason = f"SHOULD not met (reported, not failed): {rec.properties[should.PROPERTY]}"
            cat = artifacts.categorize(outcome, rec.assertion, rec.text)
            rows.append(html_report.Row(t.name, rec.nodeid, t.tier, outcome, t.rules, t.areas, rec.duration,
                                        reason, rec.text, cat.name if cat else "",
                                        attachments.get(rec.nodeid, [])))
        shown = [dataclasses.replace(p, name=f"{p.name} ({api})") if api else p for api, p in profiles.items()]
        page = html_report.render(title="InferencePool conformance", facts=facts, implementation=impl_text,
                                  mode=opts.mode, date=date, profiles=shown, rows=rows, notes=notes)
        html_path = self.results_dir / "report.html"
        _atomic_write(html_path, page)
        self.lines.append(f"HTML report: {html_path}")
        if not self.opts.results_dir:
            self._link_latest()
            prune_results(self.results_dir.parent, keep=KEEP_RUNS)

    def _report_file(self, doc: dict, api: str, several: bool) -> Path:
        """Where an API's ConformanceReport goes: --report-output (with the API's name before the
        suffix when the run judged several APIs), else the results directory (in a folder per
        API, named as reports/ names it, the API's GIE release, when there are several)."""
        if self.report_path is not None:
            path = self.report_path
            return path.with_name(f"{path.stem}-{api}{path.suffix}") if several else path
        if several:
            return self.results_dir / doc[cr.EXTENSION_VERSION_KEY] / cr.file_name(doc)
        return self.results_dir / cr.file_name(doc)

    def _attachments(self) -> dict:
        if self.allure_dir is None:
            return {}
        return artifacts.read_allure(self.allure_dir, run=self.run_id)

    def _link_latest(self) -> None:
        latest = self.results_dir.parent / "latest"
        tmp = self.results_dir.parent / f".latest.{os.getpid()}"
        try:
            if tmp.is_symlink():
                tmp.unlink()
            tmp.symlink_to(self.results_dir.name)
            os.replace(tmp, latest)
        except OSError:
            pass  # a convenience only


def _first_error_line(text: str) -> str:
    """The line that says what went wrong: pytest's first `E` line, or the message's first line."""
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    for ln in lines:
        if ln.startswith("E "):
            return ln[1:].strip()
    return lines[0].strip() if lines else ""
