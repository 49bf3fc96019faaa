"""``offlinerl export policy CHECKPOINT --format onnx|torchscript -o FILE``: a deployable policy file; for a
checkpoint of several modules, ``--module-id ID``, ``--all-modules`` (a file per module) or ``--joint`` (one file)."""

from __future__ import annotations

import argparse
import sys

__all__ = ["register_policy", "run_policy"]

PROG = "offlinerl export policy"


def register_policy(formats: argparse._SubParsersAction) -> None:
    p = formats.add_parser(
        "policy",
        help="a checkpoint's policy as one ONNX or TorchScript file: raw env observation in, env action out",
        description="Write the deterministic policy of CHECKPOINT (forward_inference) as one self-contained file "
        "with its observation preprocessing (flatten, one-hot, normalisation with the fitted statistics) and its "
        "action postprocessing (argmax for Discrete; the env dtype, clipped to the bounds, for Box) built in. "
        "Inputs: one per leaf of the observation space, 'obs' or 'obs.<key>' in the space's order, batch first, "
        "in the env's dtype; output: 'actions'. The description (spaces, inputs, output, source) is stored in "
        "the file and beside it as FILE.json. Run it with onnxruntime or torch.jit.load, without offlinerl "
        "(see docs/deploy.md). ONNX needs the optional dependencies: pip install 'offlinerl[export]'. "
        "A checkpoint of several modules (multi-agent) needs one of --module-id, --all-modules or --joint.",
    )
    p.add_argument("checkpoint", metavar="CHECKPOINT", help="checkpoint directory (e.g. runs/<run>/checkpoints/final)")
    p.add_argument("--format", dest="file_format", choices=("onnx", "torchscript"), required=True,
                   help="onnx (for onnxruntime and other ONNX runtimes) or torchscript (for torch.jit.load)")
    p.add_argument("-o", "--output", required=True, metavar="FILE",
                   help="file to write, e.g. policy.onnx (with --all-modules: the directory to write the files into)")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--module-id", default=None, metavar="ID",
                       help="export this module of a checkpoint that holds several")
    which.add_argument("--all-modules", action="store_true",
                       help="export every module to its own file in the directory FILE: <module_id>.onnx or "
                       "<module_id>.pt (and .json beside each), each with its own normalisation")
    which.add_argument("--joint", action="store_true",
                       help="export every module into the one file FILE: one input per module named after it "
                       "(<module_id>, or <module_id>.<key> per leaf), one output per module (actions_<module_id>), "
                       "each module with its own normalisation and its own batch dimension")
    p.add_argument("--overwrite", action="store_true",
                   help="replace FILE (and FILE.json) if it exists; never the checkpoint or a file inside it (or "
                   "inside any dataset or checkpoint), nor a directory (exit 2, nothing changed)")
    p.set_defaults(func=run_policy)


#: The suffixes each format's file is usually named with (a file of one format under the other's suffix is a slip).
_SUFFIXES = {"onnx": (".onnx",), "torchscript": (".pt", ".pth", ".ts")}


def _suffix_problem(output: str, fmt: str) -> str | None:
    """Why ``output`` is no name for a ``fmt`` policy file (None: fine): a ``.json`` name (the description goes
    beside the file as ``FILE.json``, so it would overwrite an earlier export's description), or the other format's
    suffix."""
    suffix = output.lower().rsplit("/", 1)[-1]
    if suffix.endswith(".json"):
        return (f"the description is written beside the policy as FILE.json; name the {fmt} file itself, e.g. "
                f"policy{_SUFFIXES[fmt][0]}")
    other = next((f for f, ends in _SUFFIXES.items() if f != fmt and suffix.endswith(ends)), None)
    if other is not None:
        return f"a {other} file's name for a --format {fmt} file; name it e.g. policy{_SUFFIXES[fmt][0]}"
    return None


def run_policy(args: argparse.Namespace) -> int:
    """Exit 0 written; 1 bad checkpoint, missing optional dependency, export or write failure; 2 output refused."""
    from offlinerl.training.checkpoint import CheckpointError
    from offlinerl.export import ExportError, export_joint_policy, export_module_policies, export_policy
    from offlinerl.episodes.atomic import OutputExistsError, OutputWriteError

    fmt = args.file_format
    if not args.all_modules and (problem := _suffix_problem(args.output, fmt)) is not None:
        print(f"{PROG}: error: -o {args.output}: {problem}", file=sys.stderr)
        return 2
    try:
        if args.all_modules:
            files = export_module_policies(args.checkpoint, args.output, fmt, overwrite=args.overwrite)
        elif args.joint:
            out = export_joint_policy(args.checkpoint, args.output, fmt, overwrite=args.overwrite)
        else:
            out = export_policy(args.checkpoint, args.output, fmt, module_id=args.module_id, overwrite=args.overwrite)
    except OutputExistsError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    except (CheckpointError, ExportError, OutputWriteError) as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 1
    if args.all_modules:
        for mid, path in files.items():
            print(f"wrote {fmt} policy of module {mid} to {path} (description: {path}.json)")
    elif args.joint:
        print(f"wrote the joint {fmt} policy to {out} (description: {out}.json)")
    else:
        print(f"wrote {fmt} policy to {out} (description: {out}.json)")
    return 0
