"""``offlinerl data OP INPUT... -o OUT``: filter, sample, split, mix, relabel, dedup and stats of episode datasets
(:mod:`offlinerl.data_ops`; recipes in docs/data.md)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from offlinerl.cli.common import add_address_option, overwrite_help

__all__ = ["register", "run"]

#: Largest --episodes/--exclude id file read (64 MiB).
MAX_ID_FILE_BYTES = 64 * 2**20

EPILOG = """\
Every operation reads its input(s) with Ray Data, writes a new dataset atomically (never over an input; an
existing output only with --overwrite) and records in its dataset.json the content fingerprint and the
lineage (the parents' fingerprints, the operation and its options). Exit codes: 0 written, 2 refused
(bad option, unreadable or empty input, an output that may not be written; nothing was written), 130
interrupted (Ctrl-C; nothing was written), 141 stdout closed early (e.g. `| head`; the outputs were written).

examples:
  offlinerl data filter datasets/cartpole-mixed --top 10% -o data/cartpole-top10
  offlinerl data filter D --where "return > 100 and first(behavior_level) >= 2" -o D-good
  offlinerl data sample D --fraction 0.25 --seed 1 -o D-quarter
  offlinerl data split D --holdout 0.2 --seed 0 -o D-split        (D-split/train, D-split/holdout)
  offlinerl data mix expert random --weights 0.3,0.7 --by steps -o mixed
  offlinerl data relabel D --scale 0.1 --clip -1,1 -o D-scaled
  offlinerl data dedup D -o D-unique
  offlinerl data stats D -o D-card.json --png D-card.png
"""


def _float_pair(text: str) -> tuple[float, float]:
    try:
        lo, hi = (float(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected LO,HI (e.g. -1,1), got {text!r}") from None
    return lo, hi


def _floats(text: str) -> tuple[float, ...]:
    try:
        return tuple(float(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected numbers separated by commas (e.g. 0.3,0.7), got {text!r}") from None


def _fractions(text: str) -> tuple[tuple[str, float], ...]:
    out = []
    for part in text.split(","):
        name, sep, value = part.partition("=")
        try:
            out.append((name.strip(), float(value)))
        except ValueError:
            sep = ""
        if not sep:
            raise argparse.ArgumentTypeError(f"expected NAME=F,... (e.g. train=0.8,test=0.2), got {text!r}")
    return tuple(out)


def _read_ids(path: str | None, option: str) -> tuple[str, ...] | None:
    """Episode ids from a text file (one per line) or a JSON list of strings."""
    if path is None:
        return None
    from offlinerl.data_ops import DataOpError

    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_ID_FILE_BYTES + 1)
    except OSError as exc:
        raise DataOpError(f"{option} {path}: cannot be read ({exc.strerror or exc})") from None
    if len(raw) > MAX_ID_FILE_BYTES:
        raise DataOpError(f"{option} {path}: larger than {MAX_ID_FILE_BYTES:,} bytes")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise DataOpError(f"{option} {path}: not UTF-8 text") from None
    if text.lstrip().startswith("["):
        try:
            ids = json.loads(text)
        except ValueError as exc:
            raise DataOpError(f"{option} {path}: not a JSON list ({exc})") from None
        if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
            raise DataOpError(f"{option} {path}: a JSON file must hold a list of episode ids (strings)")
        return tuple(ids)
    return tuple(line.strip() for line in text.splitlines() if line.strip())


def _output(p: argparse.ArgumentParser, what: str = "output dataset directory (must not exist unless --overwrite)"
            ) -> None:
    p.add_argument("-o", "--output", required=True, metavar="OUT", help=what)
    p.add_argument("--overwrite", action="store_true", help=overwrite_help())
    add_address_option(p)


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "data", help="filter, sample, split, mix, relabel, dedup or describe episode datasets (with lineage)",
        description="Data-centric operations on episode datasets, each a streaming Ray Data job that writes a new "
        "dataset with its content fingerprint and lineage (docs/data.md).",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    ops = parser.add_subparsers(dest="op", metavar="OP")
    ops.required = True

    p = ops.add_parser("filter", help="keep the episodes that pass predicates, ranks or id lists",
                       description="Keep whole episodes: every predicate given must hold; then --top/--bottom rank "
                       "what is left. An episode's return and length sum all its rows.")
    p.add_argument("input", metavar="INPUT", help="episode dataset directory")
    p.add_argument("--top", metavar="K|P%", help="keep the best K episodes, or the best P%% (e.g. 10%%)")
    p.add_argument("--bottom", metavar="K|P%", help="keep the worst K episodes, or the worst P%%")
    p.add_argument("--rank-by", default="return", metavar="return|length|EXPR",
                   help="what --top/--bottom rank by: return (default), length, or an episode expression as --where "
                   "takes, e.g. \"last(rewards)\" (how episodes ended)")
    p.add_argument("--min-return", type=float, metavar="R", help="keep episodes whose return is >= R")
    p.add_argument("--max-return", type=float, metavar="R", help="keep episodes whose return is <= R")
    p.add_argument("--min-length", type=int, metavar="T", help="keep episodes of >= T steps")
    p.add_argument("--max-length", type=int, metavar="T", help="keep episodes of <= T steps")
    p.add_argument("--where", metavar="EXPR",
                   help="episode predicate over return, length, terminated, truncated, episode_id and mean/sum/min/"
                   "max/first/last(COLUMN) of a per-step column, e.g. \"return > 100 and first(behavior_level) < 2\" "
                   "(parsed, never run as Python)")
    p.add_argument("--episodes", metavar="FILE", help="keep only the episode ids in FILE (one per line, or a JSON list)")
    p.add_argument("--exclude", metavar="FILE", help="drop the episode ids in FILE")
    _output(p)

    p = ops.add_parser("sample", help="draw N episodes or a fraction, seeded (optionally return-matched)")
    p.add_argument("input", metavar="INPUT", help="episode dataset directory")
    p.add_argument("--episodes", type=int, metavar="N", help="episodes to draw")
    p.add_argument("--fraction", type=float, metavar="F", help="share of the episodes to draw, in (0, 1]")
    p.add_argument("--seed", type=int, default=0, help="seed of the draw (default 0)")
    p.add_argument("--match-returns", metavar="DATASET",
                   help="draw so the return histogram follows DATASET's (equal-width bins over both ranges)")
    p.add_argument("--bins", type=int, default=20, help="return bins for --match-returns (default 20)")
    _output(p)

    p = ops.add_parser("split", help="split by episode id, seeded: OUT/NAME per part",
                       description="Split the episodes (seeded permutation of the sorted ids) into named datasets "
                       "OUT/NAME. --holdout F writes OUT/train and OUT/holdout: exactly what a job with "
                       "data.holdout {fraction: F, seed: S} trains on and holds out.")
    p.add_argument("input", metavar="INPUT", help="episode dataset directory")
    p.add_argument("--holdout", type=float, metavar="F", help="share held out (OUT/train, OUT/holdout)")
    p.add_argument("--fractions", type=_fractions, default=(), metavar="NAME=F,...",
                   help="named shares summing to 1, e.g. train=0.8,valid=0.1,test=0.1")
    p.add_argument("--seed", type=int, default=0, help="seed of the draw (default 0)")
    _output(p, "directory of the parts: OUT/NAME, each a dataset, which must not exist unless --overwrite (OUT "
               "itself may, and what else it holds is left alone)")

    p = ops.add_parser("mix", help="mix datasets of the same spaces, with weights and a source column")
    p.add_argument("inputs", nargs="+", metavar="INPUT", help="episode dataset directories (two or more)")
    p.add_argument("--weights", type=_floats, metavar="W1,W2,...",
                   help="one weight per input (default: take every episode; with --total: equal weights)")
    p.add_argument("--by", choices=("episodes", "steps"), default="episodes",
                   help="what --weights/--total share out (default episodes; steps needs --weights or --total)")
    p.add_argument("--total", type=int, metavar="N",
                   help="exactly N episodes in the output (by steps: about N steps), shared out by --weights, equal "
                   "shares without; at least one episode per input, none drawn twice (default: the most the weights "
                   "allow)")
    p.add_argument("--names", metavar="N1,N2,...", help="source names (default: the directory names)")
    p.add_argument("--source-column", default="source", help="per-step column naming the source (default source)")
    p.add_argument("--no-source-column", action="store_true", help="add no source column")
    p.add_argument("--seed", type=int, default=0, help="seed of the draw (default 0)")
    _output(p)

    p = ops.add_parser("relabel", help="rewards scaled/shifted/clipped or from a function; terminal flags",
                       description="New rewards: clip(f(r) * scale * k + shift, LO, HI); k = --return-range / "
                       "(max return - min return). --reward-fn module:function imports that module (it runs its "
                       "code): name only code you trust. It is read from this command line only, never a file.")
    p.add_argument("input", metavar="INPUT", help="episode dataset directory")
    p.add_argument("--scale", type=float, default=1.0, help="multiply every reward by this (default 1)")
    p.add_argument("--shift", type=float, default=0.0, help="then add this (default 0)")
    p.add_argument("--clip", type=_float_pair, metavar="LO,HI", help="then clip to [LO, HI]")
    p.add_argument("--return-range", type=float, metavar="K", help="scale rewards by K / (max - min episode return)")
    p.add_argument("--reward-fn", metavar="MODULE:FUNCTION",
                   help="f(obs, actions, rewards, next_obs) -> rewards, called per row with numpy arrays")
    p.add_argument("--terminal-when", metavar="EXPR",
                   help="predicate on each episode's last step over reward, action, obs, next_obs (e.g. "
                   "\"next_obs[0] > 0.45\"): true -> terminated, false -> truncated")
    _output(p)

    p = ops.add_parser("dedup", help="remove exact duplicate episodes and chunks (counted, reported)")
    p.add_argument("input", metavar="INPUT", help="episode dataset directory")
    _output(p)

    p = ops.add_parser("stats", help="a dataset card: JSON, a one-page PNG, text on stdout")
    p.add_argument("input", metavar="INPUT", help="episode dataset directory")
    p.add_argument("-o", "--output", metavar="FILE.json", help="write the card as JSON")
    p.add_argument("--png", metavar="FILE.png", help="draw the one-page report")
    p.add_argument("--by", metavar="COLUMN",
                   help="per-step column whose first value names an episode's source (default: source, else "
                   "behavior_level, when present)")
    p.add_argument("--bins", type=int, default=10, help="bins per dimension of the coverage count (default 10)")
    p.add_argument("--overwrite", action="store_true", help="replace existing report files")
    add_address_option(p)
    parser.set_defaults(func=run)


def _count(n: int, word: str) -> str:
    """``1 episode``, ``2 episodes``."""
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def _summary(result) -> str:
    info = result.info
    episodes = _count(info.num_episodes, "episode")
    team = result.report.get("episodes_out")
    if team is not None and team != info.num_episodes:  # multi-agent: the op counted whole (team) episodes
        episodes = f"{_count(team, 'episode')} ({info.num_episodes:,} agent episodes)"
    return f"wrote {result.path}: {episodes}, {_count(info.num_steps, 'step')}, fingerprint {info.fingerprint[:16]}"


def _run(args: argparse.Namespace) -> list[str]:
    from offlinerl import data_ops as D

    if args.op == "filter":
        cfg = D.FilterConfig(top=args.top, bottom=args.bottom, rank_by=args.rank_by, min_return=args.min_return,
                             max_return=args.max_return, min_length=args.min_length, max_length=args.max_length,
                             where=args.where, episodes=_read_ids(args.episodes, "--episodes"),
                             exclude=_read_ids(args.exclude, "--exclude") or ())
        r = D.filter_dataset(args.input, args.output, cfg, overwrite=args.overwrite)
        return [f"kept {r.report['episodes_out']:,} of {_count(r.report['episodes_in'], 'episode')} "
                f"(return mean {r.report['return_mean_in']:.4g} -> {r.report['return_mean_out']:.4g})", _summary(r)]
    if args.op == "sample":
        cfg = D.SampleConfig(episodes=args.episodes, fraction=args.fraction, seed=args.seed,
                             match_returns=args.match_returns, bins=args.bins)
        r = D.sample_dataset(args.input, args.output, cfg, overwrite=args.overwrite)
        extra = f"; {r.report['shortfall']} short of the target histogram" if r.report.get("shortfall") else ""
        return [f"drew {r.report['episodes_out']:,} of {_count(r.report['episodes_in'], 'episode')}{extra}",
                _summary(r)]
    if args.op == "split":
        cfg = D.SplitConfig(holdout=args.holdout, fractions=args.fractions, seed=args.seed)
        return [_summary(r) for r in D.split_dataset(args.input, args.output, cfg, overwrite=args.overwrite).values()]
    if args.op == "mix":
        cfg = D.MixConfig(weights=args.weights, by=args.by, total=args.total,
                          names=tuple(args.names.split(",")) if args.names else None,
                          source_column=None if args.no_source_column else args.source_column, seed=args.seed)
        r = D.mix_datasets(args.inputs, args.output, cfg, overwrite=args.overwrite)
        lines = [f"  {n}: {_count(s['episodes'], 'episode')}, {_count(s['steps'], 'step')}"
                 for n, s in r.report["sources"].items()]
        if r.report["columns_dropped"]:
            lines.append(f"  columns not in every input, dropped: {', '.join(r.report['columns_dropped'])}")
        return lines + [_summary(r)]
    if args.op == "relabel":
        cfg = D.RelabelConfig(scale=args.scale, shift=args.shift, clip=args.clip, return_range=args.return_range,
                              reward_fn=args.reward_fn, terminal_when=args.terminal_when)
        return [_summary(D.relabel_dataset(args.input, args.output, cfg, overwrite=args.overwrite))]
    if args.op == "dedup":
        r = D.dedup_dataset(args.input, args.output, overwrite=args.overwrite)
        rep = r.report
        return [f"removed {rep['duplicate_rows_removed']:,} duplicate row(s) and {rep['duplicate_episodes_removed']:,} "
                f"duplicate episode(s) ({_count(rep['steps_removed'], 'step')}); kept "
                f"{_count(rep['episodes_out'], 'episode')}", _summary(r)]
    return _stats(args)


def _stats(args: argparse.Namespace) -> list[str]:
    from offlinerl.data_ops import DataOpError, StatsConfig, dataset_card, format_card
    from offlinerl.data_ops.report import plot_card
    from offlinerl.episodes.atomic import check_output_file, write_file

    targets = [t for t in (args.output, args.png) if t]
    if len(targets) == 2 and Path(args.output).resolve() == Path(args.png).resolve():
        raise DataOpError(f"-o {args.output} and --png {args.png} are the same file; give each its own path")
    for target in targets:  # refused before the passes, not after
        check_output_file(target, args.overwrite, inputs=[args.input])
    card = dataset_card(args.input, StatsConfig(by=args.by, bins=args.bins))
    lines = [format_card(card)]
    if args.output:
        path = write_file(args.output, json.dumps(card, indent=2, allow_nan=False, default=str) + "\n",
                          args.overwrite, inputs=[args.input])
        lines.append(f"wrote {path}")
    if args.png:
        lines.append(f"wrote {plot_card(card, args.png, overwrite=args.overwrite)}")
    return lines


def run(args: argparse.Namespace) -> int:
    from offlinerl.ray_utils import quiet_ray_data

    quiet_ray_data()
    prefix = f"offlinerl data {args.op}"
    try:
        lines = _run(args)
    except (ValueError, OSError) as exc:  # DataOpError, DatasetInfoError, ExpressionError, refused outputs
        text = str(exc).strip().splitlines()
        print(f"{prefix}: {text[0] if text else type(exc).__name__}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # writers remove their temporary outputs: nothing was written
        print(f"{prefix}: interrupted", file=sys.stderr)
        return 130
    for line in lines:  # a closed stdout (`| head`) is exit 141 (offlinerl.cli.main)
        print(line)
    return 0
