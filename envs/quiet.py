"""Import jaxmarl without its start-up lines: the one place it is first imported (``envs.smax``,
``envs.mpe``)."""

import os
import sys


def import_jaxmarl_quietly():
    """jaxmarl prints two lines about submoduled environments on import (at the file-descriptor
    level, so ``contextlib.redirect_stdout`` does not catch them); keep the CLI output clean."""
    if "jaxmarl" in sys.modules:
        return
    if sys.stdout is not None:
        sys.stdout.flush()
    saved = os.dup(1)
    streams = sys.stdout, sys.stderr  # jaxmarl's mabrax module resets sys.stdout to sys.__stdout__
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 1)
            import jaxmarl  # noqa: F401

            if sys.stdout is not None:
                sys.stdout.flush()
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        sys.stdout, sys.stderr = streams


import_jaxmarl_quietly()
