"""``learning_curve.png`` of a run (``train`` and ``finetune``): the evaluation return, then each loss on its own axes.

- top panel: the evaluation return after each evaluation, with a band labelled ``± std over N episodes``, and
  dashed reference lines at the dataset card's ``random_return`` and ``best_return`` (where the dataset has a
  ``card.json``; ``offlinerl.scoring.load_card``);
- one panel per loss term below it, log-scaled when every value is positive (losses of different terms differ
  by orders of magnitude: on one linear axis the small ones were flat lines at zero).

The x axis is gradient updates, or env steps for a finetune run that has them.
"""

from __future__ import annotations

import io
import threading
from pathlib import Path
from typing import Mapping, Sequence

from offlinerl.core import metrics as M
from offlinerl.episodes.atomic import replace_file

__all__ = ["plot_learning_curve", "reference_lines"]


def reference_lines(dataset: str | Path | None) -> dict[str, float]:
    """``{"random": r, "best": b}`` from the dataset's card; empty without a dataset or card (or a bad card)."""
    if dataset is None:
        return {}
    from offlinerl.scoring import CardError, load_card

    try:
        card = load_card(dataset)
    except CardError:
        return {}
    return {} if card is None else {"random": float(card["random_return"]), "best": float(card["best_return"])}


_PYPLOT = threading.Lock()
"""pyplot is not thread-safe (its figure registry, the mathtext parser): vectorised seeds plot from threads."""


def plot_learning_curve(history: Sequence[Mapping[str, float]], path: Path, title: str, *,
                        references: Mapping[str, float] | None = None, x_key: str = M.UPDATES) -> dict[str, list[str]]:
    """Write ``path`` (PNG, replaced atomically: never half-written) from the run's ``metrics.jsonl`` records;
    returns what it drew: ``panels`` (y labels, top to bottom), ``legend`` (the top panel's) and ``log`` (the
    panels with a log scale)."""
    with _PYPLOT:
        drawn, image = _draw(history, title, references, x_key)
    replace_file(path, image)
    return drawn


def _draw(history: Sequence[Mapping[str, float]], title: str, references: Mapping[str, float] | None,
          x_key: str) -> tuple[dict[str, list[str]], bytes]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    x_label = "env steps" if x_key == M.ENV_STEPS else "gradient updates"
    losses = sorted({k for h in history for k in h if M.is_loss(k)})
    fig, axes = plt.subplots(1 + len(losses), 1, figsize=(7, 3.0 + 1.7 * len(losses)), sharex=True, squeeze=False)
    ax = axes[0][0]
    evals = [(h[x_key], h[M.EVAL_RETURN_MEAN], h.get(M.EVAL_RETURN_STD) or 0.0, h.get(M.EVAL_EPISODES))
             for h in history if M.EVAL_RETURN_MEAN in h and x_key in h]
    if evals:
        x, y, s, n = zip(*evals)
        ax.plot(x, y, marker="o", label="evaluation return (mean)")
        episodes = next((int(e) for e in reversed(n) if e), None)
        ax.fill_between(x, [a - b for a, b in zip(y, s)], [a + b for a, b in zip(y, s)], alpha=0.2,
                        label=f"± std over {episodes} episodes" if episodes else "± std over episodes")
    else:
        ax.text(0.5, 0.5, "no env evaluation", ha="center", va="center", transform=ax.transAxes)
    for (name, value), style in zip(sorted((references or {}).items()), ("--", ":")):
        ax.axhline(value, linestyle=style, color="grey", linewidth=1, label=f"{name} (dataset card): {value:g}")
    ax.set(ylabel="evaluation return", title=title)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize="small", loc="best")
    for row, key in enumerate(losses, 1):
        ax = axes[row][0]
        pts = [(h[x_key], h[key]) for h in history if key in h and x_key in h]
        if pts:
            ax.plot(*zip(*pts))
            if all(v > 0 for _, v in pts):
                ax.set_yscale("log")
        ax.set_ylabel(key.replace(M.LOSSES, ""), fontsize="small")
    axes[-1][0].set_xlabel(x_label)
    drawn = {"panels": [a[0].get_ylabel() for a in axes], "legend": axes[0][0].get_legend_handles_labels()[1],
             "log": [a[0].get_ylabel() for a in axes if a[0].get_yscale() == "log"]}
    fig.tight_layout()
    image = io.BytesIO()
    fig.savefig(image, format="png", dpi=90)
    plt.close(fig)
    return drawn, image.getvalue()
