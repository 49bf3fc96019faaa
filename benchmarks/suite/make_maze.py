"""Generate a PointMaze dataset of the maze-stitching family by hand (no offlinerl CLI), or re-measure the
reference returns shipped in ``src/offlinerl/benchmark/references.json``.

    python benchmarks/suite/make_maze.py pointmaze-umaze /tmp/pointmaze-umaze --steps 1000000 --seed 0
    python benchmarks/suite/make_maze.py --references      # after a recipe change (bump RECIPE_VERSION too)

The same name, steps and seed write the same parquet bytes (``data_sha256`` in the card).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from offlinerl.benchmark import maze


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("name", nargs="?", choices=sorted(maze.MAZES), help="the maze")
    p.add_argument("out", nargs="?", type=Path, help="the dataset directory to write")
    p.add_argument("--steps", type=int, default=1_000_000, help="env steps (default 1,000,000, D4RL's umaze size)")
    p.add_argument("--seed", type=int, default=0, help="generation seed (default 0)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing dataset at OUT")
    p.add_argument("--references", action="store_true",
                   help=f"measure every maze's reference returns and write {maze.REFERENCES.name}")
    args = p.parse_args(argv)
    if args.references:
        started = time.perf_counter()
        data = maze.write_references()
        print(json.dumps(data["mazes"], indent=2))
        print(f"wrote {maze.REFERENCES} in {time.perf_counter() - started:.0f} s")
        return 0
    if args.name is None or args.out is None:
        p.error("give NAME and OUT (or --references)")
    maze.generate_maze(args.name, args.out, steps=args.steps, seed=args.seed, overwrite=args.overwrite, log=print)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
