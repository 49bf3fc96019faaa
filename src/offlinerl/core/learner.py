"""``Learner``: owns the module, the optimizers and the update step.

An algorithm's learner overrides a few hooks:

- ``configure_optimizers_for_module(module_id, module) -> {name: optimizer}``
- ``compute_loss_for_module(module_id, module, batch, fwd_out) -> LossOut``
- ``before_gradient_based_update(timestep)`` / ``after_gradient_based_update(timestep)``
  (Polyak targets, schedules)
- ``get_extra_state`` / ``set_extra_state`` for running statistics.

The update step (``update``) guarantees **gradient isolation**: every loss term
is differentiated only with respect to the parameters of the optimizer of the
same name (``torch.autograd.grad``), so an actor loss never moves critic
weights however it is written. Every parameter belongs to exactly one optimizer
(``offlinerl.core.param_owners``, checked when the learner builds): a submodule
that several modules share (``MultiRLModuleSpec(shared=...)``, e.g. one policy
encoder for every agent) is stepped once per update, by the first module's
optimizer, on the sum of every module's same-named loss gradient. Under
``torch.distributed`` the gradients of all optimizers are averaged across
learners in one coalesced all-reduce per update
(DDP semantics: replicas stay identical), then clipped per optimizer, then
stepped. ``run_updates`` performs many updates per call with metrics kept as
tensors and reduced once. Both take ``hold``: optimizer names not stepped in
those updates (their loss terms are computed but not differentiated), e.g.
``POLICY_OPTIMIZERS`` while fine-tuning's critics warm up.
"""

from __future__ import annotations

import contextlib
import time
from contextlib import contextmanager
from typing import Any, Iterator, Mapping, Protocol

import torch
import torch.distributed as dist
from torch import nn

from offlinerl.core import metrics as M
from offlinerl.core.fused_step import FUSED_KINDS, step_all
from offlinerl.core.loss import LossOut
from offlinerl.core.param_owners import OptimizerKey, assign_parameters
from offlinerl.core.rl_module import MultiRLModule, MultiRLModuleSpec, RLModule

__all__ = ["Learner", "LearnerConfig", "BatchSource", "OptimizerKey", "POLICY_OPTIMIZERS", "MetricMeans"]

#: Optimizers that move what the agent does: the policy ("actor") and SAC's entropy temperature ("alpha").
POLICY_OPTIMIZERS = ("actor", "alpha")
TensorBatch = dict[str, torch.Tensor]


def fast_step(opt: torch.optim.Optimizer) -> None:
    """The optimizer's fastest step that keeps its arithmetic: Adam and AdamW with the fused kernel (one pass per
    tensor, on CPU too: 124 against 324 us a step for two 256x256 MLPs here; the same update to float rounding,
    ~1e-8), every other optimizer with the multi-tensor (``foreach``) step (bit-equal to torch's CPU default).
    Settings a user gave (``foreach``, ``fused``, ``capturable``, ``differentiable``) are left as they are."""
    fusable = type(opt) in FUSED_KINDS
    for group in opt.param_groups:
        if group.get("fused") or group.get("foreach") is not None:
            continue
        if fusable and not group.get("differentiable") and not group.get("capturable"):
            group["fused"] = True
        else:
            group["foreach"] = True


class LearnerConfig(Protocol):
    """What the base ``Learner`` reads from its config (``AlgorithmConfig`` has it; an algorithm's learner also reads
    its own config class's fields)."""

    @property
    def seed(self) -> int:
        """Seeds module initialisation (identical on every replica) and each replica's sampling."""

    @property
    def lr(self) -> float:
        """Learning rate of the default optimizer."""

    @property
    def grad_clip(self) -> float | None:
        """Clip each optimizer's gradient to this global norm (None: no clipping)."""

    @property
    def compile(self) -> bool:
        """``torch.compile`` ``compute_loss_for_module`` when the learner is built."""


class BatchSource(Protocol):
    """Where a learner draws train batches from (in-memory sampler, streaming iterator, fixed batch)."""

    def next_batch(self) -> dict[str, TensorBatch]:
        """One batch per module id."""

    def get_state(self) -> dict[str, Any]: ...

    def set_state(self, state: Mapping[str, Any]) -> None: ...


class MetricMeans:
    """Each metric's mean over the updates that reported it (a delayed actor's loss over the updates that stepped
    it), summed on the device and synced once: ``add`` each update's metrics, then ``means``."""

    def __init__(self) -> None:
        self._groups: dict[tuple[str, ...], tuple[list[torch.Tensor], list[int]]] = {}  # names -> (sums, [count])

    def add(self, metrics: Mapping[str, torch.Tensor]) -> bool:
        """Add one update's metrics; True when they are the first with these names."""
        names = tuple(metrics)
        group = self._groups.get(names)
        if group is None:
            self._groups[names] = ([v.clone().float() for v in metrics.values()], [1])
            return True
        torch._foreach_add_(group[0], list(metrics.values()))
        group[1][0] += 1
        return False

    def means(self) -> dict[str, torch.Tensor]:
        totals: dict[str, tuple[torch.Tensor, int]] = {}
        for names, (sums, (count,)) in self._groups.items():
            for name, value in zip(names, sums):
                total, n = totals.get(name, (0.0, 0))
                totals[name] = (total + value, n + count)
        return {name: total / n for name, (total, n) in totals.items()}


@contextmanager
def flush_denormals() -> Iterator[None]:
    """CPU arithmetic in this thread flushes subnormal floats (below 1.2e-38) to zero, then back to the default.
    Adam's moments of a parameter whose gradient stays 0 (a dead ReLU unit) decay through the subnormal range,
    where the CPU takes a slow path: an IQL update spent 7% of its time there after 1,000 updates. An Adam step
    from a moment that small is ~1e-34, below the precision of any weight but one that is exactly 0, so training
    is unchanged."""
    torch.set_flush_denormal(True)
    try:
        yield
    finally:
        torch.set_flush_denormal(False)


class Learner:
    """Base learner; see the module docstring for the hooks."""

    vectorizable: bool = True
    """Whether seeds of this learner can train as one ``SeedStack`` (``config.num_seeds``): False for a loss that
    differentiates inside itself (EDAC's action gradients), which ``torch.func.vmap`` cannot run."""
    separable_losses: bool = False
    """Declares that on every update each loss term reaches only its own optimizer's parameters (it meets the
    others' detached or under ``no_grad``, as IQL's and MARWIL's terms do): one backward of all the terms then
    gives every parameter the gradient a backward per term gives, without walking the graph once per term (IQL:
    5% of an update on CPU). Checked the first time each set of terms is differentiated (a module whose critic
    shares the policy's trunk falls back to a backward per term). Not for a loss whose structure changes
    between updates (CQL's actor loss reaches the critic only after its BC warm-up)."""

    def __init__(self, *, config: LearnerConfig, module_spec: MultiRLModuleSpec,
                 device: str | torch.device | None = None) -> None:
        self.config = config
        self.module_spec = module_spec
        self.device = torch.device(device) if device is not None else torch.device("cpu")
        self.module: MultiRLModule | None = None
        self.timestep = 0
        self.first_update_at: float | None = None
        """Wall-clock time (``time.time()``) when this learner's first update in this process finished."""
        self._optimizers: dict[OptimizerKey, torch.optim.Optimizer] = {}
        self._separable_terms: dict[frozenset[OptimizerKey], bool] = {}
        """Per set of loss terms an update differentiates: whether one backward serves them all (``_separable``)."""
        self._params: dict[OptimizerKey, list[nn.Parameter]] = {}
        """The parameters each optimizer steps (each parameter in exactly one: ``offlinerl.core.param_owners``)."""
        self._grad_params: dict[OptimizerKey, list[nn.Parameter]] = {}
        """The parameters each loss term is differentiated against (its optimizer's, plus shared ones)."""
        self._moves: dict[OptimizerKey, tuple[OptimizerKey, ...]] = {}
        """The optimizers each loss term moves (its own, then the owners of its shared parameters)."""
        self.generator: torch.Generator | None = None
        """This learner's own random stream (``random_draws``), seeded in ``build``; checkpoints save it."""
        self.world_size = dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1
        self.rank = dist.get_rank() if self.world_size > 1 else 0

    # -- build ----------------------------------------------------------------------------------
    def build(self) -> "Learner":
        seed = int(self.config.seed)
        torch.manual_seed(seed)  # identical initial weights on every replica
        self.module = self.module_spec.build(inference_only=False).to(self.device)
        if self.world_size > 1:
            with torch.no_grad():
                for t in list(self.module.parameters()) + list(self.module.buffers()):
                    dist.broadcast(t.data, src=0)
        torch.manual_seed(seed + 1000 * self.rank)
        self.generator = torch.Generator(device=self.device)
        self.generator.manual_seed(seed + 1000 * self.rank)
        self.configure_module_optimizers()
        if getattr(self.config, "compile", False):  # the forwards and the loss maths as one compiled graph
            self.compute_loss_for_module = torch.compile(self.compute_loss_for_module)  # type: ignore[method-assign]
        return self

    def configure_module_optimizers(self) -> None:
        """Build the optimizers over ``self.module`` and assign each parameter to exactly one
        (``build`` does this; a learner whose module was set otherwise, e.g. ``offlinerl.core.seed_stack``'s
        stacked one, calls it itself)."""
        assert self.module is not None
        optimizers = {(mid, name): opt for mid, module in self.module.items()
                      for name, opt in self.configure_optimizers_for_module(mid, module).items()}
        owners = assign_parameters(optimizers, self.module)  # each parameter in exactly one optimizer
        for opt in optimizers.values():
            fast_step(opt)
        self._optimizers = optimizers
        self._params, self._grad_params, self._moves = owners.params, owners.grad_params, owners.moves

    # -- hooks ----------------------------------------------------------------------------------
    def configure_optimizers_for_module(self, module_id: str, module: RLModule) -> dict[str, torch.optim.Optimizer]:
        """Default: one Adam named "default" over every parameter, at ``config.lr``."""
        return {"default": torch.optim.Adam(module.parameters(), lr=self.config.lr)}

    def compute_loss_for_module(self, module_id: str, module: RLModule, batch: TensorBatch, fwd_out: dict[str, Any]) -> LossOut:
        raise NotImplementedError

    def random_draws(self, module_id: str, batch: TensorBatch) -> TensorBatch:
        """Random tensors the loss of ``batch`` uses, drawn from ``self.generator`` and added to the batch before
        the loss (default: none). A learner whose loss needs noise draws it here rather than in
        ``compute_loss_for_module``, so that vectorised seeds (``offlinerl.core.seed_stack``) draw each replica's
        from that replica's own generator and every replica equals a single-seed run."""
        return {}

    def before_gradient_based_update(self, timestep: int) -> None:
        """Called before each update (schedules)."""

    def after_gradient_based_update(self, timestep: int) -> None:
        """Called after each optimizer step (Polyak target updates)."""

    def get_extra_state(self) -> dict[str, Any]:
        """Running statistics of the algorithm (tensors or plain values), saved in checkpoints."""
        return {}

    def set_extra_state(self, state: Mapping[str, Any]) -> None:
        """Inverse of ``get_extra_state``."""

    # -- distributed helpers ---------------------------------------------------------------------
    def distributed_mean(self, value: torch.Tensor) -> torch.Tensor:
        """Mean of ``value`` over all learners (identity with one learner); no gradient."""
        if self.world_size == 1:
            return value.detach()
        out = value.detach().clone()
        dist.all_reduce(out)
        return out / self.world_size

    # -- the update step -------------------------------------------------------------------------
    def optimizer(self, module_id: str, name: str) -> torch.optim.Optimizer:
        return self._optimizers[(module_id, name)]

    def update(self, batch: Mapping[str, Any], hold: tuple[str, ...] = ()) -> dict[str, torch.Tensor]:
        """One gradient step on ``batch`` ({module_id: batch}, or a plain batch for a single module); the
        optimizers named in ``hold`` are not stepped."""
        assert self.module is not None, "call build() first"
        batches = self._per_module(batch)
        self.before_gradient_based_update(self.timestep)
        losses: dict[OptimizerKey, torch.Tensor] = {}
        metrics: dict[str, torch.Tensor] = {}
        single = len(self.module.keys()) == 1
        for mid, b in batches.items():
            module = self.module[mid]
            draws = self.random_draws(mid, b)
            if draws:
                b = {**b, **draws}
            with self.autocast():
                out = self.compute_loss_for_module(mid, module, b, module.forward_train(b))
            prefix = "" if single else f"{mid}/"
            for name, loss in out.losses.items():
                if (mid, name) not in self._optimizers:
                    raise KeyError(
                        f"loss term {name!r} of module {mid!r} has no optimizer of that name; "
                        f"optimizers: {sorted(n for m, n in self._optimizers if m == mid)}"
                    )
                losses[(mid, name)] = loss
                metrics[M.loss(name, None if single else mid)] = loss.detach()
            for k, v in out.metrics.items():
                metrics[f"{prefix}{k}"] = v.detach()
        if hold:
            losses = {key: loss for key, loss in losses.items() if key[1] not in hold}
        self._apply_gradients(losses, metrics, single)
        self.timestep += 1
        self.after_gradient_based_update(self.timestep)
        return metrics

    def autocast(self) -> contextlib.AbstractContextManager[Any]:
        """Where the forwards and losses run: in ``torch.autocast`` to bfloat16 under ``config.precision: bf16``
        (the backward and the optimizer step outside it, as autocast asks), else as they are."""
        if getattr(self.config, "precision", "fp32") == "bf16":
            return torch.autocast(self.device.type, dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def _per_module(self, batch: Mapping[str, Any]) -> Mapping[str, TensorBatch]:
        assert self.module is not None
        if batch and all(k in self.module for k in batch) and all(isinstance(v, Mapping) for v in batch.values()):
            return batch  # type: ignore[return-value]
        if len(self.module.keys()) != 1:
            raise ValueError("a multi-module learner needs batches keyed by module id")
        return {self.module.keys()[0]: batch}  # type: ignore[dict-item]

    def _apply_gradients(self, losses: dict[OptimizerKey, torch.Tensor], metrics: dict[str, torch.Tensor], single: bool) -> None:
        """Differentiate each loss term against its parameters (``_grad_params``: its optimizer's, plus shared ones
        another module's optimizer steps), sum the gradients of a parameter several terms reach, average them over
        learners, then clip and step every optimizer those terms move, once."""
        keys = list(losses)
        stepped: dict[OptimizerKey, None] = {}
        reached: set[int] = set()
        for params, grads in self._gradients(losses):
            for p, g in zip(params, grads):
                if id(p) not in reached:
                    reached.add(id(p))
                    # contiguous: the fused CPU Adam misreads strided gradients (a weight's gradient from a vmapped
                    # backward, offlinerl.core.seed_stack's, is often a transposed view)
                    p.grad = torch.zeros_like(p) if g is None else g.contiguous()
                elif g is not None:  # a shared parameter: the sum of every module's loss gradient
                    p.grad = p.grad + g
        for key in keys:
            stepped.update(dict.fromkeys(self._moves[key]))
        all_params = [p for key in stepped for p in self._params[key]]
        for p in all_params:
            if id(p) not in reached:  # an owner stepped for another module's loss only
                p.grad = torch.zeros_like(p)
        if self.world_size > 1 and all_params:
            all_grads = [p.grad for p in all_params]
            flat = torch.cat([g.reshape(-1) for g in all_grads])
            dist.all_reduce(flat)
            flat /= self.world_size
            offset = 0
            for g in all_grads:
                n = g.numel()
                g.copy_(flat[offset : offset + n].view_as(g))
                offset += n
        clip = self.config.grad_clip
        if clip:  # each parameter is one optimizer's: clipping them all, then stepping, is clipping before each step
            for mid, name in stepped:
                norm = self.clip_gradients(self._params[(mid, name)], clip)
                metrics[M.grad_norm(name, None if single else mid)] = norm.detach()
        step_all([self._optimizers[key] for key in stepped])  # one fused Adam kernel per set of hyper-parameters

    def _gradients(self, losses: dict[OptimizerKey, torch.Tensor]) -> list[tuple[list[nn.Parameter], tuple[Any, ...]]]:
        """(parameters, their gradients) of the loss terms: one backward per term, each against its own
        parameters; or, for ``separable_losses``, one backward of all the terms against all of them."""
        live = [key for key in losses if losses[key].requires_grad]
        if self.separable_losses and len(live) > 1 and self._separable(losses, live):
            params = list({id(p): p for key in live for p in self._grad_params[key]}.values())
            return [(params, torch.autograd.grad([losses[key] for key in live], params, allow_unused=True))]
        return [(self._grad_params[key], torch.autograd.grad(losses[key], self._grad_params[key],
                                                             retain_graph=key != live[-1], allow_unused=True)
                 if key in live else (None,) * len(self._grad_params[key])) for key in losses]

    def _separable(self, losses: dict[OptimizerKey, torch.Tensor], live: list[OptimizerKey]) -> bool:
        """Whether no term of ``live`` has a graph path to a parameter only another term is differentiated against:
        checked on the first update with these terms (one extra backward per term, once), then remembered, as
        ``separable_losses`` declares the structure the same on every update."""
        names = frozenset(live)
        known = self._separable_terms.get(names)
        if known is None:
            known = True
            for key in live:
                own = {id(p) for p in self._grad_params[key]}
                others = list({id(p): p for k in live if k != key for p in self._grad_params[k]
                               if id(p) not in own}.values())
                if others and any(g is not None for g in torch.autograd.grad(
                        losses[key], others, retain_graph=True, allow_unused=True)):
                    known = False
                    break
            self._separable_terms[names] = known
        return known

    def clip_gradients(self, params: list[nn.Parameter], max_norm: float) -> torch.Tensor:
        """Scale the gradients of ``params`` to a global norm of at most ``max_norm``; return the norm before."""
        return torch.nn.utils.clip_grad_norm_(params, max_norm)

    def run_updates(self, source: BatchSource, num_updates: int, hold: tuple[str, ...] = ()) -> dict[str, float]:
        """``num_updates`` updates on batches from ``source`` (``hold``: as in ``update``); metrics synced once, each
        averaged over the updates that reported it (a delayed actor's loss over the updates that stepped it)."""
        if num_updates < 1:
            raise ValueError(f"num_updates must be >= 1, got {num_updates}")
        sums = MetricMeans()
        first = self.first_update_at is None
        with flush_denormals():
            for _ in range(num_updates):
                if sums.add(self.update(source.next_batch(), hold)) and first and self.first_update_at is None:
                    if self.device.type == "cuda":
                        torch.cuda.synchronize(self.device)
                    self.first_update_at = time.time()
        means = sums.means()
        out = dict(zip(means, torch.stack(list(means.values())).tolist()))
        out[M.UPDATES] = float(self.timestep)
        if first:  # once: the job reports the time from its start to here (``job.run_job``)
            out[M.FIRST_UPDATE_AT] = self.first_update_at
        return out

    # -- state -----------------------------------------------------------------------------------
    def get_module_state(self) -> dict[str, torch.Tensor]:
        assert self.module is not None
        return {k: v.detach().cpu() for k, v in self.module.state_dict().items()}

    def set_module_state(self, state: Mapping[str, torch.Tensor]) -> None:
        assert self.module is not None
        self.module.load_state_dict(state)

    def get_state(self) -> dict[str, Any]:
        """Module, optimizers, counters, extra state and this process's RNG state."""
        state = {
            "module": self.get_module_state(),
            "optimizers": {f"{m}/{n}": opt.state_dict() for (m, n), opt in self._optimizers.items()},
            "timestep": self.timestep,
            "extra": self.get_extra_state(),
            "rng": {"torch": torch.get_rng_state()},
        }
        if self.generator is not None:
            state["rng"]["learner"] = self.generator.get_state()
        if self.device.type == "cuda":
            state["rng"]["cuda"] = torch.cuda.get_rng_state(self.device)
        return state

    def set_state(self, state: Mapping[str, Any]) -> None:
        """Restore module, optimizer moments, counters, extra state and RNG. The optimizers keep the
        hyperparameters of this learner's config (lr, betas, ...): a state from a checkpoint brings its
        running statistics, not the settings it was trained with, so ``finetune --set config.actor_lr=...``
        takes effect (``torch.optim.Optimizer.load_state_dict`` alone would restore the old ones)."""
        self.set_module_state(state["module"])
        for key, opt in self._optimizers.items():
            settings = [{k: v for k, v in group.items() if k != "params"} for group in opt.param_groups]
            opt.load_state_dict(state["optimizers"][f"{key[0]}/{key[1]}"])
            for group, kept in zip(opt.param_groups, settings):
                group.update(kept)
                if group.get("fused"):  # a step count saved by an unfused optimizer sits on the CPU as it was
                    for q in group["params"]:
                        if "step" in opt.state.get(q, {}):
                            opt.state[q]["step"] = torch.as_tensor(opt.state[q]["step"], dtype=torch.float32, device=q.device)
        self.timestep = int(state["timestep"])
        self.set_extra_state(state.get("extra", {}))
        rng = state.get("rng", {})
        if "torch" in rng:
            torch.set_rng_state(rng["torch"])
        if "learner" in rng and self.generator is not None:
            self.generator.set_state(rng["learner"])
        if "cuda" in rng and self.device.type == "cuda":
            torch.cuda.set_rng_state(rng["cuda"], self.device)
