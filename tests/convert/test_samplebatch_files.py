"""Input resolution, writer file order and byte-range reading (no Ray)."""

from __future__ import annotations

import pytest

from offlinerl.convert.samplebatch.files import (
    InputError,
    iter_range_lines,
    line_numbers,
    plan_ranges,
    resolve_inputs,
)
from tests.convert.samplebatch_recordings import write_lines


def test_files_sort_by_worker_and_index_as_numbers(tmp_path):
    names = ["output-2026-01-01_00-00-00_worker-0_10.json", "output-2026-01-01_00-00-00_worker-0_2.json",
             "output-2026-01-01_00-00-09_worker-1_0.json.gz", "output-2026-01-01_00-00-05_worker-0_0.json"]
    for n in names:
        write_lines(tmp_path / n, ["{}"])
    (tmp_path / "expected.json").write_text("{}")
    order = [p.name for p in resolve_inputs([str(tmp_path)])]
    assert order == [names[3], names[1], names[0], names[2]]
    assert [p.name for p in resolve_inputs([str(tmp_path / "output-*worker-0_*.json")])] == [names[3], names[1], names[0]]
    with pytest.raises(InputError):
        resolve_inputs([str(tmp_path / "nothing-*.json")])


def test_byte_ranges_read_every_line_exactly_once(tmp_path):
    lines = [f'{{"i": {i}, "pad": "{"x" * (i * 7 % 23)}"}}' for i in range(200)]
    path = write_lines(tmp_path / "output-x_worker-0_0.json", lines)
    for range_bytes in (1, 17, 64, 1000, 10**9):
        ranges = plan_ranges([path], range_bytes)
        got = [(off, raw.decode().rstrip("\n")) for r in ranges for off, raw in iter_range_lines(r)]
        assert [g[1] for g in got] == lines
    offsets = [off for off, _ in got]
    numbers = line_numbers(str(path), [offsets[0], offsets[41], offsets[199]])
    assert numbers == {offsets[0]: 1, offsets[41]: 42, offsets[199]: 200}


def test_gz_files_are_one_range_with_decompressed_offsets(tmp_path):
    path = write_lines(tmp_path / "output-x_worker-0_0.json.gz", ["a", "bb", "ccc"])
    r, = plan_ranges([path], 1)
    got = list(iter_range_lines(r))
    assert [(o, x) for o, x in got] == [(0, b"a\n"), (2, b"bb\n"), (5, b"ccc\n")]
    assert line_numbers(str(path), [5]) == {5: 3}
