"""Hostile inputs for the reliability tests, built cheaply: values that declare far
more than they hold, and a way to measure the memory a conversion really used."""

from __future__ import annotations

import base64
import os
import pickle
import threading
import tracemalloc

import lz4.frame
import numpy as np

__all__ = [
    "MiB", "GiB", "RECONSTRUCT", "Pickled", "packed", "TINY_HUGE_VALUES", "lz4_bomb", "packed_bomb", "peak_traced",
    "BILLION_LAUGHS", "tree_pss", "TreePeak",
]

MiB, GiB = 1024**2, 1024**3
RECONSTRUCT = np.ndarray.__reduce__(np.zeros(1))[0]  # numpy's own _reconstruct (numpy 1.x and 2.x paths)


class Pickled:
    """Pickles as ``fn(*args)`` (then ``BUILD`` with ``state`` if given): what a crafted pickle can ask for."""

    def __init__(self, fn, args, state=None):
        self.fn, self.args, self.state = fn, args, state

    def __reduce__(self):
        return (self.fn, self.args) if self.state is None else (self.fn, self.args, self.state)


def packed(obj) -> str:
    """RLlib's ``pack()`` of any picklable object."""
    return base64.b64encode(lz4.frame.compress(pickle.dumps(obj, protocol=4))).decode("ascii")


#: ~100-byte packed values whose pickles ask numpy for 11 GB (an object array numpy zero-fills).
TINY_HUGE_VALUES = {
    "declared shape": packed(Pickled(RECONSTRUCT, (np.ndarray, (1_375_000_000,), b"O"))),
    "setstate shape": packed(Pickled(RECONSTRUCT, (np.ndarray, (0,), b"b"),
                                     (1, (1_375_000_000,), np.dtype("O"), False, []))),
    "void item size": packed(Pickled(RECONSTRUCT, (np.ndarray, (0,), b"b"),
                                     (1, (1,), np.dtype("V2000000000"), False, b""))),
}


def lz4_bomb(decompressed: int = 2 * GiB, declare_size: bool = True) -> bytes:
    """A valid LZ4 frame of ``decompressed`` zero bytes, built from one compressed 4 MiB block (cheap)."""
    block = 4 * MiB
    compressor = lz4.frame.LZ4FrameCompressor(block_size=lz4.frame.BLOCKSIZE_MAX4MB, block_linked=False)
    header = compressor.begin(source_size=decompressed if declare_size else 0)
    one = compressor.compress(bytes(block))  # one independent block (frame format: size word + data)
    return header + one * (decompressed // block) + b"\x00\x00\x00\x00"  # the end mark (no checksum)


def packed_bomb(decompressed: int = 2 * GiB, declare_size: bool = True) -> str:
    return base64.b64encode(lz4_bomb(decompressed, declare_size)).decode("ascii")


def peak_traced(fn) -> tuple[int, object]:
    """(peak bytes Python allocated while ``fn`` ran, what it raised or returned)."""
    tracemalloc.start()
    try:
        result = fn()
    except Exception as exc:  # the caller asserts on the exception
        result = exc
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak, result


BILLION_LAUGHS = """\
a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
algorithm: bc
"""


def tree_pss() -> int:
    """PSS in bytes of this process and all its descendants (the driver, Ray's raylet/GCS and workers)."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    parents[int(entry)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    tree, frontier = {os.getpid()}, [os.getpid()]
    while frontier:
        pid = frontier.pop()
        children = [c for c, p in parents.items() if p == pid and c not in tree]
        tree.update(children)
        frontier.extend(children)
    total = 0
    for pid in tree:
        try:
            with open(f"/proc/{pid}/smaps_rollup") as f:
                total += next(int(line.split()[1]) for line in f if line.startswith("Pss:")) * 1024
        except (OSError, StopIteration):
            continue
    return total


class TreePeak:
    """Samples the process tree's PSS every 0.2 s while the ``with`` block runs; ``peak`` in bytes, and ``rise``:
    the peak over the PSS the block started from (what the block itself made the tree allocate, whatever the test
    session held before it)."""

    def __enter__(self) -> TreePeak:
        self.start = self.peak = tree_pss()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            self.peak = max(self.peak, tree_pss())

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, tree_pss())

    @property
    def rise(self) -> int:
        return self.peak - self.start
