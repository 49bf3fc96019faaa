"""Minari datasets in and out: import any local Minari dataset (hdf5, arrow or
parquet storage) as an episode dataset, and export an episode dataset as a
Minari dataset that ``minari.load_dataset`` opens.

Alignment (the part that is easy to get wrong): a Minari episode holds T+1
observations and T actions/rewards/terminations/truncations, exactly like our
rows (its arrow/parquet storages pad the last row's actions/rewards/flags with
zeros on disk; minari's own reader strips them, and we read through minari's
API). Minari's ``infos`` hold T+1 entries (the first from ``reset``); we keep
``infos[1:]``, the info returned by each step, as the JSON column ``infos``
when every leaf is a plain array of T+1 values, and say so in the provenance.
Export writes observations, actions, rewards and flags; infos are not
exported (the reset info they would need is not stored).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any, Iterator

import gymnasium as gym
import numpy as np
import pyarrow.parquet as pq

from offlinerl.convert.interface import EXIT_OK, EXIT_USAGE, Converter
from offlinerl.convert.options import start_ray
from offlinerl.episodes import schema as S
from offlinerl.episodes.arrow import batch_map
from offlinerl.episodes.episode import SingleAgentEpisode, episodes_to_table, table_to_episodes
from offlinerl.episodes.info import DatasetInfo, read_info
from offlinerl.episodes.atomic import atomic_directory, check_output
from offlinerl.episodes.io import DEFAULT_MAX_STEPS_PER_ROW, parquet_files, write_dataset
from offlinerl.episodes.spaces import SpaceError, space_to_json

__all__ = ["MinariError", "open_minari", "import_minari", "export_minari", "episode_from_minari", "iter_episodes",
           "DATA_FORMATS", "CONVERTER"]

DATA_FORMATS = ("hdf5", "arrow", "parquet")
INFOS = "infos"
EPISODES_PER_TASK = 64


class MinariError(ValueError):
    """A Minari dataset that cannot be found, read or written."""


def _data_path(dataset_id_or_path: str | os.PathLike) -> Path:
    """The ``data/`` directory of a Minari dataset given by path or id (ids via ``MINARI_DATASETS_PATH``)."""
    from minari.storage.datasets_root_dir import get_dataset_path

    p = Path(dataset_id_or_path)
    for candidate in (p / "data", p):
        if (candidate / "metadata.json").is_file():
            return candidate.resolve()
    if p.exists():
        raise MinariError(f"{p}: not a Minari dataset (no metadata.json in it or in its data/ folder)")
    data = Path(get_dataset_path(str(dataset_id_or_path))) / "data"
    if not (data / "metadata.json").is_file():
        root = os.environ.get("MINARI_DATASETS_PATH", "~/.minari/datasets")
        raise MinariError(f"Minari dataset {str(dataset_id_or_path)!r} not found locally at {data.parent} "
                          f"(datasets root {root}; set MINARI_DATASETS_PATH or pass the dataset directory)")
    return data.resolve()


def open_minari(dataset_id_or_path: str | os.PathLike):
    """Open a local Minari dataset with minari's own reader (``MinariDataset``)."""
    from minari import MinariDataset

    try:
        return MinariDataset(_data_path(dataset_id_or_path))
    except MinariError:
        raise
    except Exception as exc:  # minari raises assertion/value/key errors on bad metadata
        raise MinariError(f"{dataset_id_or_path}: minari cannot open it: {type(exc).__name__}: {exc}") from exc


def _simple_infos(infos: Any, n: int) -> bool:
    """Infos we keep: a dict whose leaves (through nested dicts) are plain arrays of n values."""
    if not isinstance(infos, dict) or not infos:
        return False
    for v in infos.values():
        if isinstance(v, dict):
            if not _simple_infos(v, n):
                return False
        elif not (isinstance(v, np.ndarray) and v.dtype.kind in "biufUS" and len(v) == n):
            return False
    return True


def _info_at(infos: dict, t: int) -> dict:
    return {k: (_info_at(v, t) if isinstance(v, dict) else v[t].tolist()) for k, v in infos.items()}


def episode_from_minari(ep: Any, keep_infos: bool) -> SingleAgentEpisode:
    """One minari ``EpisodeData`` -> our episode (flags from the last step; checks the T+1 alignment)."""
    T = len(ep.rewards)
    n_obs = len(next(iter(_leaves(ep.observations))))
    if n_obs != T + 1 or any(len(a) != T for a in _leaves(ep.actions)):
        raise MinariError(f"episode {ep.id}: {n_obs} observations and {T} rewards (expected T+1 observations, "
                          "T actions)")
    term, trunc = np.asarray(ep.terminations, bool), np.asarray(ep.truncations, bool)
    if T == 0 or term[:-1].any() or trunc[:-1].any():
        raise MinariError(f"episode {ep.id}: {T} steps, or a termination/truncation before its last step")
    extras = {}
    if keep_infos:
        extras[INFOS] = ([json.dumps(_info_at(ep.infos, t + 1)) for t in range(T)]
                         if _simple_infos(ep.infos, T + 1) else ["null"] * T)
    return SingleAgentEpisode(
        id=str(ep.id), obs=_as_batch(ep.observations), actions=_as_batch(ep.actions),
        rewards=np.asarray(ep.rewards, dtype=np.float32), terminated=bool(term[-1]),
        # a last step with neither flag was cut by the end of the recording; with both, termination wins
        truncated=bool(trunc[-1] or not term[-1]) and not bool(term[-1]), extras=extras,
    )


def _leaves(batch: Any) -> list:
    if isinstance(batch, dict):
        return [x for v in batch.values() for x in _leaves(v)]
    if isinstance(batch, (tuple, list)) and batch and isinstance(batch[0], (np.ndarray, dict, tuple)):
        return [x for v in batch for x in _leaves(v)]
    return [np.asarray(batch)]


def _as_batch(batch: Any) -> Any:
    if isinstance(batch, dict):
        return {k: _as_batch(v) for k, v in batch.items()}
    if isinstance(batch, tuple):
        return tuple(_as_batch(v) for v in batch)
    return np.asarray(batch)


def _arrow_episodes(storage: Any, indices: Any) -> Iterator[Any]:
    """Episodes of minari's arrow/parquet storages, each read whole.

    minari 0.5.4's own ``get_episodes`` zips episode ids with record *batches*,
    so an episode stored in more than one batch (more than 32,767 steps) is cut
    and every later episode gets the wrong rows. We read each episode folder
    as one table and decode it with minari's own space/info decoders.
    """
    import pyarrow.dataset as pds
    from minari.dataset._storages.arrow_storage import _decode_info, _decode_space
    from minari.dataset.episode_data import EpisodeData

    jpeg = bool(storage.metadata.get("jpeg_encoding", True))
    for ep_id in indices:
        table = pds.dataset(str(Path(storage.data_path) / str(ep_id)), format=storage.FORMAT,
                            ignore_prefixes=["_", ".", "metadata.json"]).to_table()
        col = {name: table.column(name).combine_chunks() for name in table.column_names}
        yield EpisodeData(
            id=int(ep_id),
            observations=_decode_space(storage.observation_space, col["observations"], jpeg_encoding=jpeg),
            actions=_decode_space(storage.action_space, col["actions"][:-1], jpeg_encoding=jpeg),
            rewards=np.asarray(col["rewards"])[:-1],
            terminations=np.asarray(col["terminations"])[:-1],
            truncations=np.asarray(col["truncations"])[:-1],
            infos=_decode_info(col["infos"]) if "infos" in col else {},
        )


def _read_episodes(items: Any, *, data_path: str, observation_space: gym.Space, action_space: gym.Space,
                   keep_infos: bool, extra_columns: dict, max_steps: int):
    """``map_batches`` function: read a range of minari episodes as episode rows (lengths checked against
    minari's per-episode metadata)."""
    dataset = open_minari(data_path)
    storage = dataset.storage
    rows = []
    for start, stop in zip(items["start"], items["stop"]):
        indices = dataset.episode_indices[int(start):int(stop)]
        steps = [int(m["total_steps"]) for m in storage.get_episode_metadata(indices)]
        if storage.FORMAT in ("arrow", "parquet"):
            episodes = _arrow_episodes(storage, indices)
        else:
            episodes = dataset.iterate_episodes(indices)
        for ep, expected in zip(episodes, steps):
            if len(ep.rewards) != expected:
                raise MinariError(f"{data_path}: episode {ep.id} has {len(ep.rewards)} steps, its metadata says "
                                  f"{expected}")
            rows.extend(episode_from_minari(ep, keep_infos).split(max_steps))
    return episodes_to_table(rows, observation_space, action_space, extra_columns)


def import_minari(
    dataset_id_or_path: str | os.PathLike,
    output: str | Path,
    *,
    keep_infos: bool = True,
    max_steps_per_row: int = DEFAULT_MAX_STEPS_PER_ROW,
    overwrite: bool = False,
) -> DatasetInfo:
    """Convert a local Minari dataset into an episode dataset at ``output`` (episodes read in Ray tasks)."""
    import ray.data

    dataset = open_minari(dataset_id_or_path)
    data_path = str(dataset.storage.data_path)
    source_dir = Path(data_path).parent  # the Minari dataset directory (data/ and its metadata)
    check_output(output, overwrite, kind="dataset", inputs=[source_dir])
    obs_space, act_space = dataset.observation_space, dataset.action_space
    for what, space in (("observation", obs_space), ("action", act_space)):
        try:
            space_to_json(space)
        except SpaceError as exc:
            raise MinariError(f"{dataset_id_or_path}: {what} space cannot be stored: {exc}") from exc
    n = len(dataset.episode_indices)
    if n == 0:
        raise MinariError(f"{dataset_id_or_path}: the Minari dataset has no episodes")
    first = next(dataset.iterate_episodes(dataset.episode_indices[:1]))
    keep_infos = keep_infos and _simple_infos(first.infos, len(first.rewards) + 1)
    extra = {INFOS: {"dtype": S.JSON_DTYPE, "shape": []}} if keep_infos else {}
    meta = dataset.storage.metadata
    env_spec = json.loads(meta["env_spec"]) if isinstance(meta.get("env_spec"), str) else None
    env_id = env_spec.get("id") if env_spec else None
    ranges = [{"start": s, "stop": min(s + EPISODES_PER_TASK, n)} for s in range(0, n, EPISODES_PER_TASK)]
    ds = ray.data.from_items(ranges).map_batches(
        _read_episodes, batch_size=1, batch_format="numpy",
        fn_kwargs=dict(data_path=data_path, observation_space=obs_space, action_space=act_space,
                       keep_infos=keep_infos, extra_columns=extra, max_steps=max_steps_per_row),
    )
    provenance = {
        "converter": "offlinerl.convert.minari",
        "source_format": f"minari ({meta.get('data_format')})",
        "minari_dataset_id": meta.get("dataset_id"),
        "minari_data_format": meta.get("data_format"),
        "minari_version": meta.get("minari_version"),
        "source": data_path,
        "minari_total_episodes": meta.get("total_episodes"),
        "minari_total_steps": meta.get("total_steps"),
        "infos": "kept: infos[1:] (the info each step returned) as JSON" if keep_infos
        else "not kept (absent, or not plain arrays of T+1 values)",
    }
    return write_dataset(ds, output, observation_space=obs_space, action_space=act_space, env_id=env_id,
                         env_spec=env_spec, extra_columns=extra, max_steps_per_row=max_steps_per_row,
                         provenance=provenance, overwrite=overwrite, inputs=[source_dir])


def _minari_buffer(ep: SingleAgentEpisode, index: int):
    from minari.data_collector.episode_buffer import EpisodeBuffer

    T = len(ep)
    flags = np.zeros(T, dtype=bool)
    term, trunc = flags.copy(), flags.copy()
    term[-1], trunc[-1] = ep.terminated, ep.truncated
    return EpisodeBuffer(
        id=index, observations=batch_map(np.asarray, ep.obs), actions=batch_map(np.asarray, ep.actions),
        rewards=list(ep.rewards),
        terminations=term.tolist(), truncations=trunc.tolist(), infos={},
    )


def iter_episodes(path: str | Path, info: DatasetInfo) -> Iterator[SingleAgentEpisode]:
    """Episodes of a dataset streamed one file at a time; consecutive chunks of an episode are joined."""
    pending: list[SingleAgentEpisode] = []
    for f in parquet_files(path):
        for row in table_to_episodes(pq.read_table(f), info.observation_space, info.action_space, info.extra_columns):
            if row.chunk_index == 0 and pending:
                yield SingleAgentEpisode.concat(pending)
                pending = []
            if row.chunk_index != len(pending) or (pending and row.id != pending[0].id):
                raise MinariError(f"{f}: chunk {row.chunk_index} of episode {row.id!r} does not follow chunk "
                                  f"{len(pending) - 1} of {pending[0].id if pending else None!r}")
            pending.append(row)
    if pending:
        yield SingleAgentEpisode.concat(pending)


def export_minari(
    path: str | Path,
    dataset_id: str,
    *,
    data_format: str = "hdf5",
    root: str | Path | None = None,
    description: str | None = None,
    overwrite: bool = False,
    progress: bool = False,
) -> Path:
    """Write the episode dataset at ``path`` as the Minari dataset ``dataset_id``; returns its directory.

    The dataset goes to ``ROOT/DATASET_ID`` (``ROOT`` defaults to minari's datasets root, i.e.
    ``$MINARI_DATASETS_PATH`` or ``~/.minari/datasets``), written in a temporary directory and renamed.
    """
    from minari import __version__ as minari_version
    from tqdm import tqdm
    from minari.dataset.minari_dataset import parse_dataset_id
    from minari.dataset.minari_storage import MinariStorage
    from minari.storage.datasets_root_dir import get_dataset_path

    if data_format not in DATA_FORMATS:
        raise MinariError(f"unknown Minari data format {data_format!r} (one of {', '.join(DATA_FORMATS)})")
    try:
        parse_dataset_id(dataset_id)
    except ValueError as exc:
        raise MinariError(str(exc)) from exc
    info = read_info(path)
    target = Path(root) / dataset_id if root is not None else Path(get_dataset_path(dataset_id))
    env_spec = None
    if info.env_spec:
        try:
            env_spec = gym.envs.registration.EnvSpec.from_json(json.dumps(info.env_spec))
        except Exception:  # a spec gymnasium cannot rebuild: the dataset still opens without it
            env_spec = None
    with atomic_directory(target, overwrite, kind="minari", inputs=[path]) as tmp:
        storage = MinariStorage.new(tmp / "data", observation_space=info.observation_space,
                                    action_space=info.action_space, env_spec=env_spec, data_format=data_format,
                                    jpeg_encoding=False)
        storage.update_metadata({
            "dataset_id": dataset_id,
            "minari_version": minari_version,
            "description": description or f"Exported by offlinerl from {Path(path).resolve()}",
            "algorithm_name": str(info.provenance.get("converter") or info.provenance.get("collector") or "offlinerl"),
        })
        episodes = tqdm(iter_episodes(path, info), total=info.num_episodes, unit="episode",
                        desc=f"export {dataset_id}", disable=not progress)
        storage.update_episodes(_minari_buffer(ep, i) for i, ep in enumerate(episodes))
    return target



def _add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("dataset", metavar="DATASET", help="Minari dataset id (e.g. D4RL/door/human-v2) or directory")
    p.add_argument("--no-infos", action="store_true", help="do not keep infos")
    p.add_argument("--max-steps-per-row", type=int, default=None, help="split longer episodes into chunks")


def _run(args: argparse.Namespace) -> int:
    from offlinerl.episodes.io import OutputExistsError

    start_ray(args.address)
    try:
        info = import_minari(
            args.dataset, args.output, keep_infos=not args.no_infos,
            max_steps_per_row=args.max_steps_per_row or DEFAULT_MAX_STEPS_PER_ROW, overwrite=args.overwrite,
        )
    except (FileNotFoundError, OutputExistsError, MinariError) as exc:
        print(f"offlinerl convert minari: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    print(f"Minari {info.provenance.get('minari_dataset_id')} ({info.provenance.get('minari_data_format')}) -> "
          f"{args.output}: {info.num_episodes} episodes, {info.num_steps} steps")
    return EXIT_OK


CONVERTER = Converter(
    name="minari",
    help="a local Minari dataset (hdf5, arrow or parquet storage), by id or path",
    description="Import a local Minari dataset into an episode dataset. DATASET is a dataset id "
    "(looked up under $MINARI_DATASETS_PATH, default ~/.minari/datasets) or the path of a dataset "
    "directory (the one holding data/metadata.json, or its data/ folder). Spaces and the env spec come from "
    "the dataset's metadata; infos are kept as a JSON column when every step has them.",
    add_arguments=_add_arguments,
    run=_run,
)
