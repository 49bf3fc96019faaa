"""Held-out episodes: a seeded split of a dataset by episode id, shared by training and OPE.

The split is a permutation (seeded) of the dataset's sorted unique episode ids; the first
``max(1, round(fraction * n))`` are held out. It depends only on the set of ids, the fraction and
the seed, never on file order or on how many files or readers there are, so training
(``OfflineData``, both modes) and ``load_ope_episodes`` agree on it. Every row of a held-out
episode (all its chunks, all its agents) is held out.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from offlinerl.episodes import parquet_files
from offlinerl.episodes import schema as S

__all__ = ["dataset_episode_ids", "holdout_episode_ids", "keep_episodes"]


def dataset_episode_ids(path: str | Path) -> np.ndarray:
    """Sorted unique episode ids of the dataset at ``path`` (reads only that column)."""
    ids: set[str] = set()
    for f in parquet_files(path):
        ids.update(pq.read_table(f, columns=[S.EPISODE_ID]).column(S.EPISODE_ID).to_pylist())
    return np.array(sorted(ids), dtype=object)


def holdout_episode_ids(ids: np.ndarray, fraction: float, seed: int) -> np.ndarray:
    """The held-out subset of ``ids`` (sorted): ``max(1, round(fraction * n))`` of them, chosen by ``seed``.

    Raises ``ValueError`` if fewer than two episodes exist (nothing would be left to train on).
    """
    ids = np.array(sorted(set(ids.tolist())), dtype=object)
    if len(ids) < 2:
        raise ValueError(f"data.holdout: the dataset has {len(ids)} episode(s); a held-out split needs at least 2")
    count = min(len(ids) - 1, max(1, round(fraction * len(ids))))
    chosen = np.random.default_rng(seed).permutation(len(ids))[:count]
    return np.sort(ids[chosen])


def keep_episodes(table: pa.Table, ids: np.ndarray, held_out: bool) -> pa.Table:
    """Rows of ``table`` whose episode is in ``ids`` (``held_out=True``) or not in it (``False``)."""
    member = pc.is_in(table.column(S.EPISODE_ID), value_set=pa.array(ids.tolist(), type=table.column(S.EPISODE_ID).type))
    return table.filter(member if held_out else pc.invert(member))
