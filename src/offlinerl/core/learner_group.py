"""``LearnerGroup``: one learner in-process (``num_learners=0``) or ``m`` Ray actors
training one model with torch.distributed (gloo on CPU, NCCL on GPU).

Each learner holds its own batch source (its shard of the data, built from a
picklable spec inside the learner), so an iteration is **one Ray call per
learner**: ``run_updates(n)`` performs ``n`` updates and returns averaged
metrics. Gradients are averaged across learners every update (see ``Learner``),
so all replicas keep identical weights.
"""

from __future__ import annotations

import math
import socket
from typing import Any, Mapping, Protocol, Sequence

import numpy as np
import torch

from offlinerl.core.learner import Learner, LearnerConfig
from offlinerl.core.rl_module import MultiRLModuleSpec
from offlinerl.core.tensors import to_tensors

__all__ = ["LearnerGroup", "LearnerGroupConfig"]


class LearnerGroupConfig(LearnerConfig, Protocol):
    """What ``LearnerGroup`` reads from its config (``AlgorithmConfig`` has it), besides what each learner reads."""

    @property
    def num_learners(self) -> int:
        """0: one learner in this process; m >= 1: m Ray actors with torch.distributed."""

    @property
    def num_cpus_per_learner(self) -> float:
        """CPUs each learner reserves (torch threads = its ceiling)."""

    @property
    def num_gpus_per_learner(self) -> float:
        """GPUs each learner reserves (> 0: NCCL, and the learner's device is a GPU)."""

    @property
    def device(self) -> str | None:
        """``cpu``, ``cuda`` or ``cuda:N`` (None: a GPU when ``num_gpus_per_learner > 0``)."""

    @property
    def learner_gpus(self) -> float:
        """GPUs each learner reserves: ``num_gpus_per_learner``, else 1 when ``device`` is a GPU."""

    @property
    def learner_placement(self) -> str:
        """``spread`` (one placement-group bundle per learner, Ray's SPREAD strategy) or ``default``."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("", 0))
        return int(s.getsockname()[1])


def _device(config: LearnerGroupConfig, local: bool) -> torch.device:
    """``config.device`` (``cuda:N`` only for the in-process learner: an actor uses the GPU Ray gave it), else a
    GPU when the learners reserve one, else the CPU."""
    if config.device == "cpu":
        return torch.device("cpu")
    if local and config.device and ":" in config.device:
        return torch.device(config.device)
    if config.learner_gpus > 0 and torch.cuda.is_available():
        return torch.device("cuda", 0 if torch.cuda.device_count() == 1 else torch.cuda.current_device())
    return torch.device("cpu")


class _LearnerWorker:
    """Runs in a Ray actor (or wraps the local learner): a learner plus its batch source."""

    def __init__(self, learner_class: type[Learner], config: LearnerGroupConfig, module_spec: MultiRLModuleSpec,
                 num_threads: int | None) -> None:
        if num_threads:
            torch.set_num_threads(num_threads)
        self.learner_class, self.config, self.module_spec = learner_class, config, module_spec
        self.learner: Learner | None = None
        self.source: Any = None
        self.lockstep: tuple[Any, int] | None = None
        """``(Lockstep, replica index)``: updates run with the other replicas' (``offlinerl.core.seed_stack``)."""

    def address(self) -> tuple[str, int]:
        import ray

        return ray.util.get_node_ip_address(), _free_port()

    def setup(self, rank: int = 0, world_size: int = 1, master: tuple[str, int] | None = None) -> bool:
        device = _device(self.config, local=master is None)
        if world_size > 1:
            import torch.distributed as dist

            backend = "nccl" if device.type == "cuda" else "gloo"
            dist.init_process_group(backend, init_method=f"tcp://{master[0]}:{master[1]}", rank=rank, world_size=world_size)
        self.learner = self.learner_class(config=self.config, module_spec=self.module_spec, device=device).build()
        return True

    def set_source(self, spec: Any) -> bool:
        self.source = spec.build(self.learner.device)
        return True

    def run_updates(self, num_updates: int, hold: tuple[str, ...] = ()) -> dict[str, float]:
        if self.source is None:
            raise RuntimeError("the learner has no data source: call LearnerGroup.set_sources first")
        if self.lockstep is not None:
            lockstep, index = self.lockstep
            return lockstep.run_updates(index, self.learner, self.source, num_updates, hold)
        return self.learner.run_updates(self.source, num_updates, hold)

    def _online_source(self) -> Any:
        if not hasattr(self.source, "add_online"):
            raise RuntimeError(f"the learner's batch source ({type(self.source).__name__}) takes no online experience; "
                               "build the algorithm with an online config")
        return self.source

    def add_online(self, batch: Mapping[str, Any]) -> int:
        return self._online_source().add_online(batch)

    def restore_online(self, batch: Mapping[str, Any]) -> int:
        return self._online_source().restore_online(batch)

    def update_from_batch(self, batch: Mapping[str, Any]) -> dict[str, float]:
        metrics = self.learner.update(to_tensors(batch, self.learner.device))
        return {k: float(v) for k, v in metrics.items()}

    def get_state(self) -> dict[str, Any]:
        return {"learner": self.learner.get_state(), "source": self.source.get_state() if self.source is not None else {}}

    def set_state(self, state: Mapping[str, Any]) -> bool:
        self.learner.set_state(state["learner"])
        if self.source is not None and state.get("source"):
            self.source.set_state(state["source"])
        return True

    def get_weights(self) -> dict[str, torch.Tensor]:
        return self.learner.get_module_state()

    def set_weights(self, weights: Mapping[str, torch.Tensor], strict: bool) -> list[str]:
        unexpected = sorted(set(weights) - set(self.learner.module.state_dict()))
        if not unexpected:
            self.learner.module.load_state_dict(weights, strict=strict)
        return unexpected

    def timestep(self) -> int:
        return self.learner.timestep

    def node_id(self) -> str | None:
        from offlinerl.ray_utils import node_id

        return node_id()

    def shutdown(self) -> bool:
        import torch.distributed as dist

        if self.source is not None and hasattr(self.source, "close"):
            self.source.close()
        if dist.is_available() and dist.is_initialized():
            dist.destroy_process_group()
        return True


def _mean_metrics(results: Sequence[Mapping[str, float]]) -> dict[str, float]:
    keys = results[0].keys()
    return {k: float(np.mean([r[k] for r in results])) for k in keys}


def _spread_bundles(config: LearnerGroupConfig, num_learners: int) -> Any:
    """A placement group of one bundle per learner, Ray's SPREAD strategy: one learner per node while nodes have
    room (more per node where they do not). Placing all bundles in one decision is what makes it hold: actors
    started one by one with the SPREAD scheduling strategy could land on the same node when requested together."""
    import ray
    from ray.util.placement_group import placement_group

    bundle = {"CPU": float(config.num_cpus_per_learner)}
    if config.learner_gpus:
        bundle["GPU"] = float(config.learner_gpus)
    group = placement_group([dict(bundle) for _ in range(num_learners)], strategy="SPREAD")
    ray.get(group.ready())
    return group


def _strategy(group: Any, rank: int) -> Any:
    """Learner ``rank``'s scheduling strategy: its bundle of ``group``, or Ray's default without one."""
    if group is None:
        return "DEFAULT"
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    return PlacementGroupSchedulingStrategy(placement_group=group, placement_group_bundle_index=rank)


class LearnerGroup:
    """In-process learner or ``num_learners`` Ray actors; see the module docstring."""

    def __init__(self, config: LearnerGroupConfig, learner_class: type[Learner], module_spec: MultiRLModuleSpec) -> None:
        self.config = config
        self.num_learners = int(config.num_learners)
        threads = max(1, math.ceil(config.num_cpus_per_learner))
        if self.num_learners == 0:
            self._local: _LearnerWorker | None = _LearnerWorker(learner_class, config, module_spec, threads)
            self._local.setup()
            self._actors: list[Any] = []
            return
        import ray

        self._local = None
        actor_cls = ray.remote(num_cpus=config.num_cpus_per_learner, num_gpus=config.learner_gpus)(_LearnerWorker)
        self._placement_group = _spread_bundles(config, self.num_learners) if config.learner_placement == "spread" else None
        self._actors = [actor_cls.options(scheduling_strategy=_strategy(self._placement_group, rank)).remote(
            learner_class, config, module_spec, threads) for rank in range(self.num_learners)]
        master = ray.get(self._actors[0].address.remote())
        ray.get([a.setup.remote(rank, self.num_learners, master) for rank, a in enumerate(self._actors)])

    @property
    def is_local(self) -> bool:
        return self._local is not None

    @property
    def local_learner(self) -> Learner:
        if self._local is None:
            raise RuntimeError("the learners are remote (num_learners >= 1)")
        return self._local.learner  # type: ignore[return-value]

    def join_lockstep(self, lockstep: Any, index: int) -> None:
        """Run this group's updates as replica ``index`` of ``lockstep`` (a ``seed_stack.Lockstep``): vectorised
        seeds, with the in-process learner only."""
        if self._local is None:
            raise ValueError("vectorised seeds train in one process: num_learners must be 0")
        self._local.lockstep = (lockstep, index)

    @property
    def num_shards(self) -> int:
        return max(1, self.num_learners)

    def _call(self, method: str, *per_learner_args: Sequence[Any], same: tuple = ()) -> list[Any]:
        if self._local is not None:
            args = [a[0] for a in per_learner_args]
            return [getattr(self._local, method)(*args, *same)]
        import ray

        refs = [getattr(actor, method).remote(*[a[i] for a in per_learner_args], *same) for i, actor in enumerate(self._actors)]
        return ray.get(refs)

    def set_sources(self, specs: Sequence[Any]) -> None:
        """One batch-source spec per learner (e.g. from ``OfflineData.source_specs``)."""
        if len(specs) != self.num_shards:
            raise ValueError(f"got {len(specs)} source specs for {self.num_shards} learner(s)")
        self._call("set_source", list(specs))

    def _per_learner(self, method: str, shards: Sequence[Mapping[str, np.ndarray]]) -> int:
        if len(shards) != self.num_shards:
            raise ValueError(f"got {len(shards)} shards of online transitions for {self.num_shards} learner(s)")
        return int(sum(self._call(method, list(shards))))

    def add_online(self, shards: Sequence[Mapping[str, np.ndarray]]) -> int:
        """Add shard ``i`` of online transitions to learner ``i``'s replay (one call each); returns the transitions
        all replays hold."""
        return self._per_learner("add_online", shards)

    def restore_online(self, shards: Sequence[Mapping[str, np.ndarray]]) -> int:
        """After ``set_state``: give learner ``i``'s replay its transitions back (``shards[i]``, oldest first);
        returns the transitions all replays hold."""
        return self._per_learner("restore_online", shards)

    def update(self, num_updates: int, hold: tuple[str, ...] = ()) -> dict[str, float]:
        """``num_updates`` updates on every learner (one call each); metrics averaged over learners. The optimizers
        named in ``hold`` are not stepped (``Learner.update``)."""
        return _mean_metrics(self._call("run_updates", same=(num_updates, tuple(hold))))

    def update_from_batch(self, batch: Mapping[str, np.ndarray]) -> dict[str, float]:
        """One update on ``batch``, split into equal consecutive shards, one per learner."""
        n = len(next(iter(batch.values())))
        if n % self.num_shards:
            raise ValueError(f"batch of {n} rows does not split evenly over {self.num_shards} learners")
        size = n // self.num_shards
        shards = [{k: np.asarray(v)[i * size:(i + 1) * size] for k, v in batch.items()} for i in range(self.num_shards)]
        return _mean_metrics(self._call("update_from_batch", shards))

    def get_weights(self) -> dict[str, torch.Tensor]:
        if self._local is not None:
            return self._local.get_weights()
        import ray

        return ray.get(self._actors[0].get_weights.remote())

    def set_weights(self, weights: Mapping[str, torch.Tensor], strict: bool = True) -> list[str]:
        """Load module weights into every learner (``strict=False``: a subset may be given). Weights the module
        has no place for load nowhere: their keys are returned (empty when everything loaded)."""
        return self._call("set_weights", same=(dict(weights), strict))[0]

    def get_all_weights(self) -> list[dict[str, torch.Tensor]]:
        """Every learner's weights (to check that replicas agree)."""
        return self._call("get_weights", same=())

    def node_ids(self) -> list[str | None]:
        """The Ray node of each learner, by rank (in-process: the driver's node; None without Ray)."""
        return self._call("node_id")

    def get_state(self) -> dict[str, Any]:
        return {"num_learners": self.num_learners, "learners": self._call("get_state")}

    def set_state(self, state: Mapping[str, Any]) -> None:
        states = state["learners"]
        if len(states) != self.num_shards:
            raise ValueError(f"the state holds {len(states)} learner(s), this group has {self.num_shards}")
        self._call("set_state", list(states))

    def shutdown(self) -> None:
        if self._local is not None:
            self._local.shutdown()
        if self._actors:
            import ray
            from ray.util.placement_group import remove_placement_group

            try:
                ray.get([a.shutdown.remote() for a in self._actors], timeout=30)
            except Exception:  # noqa: BLE001 - the actors are killed below either way
                pass
            for a in self._actors:
                ray.kill(a)
            self._actors = []
            if self._placement_group is not None:
                remove_placement_group(self._placement_group)
                self._placement_group = None
