"""``marl render RUN[#SEED] --episodes 1 --out ep.gif``: episodes of a trained team as a GIF.

Drawn by jaxmarl's own visualisers (``jaxmarl.viz.visualizer.SMAXVisualizer``, which expands every env
step into the simulator's sub-steps, and ``jaxmarl.environments.mpe.MPEVisualizer``), written with
matplotlib's Pillow writer. The team acts greedily unless ``--sampled``; a latent-conditioned team
takes ``--latent`` (comma-separated values shared by every agent, or an ``.npy`` of [d] or [N, d]).
"""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import numpy as np

from common.errors import UserError


def parse_latent(text: str | None, num_agents: int, latent_dim: int):
    """``--latent`` -> [N, d] float32 (None: zeros); one-line errors for a wrong size."""
    if text is None:
        return np.zeros((num_agents, latent_dim), np.float32)
    if latent_dim == 0:
        raise UserError("--latent given, but this team has no latent input (network.latent_dim = 0)")
    if text.endswith(".npy"):
        try:
            z = np.load(text).astype(np.float32)
        except (OSError, ValueError) as e:
            raise UserError(f"cannot read latent file {text}: {e}") from None
    else:
        try:
            z = np.array([float(v) for v in text.split(",")], np.float32)
        except ValueError:
            raise UserError(f"--latent must be comma-separated numbers or an .npy file, got {text!r}") from None
    if z.shape not in ((latent_dim,), (num_agents, latent_dim)):
        raise UserError(f"--latent has shape {z.shape}; this team needs ({latent_dim},) or ({num_agents}, {latent_dim})")
    return np.broadcast_to(z, (num_agents, latent_dim)).copy()


def play(env, team, key, greedy: bool, latent, episodes: int, max_steps: int | None = None) -> list:
    """Run ``episodes`` episodes one env step at a time; returns [(key, jaxmarl state, actions dict)] per
    step (the state before the step, the key and actions given to jaxmarl's step), episodes in order."""
    import jax
    import jax.numpy as jnp

    from marl.core import ppo
    from marl.core.team import team_step

    spec, net = team.spec, team.network

    @jax.jit
    def act_and_step(carry, ts, state, reset, k_act, k_env):  # one compiled program per env step
        carry, logits = team_step(spec, net, team.params, carry, ts.obs, reset, jnp.asarray(latent), ids=team.ids)
        actions = ppo.sample(k_act, ppo.masked_logits(logits, ts.avail), greedy)
        ts, state = env.step(k_env, state, actions)
        return carry, actions, ts, state

    reset_fn = jax.jit(env.reset)
    seq = []
    limit = max_steps or spec.max_steps
    for ep in range(episodes):
        k_ep = jax.random.fold_in(key, ep)
        ts, state = reset_fn(jax.random.fold_in(k_ep, 0))
        carry = jnp.zeros((spec.num_agents, net.hidden), jnp.float32)
        for t in range(limit):
            k_act, k_env = jax.random.split(jax.random.fold_in(k_ep, t + 1))
            inner = jax.device_get(state.inner)
            carry, actions, ts, state = act_and_step(carry, ts, state, jnp.asarray(t == 0), k_act, k_env)
            a = np.asarray(actions)
            seq.append((k_env, inner, {name: int(a[i]) for i, name in enumerate(env.agents)}))
            if bool(ts.done):
                break
    return seq


def animate(env, seq: list, out: Path, fps: int) -> int:
    """Write the GIF with jaxmarl's visualiser for the env's family; returns the number of frames."""
    import matplotlib.pyplot as plt
    from matplotlib import animation

    family = env.spec.name.split(":")[0]
    with contextlib.redirect_stdout(io.StringIO()):  # the MPE visualiser prints its settings
        if family == "smax":
            from jaxmarl.viz.visualizer import SMAXVisualizer

            viz = SMAXVisualizer(env.inner, seq)
            viz.expand_state_seq()
            frames, init = len(viz.state_seq), viz.init
        else:
            from jaxmarl.environments.mpe import MPEVisualizer

            viz = MPEVisualizer(env.inner, [s for _, s, _ in seq])
            frames, init = len(viz.state_seq), None
    ani = animation.FuncAnimation(viz.fig, viz.update, frames=frames, init_func=init, blit=False, interval=1000 // fps)
    out.parent.mkdir(parents=True, exist_ok=True)
    ani.save(out, writer=animation.PillowWriter(fps=fps))
    plt.close(viz.fig)
    return frames


def render(ref: str, out: str | Path, *, episodes: int = 1, sampled: bool = False, latent: str | None = None,
           eval_seed: int = 0, max_steps: int | None = None, fps: int = 10) -> dict:
    """Write ``episodes`` episodes of the team at ``ref`` (``RUN[/checkpoints/STEP][#SEED]``) as a GIF at
    ``out``; returns where the team came from, the env steps played and the frames written."""
    import jax

    from marl.runs.loader import load

    if episodes < 1:
        raise UserError(f"--episodes must be >= 1, got {episodes}")
    if fps < 1:
        raise UserError(f"--fps must be >= 1, got {fps}")
    if max_steps is not None and max_steps < 1:
        raise UserError(f"--max-steps must be >= 1, got {max_steps}")
    out = Path(out)
    if out.suffix.lower() != ".gif":
        raise UserError(f"--out must name a .gif file, got {out}")
    loaded = load(ref)
    team, env, source = loaded.team, loaded.env, loaded.source
    z = parse_latent(latent, team.num_agents, team.network.latent_dim)
    seq = play(env, team, jax.random.PRNGKey(eval_seed), not sampled, z, episodes, max_steps)
    frames = animate(env, seq, out, fps)
    return {"source": source, "env_steps": len(seq), "frames": frames}
