"""A sweep's summary: the finished trials grouped by grid point (mean and std over seeds of the final and
best return and score) as ``summary.csv``, ``summary.md``, ``summary.json`` and ``sweep.png``; ``summary.md``
ends with what the job loop said about a trial's run (``read_run``: an actor at the action bounds)."""

from __future__ import annotations

import csv
import io
import json
import statistics
from pathlib import Path
from typing import Any

from offlinerl.config_io import to_finite_json
from offlinerl.core import metrics as M
from offlinerl.episodes.atomic import replace_file
from offlinerl.jobs.sweep.plan import TRIALS, SweepSpec

__all__ = ["summarize", "mean_std", "read_run"]

_STATS = ("final_eval_return", "best_eval_return", "final_eval_normalized_score", "best_eval_normalized_score")


def mean_std(values: list[float]) -> tuple[float | None, float | None]:
    """Mean and population standard deviation (None, None for no values)."""
    return (statistics.fmean(values), statistics.pstdev(values)) if values else (None, None)


def summarize(sweep_dir: str | Path, spec: SweepSpec) -> dict[str, Any]:
    """Group the finished trials by grid point: ``summary.csv``, ``summary.md``, ``sweep.png``; returns the rows."""
    root = Path(sweep_dir)
    points: dict[str, dict[str, Any]] = {}
    notices: list[str] = []  # what the loop said about a trial's run (an actor at the action bounds)
    for t in spec.trials:
        key = json.dumps(t.point, sort_keys=True)
        row = points.setdefault(key, {"point": t.point, "trials": 0, "finished": 0, "results": [], "curves": []})
        row["trials"] += 1
        result_file = root / TRIALS / t.name / "result.json"
        curve, notice = read_run(root / TRIALS / t.name / "metrics.jsonl")
        if result_file.is_file():
            row["finished"] += 1
            row["results"].append(json.loads(result_file.read_text()))
            row["curves"].append(curve)
        if notice:
            notices.append(f"- {t.name}: {notice}")
    rows = []
    for row in points.values():
        out = {**{k: row["point"][k] for k in spec.grid}, "trials": row["trials"], "finished": row["finished"]}
        for stat in _STATS:
            values = [r[stat] for r in row["results"] if isinstance(r.get(stat), (int, float))]
            out[f"{stat}_mean"], out[f"{stat}_std"] = mean_std(values)
        out["updates_mean"], _ = mean_std([r["updates"] for r in row["results"]])
        out["train_time_s_mean"], _ = mean_std([r["train_time_s"] for r in row["results"]])
        rows.append((out, row["curves"]))
    table = [r for r, _ in rows]
    _write_csv(root / "summary.csv", table)
    replace_file(root / "summary.md", _markdown(table, list(spec.grid))
                 + ("\nWhat the jobs said:\n\n" + "\n".join(notices) + "\n" if notices else ""))
    _plot(root / "sweep.png", rows, list(spec.grid), Path(spec.job).stem)
    best = max((r for r in table if r["final_eval_return_mean"] is not None),
               key=lambda r: r["final_eval_return_mean"], default=None)
    nodes = {}
    for t in spec.trials:
        attempts = root / TRIALS / f"{t.name}.json"
        nodes[t.name] = [a["node"] for a in json.loads(attempts.read_text())["attempts"]] if attempts.is_file() else []
    out = {"rows": table, "best": best, "keys": list(spec.grid), "trial_nodes": nodes, "sweep_dir": str(root),
           "notices": notices}
    replace_file(root / "summary.json", json.dumps(to_finite_json(out), indent=2) + "\n")
    return out


def read_run(path: Path) -> tuple[list[tuple[float, float]], str | None]:
    """One reading of a run's ``metrics.jsonl`` (missing: nothing; unreadable lines skipped): the ``(updates,
    evaluation return)`` of every evaluation, and the notice the job loop said about the run
    (``jobs.guards.saturated_actor``: an actor at the action bounds) from the first record that calls for it."""
    from offlinerl.jobs.guards import saturated_actor

    curve: list[tuple[float, float]] = []
    notice = None
    for line in path.read_text().splitlines() if path.is_file() else ():
        try:
            r = json.loads(line)
        except json.JSONDecodeError:
            continue
        if not isinstance(r, dict):
            continue
        if isinstance(r.get(M.EVAL_RETURN_MEAN), (int, float)):
            curve.append((float(r[M.UPDATES]), float(r[M.EVAL_RETURN_MEAN])))
        notice = notice or saturated_actor(r)
    return curve, notice


def _write_csv(path: Path, table: list[dict[str, Any]]) -> None:
    text = io.StringIO(newline="")
    writer = csv.DictWriter(text, fieldnames=list(table[0]) if table else ["trials"])
    writer.writeheader()
    for row in table:
        writer.writerow({k: json.dumps(v) if isinstance(v, (list, dict)) else v for k, v in row.items()})
    replace_file(path, text.getvalue())


def _fmt(mean: float | None, std: float | None) -> str:
    return "–" if mean is None else f"{mean:.1f} ± {std:.1f}"


def _markdown(table: list[dict[str, Any]], keys: list[str]) -> str:
    scored = any(r["final_eval_normalized_score_mean"] is not None for r in table)
    head = [*keys, "seeds", "final return", "best return"] + (["final score", "best score"] if scored else [])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in table:
        cells = [json.dumps(r[k]) if not isinstance(r[k], str) else r[k] for k in keys]
        cells += [f"{r['finished']}/{r['trials']}", _fmt(r["final_eval_return_mean"], r["final_eval_return_std"]),
                  _fmt(r["best_eval_return_mean"], r["best_eval_return_std"])]
        if scored:
            cells += [_fmt(r["final_eval_normalized_score_mean"], r["final_eval_normalized_score_std"]),
                      _fmt(r["best_eval_normalized_score_mean"], r["best_eval_normalized_score_std"])]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n\nmean ± std over the finished seeds of each grid point\n"


def _plot(path: Path, rows: list[tuple[dict[str, Any], list[list[tuple[float, float]]]]], keys: list[str],
          title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig, ax = plt.subplots(figsize=(7, 4))
    for row, curves in rows:
        curves = [c for c in curves if c]
        if not curves:
            continue
        n = min(len(c) for c in curves)  # seeds evaluated at the same updates (same job file)
        x = np.array([p[0] for p in curves[0][:n]])
        y = np.array([[p[1] for p in c[:n]] for c in curves])
        label = ", ".join(f"{k.removeprefix('config.')}={row[k]}" for k in keys) or "job file"
        ax.plot(x, y.mean(0), marker="o", label=f"{label}: mean, band ± std over {len(curves)} seed(s)")
        ax.fill_between(x, y.mean(0) - y.std(0), y.mean(0) + y.std(0), alpha=0.2)
    ax.set(xlabel="gradient updates", ylabel="evaluation return", title=f"sweep of {title}: mean ± std over seeds")
    if ax.lines:
        ax.legend(fontsize=8)
    fig.tight_layout()
    png = io.BytesIO()
    fig.savefig(png, format="png", dpi=90)
    plt.close(fig)
    replace_file(path, png.getvalue())
