"""``offlinerl ope CHECKPOINT... --dataset DS``: estimate checkpoints' returns from a dataset, without their env."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from offlinerl.cli.common import add_device_option, device_problem

__all__ = ["register", "format_table"]


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "ope",
        help="off-policy evaluation of checkpoints on a dataset (FQE, IS, WIS, PDIS, DR)",
        description="Estimate the discounted return of each CHECKPOINT's policy from the episodes of DATASET, "
        "without running its env. fqe (fitted Q evaluation) evaluates the deployed policy (forward_inference); "
        "is, wis, pdis and dr evaluate the module's stochastic policy (what forward_exploration samples) and need "
        "the dataset's action_logp (behaviour log-probs); they are skipped, with the reason, otherwise. Each "
        "estimate comes with a percentile bootstrap interval over episodes (see docs/ope.md). A multi-agent "
        "dataset or checkpoint is evaluated per module: each module on its own agent's rows (module_id, else "
        "agent_id) with its own normalisation, the other agents taken as part of the environment.",
    )
    p.add_argument("checkpoints", nargs="+", metavar="CHECKPOINT", help="checkpoint directories")
    p.add_argument("--dataset", required=True, help="episode dataset directory")
    p.add_argument("--method", default="fqe,is,wis,pdis,dr", help="comma-separated estimators (default: all)")
    p.add_argument("--gamma", type=float, default=0.99, help="discount of the estimated return (default 0.99)")
    p.add_argument("--fqe-updates", type=int, default=10_000, help="FQE gradient steps (default 10000)")
    p.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples (default 1000)")
    p.add_argument("--seed", type=int, default=0, help="seed of FQE, the bootstrap and policy samples")
    p.add_argument("--holdout", type=float, default=None, metavar="FRACTION",
                   help="score only the episodes a job with data.holdout {fraction: FRACTION, seed: --holdout-seed} "
                   "kept out of training (same ids, fraction and seed, same split)")
    p.add_argument("--holdout-seed", type=int, default=0, help="seed of that split (default 0)")
    p.add_argument("--out", metavar="FILE.json",
                   help="also write the report as JSON to FILE.json (missing directories are created; never a "
                   "file inside a dataset or checkpoint)")
    p.add_argument("--overwrite", action="store_true", help="replace the --out file if it exists")
    p.add_argument("--module-id", default=None, metavar="ID",
                   help="evaluate only this module of multi-agent checkpoints (default: every module, each on its "
                   "own rows of the dataset)")
    p.add_argument("--skip-validation", action="store_true", help="do not validate the dataset first")
    add_device_option(p, "the policy's forward passes and the FQE fit run")
    p.set_defaults(func=run)


def _num(x: Any) -> str:
    return "-" if x is None else f"{x:.2f}"


def _method_lines(name: str, row: dict[str, Any]) -> list[str]:
    if row.get("skipped"):
        return [f"{name} {row['method']:<5} {row['policy']:<10} skipped: {row['skipped']}"]
    ci = f"[{_num(row['ci_low'])}, {_num(row['ci_high'])}]"
    mark = " !" if row.get("flags") else ""
    return [f"{name} {row['method']:<5} {row['policy']:<10} {_num(row['estimate']):>10} {ci:>22} "
            f"{_num(row.get('ess')):>7}{mark}", *(f"  ! {row['method']}: {flag}" for flag in row.get("flags") or ())]


def _short(text: str, width: int) -> str:
    return text if len(text) <= width else "…" + text[-(width - 1):]


def format_table(report: dict[str, Any]) -> str:
    """One line per checkpoint × method (× module, for multi-agent data): estimate, interval, episodes, ESS, or
    why it was skipped; a flagged estimate (outside the feasible range, low ESS, FQE not converged) ends in ``!``,
    its reasons on the lines below it."""
    intervals = f"γ = {report['gamma']}, {report['confidence']:.0%} bootstrap intervals"
    if "modules" not in report:
        lines = [f"dataset {report['dataset']} ({report['episodes']} episodes, {intervals})",
                 f"{'checkpoint':<40} {'method':<5} {'policy':<10} {'estimate':>10} {'interval':>22} {'ESS':>7}"]
        for result in report["results"]:
            name = f"{_short(result['checkpoint'], 40):<40}"
            for row in result["methods"]:
                lines += _method_lines(name, row)
        return "\n".join(lines)
    per = ", ".join(f"{m['module_id']} {m['episodes']}" for m in report["modules"])
    lines = [f"dataset {report['dataset']} (episodes per module: {per}; each module on its own agent's rows, the "
             f"other agents part of the environment; {intervals})",
             f"{'checkpoint':<32} {'module':<12} {'method':<5} {'policy':<10} {'estimate':>10} {'interval':>22} "
             f"{'ESS':>7}"]
    for result in report["results"]:
        for entry in result["modules"]:
            name = f"{_short(result['checkpoint'], 32):<32} {_short(entry['module_id'], 12):<12}"
            for row in entry["methods"]:
                lines += _method_lines(name, row)
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    """Exit 0 done; 1 bad inputs or a failed write; 2 bad options or a refused --out (nothing run)."""
    from offlinerl.data.config import HoldoutConfig
    from offlinerl.evaluation.ope.fqe import FQEConfig
    from offlinerl.evaluation.ope.run import OPEConfig, ope_checkpoints
    from offlinerl.episodes.atomic import OutputExistsError, OutputWriteError, check_output_file, write_file
    from offlinerl.episodes.validate import InvalidDatasetError

    try:
        config = OPEConfig(methods=tuple(m.strip() for m in args.method.split(",") if m.strip()), gamma=args.gamma,
                           fqe=FQEConfig(num_updates=args.fqe_updates, seed=args.seed),
                           num_resamples=args.resamples, seed=args.seed, device=args.device or "cpu")
        holdout = None if args.holdout is None else HoldoutConfig(fraction=args.holdout, seed=args.holdout_seed)
    except ValueError as exc:  # ConfigError too (a bad --holdout)
        print(f"offlinerl ope: {exc}", file=sys.stderr)
        return 2
    if (problem := device_problem(args.device)) is not None:
        print(f"offlinerl ope: {problem}", file=sys.stderr)
        return 2
    inputs = [*args.checkpoints, args.dataset]
    try:
        if args.out:  # before any fitting: the report may not replace or land inside what it reads
            check_output_file(args.out, args.overwrite, inputs=inputs)
    except OutputWriteError as exc:
        print(f"offlinerl ope: {exc}", file=sys.stderr)
        return 1
    except OutputExistsError as exc:
        print(f"offlinerl ope: {exc}", file=sys.stderr)
        return 2
    try:
        report = ope_checkpoints(args.checkpoints, args.dataset, config, validate=not args.skip_validation,
                                 holdout=holdout, module_id=args.module_id)
    except InvalidDatasetError:
        print(f"offlinerl ope: {args.dataset} failed validation; `offlinerl validate {args.dataset}` shows why",
              file=sys.stderr)
        return 1
    except (FileNotFoundError, ValueError) as exc:
        first = str(exc).splitlines()[0]
        print(f"offlinerl ope: {first}", file=sys.stderr)
        return 1
    print(format_table(report))
    if args.out:
        try:
            out = write_file(args.out, json.dumps(report, indent=2, allow_nan=False) + "\n", args.overwrite,
                             inputs=inputs)
        except (OutputExistsError, OutputWriteError) as exc:  # appeared meanwhile, or the disk filled up
            print(f"offlinerl ope: {exc}", file=sys.stderr)
            return 1
        print(f"wrote {out}")
    return 0
