"""bench/digest_check.sh's comparison (``bench/digest_lines.py``): like with like only (issue 58)."""

from __future__ import annotations

import json

from bench.digest_lines import compare
from marl.runs.fingerprint import COMPARABLE_NOTE, MACHINE_KEYS, machine_kind

HERE = {"arch": "x86_64", "cpu": "AMD EPYC", "isa": ["avx2", "fma", "avx512f"], "cpus": 2, "backend": "cpu",
        "accelerator": "cpu", "devices": 1, "xla_flags": ""}
assert set(HERE) == set(MACHINE_KEYS)


def _out(machine, *digests):
    return [f"machine {json.dumps(machine, sort_keys=True)}"] + [f"mappo {2 * i + 2} {d} metrics_rows=4"
                                                                 for i, d in enumerate(digests)]


def test_same_kind_compares_digit_for_digit():
    assert compare(_out(HERE, "a", "b"), _out(HERE, "a", "b")) == (
        0, f"same digests (2 checkpoints, AMD EPYC (avx512f), 2 CPUs, no accelerator [{machine_kind(HERE)}])")
    code, said = compare(_out(HERE, "a", "b"), _out(HERE, "a", "c"))
    assert code == 1 and said.startswith("MISMATCH on the same machine kind: 1 line(s) differ, e.g. mappo 4 b")
    code, said = compare(_out(HERE, "a", "b"), _out(HERE, "a"))
    assert code == 1 and "2 recorded lines, 1 now" in said


def test_other_kind_is_not_a_mismatch():
    avx2 = {**HERE, "cpu": "Intel Xeon", "isa": ["avx2", "fma"]}
    code, said = compare(_out(avx2, "a", "b"), _out(HERE, "x", "y"))
    assert code == 0 and COMPARABLE_NOTE in said and "MISMATCH" not in said and "cpu Intel Xeon -> AMD EPYC" in said
    gpu = {**HERE, "backend": "gpu", "accelerator": "NVIDIA H200"}
    assert compare(_out(gpu, "a"), _out(HERE, "a"))[1].startswith(COMPARABLE_NOTE)
    # an output from before machine lines: unknown, compared as it always was
    assert compare(["mappo 2 a metrics_rows=4"], _out(HERE, "b"))[0] == 1


def test_both_pinned_to_one_isa_are_compared():
    pin = "--xla_cpu_max_isa=AVX2"
    a, b = {**HERE, "xla_flags": pin}, {**HERE, "cpu": "Intel Xeon", "isa": ["avx2", "fma"], "xla_flags": pin}
    assert compare(_out(b, "a"), _out(a, "a")) == (0, "other CPU kind, both pinned to --xla_cpu_max_isa=AVX2 "
                                                      "(cpu Intel Xeon -> AMD EPYC, isa +avx512f): the digests agree")
    code, said = compare(_out(b, "a"), _out(a, "z"))
    assert code == 1 and "1 line(s) differ" in said
    # one side pinned, the other not: another kind
    assert compare(_out(b, "a"), _out(HERE, "z"))[1].startswith(COMPARABLE_NOTE)
