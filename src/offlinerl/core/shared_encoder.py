"""Submodules shared by every ``RLModule`` of a ``MultiRLModule`` (a shared encoder), module side.

``tie_submodules(modules, ("pi_encoder",))`` makes every module's ``pi_encoder`` attribute one and the same
``nn.Module`` object (the first module's): each module stays a complete policy (its state dict, export and
inference-only copy hold the encoder), and the ``MultiRLModule``'s state dict holds the shared weights once
per module, always equal. ``check_shared_state`` refuses a state dict in which those copies differ (e.g.
weights of independently trained modules), instead of letting the last module's silently win.

Who steps the shared parameters, and on which gradient, is the learner's side
(``offlinerl.core.param_owners``): one optimizer, on the sum of every module's loss.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import torch
from torch import nn

__all__ = ["tie_submodules", "check_shared_state"]


def _layout(module: nn.Module) -> list[tuple[str, tuple[int, ...], torch.dtype]]:
    return [(k, tuple(v.shape), v.dtype) for k, v in module.state_dict().items()]


def tie_submodules(modules: Mapping[str, nn.Module], names: Sequence[str]) -> None:
    """Set attribute ``name`` of every module to the first module's submodule of that name, for each of ``names``.

    Raises ``ValueError`` naming the module and attribute when a module lacks it (inference-only modules may all
    lack it: acting may not build what training shares), when it is not an ``nn.Module``, or when its layout
    (state-dict keys, shapes, dtypes) differs from the first module's."""
    if not names:
        return
    if len(modules) < 2:
        raise ValueError(f"sharing {list(names)} needs at least two modules, got {sorted(modules)}")
    inference_only = all(getattr(m, "inference_only", False) for m in modules.values())
    for name in names:
        present = {mid: getattr(m, name, None) for mid, m in modules.items()}
        if inference_only and all(sub is None for sub in present.values()):
            continue
        first_id, first = next(iter(present.items()))
        for mid, sub in present.items():
            kind = type(modules[mid]).__name__
            if sub is None:
                raise ValueError(f"cannot share {name!r}: module {mid!r} ({kind}) has no submodule of that name")
            if not isinstance(sub, nn.Module):
                raise ValueError(f"cannot share {name!r}: module {mid!r} ({kind}) holds a {type(sub).__name__}, "
                                 "not an nn.Module")
            if _layout(sub) != _layout(first):
                raise ValueError(f"cannot share {name!r}: module {mid!r}'s differs from module {first_id!r}'s in its "
                                 "parameter names or shapes (different observation spaces or model configs)")
        for mid, module in modules.items():
            setattr(module, name, first)


def check_shared_state(per_module: Mapping[str, Mapping[str, Any]], names: Sequence[str]) -> None:
    """Raise ``RuntimeError`` when ``per_module`` ({module id: that module's state dict}) holds different values
    for one key of a shared submodule (``name.`` prefix) under two modules; keys a module's dict lacks are
    skipped (a subset may be loaded)."""
    for name in names:
        prefix = f"{name}."
        seen: dict[str, tuple[str, Any]] = {}  # key -> (first module holding it, its value)
        for mid, state in per_module.items():
            for key, value in state.items():
                if not key.startswith(prefix):
                    continue
                if key not in seen:
                    seen[key] = (mid, value)
                    continue
                first_mid, first = seen[key]
                same = isinstance(value, torch.Tensor) and isinstance(first, torch.Tensor) \
                    and value.shape == first.shape and torch.equal(value.to(first.device), first)
                if not same:
                    raise RuntimeError(
                        f"the state dict holds different values for {key!r} under modules {first_mid!r} and "
                        f"{mid!r}, but {name!r} is one submodule shared by every module (weights of modules trained "
                        "without share_encoder do not load into a shared encoder)")
