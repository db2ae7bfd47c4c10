"""``marl render RUN[#SEED] --episodes 1 --out ep.gif``: episodes of a trained team as a GIF.

How a family is drawn is its ``render`` capability (``envs.catalog``), one drawer per kind (``DRAWERS``):
"units" (SMAX) frames are drawn here (``SmaxDrawing``) from the world state's arrays: the simulator's W
sub-steps of every env step come out of the same compiled step that plays the episode (``smax_sub_steps``,
jaxmarl's ``expand_state_seq`` for one step), so nothing runs jax per frame (jaxmarl's ``SMAXVisualizer``
took about a second per frame). "particles" (MPE) frames are jaxmarl's ``MPEVisualizer``. "grid" (jumanji)
frames are the env's ``grid_frame(state)`` images, one per env step and one more after each episode's last
step, the state it ended in (``GridDrawing``, ``grid_end_state``). Written with matplotlib's Pillow writer. The team acts greedily unless ``--sampled``; a latent-conditioned team
takes ``--latent`` (comma-separated values shared by every agent, or an ``.npy`` of [d] or [N, d]).
"""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import numpy as np

from marl_common.errors import UserError
from marl_common.files import replacing
from envs.catalog import capabilities
from marl_common.preflight import check_count, check_output, check_seed, input_file
from marl.analysis.defaults import EVAL_SEED


def parse_latent(text: str | None, num_agents: int, latent_dim: int):
    """``--latent`` -> [N, d] float32 (None: zeros); one-line errors for a wrong size."""
    if text is None:
        return np.zeros((num_agents, latent_dim), np.float32)
    if text.endswith(".npy"):  # the file and its values are checked first: a bad file is bad for any team
        path = input_file(text, "--latent file")
        try:
            z = np.asarray(np.load(path, allow_pickle=False), np.float32)
        except (OSError, ValueError, EOFError, TypeError) as e:
            raise UserError(f"--latent file {text} is not a readable .npy array of numbers "
                            f"({type(e).__name__}: {str(e).splitlines()[0][:100] if str(e) else 'damaged'})") from None
    else:
        try:
            z = np.array([float(v) for v in text.split(",")], np.float32)
        except ValueError:
            raise UserError(f"--latent must be comma-separated numbers or an .npy file, got {text!r}") from None
    if not np.isfinite(z).all():
        raise UserError(f"--latent {text} has non-finite values (NaN or inf); give finite numbers (the latent box is [-1, 1])")
    if latent_dim == 0:
        raise UserError("--latent given, but this team has no latent input (network.latent_dim = 0)")
    if z.shape not in ((latent_dim,), (num_agents, latent_dim)):
        raise UserError(f"--latent has shape {z.shape}; this team needs ({latent_dim},) or ({num_agents}, {latent_dim})")
    return np.broadcast_to(z, (num_agents, latent_dim)).copy()


def play(env, team, key, greedy: bool, latent, episodes: int, max_steps: int | None = None, sub_steps=None) -> list:
    """Run ``episodes`` episodes one env step at a time; returns [(key, jaxmarl state, actions dict, sub)] per
    step (the state before the step, the key and actions given to jaxmarl's step, episodes in order), all
    on the host. ``sub(key, inner_state, actions)``, when given, runs inside the same compiled step and its
    result (e.g. the simulator's sub-step states) is ``sub``; else ``sub`` is None."""
    import jax
    import jax.numpy as jnp

    from marl.core import ppo
    from marl.core.team import team_step

    spec, net = team.spec, team.network

    @jax.jit
    def act_and_step(carry, ts, state, reset, k_act, k_env):  # one compiled program per env step
        carry, logits = team_step(spec, net, team.params, carry, ts.obs, reset, jnp.asarray(latent), ids=team.ids)
        actions = ppo.sample(k_act, ppo.masked_logits(logits, ts.avail), greedy)
        extra = None if sub_steps is None else sub_steps(k_env, state.inner, actions)
        ts, state = env.step(k_env, state, actions)
        return carry, actions, ts, state, extra

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
            carry, actions, ts, state, extra = act_and_step(carry, ts, state, jnp.asarray(t == 0), k_act, k_env)
            a = np.asarray(actions)
            seq.append((k_env, inner, {name: int(a[i]) for i, name in enumerate(env.agents)}, jax.device_get(extra)))
            if bool(ts.done):
                break
    return seq


def smax_sub_steps(env):
    """``sub(key, inner_state, actions [N])``: the simulator's world states inside one env step (jaxmarl's
    ``expand_state_seq`` for one step, as arrays with a leading sub-step axis and the same key and actions
    as the env step: ``MultiAgentEnv.step`` splits its key before ``step_env``)."""
    import jax
    import jax.numpy as jnp

    inner = env.inner
    num_actions = [int(inner.action_spaces[a].n) for a in env.agents]

    def sub(key, state, actions):
        act = {a: jnp.minimum(actions[i], k - 1) for i, (a, k) in enumerate(zip(env.agents, num_actions))}
        return inner.step_env(jax.random.split(key)[0], state, act, get_state_sequence=True)

    return sub


def _smax_frames(seq) -> list:
    """[(world state, sub-step s, env step t, the step's sub-step states)] per frame: each env step is the
    state before it and its W simulator sub-steps (W + 1 frames, as jaxmarl's SMAX visualiser shows them)."""
    import jax

    frames = []
    for _, inner, _, sub in seq:
        t = int(inner.state.step)
        w = np.asarray(sub.unit_positions).shape[0]
        frames.append((inner.state, 0, t, sub))
        frames += [(jax.tree.map(lambda x, s=s: np.asarray(x)[s], sub), s + 1, t, sub) for s in range(w)]
    return frames


class SmaxDrawing:
    """Draws SMAX frames from the world state's arrays (matplotlib patches moved in place, no jax): units as
    circles coloured by team (allies blue, enemies red) with their type letter and a health bar, dead units
    as a grey cross where they fell, and a shot as a grey square on its way from shooter to target."""

    ALLY, ENEMY, DEAD = "tab:blue", "tab:red", "0.6"

    def __init__(self, env, fig, ax, frames):
        from matplotlib.patches import Circle, Rectangle

        e = env.inner
        self.env, self.fig, self.ax = env, fig, ax
        self.n_allies, self.n_move = int(e.num_allies), int(e.num_movement_actions)
        self.w = int(e.world_steps_per_env_step)
        self.radius = np.asarray(e.unit_type_radiuses, np.float32)
        self.health = np.asarray(e.unit_type_health, np.float32)
        self.range = np.asarray(e.unit_type_attack_ranges, np.float32)
        self.letters = list(e.unit_type_shorthands)
        units = int(e.num_allies) + int(e.num_enemies)
        pos = np.concatenate([np.asarray(f[0].unit_positions, np.float32).reshape(-1, 2) for f in frames])
        mid, half = (pos.min(0) + pos.max(0)) / 2, max(float((pos.max(0) - pos.min(0)).max()) / 2 + 2.0, 4.0)
        ax.set_xlim(mid[0] - half, mid[0] + half)  # the square around every unit of the episode(s)
        ax.set_ylim(mid[1] - half, mid[1] + half)
        ax.add_patch(Rectangle((0, 0), float(e.map_width), float(e.map_height), fill=False, ec="0.4"))  # the walls
        ax.set_aspect("equal")
        ax.set_xticks([])
        ax.set_yticks([])
        self.title = ax.set_title("")
        self.circles = [ax.add_patch(Circle((0, 0), 0.5, color=self.ALLY if u < self.n_allies else self.ENEMY))
                        for u in range(units)]
        self.bars = [ax.add_patch(Rectangle((0, 0), 1.0, 0.25, color="tab:green")) for _ in range(units)]
        self.labels = [ax.text(0, 0, "", fontsize="xx-small", color="white", ha="center", va="center")
                       for _ in range(units)]
        self.dead = ax.plot([], [], "x", color=self.DEAD, ms=6)[0]
        self.shots = [ax.add_patch(Rectangle((0, 0), 0.3, 0.3, color="0.3")) for _ in range(units)]

    def target(self, u: int, action: int) -> int:
        """The unit index that unit ``u``'s attack ``action`` (an action >= the movement actions) aims at:
        allies target enemies (indices after the allies), enemies target allies."""
        k = action - self.n_move
        return k + self.n_allies if u < self.n_allies else self.n_allies - 1 - k

    def draw(self, frame) -> list:
        """Move the patches to one frame ``(world state, sub-step, env step, sub-step states)``; returns
        the artists that changed (for ``FuncAnimation``)."""
        state, s, t, sub = frame
        pos = np.asarray(state.unit_positions, np.float32)
        alive = np.asarray(state.unit_alive, bool)
        types = np.asarray(state.unit_types, np.int32)
        frac = np.clip(np.asarray(state.unit_health, np.float32) / self.health[types], 0.0, 1.0)
        attack = np.asarray(sub.prev_attack_actions)[-1]  # the attack actions of this env step
        for u, (c, bar, lab, shot) in enumerate(zip(self.circles, self.bars, self.labels, self.shots)):
            r = float(self.radius[types[u]])
            c.set_center(pos[u])
            c.set_radius(r)
            c.set_visible(bool(alive[u]))
            bar.set_xy((pos[u, 0] - r, pos[u, 1] + r + 0.15))
            bar.set_width(2 * r * float(frac[u]))
            bar.set_visible(bool(alive[u]))
            lab.set_position(pos[u])
            lab.set_text(self.letters[types[u]] if alive[u] else "")
            a = int(attack[u])
            v = self.target(u, a) if a >= self.n_move else -1
            firing = 0 <= v < len(alive) and alive[u] and alive[v] and \
                np.linalg.norm(pos[u] - pos[v]) < self.range[types[u]]
            if firing:
                p = (1 - s / self.w) * pos[u] + (s / self.w) * pos[v]
                shot.set_xy((p[0] - 0.15, p[1] - 0.15))
            shot.set_visible(bool(firing))
        self.dead.set_data(pos[~alive, 0], pos[~alive, 1])
        self.title.set_text(f"{self.env.spec.name}  step {t}  ({s}/{self.w})   "
                            f"allies {int(alive[:self.n_allies].sum())}, enemies {int(alive[self.n_allies:].sum())}")
        return self.circles + self.bars + self.labels + self.shots + [self.dead, self.title]


def _draw_units(env, seq):
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(1, 1, figsize=(5, 5))
    frames = _smax_frames(seq)
    drawing = SmaxDrawing(env, fig, ax, frames)
    return fig, frames, lambda i: drawing.draw(frames[i])


def _draw_particles(env, seq):
    from envs.quiet import family

    MPEVisualizer = family("mpe").MPEVisualizer

    with contextlib.redirect_stdout(io.StringIO()):  # the MPE visualiser prints its settings
        viz = MPEVisualizer(env.inner, [s for _, s, _, _ in seq])
    return viz.fig, viz.state_seq, viz.update


class GridDrawing:
    """Draws grid-world frames from the env's ``grid_frame(state)``: an RGB image per env step (one
    ``imshow`` updated in place) with its cell labels and caption."""

    def __init__(self, env, fig, ax, frames):
        self.env, self.ax = env, ax
        img = frames[0][0]
        self.image = ax.imshow(img, interpolation="nearest")
        ax.set_xticks(np.arange(-0.5, img.shape[1], 1), minor=True)
        ax.set_yticks(np.arange(-0.5, img.shape[0], 1), minor=True)
        ax.grid(which="minor", color="0.8", linewidth=0.5)
        ax.tick_params(which="both", length=0, labelbottom=False, labelleft=False)
        self.title = ax.set_title("", fontsize="small")
        self.texts = []

    def draw(self, i: int, frame) -> list:
        """Show frame ``(image, labels, caption, env step)``; returns the artists that changed."""
        img, labels, caption, t = frame
        self.image.set_data(img)
        for tx in self.texts:
            tx.remove()
        self.texts = [self.ax.text(c, r, text, color=colour, fontsize="x-small", ha="center", va="center")
                      for r, c, text, colour in labels]
        self.title.set_text(f"{self.env.spec.name}\nstep {t}   {caption}")  # two short lines: never wider than the grid
        return [self.image, self.title, *self.texts]


def grid_end_state(env):
    """``sub(key, inner_state, actions)`` for ``play``: the state after each env step before the env's
    auto-reset (``env.end_state``), so that an episode's last frame shows how it ended."""

    def sub(key, state, actions):
        return env.end_state(state, actions)

    return sub


def grid_frames(env, seq) -> list:
    """[(image, labels, caption, env step)]: the state before each env step of ``seq`` and, after the last
    step of each episode (it ended, or ``--max-steps`` cut it), the state that step left (``seq``'s ``sub``
    from ``grid_end_state``): the food eaten, the shelf delivered."""
    frames = []
    for i, (_, inner, _, after) in enumerate(seq):
        frames.append((*env.grid_frame(inner), int(np.asarray(inner.step_count))))
        last = i + 1 == len(seq) or int(np.asarray(seq[i + 1][1].step_count)) == 0  # the next starts an episode
        if last and after is not None:
            frames.append((*env.grid_frame(after), int(np.asarray(after.step_count))))
    return frames


def _draw_grid(env, seq):
    import matplotlib.pyplot as plt

    frames = grid_frames(env, seq)
    h, w = frames[0][0].shape[:2]
    fig, ax = plt.subplots(1, 1, figsize=(max(3.0, 0.5 * w), max(3.0, 0.5 * h) + 0.6))
    drawing = GridDrawing(env, fig, ax, frames)
    return fig, frames, lambda i: drawing.draw(i, frames[i])


# a family's ``render`` capability (envs.catalog.RENDER_KINDS) -> (env, seq) -> (figure, frames, update(i))
DRAWERS = {"units": _draw_units, "particles": _draw_particles, "grid": _draw_grid}


def render_kind(env) -> str:
    """How the env is drawn (its family's ``render`` capability); a one-line UserError when it cannot be."""
    kind = capabilities(env.spec.name).render
    if kind is None:
        raise UserError(f"{env.spec.name} cannot be rendered (its family declares no renderer)")
    return kind


def animate(env, seq: list, out: Path, fps: int) -> int:
    """Write the GIF (SMAX: drawn here from the world states, W + 1 frames per env step; MPE: jaxmarl's
    ``MPEVisualizer``, one frame per env step; grid worlds: one frame per env step and the state each episode
    ended in); returns the number of frames."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib import animation

    fig, frames, update = DRAWERS[render_kind(env)](env, seq)
    ani = animation.FuncAnimation(fig, update, frames=len(frames), blit=False, interval=1000 // fps, repeat=False)
    out.parent.mkdir(parents=True, exist_ok=True)
    with replacing(out) as tmp:  # atomically: a stopped render leaves no half GIF
        ani.save(tmp, writer=animation.PillowWriter(fps=fps))
    plt.close(fig)
    return len(frames)


def render(ref: str, out: str | Path, *, episodes: int = 1, sampled: bool = False, latent: str | None = None,
           eval_seed: int = EVAL_SEED, max_steps: int | None = None, fps: int = 10) -> dict:
    """Write ``episodes`` episodes of the team at ``ref`` (``RUN[/checkpoints/STEP][#SEED]``) as a GIF at
    ``out``; returns where the team came from, the env steps played and the frames written."""
    import jax

    from marl.core.algos import check_sampling
    from marl.runs.loader import load

    check_count(episodes, "--episodes", hi=1000)  # every frame of every episode is drawn
    check_count(fps, "--fps", hi=1000)
    if max_steps is not None:
        check_count(max_steps, "--max-steps")
    check_seed(eval_seed, "--eval-seed")
    if str(out).strip() and Path(out).suffix.lower() != ".gif":
        raise UserError(f"--out must name a .gif file, got {out}")
    # the one output rule (not in a run folder, not a link, no other kind of file in the way, writable):
    # before any episode is played
    out = check_output(out, "--out", suffixes=(".gif",))
    loaded = load(ref)
    team, env, source = loaded.team, loaded.env, loaded.source
    check_sampling(source["algo"], not sampled, ref)
    z = parse_latent(latent, team.num_agents, team.network.latent_dim)
    sub = {"units": smax_sub_steps, "grid": grid_end_state}.get(render_kind(env), lambda env: None)(env)
    seq = play(env, team, jax.random.PRNGKey(eval_seed), not sampled, z, episodes, max_steps, sub)
    frames = animate(env, seq, out, fps)
    return {"source": source, "env_steps": len(seq), "frames": frames}
