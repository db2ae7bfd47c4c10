"""Coordination probes between trained teams: barrier, mixed teams, weight space.

The Python API is ``probes.api`` (``from probes import api``; ``api.barrier``, ``api.teams``,
``api.weights``). The package itself exports nothing: ``probes.barrier`` and ``probes.weights`` are
the modules that compute those probes.
"""
