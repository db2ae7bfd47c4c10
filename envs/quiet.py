"""Import jaxmarl's environment families one at a time, quietly: the one place jaxmarl is first imported
(``envs.smax``, ``envs.mpe``, the MPE renderer).

``import jaxmarl`` runs ``jaxmarl.environments.__init__``, which imports every family jaxmarl ships (STORM,
Overcooked, JaxNav, Hanabi, coin game, ...) and prints two lines about submoduled environments at the
file-descriptor level: 6.6 s of the 9 s a training subprocess spent importing (session 19, ``python -X
importtime``). ``family("smax")`` imports ``jaxmarl.environments.smax`` (and the modules it imports) with
stand-in ``jaxmarl`` and ``jaxmarl.environments`` packages that only give the submodules their search path,
then takes the stand-ins out of ``sys.modules``: a later ``import jaxmarl`` (a user's notebook, a test) runs
jaxmarl's own ``__init__`` as usual, which finds the loaded submodules in ``sys.modules`` and reuses them, so
there is one ``SMAX`` class either way.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import types

_PACKAGES = ("jaxmarl", "jaxmarl.environments")


def family(name: str) -> types.ModuleType:
    """``jaxmarl.environments.<name>`` (``"smax"``, ``"mpe"``), imported without the rest of jaxmarl when
    jaxmarl is not imported yet."""
    module = f"jaxmarl.environments.{name}"
    if module in sys.modules:
        return sys.modules[module]
    if "jaxmarl.environments" in sys.modules:  # jaxmarl is imported whole already
        return importlib.import_module(module)
    spec = importlib.util.find_spec("jaxmarl")
    if spec is None or not spec.submodule_search_locations:  # pragma: no cover - a dependency of the package
        raise ImportError("jaxmarl is not installed: pip install -e '.[dev]'")
    root = list(spec.submodule_search_locations)
    stand_ins = {}
    for pkg, path in zip(_PACKAGES, (root, [os.path.join(p, "environments") for p in root])):
        m = types.ModuleType(pkg)
        m.__path__ = path
        m.__package__ = pkg
        stand_ins[pkg] = m
    sys.modules.update(stand_ins)
    try:
        return importlib.import_module(module)
    finally:
        for pkg, m in stand_ins.items():
            if sys.modules.get(pkg) is m:
                del sys.modules[pkg]


def import_jaxmarl_quietly():
    """The whole of jaxmarl (``jaxmarl.make`` for an environment id the adapters do not build directly),
    without the two lines it prints on import (at the file-descriptor level, so
    ``contextlib.redirect_stdout`` does not catch them)."""
    if "jaxmarl.environments" in sys.modules:
        return sys.modules["jaxmarl"]
    if sys.stdout is not None:
        sys.stdout.flush()
    saved = os.dup(1)
    streams = sys.stdout, sys.stderr  # jaxmarl's mabrax module resets sys.stdout to sys.__stdout__
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 1)
            import jaxmarl

            if sys.stdout is not None:
                sys.stdout.flush()
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        sys.stdout, sys.stderr = streams
    return jaxmarl
