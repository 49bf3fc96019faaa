"""The one-page PNG of a dataset card (:func:`offlinerl.data_ops.stats.dataset_card`): returns (per source),
lengths, actions, observation ranges, and a text panel with the counts, coverage, fingerprint and lineage."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from offlinerl.episodes.atomic import atomic_file

__all__ = ["plot_card"]

#: Observation dimensions drawn in the ranges panel.
MAX_DIMS = 24


def _returns(ax, card: dict[str, Any]) -> None:
    h = card["return_histogram"]
    by = card.get("returns_by_source") or {}
    if by and h["edges"]:
        edges = np.asarray(h["edges"])
        ax.hist([np.asarray(v) for v in by.values()], bins=edges, stacked=True, label=list(by), edgecolor="black",
                linewidth=0.3)
        ax.legend(title=card["by"], fontsize=7, title_fontsize=7)
    elif h["counts"]:
        edges = np.asarray(h["edges"])
        ax.bar(edges[:-1], h["counts"], width=np.diff(edges), align="edge", edgecolor="black", linewidth=0.3)
    ax.set(title=f"episode return ({card['episodes']:,} episodes)", xlabel="return", ylabel="episodes")


def _lengths(ax, card: dict[str, Any]) -> None:
    h = card["length_histogram"]
    if h["counts"]:
        edges = np.asarray(h["edges"])
        ax.bar(edges[:-1], h["counts"], width=np.diff(edges), align="edge", edgecolor="black", linewidth=0.3)
    ax.set(title="episode length", xlabel="steps", ylabel="episodes")


def _actions(ax, card: dict[str, Any]) -> None:
    discrete = [a for a in card["actions"] if "histogram" in a]
    if discrete:
        hist = discrete[0]["histogram"]
        ax.bar(list(hist), list(hist.values()), edgecolor="black", linewidth=0.3)
        ax.set(title="actions", xlabel="action", ylabel="steps")
        return
    for h in card["action_histograms"][:4]:
        edges = np.asarray(h["edges"])
        ax.step(edges[:-1], h["counts"], where="post", label=f"dim {h['dim']}")
    if card["action_histograms"]:
        ax.legend(fontsize=7)
    ax.set(title="actions (histogram per dimension)", xlabel="action", ylabel="steps")


def _observations(ax, card: dict[str, Any]) -> None:
    leaves = [leaf for leaf in card["observations"] if leaf.get("count") and "mean" in leaf]
    if not leaves:
        ax.set_axis_off()
        return
    leaf = leaves[0]
    dims = min(len(leaf["mean"]), MAX_DIMS)
    x = np.arange(dims)
    lo, hi = np.asarray(leaf["min"][:dims]), np.asarray(leaf["max"][:dims])
    mean, std = np.asarray(leaf["mean"][:dims]), np.asarray(leaf["std"][:dims])
    ax.vlines(x, lo, hi, color="lightgray", linewidth=6, label="min..max")
    ax.errorbar(x, mean, yerr=std, fmt="o", markersize=3, capsize=2, label="mean ± std")
    ax.set(title=f"observation ranges{' (' + leaf['leaf'] + ')' if leaf['leaf'] else ''}", xlabel="dimension")
    ax.legend(fontsize=7)


def _text(ax, card: dict[str, Any]) -> None:
    ax.set_axis_off()
    lines = [f"episodes {card['episodes']:,}   steps {card['steps']:,}   rows {card['rows']:,}",
             f"terminated {card['terminated']:,}   truncated {card['truncated']:,}   neither {card['neither']:,}"]
    if card["returns"]:
        r = card["returns"]
        lines.append(f"return mean {r['mean']:.4g} ± {r['std']:.4g}   min {r['min']:.4g}   max {r['max']:.4g}")
    for name, s in list(card["sources"].items())[:8]:
        lines.append(f"  {card['by']}={name}: {s['episodes']:,} episodes, return {s['return_mean']:.4g} "
                     f"± {s['return_std']:.4g}")
    cov = card["coverage"] or {}
    if "unique_state_actions" in cov:
        lines.append(f"coverage ({cov['bins']} bins/dim): {cov['unique_state_actions']:,} state-action cells, "
                     f"{cov['unique_states']:,} state cells")
    lines.append(f"fingerprint {card['fingerprint'][:32]}…")
    for e in card["lineage"][-6:]:
        lines.append(f"  {e.get('operation')}  -> {str(e.get('fingerprint'))[:12]}  ({e.get('created_at', '')})")
    ax.text(0.0, 1.0, "\n".join(lines), va="top", ha="left", family="monospace", fontsize=9,
            transform=ax.transAxes)


def plot_card(card: dict[str, Any], out: str | Path, *, overwrite: bool = False) -> Path:
    """Draw ``card`` into the PNG ``out`` (written atomically: never into a dataset; an existing file is
    replaced only with ``overwrite``); its resolved path."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(14, 8.5), dpi=100)
    FigureCanvasAgg(fig)
    grid = fig.add_gridspec(2, 3)
    for draw, cell in ((_returns, grid[0, 0]), (_lengths, grid[0, 1]), (_actions, grid[0, 2]),
                       (_observations, grid[1, 0]), (_text, grid[1, 1:])):
        draw(fig.add_subplot(cell), card)
    fig.suptitle(f"{Path(card['path']).name}" + (f" — {card['env_id']}" if card.get("env_id") else ""))
    fig.tight_layout()
    with atomic_file(out, overwrite, inputs=[card["path"]]) as tmp:
        fig.savefig(tmp, format="png")
    return Path(out).resolve()
