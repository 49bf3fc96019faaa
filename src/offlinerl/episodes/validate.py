"""``validate``: check an episode dataset against format version 1 before anyone spends compute on it.

The row checks run as a Ray Data job, one task per parquet row group
(:mod:`offlinerl.episodes.scan`, :mod:`offlinerl.episodes.checks`); the driver
holds only one small bookkeeping tuple per row, so datasets larger than memory
validate. The checks, in report order:

============  =======  ==================================================================
name          level    what it checks
============  =======  ==================================================================
dataset_json  error    ``dataset.json`` exists, parses, known ``format_version``, valid spaces
files         error    every ``*.parquet`` file can be read (a corrupt file is named), and none would decode to far
                       more than it holds (``parquet_size.FileBudget``: a bomb is named and not read)
schema        error    each file's columns and Arrow types match the spaces and extra columns
lengths       error    per row: ``len(obs) == T+1``, per-step columns have T, T >= 1, no nulls
flags         error    ``terminated`` and ``truncated`` are not both true
finite        error    rewards finite; observations not NaN, inf only where the bound is inf
actions       error    every action inside the action space
observations  warning  observations inside the observation space (real sensors overshoot)
episode_ids   error    ``(episode_id, agent_id, chunk_index)`` unique; each row's ``module_id`` a valid module id:
                       non-empty, no ``.``
chunks        error    chunk_index 0..k without gaps, t_start continuous, only the last chunk ends
counts        error    ``num_episodes``/``num_steps``/``num_rows`` (and ``module_ids`` where recorded) of dataset.json equal the data
============  =======  ==================================================================

Exit codes (:attr:`ValidationReport.exit_code`): 0 valid (warnings allowed),
1 invalid (a check failed), 2 not readable (the path is not a directory, or a
parquet file cannot be read at all, or would decode to far more than it holds:
that file is named in the ``files`` check and the other files are still
checked). :func:`require_valid` is the training preflight: it raises
:class:`InvalidDatasetError` (the report) unless the exit code is 0.
"""

from __future__ import annotations

import functools
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from offlinerl.episodes import schema as S
from offlinerl.episodes import validated
from offlinerl.episodes.checks import ROW_CHECKS, check_unit
from offlinerl.episodes.info import INFO_FILE as S_INFO
from offlinerl.episodes.info import DatasetInfo, DatasetInfoError, read_info
from offlinerl.episodes.io import parquet_files
from offlinerl.episodes.parquet_size import ParquetTooLargeError, check_parquet_size
from offlinerl.episodes.report import CheckResult, Example, ValidationReport, example_order
from offlinerl.episodes.scan import READ_ERRORS, plan_units, run_units, small_files

__all__ = ["CHECKS", "Example", "CheckResult", "InvalidDatasetError", "SchemaMismatchError", "ValidationReport",
           "require_schema", "require_valid", "validate_dataset"]

#: ``(name, severity, description)`` of every check, in report order.
CHECKS = (
    ("dataset_json", "error", "dataset.json exists, parses, has a known format version and valid spaces"),
    ("files", "error", "every parquet file is readable and none would decode to far more than it holds"),
    ("schema", "error", "parquet schema matches the spaces (types, sizes, required columns, extras are lists)"),
    ("lengths", "error", "per row: len(obs) = T+1, per-step columns have T entries, T >= 1, no nulls"),
    ("flags", "error", "terminated and truncated not both true"),
    ("finite", "error", "no NaN/inf rewards, no NaN observations, inf only where the bound is infinite"),
    ("actions", "error", "actions inside the action space"),
    ("observations", "warning", "observations inside the observation space"),
    ("episode_ids", "error", "episode ids unique (per agent and chunk); module_id values non-empty, without '.'"),
    ("chunks", "error", "chunks contiguous: chunk_index 0..k, t_start continuous, only the last chunk ends"),
    ("counts", "error", "at least one episode; episode, step and row counts and module ids in dataset.json "
                        "equal the data"),
)


def _same_type(actual: pa.DataType, expected: pa.DataType) -> bool:
    """Structural type equality: list field names and nullability do not matter; list may be large_list."""
    t = pa.types
    if t.is_list(expected) or t.is_large_list(expected):
        return (t.is_list(actual) or t.is_large_list(actual)) and _same_type(actual.value_type, expected.value_type)
    if t.is_fixed_size_list(expected):
        return (t.is_fixed_size_list(actual) and actual.list_size == expected.list_size
                and _same_type(actual.value_type, expected.value_type))
    if t.is_struct(expected):
        names = [expected.field(i).name for i in range(expected.num_fields)]
        have = [actual.field(i).name for i in range(actual.num_fields)] if t.is_struct(actual) else None
        return have is not None and sorted(have) == sorted(names) and all(
            _same_type(actual.field(n).type, expected.field(n).type) for n in names)
    if t.is_string(expected):
        return t.is_string(actual) or t.is_large_string(actual)
    return actual == expected


def type_str(tp: pa.DataType) -> str:
    """An Arrow type without list field names: ``list<fixed_size_list<float>[4]>``."""
    t = pa.types
    if t.is_list(tp) or t.is_large_list(tp):
        return f"{'large_' if t.is_large_list(tp) else ''}list<{type_str(tp.value_type)}>"
    if t.is_fixed_size_list(tp):
        return f"fixed_size_list<{type_str(tp.value_type)}>[{tp.list_size}]"
    if t.is_struct(tp):
        return "struct<" + ", ".join(f"{f.name}: {type_str(f.type)}" for f in tp) + ">"
    return str(tp)


def _is_list(tp: pa.DataType) -> bool:
    return pa.types.is_list(tp) or pa.types.is_large_list(tp)


def _check_schema(actual: pa.Schema, expected: pa.Schema) -> tuple[list[str], set, set]:
    """Problems of one file's schema, and its (correctly typed, list-typed) columns."""
    problems, typed, listed = [], set(), set()
    for f in expected:
        if f.name not in actual.names:
            kind = "required column" if f.name in S.REQUIRED_COLUMNS else "extra column declared in dataset.json"
            problems.append(f"{kind} {f.name!r} is missing")
            continue
        got = actual.field(f.name).type
        if _same_type(got, f.type):
            typed.add(f.name)
        else:
            problems.append(f"column {f.name!r}: expected {type_str(f.type)}, got {type_str(got)}")
        if _is_list(got) and _is_list(f.type):
            listed.add(f.name)
    for f in actual:
        if f.name in expected.names:
            continue
        if _is_list(f.type):
            listed.add(f.name)
        else:
            problems.append(f"extra column {f.name!r} is not a per-step list (type {type_str(f.type)})")
    return problems, typed, listed


def validate_dataset(path: str | Path, max_examples: int = 5, *, local: bool = False) -> ValidationReport:
    """Run every check on the dataset directory ``path`` (Ray is started if needed; ``local``: the row groups are
    checked one after another in this process, without Ray: ``scan.run_units``)."""
    report = ValidationReport(str(path), [CheckResult(n, sev, d) for n, sev, d in CHECKS])
    limit = max(0, int(max_examples))
    info_check = report.check("dataset_json")
    if not Path(path).is_dir():
        report.readable = False
        info_check.fail(1, [Example(str(path), None, None, "not a directory" if Path(path).exists()
                                    else "does not exist")], limit)
        return _skip_rest(report, "the path is not a dataset directory")
    try:
        info = read_info(path)
        expected = S.episode_schema(info.observation_space, info.action_space, info.extra_columns)
    except (DatasetInfoError, TypeError, ValueError, KeyError) as exc:
        info_check.fail(1, [Example(S_INFO, None, None, str(exc).replace(str(Path(path)) + "/", ""))], limit)
        return _skip_rest(report, "needs a valid dataset.json")

    before = validated.current(path)  # what a valid report is recorded under, if nothing changes meanwhile
    files = parquet_files(path)
    report.num_files = len(files)
    files_check, schema_check = report.check("files"), report.check("schema")
    files_check.unit = schema_check.unit = "files"
    if not files:
        files_check.fail(1, [Example(None, None, None, "no *.parquet files in the dataset directory")], limit)
    too_large: dict[str, str] = {}
    units, unreadable = plan_units(files, too_large=too_large)
    columns: dict[str, tuple[list, list]] = {}
    schema_examples = []
    for f in files:
        if str(f) in unreadable or str(f) in too_large:
            continue
        try:
            problems, typed, listed = _check_schema(pq.read_schema(f), expected)
        except READ_ERRORS as exc:
            unreadable[str(f)] = f"{type(exc).__name__}: {exc}"
            continue
        columns[str(f)] = (sorted(typed), sorted(listed))
        if problems:
            schema_examples.append(Example(f.name, None, None, "; ".join(problems), problems[0]))
    schema_check.fail(len(schema_examples), schema_examples, limit)
    units = [u for u in units if u.file in columns]

    fn = functools.partial(check_unit, obs_space=info.observation_space, act_space=info.action_space,
                           columns=columns, max_examples=limit, agent_spaces=info.agent_spaces)
    rows: list[tuple] = []
    per_check = {c: (0, []) for c in ROW_CHECKS}
    nodes: set[str] = set()
    for payload in run_units(units, fn, desc="validating", local=local):
        nodes.add(payload["node"])
        name = Path(payload["unit"]["file"]).name
        if "read_error" in payload:
            unreadable[payload["unit"]["file"]] = payload["read_error"]
            continue
        r = payload["rows"]
        rows.extend(zip([name] * len(r["row"]), r["row"], r[S.EPISODE_ID], r[S.AGENT_ID], r[S.CHUNK_INDEX],
                        r[S.T_START], r["steps"], r[S.TERMINATED], r[S.TRUNCATED], r[S.MODULE_ID]))
        for c in ROW_CHECKS:
            count, examples = per_check[c]
            new = [Example(name, row, eid, detail, value) for row, eid, detail, value in payload["examples"][c]]
            per_check[c] = (count + payload["bad"][c], sorted(examples + new, key=example_order)[:limit])
    for c, (count, examples) in per_check.items():
        report.check(c).fail(count, examples, limit)
    if unreadable or too_large:
        report.readable = False
        files_check.fail(len(unreadable) + len(too_large),
                         [Example(Path(f).name, None, None, f"cannot be read as parquet: {e}")
                          for f, e in unreadable.items()]
                         + [Example(Path(f).name, None, None, e) for f, e in too_large.items()], limit)
    report.num_rows = len(rows)
    report.ray_nodes = sorted(n for n in nodes if n)
    _check_episodes(report, rows, limit)
    if unreadable or too_large:  # rows of the unread files are unknown: gaps and counts cannot be judged
        _skip(report.check("chunks"), "not every file is readable")
        _skip(report.check("counts"), "not every file is readable")
    else:
        _check_counts(report.check("counts"), info, rows, limit)
    if report.ok:
        validated.record(path, report.to_json(), before)
    return report


class InvalidDatasetError(ValueError):
    """A dataset failed validation; the message is the validator's report (file, row and problem)."""

    def __init__(self, report: ValidationReport) -> None:
        super().__init__(f"{report.path} failed validation; the validator's report:\n{report.format()}")
        self.report = report


def require_valid(path: str | Path, max_examples: int = 5, *, local: bool | None = None) -> ValidationReport:
    """The preflight of a training job: validate ``path``; raise :class:`InvalidDatasetError` unless valid.

    Warnings (observations outside their space) pass; any failed error-level check
    or an unreadable file stops the job before it spends compute. A dataset whose files have not
    changed since they passed is not read again: the stored report comes back with ``cached=True``
    (:mod:`offlinerl.episodes.validated`). ``local``: as in :func:`validate_dataset`; None: where the files hold
    at most ``scan.LOCAL_SCAN_MAX_BYTES`` (``scan.small_files``; a 1M-step Pendulum set: 0.4 s here, against 2.1 s
    as a Ray session's first Ray Data job).
    """
    stored = validated.lookup(path)
    if stored is not None:
        try:
            return ValidationReport.from_json(stored, cached=True)
        except (KeyError, TypeError, ValueError):
            pass  # a record of another version's layout: validate again
    if local is None:
        local = small_files(path)
    report = validate_dataset(path, max_examples=max_examples, local=local)
    if not report.ok:
        raise InvalidDatasetError(report)
    return report


class SchemaMismatchError(ValueError):
    """A dataset's files lack columns ``dataset.json`` declares, or hold them with other types. ``problem``: the
    file and what is wrong, without the advice for ``train --skip-validation`` the message ends with."""

    def __init__(self, message: str, problem: str | None = None) -> None:
        super().__init__(message)
        self.problem = message if problem is None else problem


def require_schema(path: str | Path) -> None:
    """What even ``--skip-validation`` checks, from ``dataset.json`` and the parquet footers only (no data is
    read): every file has the columns and types the dataset declares. Raises :class:`DatasetInfoError` or
    :class:`SchemaMismatchError` naming the file, so a job never fails inside a Ray Data task instead."""
    info = read_info(path)
    expected = S.episode_schema(info.observation_space, info.action_space, info.extra_columns)
    files = parquet_files(path)
    if not files:
        raise SchemaMismatchError(f"{path}: no *.parquet files in the dataset directory")
    for f in files:
        try:
            problems = _check_schema(pq.read_schema(f), expected)[0]
            check_parquet_size(f)  # a decompression bomb is refused here too, before any task reads it
        except ParquetTooLargeError as exc:
            raise SchemaMismatchError(f"{f}: {exc}") from None
        except READ_ERRORS as exc:
            raise SchemaMismatchError(f"{f}: unreadable parquet file: {type(exc).__name__}: {exc}") from None
        if problems:
            more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
            problem = f"{f}: {problems[0]}{more}"
            raise SchemaMismatchError(f"{problem}; --skip-validation skips the checks of the values, not of the "
                                      "columns: run `offlinerl validate` on it", problem)


def _skip(check: CheckResult, note: str) -> None:
    check.status, check.note = "skipped", note


def _skip_rest(report: ValidationReport, note: str) -> ValidationReport:
    for c in report.checks[1:]:
        _skip(c, note)
    return report


def _module_id_example(r: tuple) -> Example | None:
    """The row ``r`` (as in :func:`_check_episodes`) when its ``module_id`` cannot name a module: a training job
    builds one torch module per id (``episodes.schema.module_id_problem``). An agent id is not checked: a job's
    ``policy_mapping`` may map it to a valid module id (training refuses an unmapped one in one line)."""
    file, row, eid, module = r[0], r[1], r[2], r[9]
    problem = None if module is None else S.module_id_problem(module)
    if problem is None:
        return None
    return Example(file, row, eid, f"module_id {module!r}: {problem} (training would fail on it)", module)


def _check_episodes(report: ValidationReport, rows: list[tuple], limit: int) -> None:
    """Unique ids, valid module ids and chunk contiguity, from the per-row
    ``(file, row, id, agent, chunk, t_start, T, term, trunc, module)``."""
    ids_check, chunk_check = report.check("episode_ids"), report.check("chunks")
    seen: dict[tuple, tuple] = {}
    groups: dict[tuple, list[tuple]] = {}
    dup, bad_modules = [], []
    for r in sorted(rows, key=lambda r: (r[0], r[1])):
        file, row, eid, agent, chunk = r[:5]
        if (bad_module := _module_id_example(r)) is not None:
            bad_modules.append(bad_module)
        if eid is None or chunk is None:
            continue  # reported by the lengths check (null) or the schema check (missing column)
        key = (eid, agent, chunk)
        if key in seen:
            who = f"episode {eid!r}" + (f" agent {agent!r}" if agent is not None else "")
            dup.append(Example(file, row, eid, f"{who} chunk {chunk} also at {seen[key][0]} row {seen[key][1]}", eid))
        else:
            seen[key] = r
            groups.setdefault((eid, agent), []).append(r)
    offending = {(e.file, e.row) for e in dup + bad_modules}  # a row both duplicated and badly named counts once
    ids_check.fail(len(offending), dup + bad_modules, limit)

    bad: dict[tuple, Example] = {}
    for members in groups.values():
        members.sort(key=lambda r: r[4])
        last = len(members) - 1
        for i, r in enumerate(members):
            file, row, eid, _, chunk, t_start, steps, term, trunc, _ = r
            problem = None
            prev = members[i - 1] if i else None
            if chunk != (prev[4] + 1 if prev else 0):
                problem = (f"chunk_index {chunk}, expected {prev[4] + 1 if prev else 0} "
                           f"(chunks present: {[m[4] for m in members]})", chunk)
            elif prev and None not in (prev[5], prev[6], t_start) and t_start != prev[5] + prev[6]:
                problem = (f"t_start {t_start}, expected {prev[5] + prev[6]} (chunk {prev[4]} starts at "
                           f"{prev[5]} with T = {prev[6]})", t_start)
            elif i < last and (term or trunc):
                flag = "terminated" if term else "truncated"
                problem = f"chunk {chunk} is {flag} but chunk {members[last][4]} follows", flag
            if problem:
                bad[(file, row)] = Example(file, row, eid, *problem)
    chunk_check.fail(len(bad), list(bad.values()), limit)


def _check_counts(check: CheckResult, info: DatasetInfo, rows: list[tuple], limit: int) -> None:
    check.unit = "fields"
    data = {
        "num_episodes": len({(r[2], r[3]) for r in rows if r[2] is not None}),
        "num_steps": sum(r[6] for r in rows if r[6] is not None),
        "num_rows": len(rows),
    }
    if info.module_ids is not None:  # recorded since module_ids exists; older datasets have none to check
        data["module_ids"] = sorted({S.row_module_id(r[9], r[3]) for r in rows})
    wrong = [Example(S_INFO, None, None, f"{k}: dataset.json says {getattr(info, k)}, the data has {v}",
                     getattr(info, k)) for k, v in data.items() if getattr(info, k) != v]
    if not rows:  # a dataset of no episodes: nothing to train on or evaluate with
        wrong.append(Example(None, None, None, "the dataset holds no episodes (0 rows)", 0))
    check.fail(len(wrong), wrong, limit)
