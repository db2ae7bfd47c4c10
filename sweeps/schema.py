"""The sweep file's schema: every table and key a sweep file may hold, with its type, checked on load.

Anything unknown (a top-level key, a table's key, a ``[grid]`` key, an env, history or variant named
by a table) is named with the closest allowed name (``did_you_mean``); a value of the wrong type is
named with the type it must have; config keys (``[config]``, ``[env."NAME"]``, ``[history.NAME]``,
``[variants.NAME]``, ``[grid]``) are checked against TrainConfig's fields and their types. Each error
is one line (``UserError``), raised before anything runs or is written.

``histories`` is optional: without it every env x variant x grid point is one plain run of the config
as given. ``[grid] env = [...]`` is another way to write ``envs``; ``[grid] algo`` (and ``share_actor``)
are plain config keys, which a history would overwrite: a sweep with histories refuses them.
"""

from __future__ import annotations

import typing

from marl_common.errors import UserError, did_you_mean
from marl_common.preflight import check_number
from marl.core.config import flatten, key_types, read_toml, suggest
from sweeps.histories import HISTORY_KEYS, HISTORY_SPECS, get_history

# top-level key -> what it must be ("table", "list of str", ...)
TOP = {"out": str, "envs": "names", "histories": "names", "config": dict, "env": dict, "history": dict,
       "grid": dict, "variants": dict, "resources": dict, "probe": dict, "pairs": list, "report": dict,
       "allow_unequal_budgets": bool, "eval": dict}
# [eval]: the training report (OUT/report) from evaluations instead of the training metrics: every kept checkpoint
# of every run on `episodes` greedy episodes (`marl eval RUN --all-steps`), and with `absolute = true` also Mava's
# absolute metric (`marl eval RUN --absolute`) and marl-eval's JSON (OUT/report/marl_eval.json)
EVAL_KEYS = {"episodes": int, "absolute": bool, "eval_seed": int}
EVAL_DEFAULTS = {"episodes": 32, "absolute": False}
PROBE_SETTINGS = {"alphas": (int, list), "episodes": int, "boot": int, "eval_seed": int, "align": bool, "teams": bool,
                  "team_episodes": int, "max_perms": int, "team_batch": int, "batch": bool, "batch_memory": (int, float)}
PAIR_KEYS = {"a": str, "b": str, "seeds": (str, list), "align": bool, "teams": bool, "name": str}
REPORT_KEYS = {"out": str, "metric": str, "connected": list, "separated": list, "threshold": (int, float), "title": str,
               "require": dict}
# [report] require = { HISTORY = { ... } }: preconditions on a history's teams, read from the probes' endpoints
REQUIRE_KEYS = {"min_greedy_win": (int, float), "envs": "names"}
# [resources]: what each run asks of an executor (ray: per task; slurm: per job; local: informational) and
# retries (ray: retries of a failed task; slurm: requeues of a job that ran out of time). SLURM only: partition,
# account, qos, time (minutes per job), mem (sbatch --mem, e.g. "8G") and setup (shell lines run before the job)
RESOURCE_KEYS = {"num_cpus": (int, float), "num_gpus": (int, float), "retries": int, "partition": str, "account": str,
                 "qos": str, "time": int, "mem": str, "setup": list}
RESOURCE_DEFAULTS = {"num_cpus": 1, "num_gpus": 0, "retries": 2, "time": 60, "setup": []}
RESOURCE_NUMBERS = ("num_cpus", "num_gpus", "retries", "time")
INIT_FROM = "init_from"  # [variants.NAME] init_from = "OTHER": a warm-start edge between variants


def _type_name(t) -> str:
    if isinstance(t, tuple):
        return " or ".join(_type_name(x) for x in t)
    return {dict: "a table", list: "a list", str: "a string", bool: "true or false", int: "an integer",
            float: "a number", "names": "a non-empty list of names"}.get(t, str(t))


def _is(value, t) -> bool:
    if isinstance(t, tuple):
        return any(_is(value, x) for x in t)
    if t == "names":
        return isinstance(value, list) and bool(value) and all(isinstance(v, str) for v in value)
    if t is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if t is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, t)


def known(table: dict, keys, where: str) -> None:
    """Every key of ``table`` is one of ``keys`` (else: unknown key, with the closest one)."""
    keys = list(keys)
    for k in table:
        if k not in keys:
            raise UserError(f"{where}: unknown key {k!r}{did_you_mean(k, keys, 'keys')}")


def typed(table: dict, types: dict, where: str) -> None:
    """Unknown keys and wrong value types of ``table`` (a dict of key -> type)."""
    known(table, types, where)
    for k, v in table.items():
        if not _is(v, types[k]):
            raise UserError(f"{where}: {k} must be {_type_name(types[k])}, got {v!r}")


def config_fields() -> dict:
    """Every TrainConfig key a sweep may set (``network.X`` for the network, ``algo.X`` for an algorithm's
    settings, also written bare as before session 25: ``epochs``) -> its type."""
    fields = key_types()
    fields.update({k[len("algo."):]: t for k, t in fields.items() if k.startswith("algo.")})
    fields["algo.name"] = str  # the [algo] table's name (the same as algo)
    return fields


def _field_type(t):
    if typing.get_origin(t) is typing.Union or type(t).__name__ == "UnionType":
        t = next(x for x in typing.get_args(t) if x is not type(None))
    return t


def check_config_key(key: str, where: str, allow=()) -> None:
    """``key`` is a TrainConfig field (or one of ``allow``); else one line with the key it most likely means
    (``marl.core.config.suggest``: close spellings, other codebases' names, the right name in the wrong table)."""
    if key in allow or key in config_fields():
        return
    close = suggest(key)
    raise UserError(f"{where}: unknown config key {key!r}"
                    + (f"; did you mean {close!r}?" if close else did_you_mean(key, allow)))


def check_config_keys(table: dict, where: str, allow=()) -> dict:
    """Flatten a config table and check every key is a TrainConfig field with a value of its type."""
    values = flatten(table)
    for k, v in values.items():
        check_config_key(k, where, allow)
        if k not in allow:
            check_value(k, v, where)
    return values


def check_value(key: str, value, where: str) -> None:
    """Raise UserError when ``value`` is not of config key ``key``'s type (int, float, bool or str keys only)."""
    t = _field_type(config_fields()[key])
    if t in (int, float, bool, str) and not _is(value, t):
        raise UserError(f"{where}: {key} must be {_type_name(t)}, got {value!r}")


def load_sweep(path) -> dict:
    """Parse and validate a sweep file; returns its data (tables as parsed; ``[grid] env`` moved to
    ``envs``; ``config`` and ``grid`` always present)."""
    return check_sweep(read_toml(path, "sweep file"), f"sweep file {path}")


def check_sweep(data: dict, where: str) -> dict:
    """``load_sweep``'s checks on a sweep's parsed tables (a sweep file, or a study file's ``[sweep]`` table);
    ``where`` names it in every error. Returns ``data`` (``config`` and ``grid`` always present)."""
    typed(data, TOP, where)
    data.setdefault("config", {})
    data.setdefault("grid", {})
    _grid_envs(data, where)
    if "envs" not in data:
        raise UserError(f"{where}: envs must be {_type_name('names')} (or write [grid] env = [...])")
    envs, histories = data["envs"], data.get("histories", [])
    check_config_keys(data["config"], f"{where}: [config]")
    for env, table in data.get("env", {}).items():
        if env not in envs:
            raise UserError(f"{where}: [env.{env!r}] names an env that is not in envs{did_you_mean(env, envs, 'envs')}")
        if not isinstance(table, dict):
            raise UserError(f"{where}: [env.{env!r}] must be a table of config keys")
        check_config_keys(table, f"{where}: [env.{env!r}]")
    for h, table in data.get("history", {}).items():
        get_history(h)  # a misspelt [history.NAME] is an error, not ignored
        if not histories:
            raise UserError(f"{where}: [history.{h}] sets keys for a history, but the sweep has no histories "
                            f"(add histories = [...] or move the keys to [config])")
        if not isinstance(table, dict):
            raise UserError(f"{where}: [history.{h}] must be a table of config keys")
        check_config_keys(table, f"{where}: [history.{h}]")
    _check_grid(data["grid"], where)
    _check_variants(data.get("variants", {}), where)
    if histories:
        _check_history_keys(data, where)
    _check_resources(data.get("resources", {}), f"{where}: [resources]")
    probe = data.get("probe", {})
    known(probe, list(PROBE_SETTINGS) + ["env"], f"{where}: [probe]")
    typed({k: v for k, v in probe.items() if k != "env"}, PROBE_SETTINGS, f"{where}: [probe]")
    for env, table in probe.get("env", {}).items():
        if env not in envs:
            raise UserError(f"{where}: [probe.env.{env!r}] names an env that is not in envs{did_you_mean(env, envs, 'envs')}")
        typed(table, PROBE_SETTINGS, f"{where}: [probe.env.{env!r}]")
    typed(data.get("report", {}), REPORT_KEYS, f"{where}: [report]")
    typed(data.get("eval", {}), EVAL_KEYS, f"{where}: [eval]")
    if "episodes" in data.get("eval", {}):
        check_number(data["eval"]["episodes"], f"{where}: [eval] episodes", lo=1, hi=1 << 16, integer=True)
    pairs = data.get("pairs", [])
    if not all(isinstance(p, dict) for p in pairs):
        raise UserError(f"{where}: pairs must be [[pairs]] tables with a, b and seeds")
    if pairs and not histories:
        raise UserError(f"{where}: [[pairs]] compare the runs of two histories, but the sweep has no histories "
                        f"(add histories = [...])")
    for p in pairs:
        typed(p, PAIR_KEYS, f"{where}: [[pairs]]")
        for k in ("a", "b"):
            if k not in p:
                raise UserError(f"{where}: a [[pairs]] table has no {k!r} (the history names to compare)")
    if "report" in data and not pairs:
        raise UserError(f"{where}: [report] sets up the probe report, which needs [[pairs]]; the training report "
                        f"(OUT/report) needs no table")
    if pairs and "report" in data and "out" not in data["report"]:
        raise UserError(f"{where}: [report] needs out (the folder of the summary)")
    _check_require(data, where)
    return data


def _check_resources(table: dict, where: str) -> None:
    """``[resources]``: known keys of their types, numbers >= 0 (time >= 1 minute), names without spaces or
    newlines, setup a list of one-line shell commands."""
    typed(table, RESOURCE_KEYS, where)
    for k, v in table.items():
        if k in RESOURCE_NUMBERS:
            check_number(v, f"{where} {k}", lo=1 if k == "time" else 0, integer=k in ("retries", "time"))
        elif k == "setup":
            if not all(isinstance(line, str) and line.strip() and "\n" not in line for line in v):
                raise UserError(f"{where}: setup must be a list of one-line shell commands, got {v!r}")
        elif not v.strip() or any(c.isspace() for c in v):
            raise UserError(f"{where}: {k} must be a name without spaces, got {v!r}")


def _check_require(data: dict, where: str) -> None:
    """``[report] require = { HISTORY = { min_greedy_win = X, envs = [...] } }``: a history of the sweep that some
    ``[[pairs]]`` table probes (its teams' win rates are read from the probes' endpoints), known keys, X in [0, 1]."""
    req = data.get("report", {}).get("require")
    if req is None:
        return
    w = f"{where}: [report] require"
    histories, envs = data.get("histories", []), data["envs"]
    probed = [p[k] for p in data.get("pairs", []) for k in ("a", "b") if k in p]
    for h, table in req.items():
        if h not in histories:
            raise UserError(f"{w}: unknown history {h!r}{did_you_mean(h, histories, 'histories')}")
        if not isinstance(table, dict):
            raise UserError(f"{w}: {h!r} must be a table such as {{ min_greedy_win = 0.8 }}, got {table!r}")
        typed(table, REQUIRE_KEYS, f"{w} {h!r}")
        if "min_greedy_win" not in table:
            raise UserError(f"{w} {h!r}: needs min_greedy_win (the lowest greedy win rate a team of {h!r} may have)")
        check_number(table["min_greedy_win"], f"{w} {h!r}: min_greedy_win", lo=0, hi=1)
        for e in table.get("envs", []):
            if e not in envs:
                raise UserError(f"{w} {h!r}: envs names {e!r}, which is not in envs{did_you_mean(e, envs, 'envs')}")
        if h not in probed:
            raise UserError(f"{w}: {h!r} is an endpoint of no [[pairs]] table, and its win rate is read from the probes' "
                            f"endpoints (add a pair with {h!r}, or drop it from require)")


def _grid_envs(data: dict, where: str) -> None:
    """``[grid] env = [...]`` is ``envs = [...]``: the env stays the outermost folder and the report's task."""
    if "env" not in data["grid"]:
        return
    envs = data["grid"].pop("env")
    if "envs" in data:
        raise UserError(f"{where}: the envs are given twice (envs = [...] and [grid] env = [...]); keep one")
    if not _is(envs, "names"):
        raise UserError(f"{where}: [grid]: env must be {_type_name('names')}, got {envs!r}")
    data["envs"] = envs


def _check_history_keys(data: dict, where: str) -> None:
    """A history sets algo and share_actor itself: the same key in any table of the file contradicts it."""
    presets = ", ".join(f"{h.name}: {h.algo}{'' if h.share_actor else ' (separate actors)'}" for h in HISTORY_SPECS)
    tables = [("[config]", data["config"]), ("[grid]", data["grid"])]
    tables += [(f"[env.{k!r}]", t) for k, t in data.get("env", {}).items()]
    tables += [(f"[history.{k}]", t) for k, t in data.get("history", {}).items()]
    tables += [(f"[variants.{k}]", t) for k, t in data.get("variants", {}).items()]
    for name, table in tables:
        for key in HISTORY_KEYS:
            if key in table:
                raise UserError(f"{where}: {name} sets {key}, but each history fixes algo and share_actor ({presets}); "
                                f"drop histories = [...] to train the config as given (e.g. [grid] algo = [\"mappo\", \"happo\"]), "
                                f"or drop {key}")


def _check_grid(grid: dict, where: str) -> None:
    for k, values in flatten(grid).items():
        w = f"{where}: [grid]"
        check_config_key(k, w)
        if not isinstance(values, list) or not values:
            raise UserError(f"{w}: {k} must be a non-empty list of values, got {values!r}")
        for v in values:
            check_value(k, v, w)
        if len(set(map(repr, values))) != len(values):
            raise UserError(f"{w}: {k} lists a value twice")


def _check_variants(variants: dict, where: str) -> None:
    for name, table in variants.items():
        w = f"{where}: [variants.{name}]"
        if not isinstance(table, dict):
            raise UserError(f"{w} must be a table of config keys (and {INIT_FROM} = \"VARIANT\")")
        if not name or "/" in name or name.startswith("."):
            raise UserError(f"{w}: a variant name must be a plain folder name")
        check_config_keys(table, w, allow=(INIT_FROM,))
        src = table.get(INIT_FROM)
        if src is not None:
            if not isinstance(src, str):
                raise UserError(f"{w}: {INIT_FROM} must be the name of another variant, got {src!r}")
            if src not in variants:
                raise UserError(f"{w}: warm-start edge to {src!r}, which is not a run of this sweep"
                                f"{did_you_mean(src, variants, 'variants')}")
    # no cycles: follow every chain of init_from edges
    for name in variants:
        seen, cur = [name], variants[name].get(INIT_FROM)
        while cur is not None:
            if cur in seen:
                raise UserError(f"{where}: the variants' warm-start edges form a cycle ({' -> '.join(seen + [cur])})")
            seen.append(cur)
            cur = variants[cur].get(INIT_FROM)


def variant_order(variants: dict) -> list[str]:
    """Variant names, each after the variant it starts from (file order otherwise)."""
    order: list[str] = []

    def visit(n):
        if n in order:
            return
        src = variants[n].get(INIT_FROM)
        if src is not None:
            visit(src)
        order.append(n)

    for n in variants:
        visit(n)
    return order


def resources(sweep: dict) -> dict:
    """The sweep's [resources] table over ``RESOURCE_DEFAULTS`` (num_cpus, num_gpus, retries, time, setup)."""
    return {**RESOURCE_DEFAULTS, **sweep.get("resources", {})}

