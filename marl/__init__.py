"""MAPPO/HAPPO teams on SMAX and MPE: the algorithm core (``marl.core``), run folders (``marl.runs``),
analysis (``marl.analysis``) and the Python API (``marl.api``).

``marl.train``, ``marl.resume``, ``marl.load``, ``marl.evaluate``, ``marl.search``, ``marl.report``,
``marl.lineage`` and ``marl.make_config`` are ``marl.api``'s, loaded on first use so that importing the
package imports no jax.
"""

_API = ("train", "resume", "load", "evaluate", "search", "report", "lineage", "make_config")


def __getattr__(name):
    if name in _API:
        from marl import api

        return getattr(api, name)
    raise AttributeError(f"module 'marl' has no attribute {name!r}")
