"""Learning quality of CQL / IQL / TD3+BC pipelines against BC on the same data, without Ray.

Runs the pipeline's algorithm and config through the Ray-free reference loops of
``examples/reference_{cql,iql,td3bc}.py`` (tested to compute the same losses and updates as
the Ray path, bit for bit) so many seeds can run side by side on one machine, on CPU or
GPU. ``--algorithm bc`` runs BC with the pipeline's model, batch, normalisation and
update budget instead (the pipeline's lr, else 1e-3); run on a BC pipeline it is that pipeline.

    PYTHONPATH=. python benchmarks/quality.py run jobs/pendulum-iql.yaml --seed 1 --out results.jsonl
    PYTHONPATH=. python benchmarks/quality.py run jobs/pendulum-iql.yaml --algorithm bc --seed 1 --out results.jsonl
    PYTHONPATH=. python benchmarks/quality.py table results.jsonl      # markdown: mean ± std over seeds

Each run appends one JSON line: pipeline, algorithm, seed, overrides, updates, seconds,
evaluation curve, final return and its normalised score (0 = random, 100 = best level).
"""

from __future__ import annotations

import argparse
import copy
import importlib.util
import inspect
import json
import math
import statistics
import time
from pathlib import Path

import numpy as np
import torch

from offlinerl.algorithms.bc import BCConfig, bc_loss
from offlinerl.algorithms.registry import get_algorithm
from offlinerl.trusted import load_config_file
from offlinerl.core import columns as C
from offlinerl.core.default_module import DefaultRLModule
from offlinerl.env.evaluation import evaluate_module
from offlinerl.episodes import read_info
from offlinerl.scoring import score_for_dataset

ROOT = Path(__file__).resolve().parents[1]


def _reference(name: str):
    spec = importlib.util.spec_from_file_location(f"reference_{name}", ROOT / "examples" / f"reference_{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def np_copy(x):
    return np.array(x, copy=True)


def _bc_parts(cfg: BCConfig, info):
    module = DefaultRLModule(info.observation_space, info.action_space, cfg.module_config())
    opt = {"actor": torch.optim.Adam(module.policy_parameters(), lr=cfg.lr)}

    def update(batch):
        out = bc_loss(batch, module.forward_train(batch), cfg)
        opt["actor"].zero_grad()
        out.losses["actor"].backward()
        opt["actor"].step()
        return out.losses

    return module, update


def run(pipeline_path: str, algorithm: str | None, seed: int, overrides: list[str], device: str,
        updates: int | None, out: str) -> dict:
    spec = load_config_file(pipeline_path, [f"config.{o}" for o in overrides])
    name = algorithm or spec["algorithm"]
    dataset = str(ROOT / spec["dataset"]) if not Path(spec["dataset"]).is_absolute() else spec["dataset"]
    cfg_dict = {**spec.get("config", {}), "seed": seed}
    if name == "bc":
        keep = ("lr", "train_batch_size", "normalize_observations", "model", "evaluation", "updates_per_iteration")
        cfg = BCConfig.from_dict({k: v for k, v in cfg_dict.items() if k in keep} | {"seed": seed})
    else:
        cfg = get_algorithm(name).config_cls.from_dict(cfg_dict)
    total = updates or int(spec["stop"]["updates"])
    eval_every = cfg.updates_per_iteration * max(1, cfg.evaluation.interval)
    torch.manual_seed(seed)
    info = read_info(dataset)
    ref = _reference("iql" if name == "bc" else name)
    arrays, env_to_module = ref.load_transitions(dataset, cfg.normalize_observations)
    data = {k: torch.from_numpy(np_copy(v)).to(device) for k, v in arrays.items()}
    if name == "bc":
        module, step_fn = _bc_parts(cfg, info)
        module.to(device)
    else:
        module_cls = get_algorithm(name).module_cls
        module = module_cls(info.observation_space, info.action_space, cfg.module_config()).to(device)
        optimizers = ref.make_optimizers(module, cfg)
        if len(inspect.signature(ref.update).parameters) > 4:  # the update depends on its index (CQL, TD3+BC)
            step_fn = lambda batch, i: ref.update(module, optimizers, batch, cfg, i)  # noqa: E731
        else:
            step_fn = lambda batch, i: ref.update(module, optimizers, batch, cfg)  # noqa: E731
    n = len(data[C.OBS])
    curve, t0, train_s = [], time.perf_counter(), 0.0
    for i in range(total):
        idx = torch.randint(n, (cfg.train_batch_size,), device=device)
        batch = {k: v[idx] for k, v in data.items()}
        step_fn(batch) if name == "bc" else step_fn(batch, i)
        if (i + 1) % eval_every == 0 or i + 1 == total:
            train_s += time.perf_counter() - t0
            cpu = copy.deepcopy(module).cpu()
            ev = evaluate_module(cpu, info.env_id, env_to_module, episodes=cfg.evaluation.episodes, seed=cfg.evaluation.seed)
            curve.append([i + 1, ev["eval/return_mean"], ev["eval/return_std"]])
            with open(out + ".partial", "a") as f:  # progress survives a run that is cut short
                f.write(json.dumps({"pipeline": Path(pipeline_path).stem, "algorithm": name, "seed": seed,
                                    "overrides": overrides, "updates": i + 1, "train_s": round(train_s, 1),
                                    "return": ev["eval/return_mean"], "score": score_for_dataset(ev["eval/return_mean"], dataset)}) + "\n")
            t0 = time.perf_counter()
    final = curve[-1][1]
    result = {
        "pipeline": Path(pipeline_path).stem, "algorithm": name, "seed": seed, "overrides": overrides,
        "dataset": spec["dataset"], "device": device, "updates": total, "train_s": round(train_s, 1),
        "updates_per_s": round(total / train_s, 1), "eval_episodes": cfg.evaluation.episodes, "curve": curve,
        "final_return": final, "final_score": score_for_dataset(final, dataset),
        "best_score": max(score_for_dataset(c[1], dataset) for c in curve),
    }
    with open(out, "a") as f:  # one short line per run: safe to append from parallel runs
        f.write(json.dumps(result) + "\n")
    return result


def table(paths: list[str]) -> str:
    rows: dict[tuple, list[dict]] = {}
    for path in paths:
        for line in Path(path).read_text().splitlines():
            r = json.loads(line)
            rows.setdefault((r["dataset"], r["pipeline"], r["algorithm"], " ".join(r["overrides"]), r["updates"]), []).append(r)

    def ms(values):
        if len(values) == 1:
            return f"{values[0]:.1f}"
        return f"{statistics.mean(values):.1f} ± {statistics.stdev(values):.1f}"

    lines = ["| dataset | pipeline | algorithm | overrides | seeds | updates | final score | final return | best score (any eval) | updates/s |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for (ds, pipe, algo, ov, _), rs in sorted(rows.items()):
        rs.sort(key=lambda r: r["seed"])
        lines.append(f"| {Path(ds).name} | {pipe} | {algo} | {ov or '-'} | {len(rs)} | {rs[0]['updates']} | "
                     f"{ms([r['final_score'] for r in rs])} | {ms([r['final_return'] for r in rs])} | "
                     f"{ms([r['best_score'] for r in rs])} | {ms([r['updates_per_s'] for r in rs])} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="train + evaluate one pipeline (or BC on its data) for one seed")
    r.add_argument("pipeline")
    references = sorted(p.stem.removeprefix("reference_") for p in (ROOT / "examples").glob("reference_*.py"))
    r.add_argument("--algorithm", choices=references, help="default: the pipeline's (any with an examples/reference_*.py)")
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="config override, e.g. --set cql_weight=1.0")
    r.add_argument("--device", default="cpu")
    r.add_argument("--updates", type=int, help="default: the pipeline's stop.updates")
    r.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    r.add_argument("--out", required=True, help="JSON-lines file to append the result to")
    t = sub.add_parser("table", help="markdown table (mean ± std over seeds) of result files")
    t.add_argument("results", nargs="+")
    args = parser.parse_args()
    if args.cmd == "table":
        print(table(args.results))
        return
    torch.set_num_threads(args.threads)
    res = run(args.pipeline, args.algorithm, args.seed, args.overrides, args.device, args.updates, args.out)
    print(json.dumps({k: v for k, v in res.items() if k != "curve"}))


if __name__ == "__main__":
    main()
