"""The echo that prints nothing: the default of every library call that can report progress (``echo=``, ``log=``);
the CLI passes ``print``."""

from __future__ import annotations


def quiet(_msg: str) -> None:
    """Print nothing."""
