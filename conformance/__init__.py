"""Conformance suite for the Gateway API Inference Extension InferencePool API."""

from __future__ import annotations

DISTRIBUTION = "inferencepool-conformance"


def version() -> str:
    """The installed package's version, or the checkout's (pyproject.toml) when it is not installed."""
    from importlib import metadata

    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        import tomllib

        from .data import CHECKOUT

        try:
            return tomllib.loads((CHECKOUT / "pyproject.toml").read_text())["project"]["version"]
        except (OSError, KeyError, ValueError):
            return "unknown"
