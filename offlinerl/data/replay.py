"""Replay for off-policy fine-tuning: a FIFO buffer of online transitions and a
batch source that mixes them with the offline dataset, at a fixed ratio or in
proportion to how many transitions each side holds.

Both hold column tensors (the train-batch keys of ``offlinerl.core.columns``)
preallocated on the learner's device; drawing a batch is two ``randint``s and
one gather per column — no Python per transition.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np
import torch

from offlinerl.core.tensors import to_tensor, to_tensors

__all__ = ["ReplayBuffer", "MixedBatchSource", "MIXING"]

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

    def add(self, batch: Columns) -> None:
        """Append transitions (every call must bring the same columns)."""
        n = _num_rows(batch)
        if n == 0:
            return
        if not self._columns:
            for k, v in batch.items():
                t = to_tensor(v, self.device)
                self._columns[k] = torch.empty((self.capacity, *t.shape[1:]), dtype=t.dtype, device=self.device)
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
        """The preallocated column tensors (rows ``[0, len)`` are filled)."""
        return self._columns

    def gather(self, idx: torch.Tensor) -> dict[str, torch.Tensor]:
        return {k: v[idx] for k, v in self._columns.items()}

    def sample(self, n: int, generator: torch.Generator | None = None) -> dict[str, torch.Tensor]:
        """``n`` transitions drawn uniformly with replacement."""
        if self._size == 0:
            raise ValueError("cannot sample from an empty replay buffer")
        idx = torch.randint(self._size, (n,), generator=generator, device="cpu").to(self.device)
        return self.gather(idx)

    def get_state(self) -> dict[str, Any]:
        order = (torch.arange(self._size) + (self._next - self._size)) % self.capacity  # oldest first
        return {
            "capacity": self.capacity,
            "columns": {k: v[order.to(self.device)].cpu() for k, v in self._columns.items()},
            "num_added": self.num_added,
        }

    def set_state(self, state: Mapping[str, Any]) -> None:
        self._columns, self._next, self._size = {}, 0, 0
        if state["columns"]:
            self.add(state["columns"])
        self.num_added = int(state["num_added"])


class MixedBatchSource:
    """Batches of ``batch_size`` transitions, some online and the rest offline.

    ``mixing="fixed"``: ``round(online_fraction * batch_size)`` online (symmetric
    sampling at 0.5, as RLPD). ``mixing="proportional"``: the online share is the
    online buffer's share of all transitions, ``online / (online + offline)`` —
    as if both lived in one buffer (how IQL fine-tunes); it grows as experience
    comes in, so the first small online batches cannot dominate the updates.
    While the online buffer is empty every transition is offline. Implements the
    Learner's ``BatchSource`` protocol (``next_batch`` keyed by module id).
    """

    def __init__(
        self,
        offline: Columns,
        online: ReplayBuffer,
        *,
        batch_size: int,
        online_fraction: float,
        mixing: str = "fixed",
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
        self.offline = to_tensors(offline, online.device)
        self._num_offline = _num_rows(self.offline) if self.offline else 0
        if self._num_offline == 0:
            raise ValueError("the offline transitions are empty (they also define the batch's columns)")
        self.batch_size = batch_size
        self.online_fraction = online_fraction
        self.mixing = mixing
        self.module_id = module_id
        self.generator = torch.Generator().manual_seed(seed)
        self._out: dict[str, torch.Tensor] | None = None
        self._idx: torch.Tensor | None = None

    def num_online(self) -> int:
        """Online transitions in the next batch."""
        n = len(self.online)
        if n == 0:
            return 0
        share = self.online_fraction if self.mixing == "fixed" else n / (n + self._num_offline)
        return int(round(share * self.batch_size))

    def next_batch(self) -> dict[str, Any]:
        """One mixed batch, gathered into buffers reused across calls (no allocation per update)."""
        n_on = self.num_online()
        n_off = self.batch_size - n_on
        if self._out is None:
            self._out = {k: torch.empty((self.batch_size, *v.shape[1:]), dtype=v.dtype, device=v.device)
                         for k, v in self.offline.items()}
            self._idx = torch.empty(self.batch_size, dtype=torch.int64)
        out, idx = self._out, self._idx
        if n_off:
            torch.randint(self._num_offline, (n_off,), generator=self.generator, out=idx[:n_off])
            off_idx = idx[:n_off].to(self.online.device)
            for k, v in self.offline.items():
                torch.index_select(v, 0, off_idx, out=out[k][:n_off])
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
        return {"generator": self.generator.get_state(), "online": self.online.get_state()}

    def set_state(self, state: Mapping[str, Any]) -> None:
        self.generator.set_state(state["generator"])
        self.online.set_state(state["online"])
