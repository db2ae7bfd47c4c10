"""The CLI documents itself: help on every option with its default, ``marl config show``, did-you-mean."""

from __future__ import annotations

import argparse
import tomllib

import pytest

from marl_cli.main import main, make_parser
from marl_cli.doc import parsers
from marl.core.config import NetworkConfig, TrainConfig, config_keys, field_docs, suggest


def test_every_option_has_help_and_shows_its_default():
    every = list(parsers(make_parser()))
    progs = {p.prog for p in every}
    assert {"marl train", "marl eval", "marl report", "marl render", "marl config show", "marl probe barrier",
            "marl sweep", "marl search"} <= progs
    for p in every:
        text = p.format_help()  # every parser formats (no stray % in a help string)
        for a in p._actions:
            if isinstance(a, (argparse._HelpAction, argparse._SubParsersAction)):
                continue
            assert a.help, f"{p.prog} {a.option_strings or a.dest} has no help"
        if p.prog == "marl eval":
            assert "(default: 256)" in " ".join(text.split()) and "(default: 12345)" in " ".join(text.split())
        assert "(default: None)" not in text and "(default: False)" not in text


def test_config_show_lists_every_key_with_a_description(capsys):
    assert main(["config", "show", "--algo", "happo", "lr=1e-3"]) == 0
    out = capsys.readouterr().out
    data = tomllib.loads(out)  # it is a config file a run can load
    cfg = TrainConfig.from_dict(data)
    assert cfg.algo == "happo" and cfg.share_actor is False and cfg.lr == 1e-3
    assert cfg == TrainConfig(algo="happo", share_actor=False, lr=1e-3)
    lines = {ln.split("=")[0].strip(): ln for ln in out.splitlines() if "=" in ln and not ln.startswith(("#", "["))}
    top = [k.split(".")[-1] for k in config_keys() if k != "algo" and not k.startswith("algo.")]
    assert sorted(lines) == sorted(top + ["name"] + list(cfg.algo_settings.keys()))  # [algo]: name and happo's settings
    assert "[algo]" in out and lines["name"].startswith('name = "happo"')
    for k, ln in lines.items():
        assert "# " in ln and len(ln.split("# ", 1)[1].split(": ", 1)[1]) > 3, ln  # "# type: description"
    assert "(default: 0.002)" in lines["lr"] and "(default: true)" in lines["share_actor"]
    docs = {**field_docs(TrainConfig), **field_docs(NetworkConfig), **field_docs(type(cfg.algo_settings))}
    assert all(docs.values()) and docs["gamma"] == "discount"


@pytest.mark.parametrize("key, want", [("learning_rate", "lr"), ("LR", "lr"), ("NUM_STEPS", "rollout_len"),
                                       ("hidden", "network.hidden"), ("network.lr", "lr"), ("num_seed", "num_seeds"),
                                       ("network.hiden", "network.hidden"), ("entropy_coef", "algo.ent_coef"),
                                       ("epoch", "algo.epochs"), ("algo.clip", "algo.clip_eps")])
def test_did_you_mean(key, want):
    assert suggest(key) == want


def test_unknown_key_is_one_line(capsys):
    assert main(["config", "show", "learning_rate=1e-3"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["marl: error: bad config: unknown key 'learning_rate'; did you mean lr?"]
    assert main(["config", "show", "zzzz=1"]) == 2
    assert "marl config show" in capsys.readouterr().err


def test_entity_network_doc_names_every_family_it_trains_on():
    """``marl config show``'s line for network.kind names every env family with an entity layout (the registry's
    capability), e.g. jumanji, not only MPE and SMAX."""
    from envs import catalog

    doc = field_docs(NetworkConfig)["kind"]
    fams = [f.name for f in catalog.FAMILIES.values() if f.entity_layouts is not None]
    assert "jumanji" in fams and all(f in doc for f in fams), (fams, doc)
