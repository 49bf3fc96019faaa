"""Batch sources a Learner draws from, and picklable specs that build them inside a learner.

- ``InMemorySource``: every transition as one contiguous tensor per column (on the
  learner's device); a minibatch is one ``randint`` + one ``index_select`` per
  column into reused buffers: no per-sample Python, no allocation per update.
- ``StreamingSource``: whole blocks from ``iter_torch_batches`` over a Ray Dataset
  or a ``streaming_split`` shard, pooled to at least the shuffle buffer's size,
  permuted and served as minibatches; a reader thread reads ahead, into the next epoch as soon as one ends.
- ``FixedBatchSource``: the same batch every time (tests, DDP equivalence).
- ``MultiModuleSource``: one of those per module id (a multi-agent dataset's modules), a batch holding
  ``batch_size`` transitions of every module; ``MultiModuleInMemorySource`` builds in-memory ones.
"""

from __future__ import annotations

import queue
import threading
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping

import torch

from offlinerl.core import columns as C
from offlinerl.core.tensors import to_tensors
from offlinerl.data.errors import reading

__all__ = [
    "InMemorySource",
    "StreamingSource",
    "FixedBatchSource",
    "InMemorySpec",
    "MultiModuleInMemorySource",
    "MultiModuleInMemorySpec",
    "MultiModuleSource",
    "MultiModuleSpec",
    "StreamingSpec",
    "FixedBatchSpec",
    "to_tensors",
]


class InMemorySource:
    """Uniform random minibatches (with replacement) from arrays held in memory."""

    def __init__(self, arrays: Mapping[str, Any], batch_size: int, seed: int, device: torch.device | str = "cpu",
                 module_id: str = C.DEFAULT_MODULE_ID) -> None:
        device = torch.device(device)
        self.data = to_tensors(arrays, device)
        lengths = {k: len(v) for k, v in self.data.items()}
        if len(set(lengths.values())) != 1:
            raise ValueError(f"columns have different lengths: {lengths}")
        self.size = next(iter(lengths.values()))
        if self.size == 0:
            raise ValueError("the dataset produced no transitions")
        self.batch_size = batch_size
        self.module_id = module_id
        self.generator = torch.Generator(device=device).manual_seed(seed)
        self._idx = torch.empty(batch_size, dtype=torch.int64, device=device)
        self._out = {k: torch.empty((batch_size, *v.shape[1:]), dtype=v.dtype, device=device) for k, v in self.data.items()}
        self._batch = {module_id: self._out}

    def next_batch(self) -> dict[str, dict[str, torch.Tensor]]:
        torch.randint(self.size, (self.batch_size,), generator=self.generator, out=self._idx)
        for k, v in self.data.items():
            torch.index_select(v, 0, self._idx, out=self._out[k])
        return self._batch

    def get_state(self) -> dict[str, Any]:
        return {"generator": self.generator.get_state()}

    def set_state(self, state: Mapping[str, Any]) -> None:
        self.generator.set_state(state["generator"])


class StreamingSource:
    """Batches streamed from a Ray Dataset or ``DataIterator`` (one learner's shard), epoch after epoch.

    Ray Data hands over whole blocks (``iter_torch_batches(batch_size=None)``: no re-batching and no per-row
    work on the learner's side, whose Python thread the updates need). Blocks are pooled until the pool holds
    at least ``shuffle_buffer_size`` transitions (and one batch); the pool is permuted and served as
    minibatches, and what is left (less than a batch) joins the next pool. So every transition is served
    once per epoch, in random order within windows of at least ``shuffle_buffer_size`` transitions (and at
    least one whole block: a parquet file's share, as the files are read in a shuffled order); a last
    remainder smaller than one batch is dropped at the end of an epoch, so an epoch is ``rows // batch_size``
    batches whatever the blocks (learners with equal shards start their epochs on the same update).
    """

    def __init__(self, iterable: Any, batch_size: int, shuffle_buffer_size: int, prefetch_batches: int, seed: int,
                 device: torch.device | str = "cpu", module_id: str = C.DEFAULT_MODULE_ID, dataset: str = "") -> None:
        self.iterable = iterable
        self.dataset = dataset
        """The dataset's path: malformed rows met while streaming are a ``DatasetReadError`` naming it."""
        self.batch_size = batch_size
        self.shuffle_buffer_size = shuffle_buffer_size
        self.prefetch_batches = prefetch_batches
        self.seed = seed
        self.device = torch.device(device)
        self.module_id = module_id
        self.generator = torch.Generator().manual_seed(seed)
        self.epoch = 0
        self._in_epoch = False
        self._feeder: _Feeder | None = None
        self._pool: dict[str, torch.Tensor] | None = None
        self._order: torch.Tensor | None = None
        self._pos = 0
        self._feed()  # the first epoch's read starts while the learner is still being built

    def _feed(self) -> None:
        self._feeder = _Feeder(lambda: iter(self.iterable.iter_torch_batches(
            batch_size=None, prefetch_batches=max(1, self.prefetch_batches), device=str(self.device))),
            depth=max(1, self.prefetch_batches))

    def _next_block(self) -> dict[str, torch.Tensor] | None:
        """The epoch's next block, or None where the epoch ended (the next ``_next_block`` starts a new one)."""
        if self._feeder is None:
            self._feed()
        if not self._in_epoch:
            self._in_epoch = True
            self.epoch += 1
        with reading(self.dataset or "the dataset"):
            block = self._feeder.get()
        if block is _END:
            self._in_epoch = False
            return None
        return block

    def _leftover(self) -> list[dict[str, torch.Tensor]]:
        if self._pool is None or self._pos >= len(self._order):
            return []
        rest = self._order[self._pos:]
        return [{k: v.index_select(0, rest) for k, v in self._pool.items()}]

    def _refill(self) -> None:
        # What the pool left joins the next pool within an epoch only: an epoch's last rows short of a batch are
        # dropped, so every epoch serves floor(shard / batch_size) batches whatever the blocks, and learners whose
        # shards are equal (streaming_split(equal=True)) start each epoch on the same update: the split waits for
        # every learner there, and a learner waiting there while the others wait in DDP's all-reduce would hang.
        blocks = self._leftover() if self._in_epoch else []
        rows = sum(len(next(iter(b.values()))) for b in blocks)
        need = max(self.batch_size, self.shuffle_buffer_size)
        restarts = 0
        while rows < need:
            block = self._next_block()
            if block is not None:
                n = len(next(iter(block.values())))
                if n:
                    blocks.append(block)
                    rows += n
                continue
            if rows >= self.batch_size:
                break  # serve what the epoch left
            blocks, rows = [], 0  # a remainder smaller than one batch is dropped
            restarts += 1
            if restarts > 1:
                raise RuntimeError(f"a data shard has fewer transitions than train_batch_size={self.batch_size}")
        self._pool = blocks[0] if len(blocks) == 1 else {k: torch.cat([b[k] for b in blocks]) for k in blocks[0]}
        self._order = torch.randperm(rows, generator=self.generator).to(self.device)
        self._pos = 0

    def next_batch(self) -> dict[str, dict[str, torch.Tensor]]:
        if self._pool is None or self._pos + self.batch_size > len(self._order):
            self._refill()
        idx = self._order[self._pos:self._pos + self.batch_size]
        self._pos += self.batch_size
        return {self.module_id: {k: v.index_select(0, idx) for k, v in self._pool.items()}}

    def close(self) -> None:
        """Stop reading ahead: the reader thread closes the stream's iterator (at once, or when a block it waits for
        comes)."""
        if self._feeder is not None:
            self._feeder.close()
        self._feeder = None
        self._in_epoch = False

    def get_state(self) -> dict[str, Any]:
        return {"epoch": self.epoch}

    def set_state(self, state: Mapping[str, Any]) -> None:
        # A stream cannot be rewound exactly; a restored job starts a fresh epoch (the one read ahead, where none of
        # it was served yet).
        self.epoch = int(state.get("epoch", 0))
        if self._in_epoch:
            self.close()
        self._pool = self._order = None


_END = object()
"""What a :class:`_Feeder` hands over after an epoch's last block."""


class _Feeder:
    """Epoch after epoch of ``open()``'s blocks, read on a daemon thread into a queue of ``depth`` blocks, with
    ``_END`` after each epoch's last. The next epoch is asked for as soon as one ends, so its first block (a second
    or more after the request: the split plans the epoch's execution and the read starts) arrives while the learner
    serves the blocks still queued. An error of the read is raised by the ``get`` that would have had the block."""

    def __init__(self, open: Callable[[], Iterator[Any]], depth: int) -> None:
        self._open = open
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=depth)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="offlinerl-stream", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                it = self._open()
                try:
                    for block in it:
                        if not self._put(block):
                            return
                finally:
                    if hasattr(it, "close"):
                        it.close()
                if not self._put(_END):
                    return
        except BaseException as exc:  # noqa: BLE001 - raised in the learner's thread by get()
            self._put(_Failed(exc))

    def _put(self, item: Any) -> bool:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def get(self) -> Any:
        item = self._queue.get()
        if isinstance(item, _Failed):
            self._queue.put(item)  # every later get raises it too
            raise item.error
        return item

    def close(self, wait_s: float = 1.0) -> None:
        """Stop reading; wait up to ``wait_s`` for the thread to close its iterator (it may be waiting for a block)."""
        self._stop.set()
        self._thread.join(wait_s)


@dataclass(frozen=True)
class _Failed:
    """What a :class:`_Feeder` hands over when its read raised ``error``."""

    error: BaseException


class FixedBatchSource:
    def __init__(self, batch: Mapping[str, Any], device: torch.device | str = "cpu", module_id: str = C.DEFAULT_MODULE_ID) -> None:
        self._batch = {module_id: to_tensors(batch, device)}

    def next_batch(self) -> dict[str, dict[str, torch.Tensor]]:
        return self._batch

    def get_state(self) -> dict[str, Any]:
        return {}

    def set_state(self, state: Mapping[str, Any]) -> None:
        pass


@dataclass
class InMemorySpec:
    """Arrays (or an ObjectRef to them) + sampling settings; ``build`` runs inside the learner."""

    arrays: Any
    batch_size: int
    seed: int
    module_id: str = C.DEFAULT_MODULE_ID
    """The module whose batches these are (a job's only module, e.g. ``shared`` under a ``policy_mapping``)."""

    def resolve_arrays(self) -> Mapping[str, Any]:
        """The arrays (fetched from the object store if they were put there)."""
        return resolve(self.arrays)

    def build(self, device: torch.device) -> InMemorySource:
        return InMemorySource(self.resolve_arrays(), self.batch_size, self.seed, device, module_id=self.module_id)


def resolve(value: Any) -> Any:
    """``value``, fetched from the object store if it was put there."""
    if type(value).__name__ == "ObjectRef":
        import ray

        return ray.get(value)
    return value


class MultiModuleSource:
    """One batch source per module id (each serving its module's batches); a batch holds every module's."""

    def __init__(self, sources: Mapping[str, Any]) -> None:
        self.sources = dict(sorted(sources.items()))

    def next_batch(self) -> dict[str, dict[str, torch.Tensor]]:
        return {mid: src.next_batch()[mid] for mid, src in self.sources.items()}

    def get_state(self) -> dict[str, Any]:
        return {mid: src.get_state() for mid, src in self.sources.items()}

    def set_state(self, state: Mapping[str, Any]) -> None:
        for mid, src in self.sources.items():
            src.set_state(state[mid])

    def close(self) -> None:
        """Stop every module's stream (the sources that have one)."""
        for src in self.sources.values():
            if hasattr(src, "close"):
                src.close()


class MultiModuleInMemorySource(MultiModuleSource):
    """One ``InMemorySource`` per module id (sorted; module ``j`` sampled with the seed ``seed + j``); a batch holds
    ``batch_size`` transitions of every module."""

    def __init__(self, per_module: Mapping[str, Mapping[str, Any]], batch_size: int, seed: int, device: torch.device | str = "cpu") -> None:
        super().__init__({mid: InMemorySource(arrays, batch_size, seed + i, device, module_id=mid)
                          for i, (mid, arrays) in enumerate(sorted(per_module.items()))})


@dataclass
class MultiModuleInMemorySpec:
    per_module: Any
    """``{module_id: arrays}`` (or an ObjectRef to it: one learner's shard of each module)."""
    batch_size: int
    seed: int

    def build(self, device: torch.device) -> MultiModuleInMemorySource:
        return MultiModuleInMemorySource(resolve(self.per_module), self.batch_size, self.seed, device)


@dataclass
class MultiModuleSpec:
    """One source spec per module id (each building its module's source, e.g. ``StreamingSpec(module_id=...)``)."""

    specs: Mapping[str, Any]

    def build(self, device: torch.device) -> MultiModuleSource:
        return MultiModuleSource({mid: spec.build(device) for mid, spec in self.specs.items()})


@dataclass
class StreamingSpec:
    iterable: Any
    batch_size: int
    shuffle_buffer_size: int
    prefetch_batches: int
    seed: int
    dataset: str = ""
    module_id: str = C.DEFAULT_MODULE_ID
    """The module whose batches these are (a multi-agent dataset's stream of one module)."""

    def build(self, device: torch.device) -> StreamingSource:
        return StreamingSource(self.iterable, self.batch_size, self.shuffle_buffer_size, self.prefetch_batches, self.seed,
                               device, module_id=self.module_id, dataset=self.dataset)


@dataclass
class FixedBatchSpec:
    batch: Mapping[str, Any]

    def build(self, device: torch.device) -> FixedBatchSource:
        return FixedBatchSource(self.batch, device)
