"""``inspect``: what is in an episode dataset (counts, returns, lengths, actions, observations).

Runs as a Ray Data job over parquet row groups (:mod:`offlinerl.episodes.scan`):
each task returns per-row ``(episode key, chunk, T, return, flags)`` and
mergeable per-dimension moments (count, mean, M2, min, max; Chan et al.'s
parallel update), so no task and not the driver ever holds the data. Chunks of
one episode are summed by ``(episode_id, agent_id)`` before return and length
distributions are taken.

Definitions: observation statistics are over ``obs[:T]`` of every row (the
observations actions were taken in; one per step, so chunk boundaries are not
counted twice); ``std`` is the population standard deviation (ddof = 0);
percentiles interpolate linearly (``numpy.percentile``).
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pyarrow.compute as pc

from offlinerl.episodes import schema as S
from offlinerl.episodes.agent_spaces import agent_spaces_json
from offlinerl.episodes.atomic import OutputExistsError, OutputWriteError, atomic_file, check_output_file
from offlinerl.episodes.checks import leaf_values
from offlinerl.episodes.fingerprint import format_lineage
from offlinerl.episodes.info import read_info
from offlinerl.episodes.io import parquet_files
from offlinerl.episodes.scan import ScanUnit, iter_unit_batches, plan_units, run_units
from offlinerl.episodes.spaces import flat_size, leaf_spaces, space_to_json

__all__ = ["dataset_stats", "format_stats", "plot_stats", "StatsError"]

PERCENTILES = (5, 25, 50, 75, 95)
#: Most scalars converted to float64 at once when accumulating moments.
_CHUNK = 1 << 22


class StatsError(ValueError):
    """A dataset file could not be read (run ``offlinerl validate`` for details)."""


def _moments(data: np.ndarray) -> dict[str, Any]:
    """Moments of ``data`` (steps, dims), accumulated in float64 in bounded chunks."""
    acc = None
    step = max(1, _CHUNK // max(1, data.shape[1]))
    for start in range(0, len(data), step):
        x = data[start : start + step].astype(np.float64)
        mean = x.mean(axis=0)
        part = {"count": len(x), "mean": mean, "m2": ((x - mean) ** 2).sum(axis=0),
                "min": x.min(axis=0), "max": x.max(axis=0)}
        acc = part if acc is None else _merge(acc, part)
    return acc


def _merge(a: dict[str, Any] | None, b: dict[str, Any] | None) -> dict[str, Any] | None:
    """Combine two moment records (parallel variance update)."""
    if a is None or b is None:
        return a if b is None else b
    n = a["count"] + b["count"]
    ma, mb = np.asarray(a["mean"]), np.asarray(b["mean"])
    delta = mb - ma
    out = {
        "count": n,
        "mean": ma + delta * (b["count"] / n),
        "m2": np.asarray(a["m2"]) + np.asarray(b["m2"]) + delta**2 * (a["count"] * b["count"] / n),
        "min": np.minimum(a["min"], b["min"]),
        "max": np.maximum(a["max"], b["max"]),
    }
    if "histogram" in a or "histogram" in b:
        hist = dict(a.get("histogram", {}))
        for k, v in b.get("histogram", {}).items():
            hist[k] = hist.get(k, 0) + v
        out["histogram"] = hist
    return out


def _leaf_stats(leaves: list[tuple], keep: np.ndarray | None) -> dict[str, dict[str, Any]]:
    """Moments (and Discrete histograms) of the decoded ``leaves`` (``checks.leaf_values``), of the steps ``keep``
    selects (None: all)."""
    out = {}
    for path, leaf, data, null in leaves:
        mask = ~null if keep is None else (keep & ~null)
        data = data[mask]
        if not len(data):
            continue
        part = _moments(data)
        if isinstance(leaf, gym.spaces.Discrete):
            vals, counts = np.unique(data[:, 0], return_counts=True)
            part["histogram"] = {str(int(v)): int(c) for v, c in zip(vals, counts)}
        out[path.lstrip(".")] = part
    return out


def _jsonable(part: dict[str, Any]) -> dict[str, Any]:
    return {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in part.items()}


#: Separates an agent from a leaf in the per-agent moments' keys (``agent<SEP>leaf``).
_AGENT_SEP = "\x00"


def stats_unit(unit: ScanUnit, *, obs_space: gym.Space, act_space: gym.Space,
               agents: tuple[str, ...] = ()) -> dict[str, Any]:
    """Per-row bookkeeping and per-leaf moments of one unit (a Ray Data task); with ``agents`` (agents of different
    spaces), also each agent's moments of the storage columns, keyed ``agent<SEP>leaf``."""
    cols = [S.EPISODE_ID, S.AGENT_ID, S.CHUNK_INDEX, S.OBS, S.ACTIONS, S.REWARDS, S.TERMINATED, S.TRUNCATED]
    rows: dict[str, list] = {k: [] for k in ("key", "chunk", "steps", "return", "terminated", "truncated")}
    obs_acc: dict[str, Any] = {}
    act_acc: dict[str, Any] = {}
    for _, rb in iter_unit_batches(unit, cols):
        if rb.num_rows == 0:
            continue
        col = {name: rb.column(i) for i, name in enumerate(rb.schema.names)}
        rew = col[S.REWARDS]
        offsets = rew.offsets.to_numpy()
        flat = rew.values.slice(offsets[0], offsets[-1] - offsets[0])
        r = pc.fill_null(flat, 0.0).to_numpy(zero_copy_only=False).astype(np.float64)
        sums = np.add.reduceat(np.append(r, 0.0), offsets[:-1] - offsets[0])
        sums[np.diff(offsets) == 0] = 0.0
        rows["key"].extend(zip(col[S.EPISODE_ID].to_pylist(), col[S.AGENT_ID].to_pylist()))
        rows["chunk"].extend(col[S.CHUNK_INDEX].to_pylist())
        rows["steps"].extend(pc.fill_null(pc.list_value_length(col[S.ACTIONS]), 0).to_pylist())
        rows["return"].extend(sums.tolist())
        rows["terminated"].extend(col[S.TERMINATED].to_pylist())
        rows["truncated"].extend(col[S.TRUNCATED].to_pylist())

        obs = col[S.OBS]
        o_off = obs.offsets.to_numpy()
        lens = np.diff(o_off)
        pos = np.arange(o_off[-1] - o_off[0]) - np.repeat(o_off[:-1] - o_off[0], lens)
        keep = pos < np.repeat(lens - 1, lens)  # obs[:T]: drop the final observation of each row
        o_vals = obs.values.slice(o_off[0], o_off[-1] - o_off[0])
        act = col[S.ACTIONS]
        a_off = act.offsets.to_numpy()
        a_vals = act.values.slice(a_off[0], a_off[-1] - a_off[0])
        row_agents = np.array(col[S.AGENT_ID].to_pylist(), dtype=object)
        obs_leaves, act_leaves = list(leaf_values(o_vals, obs_space)), list(leaf_values(a_vals, act_space))
        for agent in (None, *agents):
            rows_of = np.ones(len(lens), dtype=bool) if agent is None else row_agents == agent
            if not rows_of.any():
                continue
            prefix = "" if agent is None else f"{agent}{_AGENT_SEP}"
            obs_keep = keep & np.repeat(rows_of, lens)
            act_keep = None if agent is None else np.repeat(rows_of, np.diff(a_off))
            for acc, new in ((obs_acc, _leaf_stats(obs_leaves, obs_keep)),
                             (act_acc, _leaf_stats(act_leaves, act_keep))):
                for k, part in new.items():
                    acc[prefix + k] = _merge(acc.get(prefix + k), part)
    return {"rows": rows, "obs": {k: _jsonable(v) for k, v in obs_acc.items()},
            "actions": {k: _jsonable(v) for k, v in act_acc.items()}}


def _distribution(values: np.ndarray) -> dict[str, float] | None:
    if not len(values):
        return None
    out = {"min": float(values.min()), "mean": float(values.mean()), "std": float(values.std())}
    out.update({f"p{p}": float(v) for p, v in zip(PERCENTILES, np.percentile(values, PERCENTILES))})
    out["max"] = float(values.max())
    return out


def _histogram(values: np.ndarray, integer: bool) -> dict[str, list]:
    if not len(values):
        return {"edges": [], "counts": []}
    lo, hi = float(values.min()), float(values.max())
    if integer:  # one bar per length while they fit, centred on the integers
        bins, span = int(min(30, hi - lo + 1)), (lo - 0.5, hi + 0.5)
    else:
        bins, span = 30, ((lo, hi) if hi > lo else (lo - 0.5, hi + 0.5))
    counts, edges = np.histogram(values, bins=bins, range=span)
    return {"edges": edges.tolist(), "counts": counts.tolist()}


def _leaf_summary(space: gym.Space, parts: dict[str, Any]) -> list[dict[str, Any]]:
    leaves = []
    for path, leaf in leaf_spaces(space):
        part = parts.get(path)
        entry: dict[str, Any] = {"leaf": path, "space": str(leaf), "count": 0}
        if part:
            shape = [] if isinstance(leaf, gym.spaces.Discrete) else list(leaf.shape)
            entry.update(count=part["count"], shape=shape, mean=list(part["mean"]),
                         std=np.sqrt(np.asarray(part["m2"]) / part["count"]).tolist(),
                         min=list(part["min"]), max=list(part["max"]))
            if "histogram" in part:
                entry["histogram"] = dict(sorted(part["histogram"].items(), key=lambda kv: int(kv[0])))
        leaves.append(entry)
    return leaves


def dataset_stats(path: str | Path, *, local: bool = False) -> dict[str, Any]:
    """Summary statistics of the dataset at ``path`` as a JSON-ready dict (Ray is started if needed; ``local``:
    the row groups are read in this process, without Ray)."""
    info = read_info(path)
    units, unreadable = plan_units(parquet_files(path))
    if unreadable:
        f, err = next(iter(unreadable.items()))
        raise StatsError(f"{f}: cannot be read as parquet ({err}); run `offlinerl validate {path}`")
    agents = tuple(info.agent_spaces or ())
    fn = functools.partial(stats_unit, obs_space=info.observation_space, act_space=info.action_space, agents=agents)
    episodes: dict[tuple, list] = {}
    obs_acc: dict[str, Any] = {}
    act_acc: dict[str, Any] = {}
    num_rows = num_steps = 0
    for payload in run_units(units, fn, desc="inspecting", local=local):
        if "read_error" in payload:
            raise StatsError(f"{payload['unit']['file']}: cannot be read ({payload['read_error']}); "
                             f"run `offlinerl validate {path}`")
        r = payload["rows"]
        for key, steps, ret, term, trunc in zip(r["key"], r["steps"], r["return"], r["terminated"], r["truncated"]):
            ep = episodes.setdefault(tuple(key), [0.0, 0, False, False])
            ep[0] += ret
            ep[1] += steps
            ep[2] |= bool(term)
            ep[3] |= bool(trunc)
        num_rows += len(r["key"])
        num_steps += sum(r["steps"])
        for acc, new in ((obs_acc, payload["obs"]), (act_acc, payload["actions"])):
            for k, part in new.items():
                acc[k] = _merge(acc.get(k), part)
    returns = np.array([e[0] for e in episodes.values()], dtype=np.float64)
    lengths = np.array([e[1] for e in episodes.values()], dtype=np.int64)
    terminated = sum(1 for e in episodes.values() if e[2])
    truncated = sum(1 for e in episodes.values() if e[3] and not e[2])
    return {
        "team": _team_stats(episodes),
        "path": str(path),
        "env_id": info.env_id,
        "observation_space": space_to_json(info.observation_space),
        "action_space": space_to_json(info.action_space),
        "agent_spaces": agent_spaces_json(info.agent_spaces),
        "episodes": len(episodes),
        "rows": num_rows,
        "steps": num_steps,
        "terminated": terminated,
        "truncated": truncated,
        "neither": len(episodes) - terminated - truncated,
        "returns": _distribution(returns),
        "lengths": _distribution(lengths.astype(np.float64)),
        "return_histogram": _histogram(returns, integer=False),
        "length_histogram": _histogram(lengths, integer=True),
        "actions": _leaf_summary(info.action_space, act_acc),
        "observations": _leaf_summary(info.observation_space, obs_acc),
        "agents": {a: {"actions": _leaf_summary(act, _own(act_acc, a, act)),
                       "observations": _leaf_summary(obs, _own(obs_acc, a, obs))}
                   for a, (obs, act) in (info.agent_spaces or {}).items()},
        "fingerprint": info.fingerprint,
        "lineage": info.lineage,
    }


def _team_stats(episodes: dict[tuple, list]) -> dict[str, Any] | None:
    """Of a multi-agent dataset (rows with an ``agent_id``), its team episodes: their number, returns (the agents'
    returns summed, as ``collect`` and the evaluations report them) and lengths (the longest agent's steps, the
    env's steps); ``None`` when no row names an agent. ``episodes``: ``(episode id, agent id) -> [return, steps,
    ...]``, as ``dataset_stats`` sums them."""
    teams: dict[Any, list] = {}
    for (episode_id, agent), (ret, steps, *_) in episodes.items():
        if agent is None:
            return None
        team = teams.setdefault(episode_id, [0.0, 0])
        team[0] += ret
        team[1] = max(team[1], steps)
    if not teams:
        return None
    returns = np.array([t[0] for t in teams.values()], dtype=np.float64)
    lengths = np.array([t[1] for t in teams.values()], dtype=np.float64)
    return {"episodes": len(teams), "returns": _distribution(returns), "lengths": _distribution(lengths)}


def _own(acc: dict[str, Any], agent: str, space: gym.Space) -> dict[str, Any]:
    """Agent ``agent``'s moments (``stats_unit``'s per-agent keys), a narrower Box's cut to its own width."""
    prefix = f"{agent}{_AGENT_SEP}"
    out = {k[len(prefix):]: dict(v) for k, v in acc.items() if k.startswith(prefix)}
    if isinstance(space, gym.spaces.Box) and "" in out:  # a Box is one leaf, ""
        width = flat_size(space)
        out[""] = {k: (np.asarray(v)[:width] if k in ("mean", "m2", "min", "max") else v)
                   for k, v in out[""].items()}
    return out


def _g(x: float) -> str:
    return f"{x:.4g}"


def _format_leaves(title: str, leaves: list[dict[str, Any]], max_dims: int) -> list[str]:
    lines = [f"{title}:"]
    for leaf in leaves:
        name = f"  {leaf['leaf']}: " if leaf["leaf"] else "  "
        lines.append(f"{name}{leaf['space']}  ({leaf['count']:,} values)")
        if not leaf["count"]:
            continue
        if "histogram" in leaf:
            total = sum(leaf["histogram"].values())
            cells = [f"{v}: {c:,} ({100 * c / total:.1f}%)" for v, c in leaf["histogram"].items()]
            for i in range(0, len(cells), 4):
                lines.append("    " + "   ".join(cells[i : i + 4]))
            continue
        dims = len(leaf["mean"])
        shape = leaf["shape"] or [1]
        lines.append(f"    {'dim':<12}{'mean':>11}{'std':>11}{'min':>11}{'max':>11}")
        for d in range(min(dims, max_dims)):
            idx = "[" + ", ".join(str(int(i)) for i in np.unravel_index(d, shape)) + "]"
            lines.append(f"    {idx:<12}" + "".join(f"{_g(leaf[k][d]):>11}" for k in ("mean", "std", "min", "max")))
        if dims > max_dims:
            lines.append(f"    ... {dims - max_dims:,} more dims (all of them in --json)")
    return lines


def _distribution_lines(stats: dict[str, Any], prefix: str, notes: dict[str, str]) -> list[str]:
    """One line each for ``stats``' return and length distributions, named ``prefix + name``."""
    lines = []
    for name in ("returns", "lengths"):
        d, label = stats[name], prefix + name
        if d is None:
            lines.append(f"  {label:<8} (no episodes)")
            continue
        cells = "  ".join(f"{k} {_g(v)}" for k, v in d.items() if k not in ("mean", "std"))
        lines.append(f"  {label:<8} mean {_g(d['mean'])} ± {_g(d['std'])}   {cells}{notes.get(name, '')}")
    return lines


def format_stats(stats: dict[str, Any], max_dims: int = 16) -> str:
    """A readable text summary of :func:`dataset_stats`' result."""
    lines = [f"dataset {stats['path']}" + (f"  (env {stats['env_id']})" if stats["env_id"] else "")]
    team = stats.get("team")
    if team:  # multi-agent: the team's episodes first, in the unit collect, evaluate and the data ops count
        lines.append(f"  team episodes {team['episodes']:,} ({stats['episodes']:,} agent episodes)")
        lines += _distribution_lines(team, "team ", {"returns": " (the agents' returns summed)",
                                                     "lengths": " (env steps)"})
    what = "agent episodes" if team else "episodes"
    lines.append(f"  {what} {stats['episodes']:,} (rows {stats['rows']:,}), steps {stats['steps']:,}; "
                 f"terminated {stats['terminated']:,}, truncated {stats['truncated']:,}, "
                 f"neither {stats['neither']:,}")
    lines += _distribution_lines(stats, "agent " if team else "", {})
    agents = stats.get("agents")
    if agents:  # agents of different spaces: each in its own, not the padded storage columns
        for agent, own in agents.items():
            lines += _format_leaves(f"agent {agent}: actions", own["actions"], max_dims)
            lines += _format_leaves(f"agent {agent}: observations (obs[:T] of its rows)", own["observations"],
                                    max_dims)
    else:
        lines += _format_leaves("actions", stats["actions"], max_dims)
        lines += _format_leaves("observations (obs[:T] of every row)", stats["observations"], max_dims)
    lines.append(f"fingerprint {stats.get('fingerprint') or 'not recorded (written before fingerprints)'}")
    lines.append(format_lineage(stats.get("lineage") or []))
    return "\n".join(lines)


#: Image types ``plot_stats`` writes, by the output's suffix.
PLOT_FORMATS = {".png": "png", ".jpg": "jpeg", ".jpeg": "jpeg", ".svg": "svg", ".pdf": "pdf"}


def plot_format(out: str | Path) -> str:
    """The image type ``out``'s suffix names (``PLOT_FORMATS``); a :class:`StatsError` for any other suffix, so
    that ``x.jpg`` is a JPEG and ``x.gif`` is refused, not PNG bytes under another name."""
    suffix = Path(out).suffix.lower()
    if suffix not in PLOT_FORMATS:
        raise StatsError(f"{out}: cannot write a {suffix or 'suffix-less'} image; name a "
                         f"{', '.join(PLOT_FORMATS)} file")
    return PLOT_FORMATS[suffix]


def plot_stats(stats: dict[str, Any], out: str | Path, *, overwrite: bool = True) -> Path:
    """Draw the return and length histograms of :func:`dataset_stats`' result into the image ``out`` (its type from
    its suffix: :func:`plot_format`); its path.

    Written atomically (``offlinerl.episodes.atomic.atomic_file``): never the dataset or a file inside it or
    inside any dataset or checkpoint, never over a directory; an existing file is replaced unless
    ``overwrite=False``. A refused output or a failed write (read-only or full disk) is a :class:`StatsError`.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    inputs = [stats["path"]]
    image_format = plot_format(out)
    try:
        target = check_output_file(out, overwrite, inputs=inputs)
    except (OutputExistsError, OutputWriteError) as exc:
        raise StatsError(str(exc)) from None
    fig = Figure(figsize=(10, 4), dpi=100)
    FigureCanvasAgg(fig)
    for i, (key, label) in enumerate((("return_histogram", "episode return"), ("length_histogram", "episode length"))):
        ax = fig.add_subplot(1, 2, i + 1)
        h = stats[key]
        if h["counts"]:
            edges = np.asarray(h["edges"])
            ax.bar(edges[:-1], h["counts"], width=np.diff(edges), align="edge", edgecolor="black", linewidth=0.5)
        ax.set_xlabel(label)
        ax.set_ylabel("episodes")
        ax.set_title(f"{label} ({stats['episodes']:,} episodes)")
    fig.suptitle(f"{Path(stats['path']).name}" + (f" — {stats['env_id']}" if stats["env_id"] else ""))
    fig.tight_layout()
    try:
        with atomic_file(target, overwrite, inputs=inputs) as tmp:
            fig.savefig(tmp, format=image_format)
    except (OutputExistsError, OutputWriteError) as exc:
        raise StatsError(str(exc)) from None
    return target
