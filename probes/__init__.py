"""Coordination probes between trained teams: barrier, mixed teams, weight space (``probes.api``).

``probes.barrier(...)``, ``probes.teams(...)`` and ``probes.weights(...)`` are ``probes.api``'s, loaded
on first use so that importing the package stays cheap.
"""

_API = ("barrier", "teams", "weights")


def __getattr__(name):
    if name in _API:
        from probes import api

        return getattr(api, name)
    raise AttributeError(f"module 'probes' has no attribute {name!r}")
