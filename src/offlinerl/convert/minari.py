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

Bounds (docs/safety.md): minari's HDF5 reader reads each dataset of an episode
whole, and a file of a few KiB can declare a 12 GB dataset (chunks never
written read as the fill value). Before any episode is read, a first pass over
the file's metadata only (:func:`_hdf5_problem`) quarantines every episode
whose datasets declare more than ``DecodeLimits`` allow (``--max-value-bytes``),
whose groups nest deeper than :data:`MAX_GROUP_DEPTH`, or whose data lies
outside the file (links, external or virtual datasets); the rest convert.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter
from pathlib import Path
from typing import Any, Iterable, Iterator, TypeVar

import gymnasium as gym
import numpy as np
import pyarrow.parquet as pq

from offlinerl.convert.interface import EXIT_OK, EXIT_QUARANTINED, EXIT_USAGE, Converter
from offlinerl.convert.limits import TOO_LARGE, DecodeLimits, ValueTooLargeError, array_nbytes
from offlinerl.convert.options import add_allow_quarantine, add_max_value_bytes, start_ray
from offlinerl.convert.quarantine import QuarantineWriter
from offlinerl.episodes import schema as S
from offlinerl.episodes.arrow import batch_map
from offlinerl.episodes.episode import SingleAgentEpisode, episodes_to_table, table_to_episodes
from offlinerl.episodes.info import DatasetInfo, read_info
from offlinerl.episodes.atomic import atomic_directory, check_output, refuse_quarantine_over_existing
from offlinerl.progress import progress_bar
from offlinerl.episodes.io import DEFAULT_MAX_STEPS_PER_ROW, parquet_files, write_dataset
from offlinerl.config_io import plain_json
from offlinerl.episodes.spaces import SpaceError, space_to_json

__all__ = ["MinariError", "open_minari", "import_minari", "export_minari", "episode_from_minari", "iter_episodes",
           "DATA_FORMATS", "CONVERTER"]

DATA_FORMATS = ("hdf5", "arrow", "parquet")
T = TypeVar("T")
INFOS = "infos"
EPISODES_PER_TASK = 64
#: Groups may nest this deep below an episode's HDF5 group (Dict/Tuple observations, nested infos).
MAX_GROUP_DEPTH = 32
#: Groups and datasets one episode's HDF5 group may hold (minari writes a few dozen at most).
MAX_EPISODE_OBJECTS = 10_000
#: Bytes charged per item of a variable-length (object) dataset: the Python object h5py builds for it.
OBJECT_ITEM_BYTES = 128
#: ``metadata.json`` holds spaces and a description; anything bigger is not a Minari dataset's.
MAX_METADATA_BYTES = 16 * 2**20


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


def _check_metadata(data: Path) -> None:
    """Refuse a ``metadata.json`` over :data:`MAX_METADATA_BYTES`, or one counting more episodes than the
    storage holds (minari builds ``arange(total_episodes)`` when it opens a dataset)."""
    file = data / "metadata.json"
    size = file.stat().st_size
    if size > MAX_METADATA_BYTES:
        raise MinariError(f"{file}: {size:,} bytes, more than a Minari dataset's metadata ({MAX_METADATA_BYTES:,})")
    try:
        meta = plain_json(file.read_bytes())
    except (ValueError, UnicodeDecodeError) as exc:  # bad JSON, deep nesting, huge integers (NestingError)
        raise MinariError(f"{file}: not valid JSON ({exc})") from None
    total = meta.get("total_episodes", 0) if isinstance(meta, dict) else None
    if isinstance(total, bool) or not isinstance(total, int) or total < 0:
        raise MinariError(f"{file}: total_episodes must be a non-negative integer, got {total!r:.80}")
    if meta.get("data_format") == "hdf5" and (data / "main_data.hdf5").is_file():
        import h5py

        try:
            with h5py.File(data / "main_data.hdf5", "r") as h5:
                stored = len(h5)
        except OSError as exc:
            raise MinariError(f"{data / 'main_data.hdf5'}: not a readable HDF5 file ({exc})") from None
    else:
        stored = sum(1 for d in data.iterdir() if d.is_dir())
    if total > stored:
        raise MinariError(f"{file}: total_episodes is {total:,}, but the storage holds {stored:,} episodes")


def open_minari(dataset_id_or_path: str | os.PathLike):
    """Open a local Minari dataset with minari's own reader (``MinariDataset``), after checking its metadata."""
    from minari import MinariDataset

    data = _data_path(dataset_id_or_path)
    _check_metadata(data)
    try:
        return MinariDataset(data)
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


def _hdf5_problem(group: Any, limits: DecodeLimits) -> tuple[str, str] | None:
    """``(reason, message)`` when minari's reader would build more from the episode ``group`` than ``limits``
    allow, or follow it outside the file; None when it may be read. Reads metadata only.

    Every path to a dataset (minari reads each whole, once per path) is charged its declared shape ×
    itemsize: per value, and for the episode together against the bytes the episode stores
    (``DecodeBudget``); groups may nest :data:`MAX_GROUP_DEPTH` deep and hold :data:`MAX_EPISODE_OBJECTS`.
    """
    import h5py

    datasets, stored, seen = [], 0, 0
    stack = [(group, 0)]
    while stack:  # iterative: a deep or cyclic nesting costs no recursion
        node, depth = stack.pop()
        for name in node:
            seen += 1
            path = f"{node.name}/{name}"
            if seen > MAX_EPISODE_OBJECTS:
                return TOO_LARGE, f"{group.name} holds more than {MAX_EPISODE_OBJECTS:,} groups and datasets"
            link = node.get(name, getlink=True)
            if not isinstance(link, h5py.HardLink):
                return "outside_file", f"{path} is a {type(link).__name__}; an episode's data must be in its group"
            child = node[name]
            if isinstance(child, h5py.Group):
                if depth + 1 > MAX_GROUP_DEPTH:
                    return "too_deep", f"{path}: groups nest more than {MAX_GROUP_DEPTH} levels deep"
                stack.append((child, depth + 1))
            elif isinstance(child, h5py.Dataset):
                if child.is_virtual or child.external:
                    return "outside_file", f"dataset {path} keeps its data in other files (virtual or external)"
                stored += child.id.get_storage_size()
                datasets.append((path, child.shape or (), child.dtype))
    budget = limits.budget(stored)
    try:
        for path, shape, dtype in datasets:
            nbytes = array_nbytes(shape, dtype) * (OBJECT_ITEM_BYTES // dtype.itemsize if dtype.kind == "O" else 1)
            budget.charge(nbytes, f"dataset {path} of shape {shape} and dtype {dtype.str}")
    except ValueTooLargeError as exc:
        return TOO_LARGE, str(exc)
    return None


def _scan_hdf5(items: Any, *, file: str, limits: DecodeLimits) -> dict[str, np.ndarray]:
    """``map_batches`` function: the quarantine records (JSON) of the episodes in ``items`` (JSON lists of
    indices) that :func:`_hdf5_problem` refuses."""
    import h5py

    records = []
    with h5py.File(file, "r") as h5:
        for chunk in items["episodes"]:
            for index in json.loads(chunk):
                name = f"episode_{index}"
                if name not in h5:
                    problem: tuple[str, str] | None = ("missing", f"no group /{name}")
                elif not isinstance(h5.get(name, getlink=True), h5py.HardLink):
                    problem = ("outside_file", f"/{name} is a link; an episode's data must be in its group")
                else:
                    problem = _hdf5_problem(h5[name], limits)
                if problem is not None:
                    records.append(json.dumps({"file": file, "group": f"/{name}", "level": "episode",
                                               "reason": problem[0], "message": problem[1], "episode": index}))
    return {"record": np.array(records, dtype=object)}


def _read_episodes(items: Any, *, data_path: str, observation_space: gym.Space, action_space: gym.Space,
                   keep_infos: bool, extra_columns: dict, max_steps: int):
    """``map_batches`` function: read minari episodes (``items["episodes"]``: JSON lists of indices) as
    episode rows (lengths checked against minari's per-episode metadata)."""
    dataset = open_minari(data_path)
    storage = dataset.storage
    rows = []
    for chunk in items["episodes"]:
        indices = json.loads(chunk)
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


def _env_spec(text: Any) -> dict[str, Any] | None:
    """The env spec Minari stores as JSON text (id, kwargs, time limit), or None if absent or not a JSON object."""
    if not isinstance(text, str):
        return None
    try:
        spec = plain_json(text)
    except ValueError:  # bad JSON, deep nesting, huge integers: the dataset just has no usable spec
        return None
    return spec if isinstance(spec, dict) else None


def _chunks(indices: list[int]) -> list[dict[str, str]]:
    """Task items of at most ``EPISODES_PER_TASK`` episode indices each (as JSON text: one column, any length)."""
    step = EPISODES_PER_TASK
    return [{"episodes": json.dumps(indices[s:s + step])} for s in range(0, len(indices), step)]


def import_minari(
    dataset_id_or_path: str | os.PathLike,
    output: str | Path,
    *,
    keep_infos: bool = True,
    max_steps_per_row: int = DEFAULT_MAX_STEPS_PER_ROW,
    overwrite: bool = False,
    limits: DecodeLimits | None = None,
    allow_quarantine: bool = False,
) -> DatasetInfo:
    """Convert a local Minari dataset into an episode dataset at ``output`` (episodes read in Ray tasks).

    HDF5 episodes over ``limits`` (default ``DecodeLimits()``) or otherwise unsafe to read are quarantined
    in ``output/_quarantine/records.jsonl`` and counted in ``provenance["quarantine"]``; they replace an
    existing ``output`` only with ``allow_quarantine`` (else ``QuarantineKeptError``).
    """
    import ray.data

    limits = limits or DecodeLimits()
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
    indices = [int(i) for i in dataset.episode_indices]
    if not indices:
        raise MinariError(f"{dataset_id_or_path}: the Minari dataset has no episodes")
    quarantine: list[dict] = []
    if dataset.storage.FORMAT == "hdf5":  # metadata only, before any episode is read
        scan = ray.data.from_items(_chunks(indices)).map_batches(
            _scan_hdf5, batch_size=1, batch_format="numpy",
            fn_kwargs=dict(file=str(Path(data_path) / "main_data.hdf5"), limits=limits))
        quarantine = sorted((json.loads(r["record"]) for r in scan.take_all()), key=lambda r: r["episode"])
    bad = {r["episode"] for r in quarantine}
    indices = [i for i in indices if i not in bad]
    if not indices:
        raise MinariError(f"{quarantine[0]['file']}: no episode can be read; episode {quarantine[0]['episode']}: "
                          f"{quarantine[0]['message']}")
    first = next(dataset.iterate_episodes(indices[:1]))
    keep_infos = keep_infos and _simple_infos(first.infos, len(first.rewards) + 1)
    extra = {INFOS: {"dtype": S.JSON_DTYPE, "shape": []}} if keep_infos else {}
    meta = dataset.storage.metadata
    env_spec = _env_spec(meta.get("env_spec"))
    env_id = env_spec.get("id") if env_spec else None
    ds = ray.data.from_items(_chunks(indices)).map_batches(
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
    with atomic_directory(output, overwrite, kind="dataset", inputs=[source_dir]) as tmp:
        refuse_quarantine_over_existing(output, len(quarantine), allow_quarantine)
        staging = tmp / "_staging"
        info = write_dataset(ds, staging, observation_space=obs_space, action_space=act_space, env_id=env_id,
                             env_spec=env_spec, extra_columns=extra, max_steps_per_row=max_steps_per_row,
                             provenance=provenance)
        for f in staging.iterdir():
            os.rename(f, tmp / f.name)
        staging.rmdir()
        with QuarantineWriter(tmp) as out:
            for record in quarantine:
                out.write(record)
        reasons = Counter(r["reason"] for r in quarantine)
        info.provenance["quarantine"] = {"episodes": len(quarantine), "file": out.relative_path,
                                         "reasons": dict(sorted(reasons.items()))}
        info.write(tmp)
    return info


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


def check_single_agent(path: str | Path, info: DatasetInfo) -> None:
    """``MinariError`` when the dataset's rows are several agents' (an ``agent_id`` per row, or agents of different
    spaces): a Minari dataset holds one agent's episodes, so an export would lose which agent acted in a row and
    which rows make one team episode, and pad every agent into one space."""
    agents: set[str] = set(info.agent_spaces or ())
    for f in parquet_files(path) if not agents else ():
        if S.AGENT_ID in pq.read_schema(f).names:
            agents |= {a for a in pq.read_table(f, columns=[S.AGENT_ID]).column(0).to_pylist() if a is not None}
    if agents:
        named = ", ".join(sorted(agents)[:3]) + (", ..." if len(agents) > 3 else "")
        raise MinariError(f"{path}: a multi-agent dataset (rows of {len(agents)} agents: {named}); a Minari dataset "
                          "holds one agent's episodes, so the export would lose which agent acted and which rows "
                          "make one team episode: not exported")


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
    check_single_agent(path, info)
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
        with progress_bar(total=info.num_episodes, unit="episode", desc=f"export {dataset_id}",
                          enabled=progress) as bar:
            storage.update_episodes(_minari_buffer(ep, i) for i, ep in enumerate(_counted(iter_episodes(path, info),
                                                                                        bar)))
    return target



def _counted(items: Iterable[T], bar: Any) -> Iterator[T]:
    """``items``, one ``bar.update`` each."""
    for item in items:
        yield item
        bar.update(1)


def _add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("dataset", metavar="DATASET", help="Minari dataset id (e.g. D4RL/door/human-v2) or directory")
    p.add_argument("--no-infos", action="store_true", help="do not keep infos")
    p.add_argument("--max-steps-per-row", type=int, default=None, help="split longer episodes into chunks")
    add_max_value_bytes(p)
    add_allow_quarantine(p)


def _run(args: argparse.Namespace) -> int:
    from offlinerl.episodes.io import OutputExistsError

    start_ray(args.address)
    try:
        info = import_minari(
            args.dataset, args.output, keep_infos=not args.no_infos,
            max_steps_per_row=args.max_steps_per_row or DEFAULT_MAX_STEPS_PER_ROW, overwrite=args.overwrite,
            limits=DecodeLimits(max_value_bytes=args.max_value_bytes), allow_quarantine=args.allow_quarantine,
        )
    except (FileNotFoundError, OutputExistsError, MinariError) as exc:
        print(f"offlinerl convert minari: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    print(f"Minari {info.provenance.get('minari_dataset_id')} ({info.provenance.get('minari_data_format')}) -> "
          f"{args.output}: {info.num_episodes} episodes, {info.num_steps} steps")
    quarantined = info.provenance["quarantine"]
    if not info.num_episodes:
        print(f"offlinerl convert minari: error: no episodes were converted ({quarantined['episodes']} "
              f"quarantined): {args.output} holds no data (offlinerl validate fails it)", file=sys.stderr)
        return EXIT_USAGE
    if not quarantined["episodes"]:
        return EXIT_OK
    where = Path(args.output) / quarantined["file"]
    for record in (json.loads(line) for line in where.read_text().splitlines()[:5]):
        print(f"offlinerl convert minari: quarantined {record['file']} episode {record['episode']} "
              f"({record['reason']}): {record['message']}", file=sys.stderr)
    allowed = " (allowed)" if args.allow_quarantine else ""
    hint = "" if allowed else "; the dataset was written. Pass --allow-quarantine to accept this (exit 0)."
    print(f"{quarantined['episodes']} episode(s) quarantined{allowed}, see {where}{hint}", file=sys.stderr)
    return EXIT_OK if allowed else EXIT_QUARANTINED


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
