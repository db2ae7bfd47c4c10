"""The ``studies`` API refuses bad input (issue 53 item 4): each case gives one ``ValueError`` whose message names
the argument, as the CLI's bad inputs give one ``UserError`` line (tests/test_errors.py)."""

import re
from pathlib import Path

import numpy as np
import pytest

from studies import atlas, rules
from studies import connectivity as cx
from studies import fresh_seeds as fs

NAN, INF = float("nan"), float("inf")
SIX = [0.9, 0.95, 0.92, 0.97, 0.93, 0.96]
TWO_JOBS = {"a_ids": ["a#0", "a#1"], "b_ids": ["b#0", "b#1"], "values": [0.01, 0.02]}

CASES = [  # (id, call, words the message must hold)
    ("decide NaN wins", lambda: fs.decide([NAN] * 16), "wins"),
    ("decide target NaN", lambda: fs.decide(SIX, target=NAN), "target"),
    ("decide win rate above 1", lambda: fs.decide([1.5] * 16), "wins"),
    ("decide win rate below 0", lambda: fs.decide([-0.1] + SIX), "wins"),
    ("decide one_sided 1.5", lambda: fs.decide(SIX, one_sided=1.5), "one_sided"),
    ("decide one_sided 0", lambda: fs.decide(SIX, one_sided=0.0), "one_sided"),
    ("decide None", lambda: fs.decide(None), "wins"),
    ("decide text", lambda: fs.decide("abc"), "wins"),
    ("decide empty", lambda: fs.decide([]), "wins"),
    ("decide ragged won", lambda: fs.decide(SIX[:2], won=[[1, 0], [1]]), "won"),
    ("decide won rows", lambda: fs.decide(SIX[:2], won=[[1, 0]]), "won"),
    ("decide won outcome 2", lambda: fs.decide(SIX[:2], won=[[1, 2], [1, 0]]), "won"),
    ("unchanged negative margin", lambda: fs.unchanged(SIX, SIX, margin=-0.1), "margin"),
    ("unchanged NaN old", lambda: fs.unchanged(SIX, [NAN, 0.9]), "old"),
    ("unchanged new above 1", lambda: fs.unchanged([1.2] * 6, SIX), "new"),
    ("paired inf", lambda: fs.paired([INF] * 16), "diffs"),
    ("paired min_seeds float", lambda: fs.paired(SIX, min_seeds=2.5), "min_seeds"),
    ("crossed_ci 1x1", lambda: fs.crossed_ci([[1.0]]), "won"),
    ("crossed_ci empty", lambda: fs.crossed_ci([]), "won"),
    ("crossed_ci confidence 1", lambda: fs.crossed_ci([[1, 0], [0, 1]], confidence=1.0), "confidence"),
    ("wilson no trials", lambda: rules.wilson(5, 0), "n"),
    ("wilson negative k", lambda: rules.wilson(-1, 10), "k"),
    ("verdict unknown rule", lambda: rules.verdict("nope", None, None), "rule_name"),
    ("verdict not a design", lambda: rules.verdict("connected", {}, "design"), "design"),
    ("holm NaN p", lambda: atlas.holm({"a": NAN}), "pvals"),
    ("holm p above 1", lambda: atlas.holm({"a": 0.01, "b": 1.5}), "pvals"),
    ("holm not a dict", lambda: atlas.holm([0.01]), "pvals"),
    ("group_ci unknown method, one job", lambda: cx.group_ci({"a_ids": ["a"], "b_ids": ["b"], "values": [0.1]},
                                                              method="nope"), "method"),
    ("cluster_bootstrap empty", lambda: cx.cluster_bootstrap([]), "jobs"),
    ("connected_test empty", lambda: cx.connected_test([], 0.05), "jobs"),
    ("connected_test team with itself", lambda: cx.connected_test(
        {"a_ids": ["h#0", "h#0"], "b_ids": ["h#0", "h#1"], "values": [0.1, 0.2]}, 0.05), "jobs"),
    ("connected_test one pair of teams", lambda: cx.connected_test(
        {"a_ids": ["a#0", "a#0"], "b_ids": ["b#0", "b#0"], "values": [0.1, 0.2]}, 0.05), "jobs"),
    ("connected_test threshold NaN", lambda: cx.connected_test(TWO_JOBS, NAN), "threshold"),
    ("connected_test NaN value", lambda: cx.connected_test({**TWO_JOBS, "values": [0.1, NAN]}, 0.05), "jobs"),
    ("connected_test ragged jobs", lambda: cx.connected_test({**TWO_JOBS, "b_ids": ["b#0"]}, 0.05), "jobs"),
    ("connected_test one job, no bound", lambda: cx.connected_test(
        {"a_ids": ["a"], "b_ids": ["b"], "values": [0.1]}, 0.05), "jobs"),
    ("connected_test ragged curves", lambda: cx.connected_test(TWO_JOBS, 0.05, curves=[[0, 1], [0]]), "curves"),
]


@pytest.mark.parametrize("call, word", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_studies_api_refuses_bad_input_with_one_value_error_naming_the_argument(call, word):
    with pytest.raises(ValueError) as e:
        call()
    msg = str(e.value)
    assert re.match(rf"(unknown )?{re.escape(word)}\b", msg), msg  # the message starts with the argument's name
    assert "\n" not in msg and len(msg) < 300
    assert e.value.__cause__ is None or e.value.__suppress_context__  # one line, no chained traceback
    # raised by the studies API's own checks, not deep inside numpy or scipy
    assert Path(str(e.traceback[-1].path)).parent.name == "studies", e.traceback[-1].path


def test_the_same_functions_still_answer_good_input():
    """Valid input is untouched by the checks (the refusals above are not a blanket error)."""
    assert fs.decide(SIX)["verdict"] in ("target met", "not shown", "target not met")
    assert fs.unchanged(SIX, SIX[:3], margin=0.05)["verdict"] in ("unchanged", "changed", "not shown")
    assert rules.wilson(0, 10)[0] == 0.0
    assert atlas.holm({}) == {}
    assert cx.connected_test({"a_ids": ["a#0", "a#1", "a#2"], "b_ids": ["b#0", "b#1", "b#2"],
                              "values": [0.01, 0.02, 0.01]}, 0.05)["connected"]
    assert np.isfinite(fs.crossed_ci([[1, 0, 1], [0, 1, 1]])[2])
