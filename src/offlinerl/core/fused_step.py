"""Step several optimizers at once: ``step_all(optimizers)`` does what ``opt.step()`` on each does, with the fused
Adam / AdamW kernel called once for every parameter of every optimizer that shares its hyper-parameters.

``torch.optim``'s step walks each optimizer through Python (hooks, state lists, grouping by device and dtype) before
its one kernel call: ~30 us per optimizer on CPU, where IQL steps three (actor, critic, value: 236-244 against
147-156 us for the three, one thread, 256 x 256 networks, idle machine). The kernel is elementwise per tensor, so one
call over the union of their tensors leaves every value as the separate steps leave it (a test holds it bit for bit).

An optimizer takes the batched kernel only when ``opt.step()`` would do nothing else: an ``Adam`` / ``AdamW`` (not a
subclass) whose every group is ``fused`` (``Learner``'s ``fast_step`` sets it) without ``capturable``,
``differentiable``, ``amsgrad`` or tensor hyper-parameters, with its state made (its first step is torch's own), no
step hooks, no gradient scaler and no wrapped ``step`` (an LR scheduler's). Any other is stepped by ``opt.step()``.
"""

from __future__ import annotations

from typing import Sequence

import torch
from torch.optim import optimizer as _optimizer

__all__ = ["FUSED_KINDS", "step_all"]

FUSED_KINDS = (torch.optim.Adam, torch.optim.AdamW)
"""The optimizers with a fused kernel (exactly these types: a subclass may change the step)."""
_Batch = tuple[list[torch.Tensor], list[torch.Tensor], list[torch.Tensor], list[torch.Tensor], list[torch.Tensor]]


def step_all(optimizers: Sequence[torch.optim.Optimizer]) -> None:
    """Step each of ``optimizers`` (each parameter in at most one of them) as its own ``step()`` would."""
    batches: dict[tuple, _Batch] = {}
    for opt in optimizers:
        if not _gather(opt, batches):
            opt.step()
    if not batches:
        return
    with torch.no_grad():
        for key, (params, grads, m, v, steps) in batches.items():
            decoupled, lr, beta1, beta2, weight_decay, eps, maximize, _, _ = key
            torch._foreach_add_(steps, 1)
            kernel = torch._fused_adamw_ if decoupled else torch._fused_adam_
            kernel(params, grads, m, v, [], steps, lr=lr, beta1=beta1, beta2=beta2, weight_decay=weight_decay,
                   eps=eps, amsgrad=False, maximize=maximize)


def _gather(opt: torch.optim.Optimizer, batches: dict[tuple, _Batch]) -> bool:
    """Add ``opt``'s tensors to ``batches`` (keyed by kernel, hyper-parameters, device and dtype); False, adding
    nothing, when its step must be its own."""
    if (type(opt) not in FUSED_KINDS or "step" in vars(opt) or opt._optimizer_step_pre_hooks or opt._optimizer_step_post_hooks
            or _optimizer._global_optimizer_pre_hooks or _optimizer._global_optimizer_post_hooks
            or getattr(opt, "grad_scale", None) is not None or getattr(opt, "found_inf", None) is not None):
        return False
    mine: list[tuple[tuple, list[torch.Tensor], list[dict]]] = []
    for group in opt.param_groups:
        betas = group["betas"]
        if (not group.get("fused") or group.get("capturable") or group.get("differentiable") or group.get("amsgrad")
                or any(isinstance(x, torch.Tensor) for x in (group["lr"], *betas, group["weight_decay"], group["eps"]))):
            return False
        params = [p for p in group["params"] if p.grad is not None]  # as torch's step: no gradient, no step
        states = [opt.state.get(p) for p in params]
        if not all(states) or any(p.grad.is_sparse or p.is_complex() for p in params):
            return False  # a first step (torch's own makes the state), or what the kernel does not take
        decoupled = bool(group.get("decoupled_weight_decay", type(opt) is torch.optim.AdamW))
        hyper = (decoupled, float(group["lr"]), float(betas[0]), float(betas[1]), float(group["weight_decay"]),
                 float(group["eps"]), bool(group["maximize"]))
        mine.append((hyper, params, states))
    for hyper, params, states in mine:
        for p, state in zip(params, states):
            key = (*hyper, p.device, p.dtype)
            batch = batches.get(key)
            if batch is None:
                batch = batches[key] = ([], [], [], [], [])
            batch[0].append(p)
            batch[1].append(p.grad)
            batch[2].append(state["exp_avg"])
            batch[3].append(state["exp_avg_sq"])
            batch[4].append(state["step"])
    return True
