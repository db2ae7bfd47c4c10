"""Latent search: the search loop (injected fitness), shared vs per-agent latents, CLI errors, outputs."""

import dataclasses
import json
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import envs
from marl.core.config import NetworkConfig, TrainConfig
from marl.core.networks import init_actor
from marl.analysis.search import episode_fitness, make_strategy, run_search, search_methods, summarize, write_outputs
from marl.core.team import Team, tile


def quadratic(targets):
    """fitness(cands [I, P, R, d]) = -||z - target_i||^2 (max 0 at the target, which is inside the box)."""
    return lambda cands, keys: -jnp.sum((cands - targets[:, None]) ** 2, axis=(-2, -1))


@pytest.mark.parametrize("method,rows", [("cmaes-shared", 1), ("cmaes-per-agent", 3), ("sep-cmaes-per-agent", 3),
                                         ("cmaes-independent", 3)])
def test_cmaes_finds_quadratic_optimum(method, rows):
    d, inst = 4, 3
    targets = jax.random.uniform(jax.random.PRNGKey(0), (inst, rows, d), minval=-0.6, maxval=0.6)
    strat = make_strategy(method, num_agents=3, dim=d, pop=16, sigma=0.5)
    assert strat.rows == rows
    fit = quadratic(targets)
    run = jax.jit(lambda k, b: run_search(strat, fit, k, inst, b), static_argnums=1)
    res = run(jax.random.PRNGKey(1), 16 * 60)
    assert res.returns.shape == (inst, 16 * 60)
    np.testing.assert_allclose(np.asarray(res.best_latent), np.asarray(targets), atol=0.02)
    assert np.all(np.asarray(res.best_return) > -1e-3)
    # the curve is the running max of the evaluated returns and ends at the best
    curve = np.asarray(res.curve())
    assert np.all(np.diff(curve, axis=1) >= 0)
    np.testing.assert_array_equal(curve[:, -1], np.asarray(res.best_return))
    # and it beats uniform random search with the same budget by a wide margin
    rnd = make_strategy("random-per-agent" if rows > 1 else "random-shared", 3, d)
    r_res = run_search(rnd, fit, jax.random.PRNGKey(1), inst, 16 * 60)
    assert np.all(np.asarray(res.best_return) > np.asarray(r_res.best_return) + 0.01)


def test_best_latent_is_clipped_to_box():
    targets = jnp.full((2, 1, 3), 2.0)  # optimum outside the box: the best evaluated latent is the corner
    res = run_search(make_strategy("cmaes-shared", 1, 3), quadratic(targets), jax.random.PRNGKey(0), 2, 320)
    np.testing.assert_allclose(np.asarray(res.best_latent), 1.0, atol=1e-3)


def key_noise(cands, keys):
    """A return that is pure episode noise, N(0, 1) from the episode key [I, P, 2] -> [I, P]."""
    return jax.vmap(jax.vmap(lambda k: jax.random.normal(k)))(keys)


def test_repeats_average_common_noise_over_m_keys():
    inst, d, pop, m = 64, 2, 4, 16
    strat = make_strategy("random-shared", 1, d, pop=pop)
    one = run_search(strat, key_noise, jax.random.PRNGKey(0), inst, pop * 2)
    avg = run_search(strat, key_noise, jax.random.PRNGKey(0), inst, pop * m * 2, repeats=m)
    assert one.returns.shape == (inst, pop * 2) and avg.returns.shape == (inst, pop * m * 2)
    s1 = np.asarray(one.returns)
    sm = np.asarray(avg.returns).reshape(inst, 2 * pop, m)
    np.testing.assert_array_equal(sm, sm[..., :1].repeat(m, axis=-1))  # one score per candidate, m episodes long
    sm = sm[..., 0]
    # common noise: every candidate of an instance is scored on the same keys -> one score per instance
    np.testing.assert_array_equal(s1, s1[:, :1].repeat(2 * pop, axis=1))
    np.testing.assert_array_equal(sm, sm[:, :1].repeat(2 * pop, axis=1))
    # that score is the mean of m N(0, 1) draws: spread 1 / sqrt(m) = 0.25 across instances instead of 1
    assert 0.7 < s1[:, 0].std() < 1.3 and 0.15 < sm[:, 0].std() < 0.35
    # repeats change only the scoring: on a noise-free fitness, m repeats over m times the budget run
    # the same generations (same candidates, same strategy updates) as one episode per candidate
    fit = quadratic(jnp.full((inst, 1, d), 0.3))
    cm = make_strategy("cmaes-shared", 1, d, pop=pop)
    r1 = run_search(cm, fit, jax.random.PRNGKey(3), inst, pop * 5)
    r4 = run_search(cm, fit, jax.random.PRNGKey(3), inst, pop * 5 * 4, repeats=4)
    np.testing.assert_allclose(np.asarray(r4.returns), np.repeat(np.asarray(r1.returns), 4, axis=1), rtol=1e-6)
    np.testing.assert_array_equal(np.asarray(r4.best_latent), np.asarray(r1.best_latent))
    # without common noise (``sampling``) every candidate draws its own m keys
    samp = run_search(make_strategy("sampling", 1, d, pop=pop), key_noise, jax.random.PRNGKey(0), inst, pop * m,
                      repeats=m)
    assert len(np.unique(np.asarray(samp.returns)[0])) == pop


@pytest.fixture(scope="module")
def latent_team():
    env = envs.make("mpe:simple_spread", num_agents=3)
    net = NetworkConfig(hidden=16, critic_hidden=16, latent_dim=4, recurrent=False)
    p = init_actor(jax.random.PRNGKey(0), env.spec, net)
    # untrained latent weights are zero: give them values so that z matters
    p = jax.tree_util.tree_map_with_path(
        lambda path, x: jax.random.normal(jax.random.PRNGKey(1), x.shape) if "latent" in jax.tree_util.keystr(path)
        else x, p)
    return env, Team(tile(p, 3), env.spec, net, shared=True)


def test_equal_per_agent_rows_reproduce_shared_latent(latent_team):
    env, team = latent_team
    inst, pop, n, d = 3, 4, 3, 4
    ikeys = jax.random.split(jax.random.PRNGKey(2), inst)
    ekeys = jnp.broadcast_to(jax.random.split(jax.random.PRNGKey(3), inst)[:, None], (inst, pop, 2))
    z = jax.random.uniform(jax.random.PRNGKey(4), (inst, pop, 1, d), minval=-1, maxval=1)
    fit = jax.jit(episode_fitness(env, team, ikeys, greedy=True))
    shared = np.asarray(fit(z, ekeys))
    per_agent = np.asarray(fit(jnp.repeat(z, n, axis=2), ekeys))
    np.testing.assert_array_equal(shared, per_agent)
    # rows that differ give different returns (so the equality above is not vacuous)
    z2 = jnp.repeat(z, n, axis=2).at[:, :, 0].set(-z[:, :, 0])
    assert not np.allclose(np.asarray(fit(z2, ekeys)), shared)
    # every candidate of an instance starts from the same state: the same latent gives the same return
    same = np.asarray(fit(jnp.broadcast_to(z[:, :1], z.shape), ekeys))
    np.testing.assert_array_equal(same, same[:, :1].repeat(pop, 1))
    assert len(np.unique(same[:, 0])) == inst


def test_search_methods_outputs(latent_team, tmp_path):
    env, team = latent_team
    res = search_methods(env, team, ["zero-shot", "random-shared"], num_instances=4, budget=16, reeval_episodes=2,
                         log=lambda *a: None)
    zs, rs = res["zero-shot"], res["random-shared"]
    assert zs["curve"].shape == (4, 16) and np.all(zs["curve"] == zs["curve"][:, :1])
    # MPE is deterministic: a greedy latent's re-evaluation on fresh keys equals its best seen return
    np.testing.assert_allclose(rs["reeval"], rs["best_seen"], rtol=1e-5)
    s = summarize(res)
    write_outputs(s, tmp_path / "out")
    data = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert data["methods"]["random-shared"]["curve_mean"][-1] == pytest.approx(rs["curve"][:, -1].mean())
    assert (tmp_path / "out" / "curves.png").stat().st_size > 1000
    assert len((tmp_path / "out" / "curves.csv").read_text().splitlines()) == 1 + 2 * 16
    assert len((tmp_path / "out" / "pairwise.csv").read_text().splitlines()) == 1 + len(s["comparisons"])


def test_cli_refuses_run_without_latent(tmp_path, capsys):
    from marl_cli.main import main

    run = tmp_path / "plain"
    run.mkdir()
    TrainConfig(env="mpe:simple_spread").to_toml(run / "config.toml")
    code = main(["search", str(run), "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert err.startswith("marl: error: run ") and "was trained without a latent; train with --latent-dim" in err
    assert "\n" not in err
    code = main(["search", str(run), "--out", str(tmp_path / "o"), "--methods", "cmaes-bogus"])
    assert code == 2 and "unknown search method 'cmaes-bogus'" in capsys.readouterr().err
    code = main(["search", str(run), "--out", str(tmp_path / "o"), "--repeats", "0"])
    assert code == 2 and "--repeats must be an integer in [1, 1048576], got 0" in capsys.readouterr().err


def test_budget_must_fit_population_times_repeats(latent_team):
    from marl_common.errors import UserError

    env, team = latent_team
    with pytest.raises(UserError, match=r"--budget \(48\) must be a multiple of population x repeats \(16 x 2\)"):
        search_methods(env, team, ["random-shared"], num_instances=2, budget=48, repeats=2, log=lambda *a: None)


def _source_of(team):
    """P: the latent team's actor without its latent input (L at z = 0 acts exactly as P)."""
    import dataclasses

    params = {k: v for k, v in team.params["params"].items() if k != "latent"}
    return team.replace(params={"params": params}, network=dataclasses.replace(team.network, latent_dim=0))


def test_source_row_and_named_per_agent_controls(latent_team):
    env, team = latent_team
    source = _source_of(team)
    methods = ["zero-shot", "random-shared", "sep-cmaes-shared", "sep-cmaes-per-agent"]
    res = search_methods(env, team, methods, num_instances=4, budget=16, reeval_episodes=2, source=source,
                         random_policy=True, log=lambda *a: None)
    # the random policy samples uniformly: its re-evaluated episodes are not its best-seen one replayed
    assert res["random-policy"]["reeval"].shape == (4,)
    assert not np.allclose(res["random-policy"]["reeval"], res["random-policy"]["best_seen"])
    # same instances and episode keys: P greedy equals L at z = 0 episode for episode
    np.testing.assert_array_equal(res["source"]["best_seen"], res["zero-shot"]["best_seen"])
    np.testing.assert_array_equal(res["source"]["reeval"], res["zero-shot"]["reeval"])
    s = summarize(res, per_agent="sep-cmaes-per-agent")
    comp = s["comparisons"]
    d = res["sep-cmaes-per-agent"]["reeval"] - res["sep-cmaes-shared"]["reeval"]
    assert comp["sep-cmaes-per-agent - sep-cmaes-shared (reeval)"][0] == pytest.approx(d.mean(), rel=1e-6)
    assert "sep-cmaes-per-agent - cmaes-shared (reeval)" not in comp  # cmaes-shared was not run
    assert "sep-cmaes-per-agent - source (reeval)" in comp and "zero-shot - source (reeval)" in comp
    assert comp["zero-shot - source (reeval)"][0] == 0.0
    assert s["per_agent"] == "sep-cmaes-per-agent"
    assert not any("random-policy" in k for k in comp)


def test_source_must_match_env_and_network(latent_team):
    import dataclasses

    from marl_common.errors import UserError
    from marl.analysis.search import check_source

    env, team = latent_team
    source = _source_of(team)
    check_source(team, source)
    env4 = envs.make("mpe:simple_spread", num_agents=4)
    with pytest.raises(UserError, match="with 4 agents but the latent run plays"):
        check_source(team, source.replace(spec=env4.spec))
    with pytest.raises(UserError, match="has another network"):
        check_source(team, source.replace(network=dataclasses.replace(source.network, hidden=32)))
    # L trained from P with a latent scale of its own (network.latent_scale = 10, the ATLAS recipes) is L of that P
    check_source(team.replace(network=dataclasses.replace(team.network, latent_scale=10.0)), source)


def test_cli_refuses_unknown_per_agent_method_and_nan_sigma(tmp_path, capsys):
    from marl_cli.main import main

    run = tmp_path / "lat"
    run.mkdir()
    TrainConfig(env="mpe:simple_spread").to_toml(run / "config.toml")
    for extra, msg in [(["--per-agent", "cmaes-sharde"], "is not a per-agent method"),
                       (["--methods", "zero-shot", "cmaes-shared"], "--per-agent sep-cmaes-per-agent is not among"),
                       (["--sigma", "nan"], "--sigma must be a finite number > 0"),
                       (["--sigma", "inf"], "--sigma must be a finite number > 0")]:
        code = main(["search", str(run), "--out", str(tmp_path / "o")] + extra)
        err = capsys.readouterr().err.strip()
        assert code == 2 and msg in err and "\n" not in err, (extra, err)
    assert not (tmp_path / "o").exists()


def test_search_run_checks_arguments_before_loading(tmp_path):
    import re

    from marl_common.errors import UserError
    from marl.analysis.search import search_run

    run = tmp_path / "plain"
    run.mkdir()
    TrainConfig(env="mpe:simple_spread").to_toml(run / "config.toml")
    for kw, msg in [(dict(methods=["cmaes-bogus"]), "unknown search method 'cmaes-bogus'"),
                    (dict(per_agent="cmaes-sharde"), "--per-agent 'cmaes-sharde' is not a per-agent method"),
                    (dict(methods=["zero-shot", "cmaes-shared"]), "--per-agent sep-cmaes-per-agent is not among"),
                    (dict(instances=0), "--instances must be an integer in [1, 1048576], got 0"),
                    (dict(repeats=0), "--repeats must be an integer in [1, 1048576], got 0"),
                    (dict(sigma=float("nan")), "--sigma must be a finite number > 0, got nan")]:
        with pytest.raises(UserError, match=re.escape(msg)):
            search_run(run, out=tmp_path / "o", **kw)
    assert not (tmp_path / "o").exists()
    with pytest.raises(UserError, match=f"run {re.escape(str(run.resolve()))} was trained without a latent"):
        search_run(run, out=tmp_path / "o")


def test_search_run_summary_and_files(latent_team, tmp_path, monkeypatch):
    """search_run on a run folder (the checkpoint loader replaced by the fixture's teams): the header and
    progress lines, the summary with the run's settings, the source row, and the files."""
    from marl.analysis.search import OUTPUT_FILES, search_run
    from marl.runs import loader

    env, team = latent_team
    lat, src = tmp_path / "lat", tmp_path / "src"
    for p, net in ((lat, team.network), (src, _source_of(team).network)):
        p.mkdir()
        TrainConfig(env="mpe:simple_spread", num_latents=4 if net.latent_dim else 0, network=net).to_toml(p / "config.toml")
    teams = {"lat": team, "src": _source_of(team)}
    monkeypatch.setattr(loader, "load_team", lambda ref: loader.LoadedTeam(teams[ref.run.name], env, {
        "run": str(ref.run), "step": 7, "seed": ref.seed, "algo": "mappo", "env_steps": 0, "shared": True}))
    lines = []
    s = search_run(lat, instances=2, budget=4, population=4, reeval=1, methods=["zero-shot", "random-per-agent"],
                   per_agent="random-per-agent", source=src, random_policy=True, out=tmp_path / "out",
                   echo=lines.append)
    assert lines[0] == f"search {lat.resolve()} @ update 7 ({team.spec.name}, N=3, d=4): 2 instances, budget 4"
    assert [ln.split()[0] for ln in lines[1:]] == ["zero-shot", "random-per-agent", "source", "random-policy"]
    assert "random-policy" in s["methods"]
    assert s["run"]["run"] == str(lat.resolve()) and s["source"]["run"] == str(src.resolve())
    assert (s["instances"], s["budget"], s["population"], s["sigma"], s["reeval_episodes"], s["repeats"], s["seed"],
            s["per_agent"]) == (2, 4, 4, 0.5, 1, 1, 0, "random-per-agent")
    assert s["comparisons"]["zero-shot - source (reeval)"][0] == 0.0  # L at z = 0 acts as P
    # the liveness measure on the same instances: zero-shot there is the zero-shot row's episode (noise-free MPE)
    liv = s["liveness"]
    assert np.shape(liv["latent"]) == (2, 16, 4) and np.shape(liv["zero"]) == (2, 4)
    np.testing.assert_allclose(np.asarray(liv["zero"]).mean(), s["methods"]["zero-shot"]["reeval"][0], rtol=1e-5)
    np.testing.assert_array_equal(np.ptp(np.asarray(liv["zero"]), axis=1), 0.0)
    assert all((tmp_path / "out" / f).stat().st_size > 0 for f in OUTPUT_FILES)
    assert json.loads((tmp_path / "out" / "summary.json").read_text())["comparisons"] == s["comparisons"]
    assert search_run(lat, instances=2, budget=4, population=4, reeval=1, methods=["random-per-agent"],
                      per_agent="random-per-agent", echo=lambda *a: None)["source"] is None


def _fake_results(methods, instances=6, budget=8, seed=0):
    """Per-method arrays shaped like ``search_methods``'s (no episodes run)."""
    rng = np.random.default_rng(seed)
    out = {}
    for i, m in enumerate(methods):
        curve = np.maximum.accumulate(rng.normal(i, 1.0, (instances, budget)), axis=1)
        out[m] = {"curve": curve, "best_seen": curve[:, -1], "reeval": curve[:, -1] - rng.random(instances),
                  "best_latent": np.zeros((instances, 1, 2)), "compile_s": 0.0, "search_s": 0.1}
    return out


def test_printed_table_is_per_method_rows_and_headline_pairs_go_to_files(tmp_path):
    """The console gets the per-method table and the headline comparisons; every paired difference is in
    pairwise.csv and table.txt; the figure and its file list are written."""
    import csv

    from marl.analysis.search import METHODS, OUTPUT_FILES, SOURCE, RANDOM_POLICY, table
    from marl.analysis.search.output import BASELINES, FAMILIES, family, headline

    s = summarize(_fake_results([*METHODS, SOURCE, RANDOM_POLICY]), per_agent="sep-cmaes-per-agent")
    assert len(s["comparisons"]) >= 40  # the dump the console no longer prints
    text = table(s).splitlines()
    assert len(text) <= 1 + len(METHODS) + 2 + 2 + 2
    assert headline(s) == ["sep-cmaes-per-agent - cmaes-shared (reeval)", "sep-cmaes-per-agent - sep-cmaes-shared (reeval)"]
    assert [ln.split()[0] for ln in text[1:1 + len(METHODS) + 2]] == [*METHODS, SOURCE, RANDOM_POLICY]
    assert sum(" - " in ln for ln in text) == 2
    # named per-agent method absent: the shared-search headline instead
    s2 = summarize(_fake_results(["zero-shot", "random-shared", "cmaes-shared"]))
    assert headline(s2) == ["cmaes-shared - random-shared (reeval)", "cmaes-shared - zero-shot (reeval)"]
    write_outputs(s, tmp_path)
    assert all((tmp_path / f).stat().st_size > 0 for f in OUTPUT_FILES)
    rows = list(csv.DictReader((tmp_path / "pairwise.csv").open()))
    assert [r["comparison"] for r in rows] == list(s["comparisons"])
    r = rows[0]
    assert f"{r['a']} - {r['b']} ({r['score']})" == r["comparison"] and r["a"] in s["methods"] and r["b"] in s["methods"]
    assert float(r["mean"]) == pytest.approx(s["comparisons"][r["comparison"]][0], rel=1e-5)
    saved = (tmp_path / "table.txt").read_text()
    assert saved.startswith(table(s)) and all(k in saved for k in s["comparisons"])
    # the figure's panels: every method in one family; searches split by one latent vs one per agent
    assert {m: family(m) for m in ("zero-shot", "sampling", SOURCE, RANDOM_POLICY)} == dict.fromkeys(
        ("zero-shot", "sampling", SOURCE, RANDOM_POLICY), BASELINES)
    shared, per_agent = FAMILIES.values()
    assert set(shared) | set(per_agent) | {"zero-shot", "sampling"} == set(METHODS) and not set(shared) & set(per_agent)


def test_cli_random_policy_flag_and_short_console(tmp_path, capsys, monkeypatch):
    """``marl search --random-policy`` asks for the random-policy row; the console shows the per-method
    table and the headline pairs, not every paired difference."""
    from marl_cli.main import main
    from marl import api
    from marl.analysis.search import RANDOM_POLICY

    calls = []

    def fake_search(ref, **kw):
        calls.append(kw)
        methods = ["zero-shot", "random-shared", "cmaes-shared", "sep-cmaes-shared", "sep-cmaes-per-agent"]
        s = summarize(_fake_results(methods + ([RANDOM_POLICY] if kw["random_policy"] else [])),
                      per_agent=kw["per_agent"])
        write_outputs(s, kw["out"])
        return s

    monkeypatch.setattr(api, "search", fake_search)
    for extra, want in (([], False), (["--random-policy"], True)):
        assert main(["search", str(tmp_path / "run"), "--out", str(tmp_path / "o")] + extra) == 0
        assert calls[-1]["random_policy"] is want
        out = capsys.readouterr().out
        assert (f"\n{RANDOM_POLICY} " in out) is want
        assert sum(" - " in ln for ln in out.splitlines()) == 2  # the headline pairs only
        assert "pairwise.csv" in out


def test_search_too_large_for_memory_is_one_line():
    from types import SimpleNamespace

    import envs
    from marl_common.errors import UserError
    from marl.analysis.search.driver import check_search_memory

    from marl.core.config import NetworkConfig

    env = envs.make("smax:3m")
    team = SimpleNamespace(num_agents=3, network=NetworkConfig(hidden=64, latent_dim=16))
    check_search_memory(env, team, instances=8, per_generation=16, reeval=16)  # fits
    with pytest.raises(UserError, match=r"searching 1,000,000,000 instances x 16 episodes at once needs about .* "
                                        r"use fewer --instances"):
        check_search_memory(env, team, instances=10**9, per_generation=16, reeval=4)


def test_search_memory_counts_the_entity_actors_pairs():
    """The estimate (made before compiling) grows like N^2 H for the exact entity actor and like N k H
    with network.entity_k = k: at N = 200 the exact actor's step is >= 10x the k = 8 one's, and it
    doubles-and-more from N = 100 to 200 (pairs) where the k = 8 one only about doubles."""
    import envs
    from marl.core.config import NetworkConfig
    from marl.core.networks import actor_step_bytes

    def est(n, k):
        net = NetworkConfig(kind="entity", agent_id=False, hidden=64, recurrent=False, entity_k=k)
        return actor_step_bytes(envs.make(f"mpe:simple_spread:{n}").spec, net)

    assert est(200, 0) > 10 * est(200, 8)
    assert est(200, 0) > 3.5 * est(100, 0)
    assert est(200, 8) < 2.5 * est(100, 8)
    assert est(4, 8) == est(4, 0)  # every group <= k: the exact network


def test_shared_programs_compile_the_episodes_once_across_teams(latent_team):
    """``programs`` reused for another team of the same network (another training seed): the episode
    program (the costly one) is not compiled again, and the results equal those of a fresh search."""
    from marl.analysis.search.loop import Programs

    env, team = latent_team
    leaves, tree = jax.tree.flatten(team.params)
    keys = jax.random.split(jax.random.PRNGKey(7), len(leaves))
    other = team.replace(params=jax.tree.unflatten(tree, [x + 0.5 * jax.random.normal(k, x.shape)
                                                          for x, k in zip(leaves, keys)]))
    kw = dict(num_instances=2, budget=8, pop=4, reeval_episodes=1, log=lambda *_: None)
    programs = Programs()
    episode_programs = lambda: sorted(str(k[1:]) for k in programs._compiled if k[0][0] == "score")
    search_methods(env, team, ["zero-shot", "sep-cmaes-per-agent"], programs=programs, **kw)
    first = episode_programs()
    again = search_methods(env, other, ["zero-shot", "sep-cmaes-per-agent"], programs=programs, **kw)
    assert first and episode_programs() == first
    fresh = search_methods(env, other, ["zero-shot", "sep-cmaes-per-agent"], **kw)
    for m in again:
        np.testing.assert_array_equal(again[m]["reeval"], fresh[m]["reeval"])
        assert not np.array_equal(again[m]["reeval"], search_methods(env, team, [m], **kw)[m]["reeval"])


def test_one_instance_prints_no_zero_width_interval():
    """One instance: the table says there is no interval instead of printing ``[x, x]``; with several
    instances the interval is printed as before."""
    from marl.analysis.search import table

    methods = ["zero-shot", "sep-cmaes-shared", "sep-cmaes-per-agent"]
    s1 = {**summarize(_fake_results(methods, instances=1), per_agent="sep-cmaes-per-agent"), "instances": 1}
    s = summarize(_fake_results(methods), per_agent="sep-cmaes-per-agent")
    text1 = table(s1)
    assert "[no CI: 1 instance]" in text1
    assert not re.search(r"\[\s*(-?\d+\.\d+),\s*\1\]", text1)
    lo, hi = s["methods"]["zero-shot"]["reeval"][1:]
    assert f"[{lo:8.3f}, {hi:8.3f}]" in table({**s, "instances": 4}) and "no CI" not in table({**s, "instances": 4})


def test_liveness_precondition_fails_on_an_inert_latent_and_holds_on_a_live_one(latent_team):
    """The liveness measure on a team (K latents x E episodes and zero-shot on the search's instances, one
    program): the latent weights zeroed (the latent reaches no action) fail the precondition, "inert" with its
    numbers, greedy (noise-free episodes) and sampled (episode noise), and so does ``network.latent_scale = 0``
    on the live weights; the fixture's live latent passes."""
    from marl.analysis.search import measure_liveness
    from studies import liveness as lv

    env, team = latent_team
    inert = team.replace(params=jax.tree_util.tree_map_with_path(
        lambda path, x: jnp.zeros_like(x) if "latent" in jax.tree_util.keystr(path) else x, team.params))
    inst, k, e = 16, 8, 2
    records = {f"latent_live::{lv.liveness_design(inst, k, e, e).key()}": {"passes": True}}
    m = measure_liveness(env, team, inst, latents=k, episodes=e, width=8)
    assert m["latent"].shape == (inst, k, e) and m["zero"].shape == (inst, e)
    live = lv.precondition(m["latent"], m["zero"], records)
    assert live["live"] and live["text"].startswith("latent space live"), live["text"]
    for greedy in (True, False):
        dead = measure_liveness(env, inert, inst, latents=k, episodes=e, greedy=greedy, width=8)
        out = lv.precondition(dead["latent"], dead["zero"], records)
        assert not out["live"] and out["text"].startswith(lv.INERT + ":"), out["text"]
        if greedy:  # noise-free: every latent returns exactly what zero-shot returns on its instance
            np.testing.assert_array_equal(dead["latent"], np.broadcast_to(dead["zero"][:, :1, None], (inst, k, e)))
            assert f"0/{inst} instances" in out["text"] and "noise-free" in out["text"]
        else:  # sampled actions: episode noise, the latent's share of it estimated near 0
            assert np.ptp(dead["zero"]) > 0 and "variance ratio" in out["text"]
    # the same live weights with network.latent_scale = 0 (the latent scaled away where it enters): inert
    scaled = team.replace(network=dataclasses.replace(team.network, latent_scale=0.0))
    dead = measure_liveness(env, scaled, inst, latents=k, episodes=e, width=8)
    out = lv.precondition(dead["latent"], dead["zero"], records)
    assert not out["live"] and f"0/{inst} instances" in out["text"], out["text"]
    np.testing.assert_array_equal(dead["zero"], m["zero"])  # z = 0 is unchanged by the scale
    # without a calibration record for the design, no "live": the line says so
    assert lv.precondition(m["latent"], m["zero"], {})["text"].startswith(lv.NOT_SHOWN)
