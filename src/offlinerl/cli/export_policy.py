"""``offlinerl export policy CHECKPOINT --format onnx|torchscript -o FILE``: a deployable policy file."""

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
        "(see docs/deploy.md). ONNX needs the optional dependencies: pip install 'offlinerl[export]'.",
    )
    p.add_argument("checkpoint", metavar="CHECKPOINT", help="checkpoint directory (e.g. runs/<run>/checkpoints/final)")
    p.add_argument("--format", dest="file_format", choices=("onnx", "torchscript"), required=True,
                   help="onnx (for onnxruntime and other ONNX runtimes) or torchscript (for torch.jit.load)")
    p.add_argument("-o", "--output", required=True, metavar="FILE", help="file to write, e.g. policy.onnx")
    p.add_argument("--module-id", default=None, help="module to export when the checkpoint holds several")
    p.add_argument("--overwrite", action="store_true",
                   help="replace FILE (and FILE.json) if it exists; never the checkpoint or a file inside it (or "
                   "inside any dataset or checkpoint), nor a directory (exit 2, nothing changed)")
    p.set_defaults(func=run_policy)


def run_policy(args: argparse.Namespace) -> int:
    """Exit 0 written; 1 bad checkpoint, missing optional dependency, export or write failure; 2 output refused."""
    from offlinerl.training.checkpoint import CheckpointError
    from offlinerl.export import ExportError, export_policy
    from offlinerl.episodes.atomic import OutputExistsError, OutputWriteError

    try:
        out = export_policy(args.checkpoint, args.output, args.file_format, module_id=args.module_id,
                            overwrite=args.overwrite)
    except OutputExistsError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    except (CheckpointError, ExportError, OutputWriteError) as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 1
    print(f"wrote {args.file_format} policy to {out} (description: {out}.json)")
    return 0
