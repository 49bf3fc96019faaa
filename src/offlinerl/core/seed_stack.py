"""Vectorised seeds: N learners of one algorithm, identical but for their seeds, updated as one program.

    N built learners (each initialised with its own seed)
        -> SeedStack: every parameter and buffer stacked on a leading seed dimension, [N, ...]
        -> update: per-seed batches stacked to [N, B, ...]; the learner's own forward and loss run once under
           ``torch.func.vmap`` (``functional_call`` of the module with one seed's slice), so every matmul is one
           batched matmul over the seeds; each loss term's per-seed values are summed and differentiated against
           the stacked parameters (the seeds share no parameter, so each slice's gradient is its seed's own),
           clipped per seed, and stepped by the learner's own optimizers built over the stacked tensors (Adam's
           arithmetic is elementwise: each slice moves exactly as its seed's own optimizer would move it)
        -> sync_replicas: each slice back into its learner (module, optimizer moments, timestep), so checkpoints,
           evaluation and metrics of replica i are those of a single-seed run.

Random tensors a loss needs come from ``Learner.random_draws``, drawn outside the vmap from each replica's own
generator (``Learner.generator``): replica i's draws are the ones a single-seed run with its seed makes. Randomness drawn inside
a loss (CQL's sampled actions, SAC's reparameterised samples) still works (``randomness="different"``) but is
not the single-seed run's stream. What cannot be vectorised is refused when the stack is built: shared
submodules (``share_encoder``), distributed learners, and learners with running statistics outside the module
(``get_extra_state``).

``Lockstep`` lets N ordinary jobs, each in its own thread with its own run directory, train as one: when the last
replica asks for an iteration's updates, they run for all of them on the lockstep's one worker thread
(``offlinerl.jobs.vectorized``, which runs the replicas' evaluations there too).
"""

from __future__ import annotations

import concurrent.futures
import copy
import threading
import time
from typing import Any, Mapping, Sequence

import torch
from torch import nn

from offlinerl.core import metrics as M
from offlinerl.core.learner import BatchSource, Learner, MetricMeans, flush_denormals

__all__ = ["SeedStack", "Lockstep", "check_vectorizable", "keeps_running_statistics", "per_seed_clip"]

_SEP = "\x00"  # joins module id and loss name in the vmapped function's output


def check_vectorizable(learner: Learner) -> None:
    """Raise ``ValueError`` naming why ``learner`` cannot be one replica of a ``SeedStack``."""
    name = type(learner).__name__
    if learner.world_size > 1:
        raise ValueError("vectorised seeds train in one process, not in a torch.distributed group (num_learners: 0)")
    if learner.module is None:
        raise ValueError(f"{name}: build the learner first")
    if getattr(learner.module, "shared", ()):
        raise ValueError("vectorised seeds cannot share submodules between modules (share_encoder)")
    if not learner.vectorizable:
        raise ValueError(f"{name}'s loss takes gradients inside itself; it cannot train vectorised seeds")
    if keeps_running_statistics(type(learner)):
        raise ValueError(f"{name} keeps running statistics outside its module; it cannot train vectorised seeds")


def keeps_running_statistics(learner_cls: type[Learner]) -> bool:
    """Whether the learner class keeps state outside its module (``get_extra_state``, e.g. MARWIL's advantage
    norm), which one stacked learner cannot hold per seed."""
    return learner_cls.get_extra_state is not Learner.get_extra_state


def per_seed_clip(params: list[nn.Parameter], max_norm: float) -> torch.Tensor:
    """``clip_grad_norm_`` of each seed's slice: the norm over every parameter's ``[i]`` slice, [N]."""
    grads = [p.grad for p in params if p.grad is not None]
    if not grads:
        return torch.zeros(())
    n = grads[0].shape[0]
    norms = torch.stack([g.reshape(n, -1).pow(2).sum(1) for g in grads]).sum(0).sqrt()  # [N]
    coef = (max_norm / (norms + 1e-6)).clamp(max=1.0)
    for g in grads:
        g.mul_(coef.view(n, *([1] * (g.dim() - 1))))
    return norms


class _Loss(nn.Module):
    """The learner's forward and loss of one seed, as a module ``functional_call`` can re-parameterise."""

    def __init__(self, learner: Learner) -> None:
        super().__init__()
        self.learner = [learner]  # a list: not a submodule
        self.module = learner.module

    def forward(self, batches: Mapping[str, Mapping[str, torch.Tensor]]) -> tuple[dict, dict]:
        learner = self.learner[0]
        losses, metrics = {}, {}
        for mid, b in batches.items():
            module = learner.module[mid]
            out = learner.compute_loss_for_module(mid, module, b, module.forward_train(b))
            losses.update({f"{mid}{_SEP}{k}": v for k, v in out.losses.items()})
            metrics.update({f"{mid}{_SEP}{k}": v.detach() for k, v in out.metrics.items()})
        return losses, metrics


def _named_tensors(module: nn.Module) -> dict[str, torch.Tensor]:
    return {**dict(module.named_parameters()), **dict(module.named_buffers())}


def _replace(module: nn.Module, dotted: str, tensor: torch.Tensor) -> None:
    *path, leaf = dotted.split(".")
    owner = module.get_submodule(".".join(path)) if path else module
    if leaf in owner._parameters:
        owner._parameters[leaf] = tensor  # type: ignore[assignment]
    else:
        owner._buffers[leaf] = tensor


class SeedStack:
    """The replicas' learners as one stacked learner; see the module docstring."""

    def __init__(self, replicas: Sequence[Learner]) -> None:
        if not replicas:
            raise ValueError("a SeedStack needs at least one learner")
        kinds = {type(r) for r in replicas}
        if len(kinds) > 1:
            raise ValueError(f"the replicas of a SeedStack must be one learner class, got {sorted(k.__name__ for k in kinds)}")
        for r in replicas:
            check_vectorizable(r)
        self.replicas = list(replicas)
        self.n = len(replicas)
        first = replicas[0]
        cls = type(first)
        # The template: replica 0's module layout, re-parameterised with one seed's slice inside the vmap.
        self.template = cls(config=first.config, module_spec=first.module_spec, device=first.device)
        self.template.module = copy.deepcopy(first.module)
        self._loss = _Loss(self.template)
        # The stacked learner: the same class over [N, ...] tensors; its optimizers and hooks act on them.
        self.stacked = cls(config=first.config, module_spec=first.module_spec, device=first.device)
        self.stacked.module = copy.deepcopy(first.module)
        states = [_named_tensors(r.module) for r in replicas]
        self.names = list(states[0])
        with torch.no_grad():
            for name, t in states[0].items():
                value = torch.stack([s[name].detach() for s in states])
                if isinstance(t, nn.Parameter):
                    value = nn.Parameter(value, requires_grad=t.requires_grad)
                _replace(self.stacked.module, name, value)
        self.stacked.configure_module_optimizers()
        self.stacked.clip_gradients = per_seed_clip  # type: ignore[method-assign]
        self.stacked.timestep = first.timestep
        self._load_optimizer_states()
        self._single = len(first.module.keys()) == 1

    # -- state between the stack and its replicas ----------------------------------------------------------
    def _optimizer_pairs(self):
        """(stacked optimizer, [replica optimizers]) per optimizer key, and their parameters in the same order."""
        for key, opt in self.stacked._optimizers.items():
            yield key, opt, [r._optimizers[key] for r in self.replicas]

    @staticmethod
    def _params(opt: torch.optim.Optimizer) -> list[torch.Tensor]:
        return [p for g in opt.param_groups for p in g["params"]]

    def _load_optimizer_states(self) -> None:
        """Stack the replicas' optimizer moments (non-empty when they were restored from checkpoints)."""
        for _, opt, reps in self._optimizer_pairs():
            rep_params = [self._params(r) for r in reps]
            for j, p in enumerate(self._params(opt)):
                per = [r.state.get(ps[j]) for r, ps in zip(reps, rep_params)]
                if any(s is None or not s for s in per):
                    continue
                opt.state[p] = {k: torch.stack([s[k] for s in per]) if torch.is_tensor(v) and v.dim() > 0 else v
                                for k, v in per[0].items()}

    @torch.no_grad()
    def sync_replicas(self) -> None:
        """Copy each seed's slice into its replica: module tensors, optimizer moments, timestep."""
        stacked = _named_tensors(self.stacked.module)
        for i, r in enumerate(self.replicas):
            own = _named_tensors(r.module)
            for name in self.names:
                own[name].copy_(stacked[name][i])
            r.timestep = self.stacked.timestep
        for _, opt, reps in self._optimizer_pairs():
            rep_params = [self._params(r) for r in reps]
            for j, p in enumerate(self._params(opt)):
                state = opt.state.get(p)
                if not state:
                    continue
                for i, (r, ps) in enumerate(zip(reps, rep_params)):
                    r.state[ps[j]] = {k: (v[i].clone() if torch.is_tensor(v) and v.dim() > 0 else
                                          (v.clone() if torch.is_tensor(v) else v)) for k, v in state.items()}

    # -- the update ---------------------------------------------------------------------------------------
    def _draw(self, batches: Sequence[Mapping[str, Mapping[str, torch.Tensor]]]) -> list[dict[str, dict]]:
        """Each replica's ``random_draws`` from its own generator, added to its batches."""
        self.template.timestep = self.stacked.timestep
        out = []
        for replica, per_module in zip(self.replicas, batches):
            self.template.generator = replica.generator
            out.append({mid: {**b, **self.template.random_draws(mid, b)} for mid, b in per_module.items()})
        return out

    def update(self, batches: Sequence[Mapping[str, Any]], hold: tuple[str, ...] = ()) -> dict[str, torch.Tensor]:
        """One update of every seed: ``batches[i]`` is replica i's ({module_id: batch}); metrics are [N] tensors."""
        if len(batches) != self.n:
            raise ValueError(f"{self.n} seeds need {self.n} batches, got {len(batches)}")
        per_seed = self._draw([self.template._per_module(b) for b in batches])
        stacked_batch = {mid: {k: torch.stack([b[mid][k] for b in per_seed]) for k in per_seed[0][mid]}
                         for mid in per_seed[0]}
        learner = self.stacked
        learner.before_gradient_based_update(learner.timestep)
        self.template.timestep = learner.timestep
        tensors = {f"module.{k}": v for k, v in _named_tensors(learner.module).items()}

        def one_seed(params, batch):
            return torch.func.functional_call(self._loss, params, (batch,))

        with learner.autocast():  # config.precision: bf16 reaches the batched matmuls under vmap as well
            losses, values = torch.func.vmap(one_seed, randomness="different")(tensors, stacked_batch)
        metrics: dict[str, torch.Tensor] = {}
        terms = {}
        for key, loss in losses.items():
            mid, name = key.split(_SEP)
            if (mid, name) not in learner._optimizers:
                raise KeyError(f"loss term {name!r} of module {mid!r} has no optimizer of that name")
            terms[(mid, name)] = loss.sum()  # the seeds share no parameter: each slice gets its own gradient
            metrics[M.loss(name, None if self._single else mid)] = loss.detach()
        for key, v in values.items():
            mid, name = key.split(_SEP)
            metrics[name if self._single else f"{mid}/{name}"] = v
        if hold:
            terms = {k: v for k, v in terms.items() if k[1] not in hold}
        learner._apply_gradients(terms, metrics, self._single)
        learner.timestep += 1
        learner.after_gradient_based_update(learner.timestep)
        return metrics

    def run_updates(self, sources: Sequence[BatchSource], num_updates: int,
                    hold: tuple[str, ...] = ()) -> list[dict[str, float]]:
        """``num_updates`` updates of every seed (replica i's batches from ``sources[i]``), then ``sync_replicas``;
        returns each replica's metrics as ``Learner.run_updates`` would (each averaged over the updates that
        reported it)."""
        if num_updates < 1:
            raise ValueError(f"num_updates must be >= 1, got {num_updates}")
        sums = MetricMeans()
        first = self.replicas[0].first_update_at is None
        first_at = None
        with flush_denormals():
            for _ in range(num_updates):
                if sums.add(self.update([s.next_batch() for s in sources], hold)) and first_at is None:
                    first_at = time.time()
        means = sums.means()
        table = torch.stack([v.expand(self.n) for v in means.values()]).T.tolist()  # [N, metrics]
        self.sync_replicas()
        out = []
        for i, r in enumerate(self.replicas):
            row = dict(zip(means, table[i]))
            row[M.UPDATES] = float(self.stacked.timestep)
            if first:
                r.first_update_at = first_at
                row[M.FIRST_UPDATE_AT] = first_at
            out.append(row)
        return out


class Lockstep:
    """N jobs in N threads, one ``SeedStack``: each replica's ``run_updates`` waits until every replica still
    running has asked for its iteration; then the updates of all of them run on the lockstep's worker thread.

    A replica whose job ends (a stop condition, an error) calls ``leave``: the others no longer wait for it (its
    seed is still updated with theirs, and its results are dropped)."""

    def __init__(self, num_replicas: int) -> None:
        self.n = num_replicas
        self._cond = threading.Condition()
        self._active = set(range(num_replicas))
        self._waiting: dict[int, tuple[Learner, BatchSource, int, tuple[str, ...]]] = {}
        self._members: dict[int, tuple[Learner, BatchSource]] = {}
        self._results: dict[int, dict[str, float]] = {}
        self._generation = 0
        self._error: BaseException | None = None
        self.stack: SeedStack | None = None
        # Every joint update runs on this one thread, whichever replica asked last: torch's OpenMP pool is per
        # calling thread, and 8 callers' pools spinning beside each other made the updates 2x slower.
        self._runner = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="offlinerl-seedstack")

    def run_updates(self, index: int, learner: Learner, source: BatchSource, num_updates: int,
                    hold: tuple[str, ...] = ()) -> dict[str, float]:
        with self._cond:
            self._waiting[index] = (learner, source, num_updates, tuple(hold))
            generation = self._generation
            if self._waiting.keys() >= self._active:
                self._step()
            else:
                while self._generation == generation and self._error is None:
                    self._cond.wait()
            if self._error is not None:
                raise RuntimeError(f"vectorised seeds: the joint update failed: {self._error}") from self._error
            return self._results.pop(index)

    def call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """``fn(*args, **kwargs)`` on the thread that runs the joint updates (e.g. a replica's evaluation: every
        torch computation of the replicas on one thread, one OpenMP pool)."""
        return self._runner.submit(fn, *args, **kwargs).result()

    def leave(self, index: int) -> None:
        with self._cond:
            self._active.discard(index)
            self._waiting.pop(index, None)
            if self._waiting and self._waiting.keys() >= self._active:
                self._step()
            if not self._active:
                self._runner.shutdown(wait=False)

    def _step(self) -> None:
        """Run the waiting replicas' updates (under the lock), publish the results, wake everyone."""
        try:
            asked = {(n, hold) for _, _, n, hold in self._waiting.values()}
            if len(asked) > 1:
                raise ValueError(f"the replicas asked for different updates: {sorted(asked)}")
            num_updates, hold = asked.pop()
            if self.stack is None:
                self._members = {i: (lr, src) for i, (lr, src, _, _) in sorted(self._waiting.items())}
                self.stack = SeedStack([lr for lr, _ in self._members.values()])
            sources = [src for _, src in self._members.values()]
            results = self._runner.submit(self.stack.run_updates, sources, num_updates, hold).result()
            for index, row in zip(self._members, results):
                if index in self._waiting:
                    self._results[index] = row
        except BaseException as exc:  # every waiting replica raises it
            self._error = exc
        finally:
            self._waiting.clear()
            self._generation += 1
            self._cond.notify_all()
