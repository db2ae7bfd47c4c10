"""MAPPO/HAPPO teams on SMAX and MPE: the algorithm core (``marl.core``), run folders (``marl.runs``),
analysis (``marl.analysis``) and the Python API (``marl.api``).

``marl.train``, ``marl.resume``, ``marl.load``, ``marl.evaluate``, ``marl.search``, ``marl.report``,
``marl.lineage`` and ``marl.make_config`` are ``marl.api``'s, loaded on first use so that importing the
package imports no jax. Bad input to any of them raises ``marl.UserError`` (``marl_common.errors.UserError``)
with a one-line message.
"""

_API = ("train", "resume", "load", "evaluate", "search", "report", "lineage", "make_config")


def __getattr__(name):
    if name == "UserError":  # the one exception class of bad input, from every API function
        from marl_common.errors import UserError

        return UserError
    if name in _API:
        from marl import api

        return getattr(api, name)
    raise AttributeError(f"module 'marl' has no attribute {name!r}")
