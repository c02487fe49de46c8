"""Command-line options, with the names of the upstream Go conformance suites.

`add_options` registers them with pytest; `from_config` reads, merges (an
options file below the command line) and checks them into one frozen
`Options`. Every bad value becomes an `OptionError` whose message is one line
saying what is wrong and what to do.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from .timeouts import TimeoutConfig

DEFAULT_GATEWAY_CLASS = "reference"  # the embedded reference implementation's class
# The model servers of the status topology (manifests/status/) run Gateway API's echo server, the
# backend upstream GIE's conformance suite uses (conformance/resources/base.yaml there).
DEFAULT_MODEL_SERVER_IMAGE = "gcr.io/k8s-staging-gateway-api/echo-basic:v20251106-v1.3.0-263-g47c3435c"
# The traffic tier's endpoint picker: upstream's EPP, which its conformance suite runs with the test
# plugins (the embedded cluster builds this version from the Go module proxy: conformance.traffic.epp).
DEFAULT_EPP_IMAGE = "registry.k8s.io/gateway-api-inference-extension/epp:v1.4.0"
# The traffic tier's sentinel (rule T5): a container that exits on its first accepted connection, so that
# a connection shows in the Pod's status. Busybox's `nc -l -p PORT -e false` does that; this is the busybox
# image of the Kubernetes end-to-end tests (registry.k8s.io, not rate-limited like Docker Hub).
DEFAULT_SENTINEL_IMAGE = "registry.k8s.io/e2e-test-images/busybox:1.36.1-1"


class OptionError(ValueError):
    pass


def _bool(value) -> bool:
    if isinstance(value, bool):
        return value
    v = str(value).strip().lower()
    if v in ("1", "true", "yes", "on"):
        return True
    if v in ("0", "false", "no", "off"):
        return False
    raise ValueError(value)


# name -> (kind, default, help). kind: str, bool, list, map
_FLAGS: dict[str, tuple[str, object, str]] = {
    "gateway-class": ("str", None, "GatewayClass of the implementation under test (default: the embedded reference "
                                   "implementation's 'reference')"),
    "supported-features": ("list", None, "comma-separated features the implementation supports (default: read from "
                                         "the GatewayClass status.supportedFeatures)"),
    "exempt-features": ("list", None, "comma-separated features not to test"),
    "all-features": ("bool", False, "test every feature"),
    "skip-tests": ("list", None, "comma-separated short names of tests to skip"),
    "run-test": ("str", None, "run only the test with this short name"),
    "cleanup-base-resources": ("bool", True, "delete base resources (shared namespaces) after the run"),
    "cleanup-test-resources": ("bool", True, "delete each test's namespace and objects after it (false keeps them "
                                             "for debugging)"),
    "debug": ("bool", False, "log every API request and wait"),
    "namespace-labels": ("map", None, "comma-separated key=value labels for the namespaces the suite creates"),
    "namespace-annotations": ("map", None,
                              "comma-separated key=value annotations for the namespaces the suite creates"),
    "model-server-image": ("str", DEFAULT_MODEL_SERVER_IMAGE,
                           "image of the model-server Pods the status tests' pools select; it is given HTTP_PORT=8000, "
                           "the pools' target port (default: Gateway API's echo server, "
                           f"{DEFAULT_MODEL_SERVER_IMAGE})"),
    "epp-image": ("str", DEFAULT_EPP_IMAGE, "image of the traffic tier's endpoint picker Pods (upstream's EPP, run "
                                            f"with its conformance plugins; default: {DEFAULT_EPP_IMAGE})"),
    "sentinel-image": ("str", DEFAULT_SENTINEL_IMAGE,
                       "image of the traffic tier's sentinel Pod, which must exit on its first connection: it runs "
                       "busybox's `nc -l -p PORT -e false` and `sh -c 'netstat -ltn | grep ...'` as readiness probe "
                       f"(default: {DEFAULT_SENTINEL_IMAGE})"),
    "skip-traffic": ("bool", False, "leave out the traffic tier (requests through the gateway's data plane)"),
    "conformance-profiles": ("list", None, "comma-separated conformance profiles to run (known: Gateway)"),
    "report-output": ("str", None, "write the ConformanceReport YAML to this file (default: "
                                   "<results-dir>/<version>-<mode>-<profile>-report.yaml when the implementation "
                                   "metadata is given)"),
    "organization": ("str", None, "implementation's organization, for the report"),
    "project": ("str", None, "implementation's project, for the report"),
    "url": ("str", None, "implementation's URL, for the report"),
    "version": ("str", None, "implementation's version, for the report"),
    "contact": ("list", None, "comma-separated contacts for the report"),
    "mode": ("str", "default", "implementation mode, for the report (one word; it names the report file)"),
    "allow-crds-mismatch": ("bool", False, "go on when the installed CRDs match no known API revision"),
    "skip-provisional-tests": ("bool", False, "skip tests marked provisional"),
    "fail-fast": ("bool", False, "stop at the first failure"),
    "timeout-config-overrides": ("str", None, "override timeouts: Name:seconds;Name:seconds"),
    "conformance-options-file": ("str", None, "YAML file with any of these options (the command line wins)"),
    "kubeconfig": ("str", None,
                   "kubeconfig of the cluster to test (default: $KUBECONFIG; none: start the embedded cluster)"),
    "context": ("str", None, "kubeconfig context to use"),
    "api-revision": ("list", None,
                     "comma-separated InferencePool API revisions to judge, at most one per API (e.g. seed,v1.6); "
                     "default: every API installed, its revision detected from the CRD (embedded: seed,v1.6)"),
    "results-dir": ("str", None, "directory for the run's JUnit XML, Allure results, HTML page and report (default: "
                                 "reports/out/<UTC time>-<run id>/ under pytest's rootdir: the checkout, or the "
                                 "directory an installed suite runs in)"),
    "implementation-command": ("str", None, "on the embedded cluster, start this command as the implementation under "
                                            "test ({kubeconfig} is replaced by the kubeconfig path, {api_revision} by "
                                            "the judged API revisions' names, comma-separated; {envoy_config_dir} and "
                                            "{gateway_addresses} by the traffic tier's, see docs/traffic.md)"),
}

# pytest owns --debug and --version, so on the command line these two carry a
# prefix; options files use the upstream names.
CLI_NAMES = {"debug": "conformance-debug", "version": "implementation-version"}

PROFILES = ("Gateway",)
_LABEL_KEY = re.compile(r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
                        r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
_TOKEN = re.compile(r"^[A-Za-z0-9][-A-Za-z0-9_.+]*$")  # same rule as conformance.results.report
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
# An image reference: [registry[:port]/]path[:tag][@digest] (the grammar of distribution/reference).
_IMAGE_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_IMAGE_DOMAIN = (r"(?:[A-Za-z0-9]|[A-Za-z0-9][-A-Za-z0-9]*[A-Za-z0-9])"
                 r"(?:\.(?:[A-Za-z0-9]|[A-Za-z0-9][-A-Za-z0-9]*[A-Za-z0-9]))*(?::[0-9]+)?")
_IMAGE = re.compile(rf"^(?:{_IMAGE_DOMAIN}/)?{_IMAGE_COMPONENT}(?:/{_IMAGE_COMPONENT})*"
                    r"(?::[\w][\w.-]{0,127})?(?:@[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,})?$")


# Command-line flags that only a pytest run has (an options file has none of them): name -> help.
RUN_FLAGS: dict[str, str] = {
    "rule-coverage": "print which collected tests check each SPEC rule, then stop",
}

# How `--help` groups the options, in this order (pytest's and `python -m conformance`'s alike; the
# README's "Options" lists them the same way): (group name, heading, the flags in it).
GROUPS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("conformance-cluster", "InferencePool conformance: the cluster under test",
     ("kubeconfig", "context", "api-revision", "allow-crds-mismatch")),
    ("conformance-implementation", "InferencePool conformance: the implementation under test",
     ("gateway-class", "implementation-command", "supported-features", "exempt-features", "all-features",
      "model-server-image", "epp-image", "sentinel-image")),
    ("conformance-selection", "InferencePool conformance: which tests run",
     ("conformance-profiles", "run-test", "skip-tests", "skip-provisional-tests", "skip-traffic", "fail-fast",
      "rule-coverage")),
    ("conformance-reports", "InferencePool conformance: results and the ConformanceReport",
     ("results-dir", "report-output", "organization", "project", "url", "version", "contact", "mode")),
    ("conformance-run", "InferencePool conformance: how the suite runs",
     ("conformance-options-file", "timeout-config-overrides", "cleanup-base-resources", "cleanup-test-resources",
      "namespace-labels", "namespace-annotations", "debug")),
)


_METAVARS = {"bool": "true|false", "list": "A,B", "map": "K=V,K=V"}


def add_options(parser) -> None:
    """Register the options with pytest's parser (or anything with its `getgroup(name, heading).addoption`)."""
    for group_name, heading, names in GROUPS:
        group = parser.getgroup(group_name, heading)
        for name in names:
            if name in RUN_FLAGS:
                group.addoption(f"--{name}", action="store_true", default=False, dest=name.replace("-", "_"),
                                help=RUN_FLAGS[name])
                continue
            kind, _default, help_ = _FLAGS[name]
            kw: dict = {"dest": "ipc_" + name.replace("-", "_"), "default": None, "help": help_,
                        "metavar": _METAVARS.get(kind, name.upper().replace("-", "_"))}
            if kind == "bool":
                kw.update(nargs="?", const="true")
            group.addoption(f"--{CLI_NAMES.get(name, name)}", **kw)


def bare_bools_to_true(args: list[str]) -> None:
    """Give bare boolean flags Go's meaning (`--fail-fast` is `--fail-fast=true`), in place.

    argparse would otherwise take the next argument (often a test path) as the
    flag's value. Runs before pytest parses the command line.
    """
    bare = {f"--{CLI_NAMES.get(n, n)}" for n, (kind, _d, _h) in _FLAGS.items() if kind == "bool"}
    for i, arg in enumerate(args):
        if arg == "--":
            break
        if arg in bare:
            args[i] = f"{arg}=true"


def given_on_command_line(args) -> bool:
    """Whether any of the suite's options is among these command-line arguments."""
    flags = {f"--{CLI_NAMES.get(n, n)}" for n in _FLAGS} | {f"--{n}" for n in RUN_FLAGS}
    return any(str(a).split("=", 1)[0] in flags for a in args)


def path_values_taken_for_tests(args: list[str]) -> str | None:
    """The first `--option VALUE` (apart) whose VALUE is an existing path, as `--option=VALUE`.

    pytest chooses its rootdir and configuration file from the command line's
    paths before it loads this plugin; it then reads such a VALUE as a test
    path, and when that lies outside the project it loses the project's
    configuration (test paths, options) without a word.
    """
    valued = {f"--{CLI_NAMES.get(n, n)}" for n, (kind, _d, _h) in _FLAGS.items() if kind != "bool"}
    for arg, value in zip(args, args[1:], strict=False):
        if arg == "--":
            break
        if arg in valued and not value.startswith("-") and os.path.exists(value):
            return f"{arg}={value}"
    return None


@dataclass(frozen=True)
class Options:
    gateway_class: str | None
    supported_features: tuple[str, ...] | None
    exempt_features: tuple[str, ...]
    all_features: bool
    skip_tests: tuple[str, ...]
    run_test: str | None
    cleanup_base_resources: bool
    cleanup_test_resources: bool
    debug: bool
    namespace_labels: dict[str, str]
    namespace_annotations: dict[str, str]
    conformance_profiles: tuple[str, ...]
    model_server_image: str
    epp_image: str
    sentinel_image: str
    skip_traffic: bool
    report_output: Path | None
    organization: str | None
    project: str | None
    url: str | None
    version: str | None
    contact: tuple[str, ...]
    mode: str
    allow_crds_mismatch: bool
    skip_provisional_tests: bool
    fail_fast: bool
    timeouts: TimeoutConfig = field(default_factory=TimeoutConfig)
    kubeconfig: str | None = None
    context: str | None = None
    api_revisions: tuple[str, ...] = ()  # forced by --api-revision; empty: detect every installed API
    implementation_command: str | None = None
    results_dir: Path | None = None

    @property
    def embedded(self) -> bool:
        return self.kubeconfig is None

    @property
    def implementation_metadata_missing(self) -> list[str]:
        return [n for n in ("organization", "project", "url", "version") if not getattr(self, n)] + (
            [] if self.contact else ["contact"])


def _load_file(path: str) -> dict:
    p = Path(path)
    try:
        doc = yaml.safe_load(p.read_text())
    except OSError as e:
        raise OptionError(f"--conformance-options-file {path}: cannot read it ({e.strerror}); pass a readable "
                          "YAML file") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise OptionError(f"--conformance-options-file {path}: not valid YAML{where}; fix the file") from None
    if doc is None:
        return {}
    if not isinstance(doc, dict):
        raise OptionError(f"--conformance-options-file {path}: must be a mapping of option names to values")
    unknown = sorted(k for k in doc if str(k) not in _FLAGS or k == "conformance-options-file")
    if unknown:
        raise OptionError(f"--conformance-options-file {path}: unknown option(s) {', '.join(map(str, unknown))}; "
                          "use the command-line names, e.g. gateway-class")
    return doc


def _convert(name: str, kind: str, raw) -> object:
    flag = CLI_NAMES.get(name, name)  # as the user types it on the command line
    if kind == "str":
        if isinstance(raw, (dict, list)):
            raise OptionError(f"--{flag} takes one value, not {type(raw).__name__}")
        if isinstance(raw, float):  # YAML reads `version: 1.10` as 1.1
            raise OptionError(f"--{flag}: {raw!r} was read as a number from the options file; quote the value "
                              "(\"1.10\", not 1.10)")
        value = str(raw).strip()
        if not value:
            raise OptionError(f"--{flag} is empty; give a value or leave the option out")
        return value
    if kind == "bool":
        try:
            return _bool(raw)
        except ValueError:
            hint = ""
            if isinstance(raw, str) and ("/" in raw or raw.endswith(".py") or os.path.exists(raw)):
                # argparse gave the flag the path that followed it
                hint = f" (a bare --{flag} takes the next argument: write --{flag}=true before a path)"
            raise OptionError(f"--{flag}={raw!r} is not a boolean; use true or false{hint}") from None
    if kind == "list":
        items = raw if isinstance(raw, list) else str(raw).split(",")
        items = [str(i).strip() for i in items]
        if any(not i for i in items):
            raise OptionError(f"--{flag}={raw!r} has an empty entry; use a comma-separated list like A,B")
        return tuple(items)
    if kind == "map":
        if isinstance(raw, dict):
            pairs = [(str(k), str(v)) for k, v in raw.items()]
        else:
            pairs = []
            for part in str(raw).split(","):
                k, sep, v = part.strip().partition("=")
                if not sep or not k:
                    raise OptionError(f"--{flag}: {part.strip()!r} is not key=value; use k1=v1,k2=v2")
                pairs.append((k.strip(), v.strip()))
        for k, v in pairs:
            if not _LABEL_KEY.match(k) or len(k) > 253:
                raise OptionError(f"--{flag}: {k!r} is not a valid label or annotation key")
            if name == "namespace-labels" and (len(v) > 63 or not _LABEL_VALUE.match(v)):
                raise OptionError(f"--{flag}: {v!r} is not a valid label value")
        return dict(pairs)
    raise AssertionError(kind)


def from_config(config, known_features: frozenset[str], known_tests: frozenset[str] | None = None,
                known_revisions: dict[str, str] | None = None) -> Options:
    """The run's options; `known_revisions` maps each revision name to its API's name."""
    cli = {name: config.getoption("ipc_" + name.replace("-", "_")) for name in _FLAGS}
    merged: dict = {}
    if cli["conformance-options-file"]:
        merged.update(_load_file(cli["conformance-options-file"]))
    merged.update({k: v for k, v in cli.items() if v is not None})
    values: dict = {}
    for name, (kind, default, _h) in _FLAGS.items():
        raw = merged.get(name)
        values[name] = default if raw is None else _convert(name, kind, raw)

    for opt in ("supported-features", "exempt-features"):
        unknown = sorted(set(values[opt] or ()) - known_features)
        if unknown:
            raise OptionError(f"--{opt}: unknown feature(s) {', '.join(unknown)} "
                              f"(known: {', '.join(sorted(known_features))})")
    if values["all-features"] and values["supported-features"]:
        raise OptionError("--all-features and --supported-features exclude each other; give one")
    profiles = values["conformance-profiles"] or PROFILES
    bad = sorted(set(profiles) - set(PROFILES))
    if bad:
        raise OptionError(f"--conformance-profiles: unknown profile(s) {', '.join(bad)} (known: {', '.join(PROFILES)})")
    if known_tests is not None:
        for t in [values["run-test"], *(values["skip-tests"] or ())]:
            if t and t not in known_tests:
                raise OptionError(f"unknown test {t!r} in --run-test/--skip-tests; list them with "
                                  "`python -m conformance tests`")
    if known_revisions is not None:
        unknown = [r for r in values["api-revision"] or () if r not in known_revisions]
        if unknown:
            raise OptionError(f"--api-revision={','.join(unknown)}: unknown "
                              f"(known: {', '.join(known_revisions)})")
        apis = [known_revisions[r] for r in values["api-revision"] or ()]
        twice = sorted({a for a in apis if apis.count(a) > 1})
        if twice:
            raise OptionError(f"--api-revision={','.join(values['api-revision'])}: more than one revision of API "
                              f"{', '.join(twice)}; give at most one per API")
    timeouts = TimeoutConfig()
    if values["timeout-config-overrides"]:
        try:
            timeouts = timeouts.with_overrides(values["timeout-config-overrides"])
        except ValueError as e:
            raise OptionError(f"--timeout-config-overrides: {e}") from None
    report = values["report-output"]
    if report:
        target = Path(report).expanduser().resolve()
        parent = target.parent
        if not parent.is_dir() or not os.access(parent, os.W_OK):
            raise OptionError(f"--report-output={report}: directory {parent} does not exist or is not writable")
        if target.is_dir():
            raise OptionError(f"--report-output={report} is a directory; give the report's file name")
    # A report names its implementation; asked for one, or given part of the
    # metadata, all of it must be there before anything runs.
    metadata = {"organization": values["organization"], "project": values["project"], "url": values["url"],
                "version": values["version"], "contact": values["contact"]}
    missing = [CLI_NAMES.get(k, k) for k, v in metadata.items() if not v]
    if missing and (report or len(missing) < len(metadata)):
        raise OptionError(f"a ConformanceReport needs the implementation's metadata; missing: "
                          f"{', '.join('--' + m for m in missing)}")
    for name in ("version", "mode"):
        if values[name] and not _TOKEN.match(values[name]):
            raise OptionError(f"--{CLI_NAMES.get(name, name)}={values[name]!r} names the report file, so it must be "
                              "one word of letters, digits and -_.+ (e.g. v1.2.0)")
    image = values["model-server-image"]
    if len(image) > 255 or not _IMAGE.fullmatch(image):
        raise OptionError(f"--model-server-image={image!r} is not an image reference; give one like "
                          "registry.example.com/echo-basic:v1.0")
    if len(values["epp-image"]) > 255 or not _IMAGE.fullmatch(values["epp-image"]):
        raise OptionError(f"--epp-image={values['epp-image']!r} is not an image reference; give one like "
                          "registry.example.com/epp:v1.4.0")
    if len(values["sentinel-image"]) > 255 or not _IMAGE.fullmatch(values["sentinel-image"]):
        raise OptionError(f"--sentinel-image={values['sentinel-image']!r} is not an image reference; give one like "
                          "registry.example.com/busybox:1.36")
    results_dir = values["results-dir"]
    if results_dir:
        existing = Path(results_dir).expanduser().resolve()
        while not existing.exists():
            existing = existing.parent
        if not existing.is_dir() or not os.access(existing, os.W_OK):
            raise OptionError(f"--results-dir={results_dir}: cannot create it ({existing} is not a writable directory)")
    kubeconfig = values["kubeconfig"] or os.environ.get("KUBECONFIG") or None
    if kubeconfig:
        kubeconfig = os.path.expanduser(kubeconfig)  # `--kubeconfig=~/...` reaches us unexpanded
    if values["context"] and not kubeconfig:
        raise OptionError("--context needs a kubeconfig: pass --kubeconfig or set KUBECONFIG")
    if values["implementation-command"] and kubeconfig:
        raise OptionError("--implementation-command runs your controller against the embedded cluster; leave out "
                          "--kubeconfig/KUBECONFIG, or start the controller yourself")

    return Options(
        gateway_class=values["gateway-class"],
        supported_features=values["supported-features"],
        exempt_features=values["exempt-features"] or (),
        all_features=values["all-features"],
        skip_tests=values["skip-tests"] or (),
        run_test=values["run-test"],
        cleanup_base_resources=values["cleanup-base-resources"],
        cleanup_test_resources=values["cleanup-test-resources"],
        debug=values["debug"],
        namespace_labels=values["namespace-labels"] or {},
        namespace_annotations=values["namespace-annotations"] or {},
        conformance_profiles=tuple(profiles),
        model_server_image=image,
        epp_image=values["epp-image"],
        sentinel_image=values["sentinel-image"],
        skip_traffic=values["skip-traffic"],
        report_output=Path(report).expanduser() if report else None,
        organization=values["organization"],
        project=values["project"],
        url=values["url"],
        version=values["version"],
        contact=values["contact"] or (),
        mode=values["mode"],
        allow_crds_mismatch=values["allow-crds-mismatch"],
        skip_provisional_tests=values["skip-provisional-tests"],
        fail_fast=values["fail-fast"],
        timeouts=timeouts,
        kubeconfig=kubeconfig,
        context=values["context"],
        api_revisions=tuple(values["api-revision"] or ()),
        implementation_command=values["implementation-command"],
        results_dir=Path(results_dir).expanduser() if results_dir else None,
    )
