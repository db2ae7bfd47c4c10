"""Where a run's chunks ran: the machine fingerprint recorded in every checkpoint's meta, and what it promises.

XLA's float results depend on the machine as well as on the config and keys: on CPU its generated code uses
the instruction sets it finds (AVX-512 or AVX2, FMA or not) and splits its work by the CPUs it may use, and
the jax/jaxlib build and ``XLA_FLAGS`` choose the code too. So a run resumed on another machine kind trains
on correctly, but not bit for bit as the original machine would have (a long training amplifies the last
bit: issue 58). Every checkpoint's meta holds ``host`` (the fingerprint of the process that saved it) and
``machines``: the update ranges the run trained on each fingerprint, carried over every resume, so a run's
lineage keeps every machine it ran on. A checkpoint written before fingerprints were recorded has an
unknown machine: it is never said to differ.

Pinning the instruction set: ``XLA_FLAGS=--xla_cpu_max_isa=AVX2`` caps the code XLA generates on x86 (see
README, "Bit for bit across machines"). jax is imported only inside ``fingerprint`` (this module is read
by commands that never compute).
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
from importlib import metadata

# The instruction sets whose presence changes the code XLA (LLVM) emits on CPU: x86 vector widths, FMA
# (fused multiply-add rounds once), the AVX-512 extensions and AMX; ARM's SIMD units.
ISA_FLAGS = ("sse4_1", "sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512dq", "avx512cd", "avx512bw",
             "avx512vl", "avx512ifma", "avx512vbmi", "avx512_vbmi2", "avx512_vnni", "avx512_bf16", "avx512_fp16",
             "avx_vnni", "amx_tile", "amx_bf16", "amx_int8", "amx_fp16", "asimd", "asimdhp", "sve", "sve2", "bf16",
             "i8mm")
# The packages whose code computes a run's numbers (their versions are part of the fingerprint).
PACKAGES = ("marl-suite", "numpy", "flax", "optax", "chex", "jaxmarl", "jumanji", "orbax-checkpoint")
# The keys that name a machine kind (the rest, versions, name the software).
MACHINE_KEYS = ("arch", "cpu", "isa", "cpus", "backend", "accelerator", "devices", "xla_flags")
COMPARABLE_NOTE = "other machine kind: numbers not comparable bit for bit"


def cpu() -> dict:
    """The CPU: architecture, model name and the ``ISA_FLAGS`` it has (Linux ``/proc/cpuinfo``; elsewhere the
    model from ``platform`` and no flags), and the CPUs this process may use (XLA partitions its work by it)."""
    model, flags = "", set()
    try:
        text = open("/proc/cpuinfo", encoding="utf-8", errors="replace").read()
    except OSError:
        text = ""
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip().lower()
        if key in ("model name", "cpu model", "hardware") and value.strip() and not model:
            model = value.strip()
        elif key in ("flags", "features") and not flags:
            flags = set(value.split())
    model = model or platform.processor() or "unknown"
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {"arch": platform.machine(), "cpu": model, "isa": [f for f in ISA_FLAGS if f in flags],
            "cpus": cpus}


def packages() -> dict:
    """``{name: version}`` of the installed ``PACKAGES`` (a missing one is left out)."""
    out = {}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return out


def fingerprint() -> dict:
    """This process's machine and software: ``cpu()``, the jax backend, its accelerator kind and device count,
    jax and jaxlib versions, ``XLA_FLAGS`` and ``packages()``."""
    import jax

    dev = jax.devices()[0]
    return {**cpu(), "backend": jax.default_backend(), "accelerator": dev.device_kind, "devices": jax.device_count(),
            "jax": jax.__version__, "jaxlib": metadata.version("jaxlib"), "xla_flags": os.environ.get("XLA_FLAGS", ""),
            "packages": packages()}


def machine_kind(fp: dict | None) -> str | None:
    """A short id of ``fp``'s machine kind (``MACHINE_KEYS``: the same CPU model and instruction sets, CPU
    count, backend, accelerator and XLA flags); None for an unknown or pre-fingerprint record."""
    if not fp or "cpu" not in fp:
        return None
    body = json.dumps({k: fp.get(k) for k in MACHINE_KEYS}, sort_keys=True)
    return hashlib.sha256(body.encode()).hexdigest()[:8]


def describe(fp: dict | None) -> str:
    """One phrase for a fingerprint: ``AMD EPYC (avx512f), 2 CPUs, cpu`` (``unknown machine`` when not recorded)."""
    if not fp:
        return "unknown machine"
    if "cpu" not in fp:  # a record from before fingerprints: what it holds
        return f"{fp.get('backend', '?')}, {fp.get('cpus', '?')} CPUs, jax {fp.get('jax', '?')}"
    isa = fp.get("isa") or []
    widest = next((f for f in ("amx_tile", "avx512f", "avx2", "avx", "sve2", "sve", "asimd") if f in isa), "")
    accel = fp.get("accelerator") if fp.get("backend") != "cpu" else "no accelerator"
    flags = f", XLA_FLAGS={fp['xla_flags']}" if fp.get("xla_flags") else ""
    jax = f", jax {fp['jax']}" if fp.get("jax") else ""
    return f"{fp.get('cpu')}{f' ({widest})' if widest else ''}, {fp.get('cpus')} CPUs, {accel}{jax}{flags} [{machine_kind(fp)}]"


def changes(old: dict | None, new: dict | None) -> list[str]:
    """What differs from ``old`` to ``new`` (``key old -> new``), over the keys both record: a fingerprint not
    recorded, or a key an older record lacks, is unknown, never a difference."""
    if not old or not new:
        return []
    out = []
    for k in new:
        if k not in old or old[k] == new[k]:
            continue
        if k == "packages":
            out += [f"{p} {old[k].get(p)} -> {v}" for p, v in new[k].items() if p in old[k] and old[k][p] != v]
        elif k == "isa":
            gone, added = sorted(set(old[k]) - set(new[k])), sorted(set(new[k]) - set(old[k]))
            out.append("isa " + " ".join([f"-{f}" for f in gone] + [f"+{f}" for f in added]))
        else:
            out.append(f"{k} {old[k] or 'none'} -> {new[k] or 'none'}")
    return out


def comparable(old: dict | None, new: dict | None) -> bool:
    """Whether numbers made on ``old`` can be compared bit for bit with numbers made on ``new``: no recorded key
    differs (an unknown side counts as comparable: a difference is then a real mismatch to look into)."""
    return not changes(old, new)


def history(meta: dict) -> list[dict]:
    """The machines a checkpoint's run trained on: ``[{"updates": [from, to], "host": fingerprint or None}]``
    in order. A checkpoint from before ``machines`` was recorded gives one range on its ``host`` (or None)."""
    rows = meta.get("machines")
    if isinstance(rows, list) and rows:
        return rows
    return [{"updates": [0, int(meta.get("update", 0))], "host": meta.get("host")}]


def extend(rows: list[dict], fp: dict, start: int, update: int) -> list[dict]:
    """``rows`` (a ``history`` up to ``start``) with updates ``start`` to ``update`` trained on ``fp``: the last
    range grows when it ran on the same fingerprint, else a new range starts."""
    kept = [dict(r) for r in rows if r["updates"][0] < start]
    if kept:
        kept[-1]["updates"] = [kept[-1]["updates"][0], min(kept[-1]["updates"][1], start)]
    if kept and kept[-1]["host"] == fp:
        kept[-1]["updates"] = [kept[-1]["updates"][0], update]
        return kept
    return kept + [{"updates": [start, update], "host": fp}]


def mixed(rows: list[dict]) -> bool:
    """Whether a run's ``history`` spans fingerprints that differ (unknown ranges never count)."""
    known = [r["host"] for r in rows if r.get("host")]
    return any(not comparable(a, b) for a, b in zip(known, known[1:]))


def summary(rows: list[dict]) -> str:
    """``updates 0-4 on <machine>; updates 4-10 on <machine>``."""
    return "; ".join(f"updates {r['updates'][0]}-{r['updates'][1]} on {describe(r.get('host'))}" for r in rows)


def resume_notice(run, step: int, meta: dict, now: dict) -> str | None:
    """The one line said when ``run`` resumes from ``step`` (its ``meta``) on a fingerprint ``now`` that differs
    from the one the step was trained on (None: the same, or not recorded)."""
    what = changes(history(meta)[-1].get("host"), now)
    if not what:
        return None
    shown = ", ".join(what[:3]) + (f" and {len(what) - 3} more" if len(what) > 3 else "")
    return (f"marl: notice: resuming {run} from step {step} on another machine or software ({shown}): it trains on, "
            f"but the continuation will not be bit for bit what the original machine would have produced "
            f"(`marl lineage {run}` lists both)")


def across_note(run, rows: list[dict]) -> str | None:
    """The line that lists ``run`` as trained across fingerprints (its ``history`` ``rows``), or None."""
    if not mixed(rows):
        return None
    return (f"{run} was trained across machine kinds ({summary(rows)}): its numbers are not one machine's bit for "
            f"bit")
