"""Data operations at 10M steps under the memory cap of docs/scaling.md: every ``offlinerl data`` operation
(``filter --top 10%``, ``sample``, ``split``, ``mix``, ``relabel``, ``dedup``, ``stats``; ``--ops`` picks some).

    PYTHONPATH=. python benchmarks/data_ops.py make --copies 196 -o /tmp/cartpole-10M   # 196 x 51,250 steps
    PYTHONPATH=. python benchmarks/data_ops.py make --copies 20 -o /tmp/cartpole-1M      # the same at 1M
    PYTHONPATH=. nice -n 10 python benchmarks/data_ops.py run /tmp/cartpole-1M /tmp/cartpole-10M \
        --out benchmarks/results/data_ops.json
    PYTHONPATH=. python benchmarks/data_ops.py table benchmarks/results/data_ops.json

``mix`` mixes the dataset with the ``filter`` output of the same run (run ``filter`` first, or in the same ``--ops``).

``make`` repeats ``datasets/cartpole-mixed`` (502 episodes, 51,250 steps) ``--copies`` times, one parquet file per
copy, each episode id prefixed with its copy (``r017-...``): the rows are the shipped ones, so every copy
after the first is an exact duplicate of the first in everything but the ids (``dedup`` must find them all),
and the ``dataset.json`` records no fingerprint (the ops compute it from the rows, as for any older dataset).

``run`` runs each operation as ``offlinerl data ...`` in its own process tree inside a memory cgroup of
``--cap-gib`` (2.5 GiB, as docs/scaling.md's larger-than-memory runs) with Ray's object store at
``--object-store-mib`` (512), sampling the PSS of every process twice a second
(``benchmarks/memory.py``'s ``measure``), and records per operation: wall time, exit code, peak PSS of the
tree, the cgroup's peak and OOM kills, what Ray spilled, and the operation's printed summary.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "src"), str(REPO)]  # the checkout's package (src/ layout) and its helpers

from benchmarks.memory import measure  # noqa: E402

SOURCE = REPO / "datasets" / "cartpole-mixed"


def make(copies: int, out: Path) -> None:
    from offlinerl.episodes import read_info
    from offlinerl.episodes.atomic import atomic_directory
    from offlinerl.episodes.io import parquet_files

    info = read_info(SOURCE)
    table = pa.concat_tables(pq.read_table(f) for f in parquet_files(SOURCE))
    ids = table.column("episode_id").to_pylist()
    with atomic_directory(out, kind="dataset", inputs=[SOURCE]) as tmp:
        for k in range(copies):
            renamed = pa.array([f"r{k:03d}-{i}" for i in ids], pa.string())
            part = table.set_column(table.schema.get_field_index("episode_id"), "episode_id", renamed)
            pq.write_table(part, tmp / f"part-{k:05d}.parquet")
        info.num_episodes *= copies
        info.num_steps *= copies
        info.num_rows *= copies
        info.provenance = {"collector": "benchmarks/data_ops.py make", "source": str(SOURCE), "copies": copies}
        info.fingerprint, info.lineage = None, []
        info.write(tmp)
    print(f"wrote {out}: {info.num_episodes:,} episodes, {info.num_steps:,} steps in {copies} files")


def operations(dataset: Path, here: Path) -> dict[str, list[str]]:
    """Each operation's ``offlinerl data`` arguments on ``dataset``, its outputs under ``here``."""
    return {"filter": ["filter", str(dataset), "--top", "10%", "-o", str(here / "filtered"), "--overwrite"],
            "sample": ["sample", str(dataset), "--fraction", "0.25", "--seed", "1", "-o", str(here / "sampled"),
                       "--overwrite"],
            "split": ["split", str(dataset), "--holdout", "0.2", "--seed", "0", "-o", str(here / "split"),
                      "--overwrite"],
            "mix": ["mix", str(dataset), str(here / "filtered"), "--names", "all,top", "--weights", "0.5,0.5",
                    "--by", "steps", "-o", str(here / "mixed"), "--overwrite"],
            "relabel": ["relabel", str(dataset), "--return-range", "1", "--shift", "-0.001", "--clip", "-1,1",
                        "-o", str(here / "relabelled"), "--overwrite"],
            "dedup": ["dedup", str(dataset), "-o", str(here / "deduped"), "--overwrite"],
            "stats": ["stats", str(dataset), "-o", str(here / "card.json"), "--png", str(here / "card.png"),
                      "--overwrite"]}


def output_steps(args: list[str]) -> dict | None:
    """Steps and episodes of what an operation wrote (a dataset, or a split's parts), if it wrote a dataset."""
    out = Path(args[args.index("-o") + 1])
    infos = [out / "dataset.json"] if (out / "dataset.json").exists() else sorted(out.glob("*/dataset.json"))
    if not infos:
        return None
    parts = {p.parent.name: json.loads(p.read_text()) for p in infos}
    return {name: {"num_steps": i["num_steps"], "num_episodes": i["num_episodes"]} for name, i in parts.items()}


def run(datasets: list[Path], out: Path, cap_gib: float, object_store_mib: int, workdir: Path,
        only: list[str] | None = None) -> None:
    workdir.mkdir(parents=True, exist_ok=True)
    cap = int(cap_gib * 2**30)
    env = {"RAY_DEFAULT_OBJECT_STORE_MAX_MEMORY_BYTES": str(object_store_mib << 20),
           "OFFLINERL_CACHE_DIR": str(workdir / "cache")}
    rows = []
    for dataset in datasets:
        info = json.loads((dataset / "dataset.json").read_text())
        size = {"dataset": str(dataset), "num_steps": info["num_steps"], "num_episodes": info["num_episodes"],
                "parquet_bytes": sum(f.stat().st_size for f in dataset.glob("*.parquet"))}
        here = workdir / dataset.name
        ops = {k: v for k, v in operations(dataset, here).items() if only is None or k in only}
        here.mkdir(parents=True, exist_ok=True)
        for name, args in ops.items():
            cmd = [sys.executable, "-m", "offlinerl.cli", "data", *args]
            row = {"op": name, **size, "command": "offlinerl data " + " ".join(args),
                   **measure(name, cmd, cap, here, env)}
            row["printed"] = [line for line in (here / f"{name}.log").read_text().splitlines()
                              if line.startswith(("kept", "removed", "wrote", "coverage", "drew", "split", "mixed",
                                                  "relabel"))][:4]
            row["output"] = output_steps(args) if name != "stats" else None
            row.pop("pss_samples", None)
            rows.append(row)
            print(json.dumps({k: row[k] for k in ("op", "num_steps", "exit_code", "wall_s", "peak_pss_bytes")}),
                  flush=True)
            out.write_text(json.dumps({"machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
                                       "cap_gib": cap_gib, "object_store_mib": object_store_mib, "runs": rows},
                                      indent=1) + "\n")


def table(path: Path) -> str:
    data = json.loads(path.read_text())
    lines = ["| operation | steps | episodes | parquet MiB | exit | wrote (steps) | wall s | peak PSS GiB | "
             "cgroup peak GiB | OOM kills |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in data["runs"]:
        wrote = ", ".join(f"{name} {o['num_steps']:,}" if len(r["output"]) > 1 else f"{o['num_steps']:,}"
                          for name, o in r["output"].items()) if r.get("output") else "—"
        lines.append(f"| {r['op']} | {r['num_steps']:,} | {r['num_episodes']:,} | {r['parquet_bytes'] / 2**20:.0f} | "
                     f"{r['exit_code']} | {wrote} | {r['wall_s']:.0f} | {r['peak_pss_bytes'] / 2**30:.2f} | "
                     f"{r.get('cgroup_peak_bytes', 0) / 2**30:.2f} | {r.get('cgroup_oom_kills', '—')} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("make")
    m.add_argument("--copies", type=int, default=196)
    m.add_argument("-o", "--output", type=Path, required=True)
    r = sub.add_parser("run")
    r.add_argument("datasets", type=Path, nargs="+")
    r.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "data_ops.json")
    r.add_argument("--cap-gib", type=float, default=2.5)
    r.add_argument("--object-store-mib", type=int, default=512)
    r.add_argument("--workdir", type=Path, default=Path("/tmp/data-ops-bench"))
    r.add_argument("--ops", default=None, help="comma-separated operations (default: all, in the order above)")
    t = sub.add_parser("table")
    t.add_argument("results", type=Path)
    args = parser.parse_args()
    if args.cmd == "make":
        make(args.copies, args.output)
    elif args.cmd == "table":
        print(table(args.results))
    else:
        only = None if args.ops is None else args.ops.split(",")
        run([d.resolve() for d in args.datasets], args.out, args.cap_gib, args.object_store_mib, args.workdir, only)


if __name__ == "__main__":
    main()
