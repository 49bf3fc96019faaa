"""The second pass of every data operation: rewrite the rows as a streaming Ray Data job, atomically.

Each row group of each input is one task: it reads its rows with pyarrow, hands them to the operation's
:class:`RowTransform` (keep some rows, change rewards, add a column), casts the result to the output's episode
schema and passes it on to ``write_parquet``; no task and not the driver holds more than one row group.
:func:`write_output` writes through :func:`offlinerl.episodes.io.write_dataset` (temporary directory, rename,
the ``--overwrite`` rules), so ``dataset.json`` gets the counts, the new fingerprint and the lineage: the
parents' entries, then this operation with its parameters and the parents' fingerprints.
"""

from __future__ import annotations

import functools
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Mapping, Protocol, Sequence

import numpy as np
import pyarrow as pa

from offlinerl.data_ops.errors import DataOpError
from offlinerl.data_ops.expr import ExpressionError
from offlinerl.data_ops.summary import Summary
from offlinerl.episodes.atomic import check_output
from offlinerl.episodes.fingerprint import extend_lineage, lineage_entry
from offlinerl.episodes.info import DatasetInfo
from offlinerl.episodes.io import DEFAULT_MAX_STEPS_PER_ROW, parquet_files, write_dataset
from offlinerl.episodes.scan import ScanUnit, iter_unit_batches, plan_units
from offlinerl.episodes.schema import episode_schema

__all__ = ["OpResult", "RowTransform", "KeepRows", "check_out", "write_output"]


class RowTransform(Protocol):
    """What an operation does to the rows of one record batch of ``file`` (``first_row``: index of its first
    row within the file). Must be picklable: it runs in Ray tasks."""

    def __call__(self, table: pa.Table, file: str, first_row: int) -> pa.Table: ...


@dataclass(frozen=True)
class KeepRows:
    """Keep the rows of the episodes ``ids`` (all if None), except the rows ``drop`` names (file -> row indices)."""

    ids: frozenset[str] | None = None
    drop: Mapping[str, frozenset[int]] = field(default_factory=dict)

    def __call__(self, table: pa.Table, file: str, first_row: int) -> pa.Table:
        keep = np.ones(table.num_rows, dtype=bool)
        if self.ids is not None:
            keep &= np.fromiter((i in self.ids for i in table.column("episode_id").to_pylist()), bool, table.num_rows)
        dropped = self.drop.get(file)
        if dropped:
            keep &= np.fromiter((first_row + i not in dropped for i in range(table.num_rows)), bool, table.num_rows)
        return table if keep.all() else table.filter(pa.array(keep))


@dataclass(frozen=True)
class OpResult:
    """What an operation wrote."""

    path: Path
    """The output dataset."""
    info: DatasetInfo
    """Its ``dataset.json`` (counts, fingerprint, lineage)."""
    report: dict[str, Any] = field(default_factory=dict)
    """What the operation did, in numbers (also its lineage entry's ``report``)."""


def check_out(out: str | Path, overwrite: bool, inputs: Sequence[str | Path]) -> Path:
    """Refuse an output the writer would refuse, before any work (``offlinerl.episodes.atomic.check_output``)."""
    return check_output(out, overwrite, kind="dataset", inputs=inputs)


def _rewrite_unit(batch: dict[str, np.ndarray], *, transforms: Sequence[RowTransform],
                  schema: pa.Schema) -> pa.Table:
    tables = []
    for text in batch["item"]:
        item = json.loads(str(text))
        unit = ScanUnit(**item["unit"])
        transform = transforms[item["source"]]
        for first_row, rb in iter_unit_batches(unit):
            table = transform(pa.Table.from_batches([rb]), unit.file, first_row)
            if table.num_rows:
                tables.append(table.select(schema.names).cast(schema))
    return pa.concat_tables(tables) if tables else schema.empty_table()


def _op_error(exc: BaseException) -> DataOpError | None:
    """The :class:`DataOpError` a Ray task raised, from the chain of errors Ray wrapped it in, or from their text
    (Ray Data keeps only the text of a task's error under its ``UserCodeException``)."""
    markers = [f"{cls.__module__}.{cls.__name__}: " for cls in (DataOpError, ExpressionError)]
    seen = 0
    while exc is not None and seen < 16:
        if isinstance(exc, DataOpError):
            return exc
        for line in str(exc).splitlines():
            for marker in markers:
                if line.strip().startswith(marker):
                    return DataOpError(line.strip()[len(marker):])
        exc = getattr(exc, "cause", None) or exc.__cause__ or exc.__context__
        seen += 1
    return None


def write_output(
    sources: Sequence[tuple[Summary, RowTransform]],
    out: str | Path,
    *,
    operation: str,
    parameters: Mapping[str, Any],
    report: Mapping[str, Any] | None = None,
    extra_columns: Mapping[str, Mapping[str, Any]] | None = None,
    overwrite: bool = False,
) -> OpResult:
    """Rewrite the rows of every ``(summary, transform)`` input into the dataset ``out``; the first input gives
    the spaces, env and (unless ``extra_columns``) the extra columns."""
    import ray.data

    from offlinerl.ray_utils import init_ray

    first = sources[0][0].info
    extras = dict(first.extra_columns if extra_columns is None else extra_columns)
    schema = episode_schema(first.observation_space, first.action_space, extras)
    items = []
    for index, (summary, _) in enumerate(sources):
        units, _ = plan_units(parquet_files(summary.path))
        items += [{"item": json.dumps({"unit": asdict(u), "source": index})} for u in units]
    init_ray()
    ds = ray.data.from_items(items, override_num_blocks=max(1, min(len(items), 4096)))
    ds = ds.map_batches(functools.partial(_rewrite_unit, transforms=[t for _, t in sources], schema=schema),
                        batch_size=1, batch_format="numpy")
    paths = [s.path for s, _ in sources]
    entry = lineage_entry(operation, parameters=parameters, parents=[s.fingerprint for s, _ in sources],
                          parent_paths=[str(p.resolve()) for p in paths])
    if report:
        entry["report"] = dict(report)
    lineage = extend_lineage([s.info.lineage for s, _ in sources], entry)
    try:
        info = write_dataset(
            ds, out, observation_space=first.observation_space, action_space=first.action_space,
            env_id=first.env_id, env_spec=first.env_spec, extra_columns=extras,
            max_steps_per_row=first.max_steps_per_row or DEFAULT_MAX_STEPS_PER_ROW,
            provenance={"operation": f"offlinerl data {operation}", "sources": [str(p) for p in paths]},
            lineage=lineage, overwrite=overwrite, inputs=paths, agent_spaces=first.agent_spaces,
        )
    except Exception as exc:  # a task's DataOpError arrives wrapped in Ray's errors: raise it as it was
        if (cause := _op_error(exc)) is None:
            raise
        raise DataOpError(str(cause.args[0]) if cause.args else str(cause)) from None
    return OpResult(path=Path(out).resolve(), info=info, report=dict(report or {}))
