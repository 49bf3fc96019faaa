"""The Ray Data user functions called directly (no Ray): a bad line or a broken episode
becomes quarantine rows, never an exception that would stop the whole conversion."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.compute as pc

from offlinerl.convert.samplebatch.files import plan_ranges
from offlinerl.convert.samplebatch.stages import read_ranges, stitch_group
from tests.convert.samplebatch_recordings import batch, sample_batch_line, write_lines


def stage_rows(path) -> pa.Table:
    ranges = pa.Table.from_pylist([r.__dict__ for r in plan_ranges([path])])
    return pa.concat_tables(list(read_ranges(ranges)))


def test_read_ranges_emits_fragments_quarantine_and_stats(tmp_path):
    path = write_lines(tmp_path / "output-x_worker-0_0.json", [
        sample_batch_line(batch(1, 0, 2)), "", "{broken", sample_batch_line(batch(1, 2, 2, end="terminated", total=4))])
    rows = stage_rows(path)
    assert rows.column("kind").to_pylist() == ["fragment", "quarantine", "fragment", "stats"]
    assert json.loads(rows.column("meta")[3].as_py())["lines"] == 3  # the blank line is not counted
    frags = rows.filter(pc.equal(rows.column("kind"), "fragment"))
    out = stitch_group(frags)
    assert out.column("kind").to_pylist() == ["episode"]
    meta = json.loads(out.column("meta")[0].as_py())
    assert (meta["steps"], meta["terminated"], meta["fragments"]) == (4, True, 2)


def test_fragments_that_cannot_be_joined_are_quarantined_not_raised(tmp_path):
    wide = batch(1, 2, 2, end="terminated", dim=3, total=4)  # different observation shape
    path = write_lines(tmp_path / "output-x_worker-0_0.json", [sample_batch_line(batch(1, 0, 2)), sample_batch_line(wide)])
    rows = stage_rows(path)
    out = stitch_group(rows.filter(pc.equal(rows.column("kind"), "fragment")), check_obs=False)
    metas = [json.loads(m) for m in out.column("meta").to_pylist()]
    assert out.column("kind").to_pylist() == ["quarantine", "quarantine"]
    assert {m["reason"] for m in metas} == {"unstitchable"} and sum(m["steps"] for m in metas) == 4
