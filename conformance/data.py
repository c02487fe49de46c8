"""Where the files the suite reads are: the one place that knows, for a checkout and an installed package alike.

The repository keeps them at its top level, beside `conformance/`:

* `manifests/`: the schema and defaulting cases, the status topologies, the
  InferencePool CRD of every API revision, the Gateway API CRDs, the RBAC
  manifests;
* `controlplane/`: the Go module the embedded cluster's binary is built from;
* `epp/`: the Go module that names the upstream endpoint picker the traffic
  tier builds and runs (conformance.traffic.epp).

A built package (wheel, and so anything installed with `pip install`) carries
the same files under `conformance/_data/` (`setup.py` copies them there when it
builds; `MANIFEST.in` puts them in the sdist). An editable install reads the
checkout's own files. Nothing else in the suite builds a path to either folder.

This module imports nothing from the suite, so that `setup.py` can load it by
path to learn what to ship.
"""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
PACKAGED = PACKAGE / "_data"  # an installed package's copy
CHECKOUT = PACKAGE.parent  # the repository's top level, when this is a checkout
# What a Go module's source is: the files `go build` reads, and so what keys a build's cache
# (conformance.cluster.binary, conformance.traffic.epp). The package carries exactly these.
GO_MODULE_SUFFIXES = (".go", ".mod", ".sum")
CONTROLPLANE_SUFFIXES = GO_MODULE_SUFFIXES


def _root() -> Path:
    if (PACKAGED / "manifests").is_dir():
        return PACKAGED
    return CHECKOUT


ROOT = _root()
MANIFESTS = ROOT / "manifests"
CONTROLPLANE = ROOT / "controlplane"
EPP = ROOT / "epp"
GO_MODULES = ("controlplane", "epp")  # the Go modules a package carries, by folder


def installed() -> bool:
    """Whether the files are an installed package's copy (else a checkout's)."""
    return ROOT == PACKAGED


def problem() -> str | None:
    """One line saying what is missing, or None when the files are all there."""
    # (One file of each kind: the schema cases' base pool of each API, each Go module.)
    needed = (MANIFESTS / "schema" / "v1alpha2" / "_base.yaml", MANIFESTS / "schema" / "v1" / "_base.yaml",
              CONTROLPLANE / "go.mod", EPP / "go.mod")
    missing = [p for p in needed if not p.is_file()]
    if not missing:
        return None
    return (f"the suite's data files are missing ({', '.join(map(str, missing))}): a package installed from a "
            "wheel or sdist carries them in conformance/_data/, a checkout at its top level; reinstall the "
            "package (pip install inferencepool-conformance) or run from a whole checkout")


def shipped(checkout: Path = CHECKOUT) -> list[Path]:
    """What a package must carry, relative to the checkout's top level: every file of manifests/ and the
    sources of the Go modules (the control plane's, the EPP's)."""
    files = [p for p in sorted((checkout / "manifests").rglob("*")) if p.is_file() and "__pycache__" not in p.parts]
    files += [p for module in GO_MODULES for p in sorted((checkout / module).iterdir())
              if p.is_file() and p.suffix in GO_MODULE_SUFFIXES]
    return [p.relative_to(checkout) for p in files]
