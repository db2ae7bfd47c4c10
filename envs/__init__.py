"""Environment adapters over jaxmarl 0.2.0 and jumanji 1.1.2 with one stacked-array interface (agent axis
first).

Importing the package imports nothing heavy: ``envs.catalog`` (the family registry, as data) answers at once, and
``make``, ``names``, ``Env`` and the other names below load the adapters (and the jaxmarl families they use,
``envs.quiet``) on first use.
"""

_LAZY = {"Env": "envs.adapter", "EnvSpec": "envs.base", "EnvState": "envs.base", "EpisodeInfo": "envs.base",
         "TimeStep": "envs.base", "make": "envs.registry", "names": "envs.registry",
         "check_name": "envs.registry"}


def __getattr__(name):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'envs' has no attribute {name!r}")
