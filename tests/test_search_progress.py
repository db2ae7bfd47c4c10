"""A search stopped part-way goes on from its kept progress to the numbers an unstopped search gives, bit for bit
(``marl.analysis.search.progress``): the ATLAS re-run's searches take up to two hours each, and a session's end
stopped them."""

import json

import jax
import numpy as np
import pytest

import envs
from marl.analysis.search import compare, search_methods
from marl.analysis.search.loop import Programs
from marl.analysis.search.progress import Progress
from marl.core.config import NetworkConfig
from marl.core.networks import init_actor
from marl.core.team import Team, tile
from marl_common.errors import UserError

METHODS = ["zero-shot", "sep-cmaes-shared", "sep-cmaes-per-agent"]
KW = dict(num_instances=3, budget=20, pop=4, reeval_episodes=2, log=lambda *_: None)  # 5 generations a method


@pytest.fixture(scope="module")
def latent_team():
    env = envs.make("mpe:simple_spread", num_agents=3)
    net = NetworkConfig(hidden=16, critic_hidden=16, latent_dim=4, recurrent=False)
    p = init_actor(jax.random.PRNGKey(0), env.spec, net)
    p = jax.tree_util.tree_map_with_path(  # untrained latent weights are zero: give them values so that z matters
        lambda path, x: jax.random.normal(jax.random.PRNGKey(1), x.shape) if "latent" in jax.tree_util.keystr(path)
        else x, p)
    return env, Team(tile(p, 3), env.spec, net, shared=True)


class Stop(Exception):
    pass


def _counting(monkeypatch, stop_at=None):
    """Count the episode program's calls (``compare.scorer``'s ``score``); raise ``Stop`` at call ``stop_at``."""
    calls = [0]
    real = compare.scorer

    def scorer(*a, **k):
        score = real(*a, **k)

        def counted(z, keys):
            calls[0] += 1
            if calls[0] == stop_at:
                raise Stop
            return score(z, keys)
        return counted
    monkeypatch.setattr(compare, "scorer", scorer)
    return calls


def _same(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for m in a:
        for k in ("curve", "best_seen", "reeval", "best_latent"):
            np.testing.assert_array_equal(np.asarray(a[m][k]), np.asarray(b[m][k]), err_msg=f"{m} {k}")


def test_a_stopped_search_goes_on_to_the_numbers_of_an_unstopped_one(latent_team, tmp_path, monkeypatch):
    """Stopped at each kind of point (in a method's generations, in a re-evaluation, before a method begins),
    then run again on the same folder, the search returns what the unstopped one returns; the
    methods it finished are not searched again. Stopped in a generation loop, it goes on with freshly compiled
    programs, as a new process does (its restored carry is numpy, not the compiled outputs it was)."""
    env, team = latent_team
    calls = _counting(monkeypatch)
    programs = Programs()
    whole = search_methods(env, team, METHODS, programs=programs, **KW)
    total = calls[0]
    assert total == 14  # zero-shot 1 + 1 re-evaluation, each search 5 generations + 1
    identity, seen = {"search": "test"}, set()
    for stop in (2, 5, 8, 11, 14):  # zero-shot's re-evaluation, each search's generations and its re-evaluation
        folder = tmp_path / f"stop{stop}"
        calls = _counting(monkeypatch, stop_at=stop)
        with pytest.raises(Stop):
            search_methods(env, team, METHODS, programs=programs, progress=Progress(folder, identity, every_s=0), **KW)
        kept = sorted(p.name for p in folder.glob("*.npz")) if folder.is_dir() else []
        calls = _counting(monkeypatch)
        progress = Progress(folder, identity, every_s=0)
        assert progress.resumed == bool(kept)
        again = search_methods(env, team, METHODS, programs=Programs() if stop in (5, 11) else programs, progress=progress,
                               **KW)
        _same(again, whole)
        assert calls[0] >= total - (stop - 1)  # it did at least what the stopped run left undone
        if kept:
            assert calls[0] < total  # and went on: what was kept was not run again
        seen.update(kept)
    assert {"sep-cmaes-shared.gen.npz", "sep-cmaes-per-agent.gen.npz", "sep-cmaes-shared.done.npz"} <= seen


def test_kept_state_is_written_no_more_often_than_asked_and_a_finished_method_always(latent_team, tmp_path,
                                                                                     monkeypatch):
    """Stopped in the per-agent search's generations (call 11): with ``every_s`` = 1 hour its running state was
    never written (the finished methods were), with 0 it was; the search seconds kept count both."""
    env, team = latent_team
    kept = {}
    for every in (3600, 0):
        _counting(monkeypatch, stop_at=11)
        progress = Progress(tmp_path / f"p{every}", {"search": "test"}, every_s=every)
        with pytest.raises(Stop):
            search_methods(env, team, METHODS, progress=progress, **KW)
        kept[every] = sorted(p.name for p in progress.folder.glob("*.npz"))
        assert progress.spent_s() > 0
    assert kept[3600] == ["sep-cmaes-shared.done.npz", "zero-shot.done.npz"]
    assert kept[0] == ["sep-cmaes-per-agent.gen.npz", "sep-cmaes-shared.done.npz", "zero-shot.done.npz"]
    progress.clear()
    assert not progress.folder.exists()


def test_progress_of_another_search_is_refused_in_one_line(latent_team, tmp_path):
    env, team = latent_team
    folder = tmp_path / "p"
    search_methods(env, team, ["zero-shot"], progress=Progress(folder, {"teams": "a"}, every_s=0), **KW)
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    with pytest.raises(UserError, match="progress of another search"):
        Progress(folder, {"teams": "b"})
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before
    assert json.loads((folder / "identity.json").read_text()) == {"teams": "a"}
    (folder / "identity.json").write_text('{"teams": ')
    with pytest.raises(UserError, match="cannot be read"):
        Progress(folder, {"teams": "a"})
    (folder / "identity.json").write_text('{"teams": "a"}')
    (folder / "zero-shot.done.npz").write_bytes(before["zero-shot.done.npz"][:100])  # cut short (a full disk, a bad copy)
    with pytest.raises(UserError, match=r"zero-shot.done.npz cannot be read \(BadZipFile\).*remove that folder"):
        search_methods(env, team, ["zero-shot"], progress=Progress(folder, {"teams": "a"}, every_s=0), **KW)
    np.savez(folder / "zero-shot.done.npz", curve=np.zeros(2))  # readable, but not what this code writes
    with pytest.raises(UserError, match="zero-shot.done.npz lacks compile_s, search_s"):
        search_methods(env, team, ["zero-shot"], progress=Progress(folder, {"teams": "a"}, every_s=0), **KW)


def test_marl_search_stopped_part_way_goes_on_from_its_out_folder(latent_team, tmp_path, monkeypatch):
    """``search_run`` with ``out`` (``marl search --out``) keeps its progress in ``out/partial_summary``: stopped
    part-way and called again with the same arguments it says it goes on, its summary is an unstopped search's,
    and the folder goes; called with other arguments over the kept progress, it is refused in one line."""
    from marl.analysis.search import search_run
    from marl.core.config import TrainConfig
    from marl.runs import loader

    env, team = latent_team
    run = tmp_path / "lat"
    run.mkdir()
    TrainConfig(env="mpe:simple_spread", num_latents=4, network=team.network).to_toml(run / "config.toml")
    monkeypatch.setattr(loader, "load_team", lambda ref: loader.LoadedTeam(team, env, {
        "run": str(ref.run), "step": 7, "seed": ref.seed, "algo": "mappo", "env_steps": 0, "shared": True}))
    kw = dict(instances=2, budget=12, population=4, reeval=1, methods=["zero-shot", "sep-cmaes-per-agent"],
              per_agent="sep-cmaes-per-agent", liveness=False)
    whole = search_run(run, echo=lambda *_: None, **kw)
    out = tmp_path / "out"
    _counting(monkeypatch, stop_at=4)  # in the per-agent search's generations
    with pytest.raises(Stop):
        search_run(run, out=out, echo=lambda *_: None, **kw)
    assert (out / "partial_summary" / "zero-shot.done.npz").is_file()
    _counting(monkeypatch)
    lines = []
    again = search_run(run, out=out, echo=lines.append, **kw)
    assert any(ln.startswith(f"going on from {out / 'partial_summary'}") for ln in lines)
    numbers = lambda s: {m: {k: v for k, v in r.items() if not k.endswith("_s")} for m, r in s["methods"].items()}  # noqa: E731
    assert numbers(again) == numbers(whole) and again["comparisons"] == whole["comparisons"]  # timings aside
    assert not (out / "partial_summary").exists() and (out / "summary.json").is_file()
    _counting(monkeypatch, stop_at=4)
    with pytest.raises(Stop):
        search_run(run, out=out, echo=lambda *_: None, **kw)
    with pytest.raises(UserError, match="holds the progress of another search"):
        search_run(run, out=out, echo=lambda *_: None, **{**kw, "seed": 1})
