"""The ConformanceReport model, the results files and the HTML page, on plain data."""

import json
import re
from pathlib import Path

import pytest
import yaml

from conformance import revisions
from conformance.results import artifacts as results
from conformance.results import html_report, inventory, report
from conformance.results.report import Phase, ProfileTest

META = {"organization": "acme", "project": "gw", "url": "https://example.com/gw", "version": "v1.2.0",
        "contact": ["@acme/gw"]}


def core(name, key=None, rules=("C1",)):
    return ProfileTest(key=key or f"test_x.py::test_{name}", name=name, tier="core", rules=rules,
                       features=("SupportInferencePool",))


def extended(name):
    return ProfileTest(key=f"test_x.py::test_{name}", name=name, tier="extended", rules=("C1",),
                       features=("SupportSomethingElse",))


def build(profile, **kw):
    args = dict(implementation=META, extension_version="v0.0.0-seed", gateway_api_version="v1.3.0",
                gateway_api_channel="standard", mode="default", profiles=[profile], date="2025-01-31T12:00:00Z")
    args.update(kw)
    return report.build(**args)


# -- names and tiers ---------------------------------------------------------------


def test_short_names_and_keys():
    nodeid = "conformance/tests/test_schema.py::test_schema_spec[selector-missing[create]]"
    assert report.short_name(nodeid) == "schema_spec[selector-missing[create]]"
    assert report.key_of(nodeid) == "test_schema.py::test_schema_spec[selector-missing[create]]"
    assert report.short_name("a/test_pool.py::test_pool_accepted") == "pool_accepted"


def test_tiers():
    core_features = {"SupportInferencePool"}
    assert report.tier_of(("S1",), (), core_features) == "core"  # schema: core API behaviour
    assert report.tier_of(("D3",), (), core_features) == "core"
    assert report.tier_of(("C1",), ("SupportInferencePool",), core_features) == "core"
    assert report.tier_of(("C1",), ("SupportInferencePool", "SupportX"), core_features) == "extended"
    assert report.tier_of((), ("SupportInferencePool",), core_features) is None  # no rule: not in the profile
    assert report.areas_of(("S1", "D2", "S3", "C1", "X1", "T5")) == ("schema", "defaulting", "status", "externalname",
                                                                "traffic")


# -- outcomes ----------------------------------------------------------------------


@pytest.mark.parametrize(("phases", "expected"), [
    ([Phase("setup", "passed"), Phase("call", "passed"), Phase("teardown", "passed")], "passed"),
    ([Phase("setup", "passed"), Phase("call", "failed", "boom"), Phase("teardown", "passed")], "failed"),
    ([Phase("setup", "failed", "no cluster"), Phase("teardown", "passed")], "failed"),
    ([Phase("setup", "passed"), Phase("call", "passed"), Phase("teardown", "failed", "cleanup")], "failed"),
    ([Phase("setup", "skipped", "skipped by --skip-tests x"), Phase("teardown", "passed")], "skipped"),
    ([Phase("setup", "skipped", "not-supported: no SupportX")], "not-supported"),
    ([Phase("call", "skipped", "not-applicable: case does not apply")], "not-applicable"),
    ([Phase("setup", "passed")], "skipped"),  # interrupted during the call: never completed
])
def test_outcome_of(phases, expected):
    assert report.outcome_of(phases)[0] == expected


def test_not_applicable_prefix_is_the_revisions_one():
    assert revisions.NOT_APPLICABLE_PREFIX == "not-applicable:"


def test_skip_reason():
    assert report.skip_reason(("f.py", 3, "Skipped: not-supported: x")) == "not-supported: x"
    assert report.skip_reason("Skipped: why") == "why"


# -- counting ----------------------------------------------------------------------


def test_count_full_success():
    tests = [core("a"), core("b")]
    p = report.count(tests, {t.key: ("passed", "") for t in tests})
    assert (p.core.result, p.core.passed, p.extended, p.not_run) == ("success", ["a", "b"], None, 0)


def test_count_failure_wins_over_skips():
    tests = [core("a"), core("b"), core("c")]
    outcomes = {tests[0].key: ("failed", "x"), tests[1].key: ("skipped", "y")}
    p = report.count(tests, outcomes)
    assert (p.core.result, p.core.failed, p.core.skipped, p.not_run) == ("failure", ["a"], ["b", "c"], 1)


def test_partial_run_is_never_success():
    tests = [core("a"), core("b")]
    p = report.count(tests, {tests[0].key: ("passed", "")})  # b deselected or never reached
    assert p.core.result == "partial" and p.core.skipped == ["b"] and p.not_run == 1


def test_not_supported_and_not_applicable():
    tests = [core("a"), core("b"), extended("e"), extended("f")]
    outcomes = {tests[0].key: ("not-applicable", ""), tests[1].key: ("not-supported", "exempted"),
                tests[2].key: ("not-supported", ""), tests[3].key: ("passed", "")}
    p = report.count(tests, outcomes)
    # A core feature cannot be unsupported, only exempted: that is a skip.
    assert p.core.skipped == ["b"] and p.core.passed == []
    # Extended: not-supported is not counted.
    assert p.extended is not None
    assert (p.extended.passed, p.extended.skipped, p.extended.result) == (["f"], [], "success")


# -- the document ------------------------------------------------------------------


def test_report_has_exact_upstream_shape():
    tests = [core("a"), core("b"), core("c")]
    p = report.count(tests, {tests[0].key: ("passed", ""), tests[1].key: ("failed", "x")})
    doc = build(p)
    assert set(doc) == report.TOP_KEYS
    assert doc["apiVersion"] == "gateway.networking.k8s.io/v1" and doc["kind"] == "ConformanceReport"
    assert doc["GatewayAPIInferenceExtensionVersion"] == "v0.0.0-seed"
    assert doc["implementation"] == META
    [profile] = doc["profiles"]
    assert set(profile) == {"name", "summary", "core"} and profile["name"] == "Gateway"
    assert profile["core"] == {"result": "failure", "statistics": {"Passed": 1, "Failed": 1, "Skipped": 1},
                               "failedTests": ["b"], "skippedTests": ["c"]}
    assert report.validate(doc) == []


def test_yaml_text_is_sorted_like_go_and_round_trips():
    tests = [core("a")]
    doc = build(report.count(tests, {tests[0].key: ("passed", "")}))
    text = report.dump(doc)
    top = [line.split(":")[0] for line in text.splitlines() if re.match(r"^\w", line)]
    assert top == ["GatewayAPIInferenceExtensionVersion", "apiVersion", "date", "gatewayAPIChannel",
                   "gatewayAPIVersion", "implementation", "kind", "mode", "profiles"]
    assert "      Failed: 0\n      Passed: 1\n      Skipped: 0\n" in text
    assert yaml.safe_load(text) == doc
    assert isinstance(yaml.safe_load(text)["date"], str)  # quoted, not a YAML timestamp
    assert "skippedTests" not in text and "failedTests" not in text  # empty lists are left out


def test_extended_section_only_with_extended_tests():
    tests = [core("a"), extended("e")]
    doc = build(report.count(tests, {t.key: ("passed", "") for t in tests}))
    assert doc["profiles"][0]["extended"]["statistics"] == {"Passed": 1, "Failed": 0, "Skipped": 0}


def test_file_name_and_rfc3339():
    tests = [core("a")]
    doc = build(report.count(tests, {}), mode="experimental")
    assert report.file_name(doc) == "v1.2.0-experimental-gateway-report.yaml"
    from datetime import datetime, timedelta, timezone

    moment = datetime(2025, 1, 31, 13, 0, 5, 123, tzinfo=timezone(timedelta(hours=1)))
    assert report.rfc3339(moment) == "2025-01-31T12:00:05Z"


def test_incomplete_metadata_is_refused():
    with pytest.raises(ValueError, match="missing url, contact"):
        build(report.count([core("a")], {}), implementation={**META, "url": "", "contact": []})


def test_summary_says_partial_run():
    tests = [core("a"), core("b")]
    p = report.count(tests, {tests[0].key: ("passed", "")})
    text = report.summary(p, ("1 deselected (-k, -m, --deselect or --run-test)",))
    assert "core partial: 1 passed, 0 failed, 1 skipped" in text and "1 deselected" in text


@pytest.mark.parametrize(("mutate", "problem"), [
    (lambda d: d.pop("mode"), "missing key(s) mode"),
    (lambda d: d.update(extra=1), "unknown key(s) extra"),
    (lambda d: d.update(date="yesterday"), "not an RFC 3339"),
    (lambda d: d["implementation"].update(contact=[]), "contact: must be a non-empty list"),
    (lambda d: d["profiles"][0]["core"].update(result="success"), "does not follow from"),
    (lambda d: d["profiles"][0]["core"]["statistics"].update(Failed=0), "lists 1 test(s) but statistics.Failed is 0"),
    (lambda d: d["profiles"][0]["core"]["statistics"].update(Passed=-1), "non-negative integer"),
    (lambda d: d["profiles"][0].update(name="HTTP"), "not a known profile"),
    (lambda d: d.update(kind="Report"), "expected ConformanceReport"),
    (lambda d: d["implementation"].update(version="1.0 beta"), "must be one word"),
])
def test_validate_finds_problems(mutate, problem):
    tests = [core("a"), core("b")]
    doc = build(report.count(tests, {tests[0].key: ("failed", "x"), tests[1].key: ("passed", "")}))
    mutate(doc)
    assert any(problem in p for p in report.validate(doc)), report.validate(doc)


# -- scope and inventory -------------------------------------------------------------


def test_scope(tmp_path):
    suite = tmp_path / "conformance" / "tests"
    suite.mkdir(parents=True)
    (suite / "test_a.py").write_text("")
    assert inventory.scope(["conformance/tests"], tmp_path, suite) == "full"
    assert inventory.scope([str(tmp_path)], tmp_path, suite) == "full"  # the rootdir holds the suite
    assert inventory.scope(["."], tmp_path / "conformance", suite) == "full"
    assert inventory.scope(["conformance/tests/test_a.py"], tmp_path, suite) == "partial"
    assert inventory.scope(["conformance/tests::x"], tmp_path, suite) == "partial"
    assert inventory.scope(["tests"], tmp_path, suite) == "none"


def test_inventory_json_round_trip():
    tests = [core("a", rules=("C1", "C2")), extended("e")]
    assert inventory.from_json(inventory.to_json(tests)) == tests


# -- results files -------------------------------------------------------------------


def test_environment_properties():
    facts = results.Facts(kubernetes_version="v1.35.4", api_revision="seed", api_revision_title="seed API",
                          extension_version="v0.0.0-seed", gateway_api_version="v1.3.0", gateway_api_channel="standard",
                          cluster="embedded control plane", gateway_class="reference")
    text = results.environment_properties(facts, "acme/gw v1.2.0", "default")
    props = dict(line.split("=", 1) for line in text.splitlines())
    assert props["Kubernetes.version"] == "v1.35.4" and props["API.revision"] == "seed (seed API)"
    assert props["Gateway.API.bundle"] == "v1.3.0 (standard channel)" and props["GatewayClass"] == "reference"
    assert props["Implementation"] == "acme/gw v1.2.0" and props["Extension.version"] == "v0.0.0-seed"
    assert results.Facts.from_dict(facts.to_dict()) == facts


@pytest.mark.parametrize(("assertion", "text", "expected"), [
    (False, "cannot reach https://127.0.0.1:1: Connection refused", "Environment: cluster unreachable"),
    (False, "urllib3.exceptions.ReadTimeoutError: Read timed out.", "Environment: API request timed out"),
    (True, "timed out after 180.0s waiting for GatewayClass reference to be Accepted",
     "Environment: implementation not ready"),
    (True, "timed out after 30.0s waiting for Service ns/picker to be deleted", "Environment: cleanup timed out"),
    (True, "timed out after 300.0s waiting for InferencePool ns/pool\nexpected: ResolvedRefs=False",
     "Implementation defect"),
    (True, "case x: expected HTTP 422 rejecting spec.selector, but the server accepted it", "Implementation defect"),
    (False, "KeyError: 'metadata'", "Suite or environment error"),
])
def test_categories(assertion, text, expected):
    assert results.categorize("failed", assertion, text).name == expected
    assert results.categorize("passed", True, text) is None


def test_categories_json_matches_what_allure_expects():
    doc = json.loads(results.categories_json())
    names = [c["name"] for c in doc]
    assert names == [c.name for c in results.CATEGORIES]
    for c in doc:
        assert set(c["matchedStatuses"]) <= {"failed", "broken", "skipped", "passed"}
        if "traceRegex" in c:  # Allure matches the whole text
            assert (re.fullmatch(c["traceRegex"], "line one\ncannot reach x\nline three")
                    or "cannot reach" not in c["traceRegex"])


def test_read_allure_matches_nodeid_and_run(tmp_path):
    (tmp_path / "a-attachment.yaml").write_text("kind: InferencePool\n")
    (tmp_path / "b-attachment.yaml").write_text("events: []\n")
    (tmp_path / "1-result.json").write_text(json.dumps({
        "uuid": "u1", "labels": [{"name": "nodeid", "value": "t.py::test_a"}, {"name": "run", "value": "r1"}],
        "steps": [{"attachments": [{"name": "applied manifests", "source": "a-attachment.yaml"}]}]}))
    (tmp_path / "2-result.json").write_text(json.dumps({
        "uuid": "u2", "labels": [{"name": "nodeid", "value": "t.py::test_a"}, {"name": "run", "value": "old"}],
        "attachments": [{"name": "stale", "source": "a-attachment.yaml"}]}))
    (tmp_path / "3-container.json").write_text(json.dumps({
        "children": ["u1"], "afters": [{"name": "namespace", "attachments": [
            {"name": "events in ns", "source": "b-attachment.yaml"}]}]}))
    found = results.read_allure(tmp_path, run="r1")
    assert [(a.name, a.body) for a in found["t.py::test_a"]] == [
        ("applied manifests", "kind: InferencePool\n"), ("events in ns", "events: []\n")]
    assert results.read_allure(tmp_path / "missing") == {}


# -- the HTML page ---------------------------------------------------------------------


def test_html_page_is_self_contained_and_escaped():
    tests = [core("a"), core("b"), core("c")]
    p = report.count(tests, {tests[0].key: ("passed", ""), tests[1].key: ("failed", "x")})
    rows = [html_report.Row("a", "t.py::test_a", "core", "passed", ("C1",), ("status",), 1.5),
            html_report.Row("b", "t.py::test_b", "core", "failed", ("C2",), ("status",), 2.0, "boom <b>",
                            "E   AssertionError: <script>alert(1)</script>", "Implementation defect",
                            [results.Attachment("last observed object", "kind: InferencePool")]),
            html_report.Row("c", "t.py::test_c", "core", "not-run", reason="deselected")]
    page = html_report.render(title="InferencePool conformance", facts=results.Facts(), implementation="acme/gw",
                              mode="default", date="2025-01-31T12:00:00Z", profiles=[p], rows=rows,
                              notes=["1 deselected"])
    assert "<script>alert" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert not re.search(r"""(src|href)=["']?https?:""", page)  # nothing fetched
    order = [page.index(f"data-outcome='{outcome}'") for outcome in ("failed", "not-run", "passed")]
    assert order == sorted(order)
    assert "last observed object" in page and "Implementation defect" in page and "1 deselected" in page


# -- the reports/ tree in this repository ----------------------------------------------


def test_published_reports_pass_the_checker():
    from conformance.results.publication import check_tree

    root = Path(__file__).resolve().parents[1] / "reports"
    assert check_tree(root) == []


def test_scope_with_pyargs():
    assert inventory.scope(["conformance.tests"], Path("/"), pyargs=True) == "full"
    assert inventory.scope(["conformance.tests.test_pool_accepted"], Path("/"), pyargs=True) == "partial"
    assert inventory.scope(["no.such.module"], Path("/"), pyargs=True) == "none"


def test_default_results_dirs_are_pruned(tmp_path):
    from conformance.results.reporting import default_results_dir, prune_results

    dirs = [default_results_dir(tmp_path, f"{i:06x}", now=1_700_000_000 + i) for i in range(5)]
    for d in dirs:
        d.mkdir(parents=True)
    (tmp_path / "reports" / "out" / "mine").mkdir()  # not a run directory: never touched
    removed = prune_results(tmp_path / "reports" / "out", keep=3)
    assert removed == dirs[:2] and all(d.is_dir() for d in dirs[2:])
    assert (tmp_path / "reports" / "out" / "mine").is_dir()
