"""Which optimizer steps each parameter: exactly one.

A learner configures optimizers per module (``configure_optimizers_for_module``). When modules share a
submodule (``MultiRLModule(shared=...)``, e.g. one policy encoder for every agent), each module's hook puts the
shared parameters in its own optimizer of the same name (every module's "actor"): stepped by all of them,
they would move several times per update, with their Adam moments split between the optimizers.
``assign_parameters`` keeps each shared parameter in the first of those optimizers only (removing it from the
others before any step) and differentiates every one of those modules' same-named losses with respect to it,
so one update is one step of every parameter on the gradient of the sum of the losses that use it:

    g(shared) = Σ_m ∂L_m,name / ∂shared,    one step of optimizer (first module, name)

Anything else that puts one parameter in two optimizers (two optimizers of one module, differently named
optimizers of two modules, one optimizer object configured twice) is refused with a ``ValueError`` naming
the parameter.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import torch
from torch import nn

__all__ = ["ParameterOwners", "assign_parameters"]

OptimizerKey = tuple[str, str]  # (module_id, optimizer name)


@dataclass(frozen=True)
class ParameterOwners:
    """The result of ``assign_parameters``, keyed like the optimizers."""

    params: dict[OptimizerKey, list[nn.Parameter]]
    """The parameters each optimizer holds and steps; every parameter is in exactly one list."""
    grad_params: dict[OptimizerKey, list[nn.Parameter]]
    """The parameters the loss term of that key is differentiated against: its optimizer's, then the shared ones
    its optimizer was configured with but another module's same-named optimizer steps."""
    moves: dict[OptimizerKey, tuple[OptimizerKey, ...]]
    """The optimizers the loss term of that key moves: its own, then the owners of its shared parameters."""


def _holders(module: nn.Module) -> tuple[dict[int, str], dict[int, set[str]]]:
    """Each parameter's qualified name (its first occurrence) and the ids of the modules holding it."""
    names: dict[int, str] = {}
    holders: dict[int, set[str]] = {}
    for name, p in module.named_parameters(remove_duplicate=False):
        names.setdefault(id(p), name)
    items = module.items() if hasattr(module, "items") else ()
    for mid, sub in items:
        for p in sub.parameters():
            holders.setdefault(id(p), set()).add(mid)
    return names, holders


def assign_parameters(optimizers: Mapping[OptimizerKey, torch.optim.Optimizer], module: nn.Module) -> ParameterOwners:
    """Give each parameter of ``optimizers`` to exactly one of them (see the module docstring); ``module``: the
    ``MultiRLModule`` the parameters belong to (names them, and says which modules share which parameters).

    Mutates the optimizers: a shared parameter is removed from every optimizer but its owner's (parameter
    groups left empty are dropped). Call it before any step."""
    names, holders = _holders(module)
    owner: dict[int, OptimizerKey] = {}
    seen_optimizers: dict[int, OptimizerKey] = {}
    params: dict[OptimizerKey, list[nn.Parameter]] = {}
    grad_params: dict[OptimizerKey, list[nn.Parameter]] = {}
    moves: dict[OptimizerKey, tuple[OptimizerKey, ...]] = {}
    for key, opt in optimizers.items():
        if id(opt) in seen_optimizers:
            raise ValueError(f"optimizers {seen_optimizers[id(opt)]} and {key} are one optimizer object: it would be "
                             "stepped twice per update; give each (module, name) its own optimizer")
        seen_optimizers[id(opt)] = key
        kept: list[nn.Parameter] = []
        shared: list[nn.Parameter] = []
        for group in opt.param_groups:
            keep = []
            for p in group["params"]:
                first = owner.get(id(p))
                if first is None:
                    owner[id(p)] = key
                    keep.append(p)
                elif first[1] == key[1] and first[0] != key[0] and {first[0], key[0]} <= holders.get(id(p), set()):
                    shared.append(p)  # shared by both modules: stepped by the first module's optimizer only
                else:
                    name = names.get(id(p), f"<a parameter of shape {tuple(p.shape)} outside the module>")
                    raise ValueError(
                        f"parameter {name} is in optimizers {first} and {key}: a parameter must belong to exactly one "
                        "optimizer (else it is stepped twice per update); a submodule shared by several modules may be "
                        "in one optimizer of the same name per module, the learner keeps it in the first")
            group["params"] = keep
            kept.extend(keep)
        opt.param_groups[:] = [g for g in opt.param_groups if g["params"]]
        params[key] = kept
        grad_params[key] = kept + shared
        moves[key] = (key, *dict.fromkeys(owner[id(p)] for p in shared))
    return ParameterOwners(params, grad_params, moves)
