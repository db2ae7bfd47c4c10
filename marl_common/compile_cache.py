"""JAX's persistent compilation cache for every ``marl`` command and ``python -m marl.worker`` (no jax here).

Compiling a program is most of a short command's time on CPU (15-60 s). XLA can keep what it compiled
on disk, keyed by the program, the jax/jaxlib version and the device, so a later command that builds
the same program (same config, shapes and code) loads it instead. ``enable_compilation_cache`` turns
that on through JAX's own environment variables before jax is imported (jax reads them when it starts):

- folder: ``$MARL_CACHE_DIR`` if set, else ``$XDG_CACHE_HOME/marl-suite/jax`` (``~/.cache/marl-suite/jax``);
- off switch: ``MARL_COMPILATION_CACHE=0`` (or ``false``/``no``/``off``) leaves JAX as it is;
- a user's own ``JAX_COMPILATION_CACHE_DIR`` (and any ``JAX_PERSISTENT_CACHE_*`` they set) wins.

Every compiled program is written (``MIN_COMPILE_SECS`` = 0; JAX's default of 1 s would skip the many
0.05-1 s programs a command builds, and a threshold makes what is kept depend on the machine's load).
Programs with host callbacks are never written. The folder grows by what new configs and shapes compile
(about 1 MB for a small command); it can be deleted at any time and is filled again on the next command.
"""

from __future__ import annotations

import os
import sys

from marl_common.errors import parse_bool

# every variable that decides the cache of a process (tests and benchmarks clear them to start from a known state)
ENV_VARS = ("JAX_COMPILATION_CACHE_DIR", "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS",
            "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "MARL_COMPILATION_CACHE", "MARL_CACHE_DIR")
MIN_COMPILE_SECS = "0"


def cache_dir(environ=None) -> str:
    """The suite's cache folder: ``$MARL_CACHE_DIR``, else ``$XDG_CACHE_HOME/marl-suite/jax``."""
    env = os.environ if environ is None else environ
    if env.get("MARL_CACHE_DIR"):
        return os.path.expanduser(env["MARL_CACHE_DIR"])
    base = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "marl-suite", "jax")


def enable_compilation_cache(environ=None) -> str | None:
    """Point JAX's persistent compilation cache at ``cache_dir()`` unless switched off or set by the user;
    returns the folder in use (None when off). Call before jax is imported: jax reads these variables
    when it starts. A jax already imported without a cache folder is configured directly, which takes
    effect only if it has not compiled anything yet (jax decides once whether it uses a cache)."""
    env = os.environ if environ is None else environ
    if parse_bool(env.get("MARL_COMPILATION_CACHE") or "1") is False:  # unset or empty: on
        return None
    folder = env.setdefault("JAX_COMPILATION_CACHE_DIR", cache_dir(env))
    env.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", MIN_COMPILE_SECS)
    env.setdefault("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "0")
    jax = sys.modules.get("jax") if environ is None else None
    if jax is not None and jax.config.jax_compilation_cache_dir is None:  # imported before us: too late for env vars
        jax.config.update("jax_compilation_cache_dir", folder)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", float(env["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"]))
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", int(env["JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES"]))
    return folder
