"""What ``convert samplebatch`` records in ``dataset.json``: the counts, the provenance, and the content
fingerprint and lineage entry that every writer records (docs/data.md, "Fingerprints and lineage").

The converter writes its parquet files itself (one Ray task per staged file, ``stages.encode_stage_files``)
rather than through ``episodes.io.write_dataset``, so it records what that writer records the same way: the
encode tasks hash the tables as they write them (``fingerprint.table_digests``, as ``write_dataset`` hashes
the episodes it writes), the driver adds the parts up with ``fingerprint.combine``, and the lineage is one
``fingerprint.lineage_entry`` naming the converter, as a converter's dataset starts. Nothing is read back.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import gymnasium as gym

from offlinerl.convert.report import ConversionReport
from offlinerl.episodes.fingerprint import combine, lineage_entry
from offlinerl.episodes.info import DatasetInfo
from offlinerl.episodes.spaces import space_to_json

if TYPE_CHECKING:
    from offlinerl.convert.samplebatch.convert import SampleBatchConvertConfig

__all__ = ["CONVERTER", "SOURCE_FORMAT", "dataset_info"]

#: The converter: ``provenance["converter"]`` and the operation its lineage entry names.
CONVERTER = "offlinerl convert samplebatch"
SOURCE_FORMAT = "RLlib JsonWriter SampleBatch/MultiAgentBatch JSON lines"
_UNSQUASH_FORMULA = "clip(low + (a + 1) * (high - low) / 2, low, high)"


def dataset_info(config: SampleBatchConvertConfig, files: Sequence[Path], report: ConversionReport,
                 written: Sequence[Mapping[str, Any]], *, observation_space: gym.Space, action_space: gym.Space,
                 env_spec: Mapping[str, Any] | None, extra_columns: Mapping[str, Mapping[str, Any]]) -> DatasetInfo:
    """``dataset.json`` of a conversion of ``files`` with ``config``; ``written``: the encode tasks' rows
    (``rows``, ``digest``, ``modules`` of each file written)."""
    extras = {name: dict(spec) for name, spec in extra_columns.items()}
    fingerprint = combine([(int(w["digest"], 16), int(w["rows"])) for w in written],
                          observation_space=space_to_json(observation_space),
                          action_space=space_to_json(action_space), extra_columns=extras)
    entry = lineage_entry(CONVERTER, parameters=_parameters(config),
                          parent_paths=[os.path.abspath(i) for i in config.inputs])
    entry["fingerprint"] = fingerprint
    return DatasetInfo(
        observation_space=observation_space, action_space=action_space, env_id=config.env_id,
        env_spec=dict(env_spec) if env_spec else None, num_episodes=report.episodes, num_steps=report.steps,
        num_rows=report.rows, module_ids=sorted({m for w in written for m in w["modules"]}),
        extra_columns=extras, max_steps_per_row=config.max_steps_per_row,
        provenance=_provenance(config, files, report), fingerprint=fingerprint, lineage=[entry],
    )


def _parameters(config: SampleBatchConvertConfig) -> dict[str, Any]:
    """The options that decide the rows (the lineage names them; the full record is the provenance)."""
    return {"env": config.env_id, "unsquash_actions": config.unsquash_actions,
            "max_steps_per_row": config.max_steps_per_row, "obs_check": config.check_obs}


def _provenance(config: SampleBatchConvertConfig, files: Sequence[Path], report: ConversionReport) -> dict[str, Any]:
    return {
        "converter": CONVERTER,
        "source_format": SOURCE_FORMAT,
        "sources": [str(f) for f in files],
        "observation_space": report.observation_space_from,
        "action_space": report.action_space_from,
        "actions": f"unsquashed: {_UNSQUASH_FORMULA}" if config.unsquash_actions else "as recorded",
        "report": report.to_json(),
    }
