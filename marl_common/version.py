"""The installed marl-suite version (no jax): ``marl --version`` and the version recorded in checkpoints."""

from __future__ import annotations

from importlib import metadata


def package_version() -> str:
    """The installed marl-suite version from the package metadata (``0+unknown`` from a source tree)."""
    try:
        return metadata.version("marl-suite")
    except metadata.PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "0+unknown"
