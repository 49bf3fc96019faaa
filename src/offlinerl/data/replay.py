"""Replay for off-policy fine-tuning: a FIFO buffer of online transitions and a
batch source that mixes them with the offline data, at a fixed ratio or in
proportion to how many transitions each side holds.

Both hold column tensors (the train-batch keys of ``offlinerl.core.columns``)
preallocated on the learner's device; drawing a batch is two ``randint``s and
one gather per column — no Python per transition.

The offline part of a mixed batch comes from the learner's own offline source:
its in-memory arrays (sampled with the mixed source's generator, as before any
other mode existed) or any batch source (streaming: the first rows of each of
its batches). A checkpoint keeps the replay's counters and ring position here
(``get_state``); its contents travel as episodes (``offlinerl.training.checkpoint``)
and come back through ``set_state(state, columns)`` in the same ring slots.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np
import torch

from offlinerl.core import columns as C
from offlinerl.core.tensors import to_tensor, to_tensors
from offlinerl.data.sources import InMemorySpec, MultiModuleInMemorySpec, MultiModuleSource, MultiModuleSpec, resolve

__all__ = ["ReplayBuffer", "MixedBatchSource", "MultiModuleMixedSource", "MixedSpec", "MIXING"]

#: How a mixed batch splits between online and offline transitions (``MixedBatchSource.mixing``).
MIXING = ("fixed", "proportional")

Columns = Mapping[str, "np.ndarray | torch.Tensor"]


def _num_rows(batch: Columns) -> int:
    lengths = {len(v) for v in batch.values()}
    if len(lengths) != 1:
        raise ValueError(f"columns of one batch must have equal lengths, got { {k: len(v) for k, v in batch.items()} }")
    return lengths.pop()


class ReplayBuffer:
    """The most recent ``capacity`` transitions, as preallocated column tensors (oldest overwritten first)."""

    def __init__(self, capacity: int, device: str | torch.device = "cpu") -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        self.capacity = capacity
        self.device = torch.device(device)
        self._columns: dict[str, torch.Tensor] = {}
        self._next = 0
        self._size = 0
        self.num_added = 0
        """Transitions added over the buffer's life (including overwritten ones)."""

    def __len__(self) -> int:
        return self._size

    @property
    def keys(self) -> list[str]:
        return list(self._columns)

    def _allocate(self, batch: Columns) -> None:
        for k, v in batch.items():
            t = to_tensor(v, self.device)
            self._columns[k] = torch.empty((self.capacity, *t.shape[1:]), dtype=t.dtype, device=self.device)

    def add(self, batch: Columns) -> None:
        """Append transitions (every call must bring the same columns)."""
        n = _num_rows(batch)
        if n == 0:
            return
        if not self._columns:
            self._allocate(batch)
        if set(batch) != set(self._columns):
            raise KeyError(f"replay columns are {sorted(self._columns)}, got {sorted(batch)}")
        if n > self.capacity:  # only the newest fit
            batch = {k: v[n - self.capacity :] for k, v in batch.items()}
            n = self.capacity
        first = min(n, self.capacity - self._next)
        for k, v in batch.items():
            t = to_tensor(v, self.device).to(self._columns[k].dtype)
            self._columns[k][self._next : self._next + first] = t[:first]
            if first < n:
                self._columns[k][: n - first] = t[first:]
        self._next = (self._next + n) % self.capacity
        self._size = min(self._size + n, self.capacity)
        self.num_added += n

    @property
    def columns(self) -> dict[str, torch.Tensor]:
        """The preallocated column tensors (the ring: rows ``[0, len)`` are filled, in ring order)."""
        return self._columns

    def gather(self, idx: torch.Tensor) -> dict[str, torch.Tensor]:
        return {k: v[idx] for k, v in self._columns.items()}

    def sample(self, n: int, generator: torch.Generator | None = None) -> dict[str, torch.Tensor]:
        """``n`` transitions drawn uniformly with replacement."""
        if self._size == 0:
            raise ValueError("cannot sample from an empty replay buffer")
        idx = torch.randint(self._size, (n,), generator=generator, device="cpu").to(self.device)
        return self.gather(idx)

    def _ring_order(self) -> torch.Tensor:
        """Ring slot of each stored transition, oldest first."""
        return (torch.arange(self._size) + (self._next - self._size)) % self.capacity

    def contents(self) -> dict[str, torch.Tensor]:
        """The stored transitions, oldest first (CPU tensors)."""
        order = self._ring_order().to(self.device)
        return {k: v[order].cpu() for k, v in self._columns.items()}

    def get_state(self) -> dict[str, Any]:
        """Counters and ring position; the transitions themselves are ``contents()``."""
        return {"capacity": self.capacity, "next": self._next, "size": self._size, "num_added": self.num_added}

    def set_state(self, state: Mapping[str, Any], columns: Columns | None = None) -> None:
        """Restore counters and ring position, and fill the ring with ``columns``: transitions oldest first, at
        least ``state["size"]`` of them (the newest ``size`` are kept), each back in the slot it had, so
        sampling continues exactly. A state saved before the contents moved out of it holds them itself
        (``columns``, oldest first) and is restored from those."""
        if "columns" in state:  # an older state: the contents, oldest first, no ring position
            self._columns, self._next, self._size = {}, 0, 0
            if state["columns"]:
                self.add(state["columns"])
            self.num_added = int(state["num_added"])
            return
        if int(state["capacity"]) != self.capacity:
            raise ValueError(f"the replay state has capacity {state['capacity']}, this buffer {self.capacity}")
        size, nxt = int(state["size"]), int(state["next"])
        self._columns = {}
        if size:
            if columns is None:
                raise ValueError(f"the replay state holds {size} transitions: pass their columns")
            n = _num_rows(columns)
            if n < size:
                raise ValueError(f"the replay held {size} transitions, {n} were given back")
            newest = {k: v[n - size:] for k, v in columns.items()}
            self._allocate(newest)
            self._next, self._size = nxt, size
            slots = self._ring_order().to(self.device)
            for k, v in newest.items():
                self._columns[k][slots] = to_tensor(v, self.device).to(self._columns[k].dtype)
        self._next, self._size = nxt, size
        self.num_added = int(state["num_added"])


def _single(batch: Mapping[str, Any], module_id: str | None) -> Mapping[str, torch.Tensor]:
    """One module's columns out of a source's batch (``{module_id: columns}``, or the columns themselves)."""
    if batch and all(isinstance(v, Mapping) for v in batch.values()):
        if module_id is not None and module_id in batch:
            return batch[module_id]
        if len(batch) == 1:
            return next(iter(batch.values()))
        raise ValueError(f"the offline source gives modules {sorted(batch)}; mixing needs one module")
    return batch


class MixedBatchSource:
    """Batches of ``batch_size`` transitions, some online and the rest offline.

    ``mixing="fixed"``: ``round(online_fraction * batch_size)`` online (symmetric
    sampling at 0.5, as RLPD). ``mixing="proportional"``: the online share is the
    online buffer's share of all transitions, ``online / (online + offline)`` —
    as if both lived in one buffer (how IQL fine-tunes); it grows as experience
    comes in, so the first small online batches cannot dominate the updates.
    The rest come from ``offline``: arrays (every transition, held as tensors and
    drawn uniformly with this source's generator) or a batch source (the first
    rows of each of its batches, e.g. a streaming shard; ``num_offline`` then says
    how many transitions it holds, for proportional mixing). While the online
    buffer is empty every transition is offline. Implements the Learner's
    ``BatchSource`` protocol (``next_batch`` keyed by module id).
    """

    def __init__(
        self,
        offline: Columns | Any,
        online: ReplayBuffer,
        *,
        batch_size: int,
        online_fraction: float,
        mixing: str = "fixed",
        num_offline: int | None = None,
        module_id: str | None = None,
        seed: int = 0,
    ) -> None:
        if not 0.0 <= online_fraction <= 1.0:
            raise ValueError(f"online_fraction must be in [0, 1], got {online_fraction}")
        if mixing not in MIXING:
            raise ValueError(f"mixing must be one of {MIXING}, got {mixing!r}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.online = online
        self.offline_source = offline if hasattr(offline, "next_batch") else None
        self.offline: dict[str, torch.Tensor] = {}
        if self.offline_source is None:
            self.offline = to_tensors(offline, online.device)
            self._num_offline = _num_rows(self.offline) if self.offline else 0
            if self._num_offline == 0:
                raise ValueError("the offline transitions are empty (they also define the batch's columns)")
        else:
            self._num_offline = num_offline
            if mixing == "proportional" and not num_offline:
                raise ValueError("proportional mixing with an offline batch source needs num_offline (its transitions)")
        self.batch_size = batch_size
        self.online_fraction = online_fraction
        self.mixing = mixing
        self.module_id = module_id
        self.generator = torch.Generator().manual_seed(seed)
        self._out: dict[str, torch.Tensor] | None = None
        self._idx: torch.Tensor | None = None
        self._online_state: Mapping[str, Any] | None = None  # restored counters waiting for their contents

    def num_online(self) -> int:
        """Online transitions in the next batch."""
        n = len(self.online)
        if n == 0:
            return 0
        share = self.online_fraction if self.mixing == "fixed" else n / (n + self._num_offline)
        return int(round(share * self.batch_size))

    def add_online(self, batch: Columns) -> int:
        """Add online transitions (columns, or ``{module_id: columns}`` of this source's module); returns the
        transitions the replay holds."""
        self.online.add(_single(batch, self.module_id))
        return len(self.online)

    def restore_online(self, columns: Columns) -> int:
        """Give the replay restored by ``set_state`` its transitions back (oldest first); returns how many it holds."""
        if self._online_state is None:
            raise RuntimeError("restore_online follows set_state (which restores the replay's counters)")
        self.online.set_state(self._online_state, _single(columns, self.module_id))
        self._online_state = None
        return len(self.online)

    def _offline_batch(self, n_off: int) -> Mapping[str, torch.Tensor] | None:
        if self.offline_source is None:
            return None
        if not n_off and self._out is not None:
            return None
        return _single(self.offline_source.next_batch(), self.module_id)

    def next_batch(self) -> dict[str, Any]:
        """One mixed batch, gathered into buffers reused across calls (no allocation per update)."""
        if self._online_state is not None:
            raise RuntimeError("the replay's transitions were not restored (LearnerGroup.restore_online)")
        n_on = self.num_online()
        n_off = self.batch_size - n_on
        drawn = self._offline_batch(n_off)
        if self._out is None:
            template = self.offline if drawn is None else drawn
            self._out = {k: torch.empty((self.batch_size, *v.shape[1:]), dtype=v.dtype, device=self.online.device)
                         for k, v in template.items()}
            self._idx = torch.empty(self.batch_size, dtype=torch.int64)
        out, idx = self._out, self._idx
        if n_off and drawn is None:
            torch.randint(self._num_offline, (n_off,), generator=self.generator, out=idx[:n_off])
            off_idx = idx[:n_off].to(self.online.device)
            for k, v in self.offline.items():
                torch.index_select(v, 0, off_idx, out=out[k][:n_off])
        elif n_off:
            if len(next(iter(drawn.values()))) < n_off:
                raise ValueError(f"the offline source's batches are smaller than the {n_off} offline rows needed")
            for k in out:
                out[k][:n_off].copy_(drawn[k][:n_off])
        if n_on:
            torch.randint(len(self.online), (n_on,), generator=self.generator, out=idx[n_off:])
            on_idx = idx[n_off:].to(self.online.device)
            columns = self.online.columns
            missing = set(out) - set(columns)
            if missing:
                raise KeyError(f"online transitions lack offline columns {sorted(missing)}")
            for k in out:
                torch.index_select(columns[k], 0, on_idx, out=out[k][n_off:])
        return {self.module_id: out} if self.module_id is not None else out

    def get_state(self) -> dict[str, Any]:
        """The generator, the replay's counters and ring position, and the offline source's state."""
        state = {"generator": self.generator.get_state(), "online": self.online.get_state()}
        if self.offline_source is not None:
            state["offline"] = self.offline_source.get_state()
        return state

    def close(self) -> None:
        """Stop the offline source's stream (if it has one)."""
        if self.offline_source is not None and hasattr(self.offline_source, "close"):
            self.offline_source.close()

    def set_state(self, state: Mapping[str, Any]) -> None:
        """Restore the generator and offline source; a replay that held transitions waits for
        ``restore_online`` (its contents are not part of this state)."""
        self.generator.set_state(state["generator"])
        if self.offline_source is not None and state.get("offline") is not None:
            self.offline_source.set_state(state["offline"])
        online = state["online"]
        if "columns" in online or not int(online.get("size", 0)):
            self.online.set_state(online)
            self._online_state = None
        else:
            self._online_state = dict(online)


@dataclass
class MixedSpec:
    """Builds a learner's ``MixedBatchSource`` from its offline source spec (``OfflineData.source_specs``).

    In-memory offline data (``InMemorySpec``) is mixed from its arrays, with the
    mixed source's generator; any other spec (e.g. ``StreamingSpec``) is built
    into a batch source whose batches give the offline rows.
    """

    offline: Any
    """The learner's offline source spec."""
    capacity: int
    """Online transitions this learner's replay keeps."""
    batch_size: int
    """Transitions per batch."""
    online_fraction: float
    """Share of each batch from the replay."""
    seed: int
    """Seed of the mixing generator."""
    mixing: str = "fixed"
    """``fixed`` or ``proportional`` (``MixedBatchSource``)."""
    num_offline: int | None = None
    """Offline transitions of this learner's shard when they are not arrays (streaming), for proportional mixing."""

    def build(self, device: torch.device) -> "MixedBatchSource | MultiModuleMixedSource":

        if isinstance(self.offline, MultiModuleInMemorySpec):  # several modules: one mixed source each
            per_module = sorted(resolve(self.offline.per_module).items())
            return MultiModuleMixedSource({m: self._mixed(arrays, device, m, j, None)
                                           for j, (m, arrays) in enumerate(per_module)})
        if isinstance(self.offline, MultiModuleSpec):
            specs = sorted(self.offline.specs.items())
            share = None if self.num_offline is None else max(1, self.num_offline // len(specs))
            return MultiModuleMixedSource({m: self._mixed(spec.build(device), device, m, j, share)
                                           for j, (m, spec) in enumerate(specs)})
        offline = self.offline.resolve_arrays() if isinstance(self.offline, InMemorySpec) else self.offline.build(device)
        return self._mixed(offline, device, getattr(self.offline, "module_id", C.DEFAULT_MODULE_ID), 0, self.num_offline)

    def _mixed(self, offline: Any, device: torch.device, module_id: str, index: int,
               num_offline: int | None) -> MixedBatchSource:
        """Module ``module_id``'s mixed source (the ``index``-th module: its generator seeded ``seed + index``)."""
        return MixedBatchSource(offline, ReplayBuffer(self.capacity, device), batch_size=self.batch_size,
                                online_fraction=self.online_fraction, mixing=self.mixing, num_offline=num_offline,
                                module_id=module_id, seed=self.seed + index)


class MultiModuleMixedSource(MultiModuleSource):
    """One ``MixedBatchSource`` per module of a multi-agent job, each mixing its module's replay with its module's
    offline data; online transitions come as ``{module_id: columns}`` (an agent's go to the module acting for it),
    and a batch holds every module's."""

    def _each(self, method: str, batch: Mapping[str, Columns]) -> int:
        unknown = sorted(set(batch) - set(self.sources))
        if unknown:
            raise ValueError(f"online transitions of modules {unknown}; this learner trains {sorted(self.sources)}")
        for mid, columns in batch.items():
            if columns and _num_rows(columns):
                getattr(self.sources[mid], method)(columns)
        return sum(len(src.online) for src in self.sources.values())

    def add_online(self, batch: Mapping[str, Columns]) -> int:
        """Add each module's online transitions to its replay; returns the transitions all replays hold."""
        return self._each("add_online", batch)

    def restore_online(self, batch: Mapping[str, Columns]) -> int:
        """After ``set_state``: give each module's replay its transitions back; returns what all of them hold."""
        return self._each("restore_online", batch)
