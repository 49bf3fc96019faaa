"""What ``validate`` reports: one :class:`CheckResult` per check, each with a few :class:`Example` items (file,
row, episode, what is wrong), gathered in a :class:`ValidationReport` that prints itself, gives the exit code and
round-trips through JSON (the stored report of an unchanged dataset, :mod:`offlinerl.episodes.validated`). The
checks themselves are :mod:`offlinerl.episodes.validate`'s."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["Example", "CheckResult", "ValidationReport", "example_order"]


@dataclass
class Example:
    """One offending item: where it is and what is wrong."""

    file: str | None
    """Data file name (``dataset.json`` for metadata problems)."""
    row: int | None
    """Row of ``file``, if the problem is one row: 1-based, the first row is row 1 (as the converters number the
    records of their inputs, and as an editor or ``pandas.read_parquet(file).iloc[row - 1]`` finds it)."""
    episode_id: str | None
    """``episode_id`` of that row, if known."""
    detail: str
    """What is wrong, with the bad value and what was expected."""
    value: Any = None
    """The bad value itself."""

    def where(self) -> str:
        parts = [self.file or "?"]
        if self.row is not None:
            parts.append(f"row {self.row}")
        if self.episode_id is not None:
            parts.append(f"episode {self.episode_id!r}")
        return " ".join(parts)


@dataclass
class CheckResult:
    """The outcome of one check."""

    name: str
    severity: str
    description: str
    status: str = "passed"
    """``passed``, ``failed`` or ``skipped``."""
    count: int = 0
    """Number of offending rows (or files / fields, see ``unit``)."""
    unit: str = "rows"
    examples: list[Example] = field(default_factory=list)
    note: str = ""
    """Why the check was skipped, or extra context."""

    def fail(self, count: int, examples: list[Example], limit: int) -> None:
        if count:
            self.status = "failed"
            self.count += count
            self.examples = sorted(self.examples + examples, key=example_order)[:limit]


def example_order(e: Example) -> tuple:
    """Examples sort by file, then row (a whole-file example first)."""
    return (e.file or "", -1 if e.row is None else e.row)


def _json_value(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")
    if isinstance(v, (list, tuple)):
        return [_json_value(x) for x in v]
    return v


@dataclass
class ValidationReport:
    """Every check's result for one dataset directory."""

    path: str
    checks: list[CheckResult]
    readable: bool = True
    """False when the path is not a directory or some parquet file cannot be read."""
    num_files: int = 0
    num_rows: int = 0
    ray_nodes: list[str] = field(default_factory=list)
    """The Ray nodes whose tasks checked the rows (sorted ids; more than one when run on a cluster)."""
    cached: bool = False
    """True when the report is the stored one of an earlier validation of the unchanged files
    (:mod:`offlinerl.episodes.validated`), not a new reading of the data."""

    def check(self, name: str) -> CheckResult:
        return next(c for c in self.checks if c.name == name)

    @property
    def failed(self) -> list[CheckResult]:
        return [c for c in self.checks if c.status == "failed" and c.severity == "error"]

    @property
    def warnings(self) -> list[CheckResult]:
        return [c for c in self.checks if c.status == "failed" and c.severity == "warning"]

    @property
    def exit_code(self) -> int:
        return 2 if not self.readable else (1 if self.failed else 0)

    @property
    def ok(self) -> bool:
        """Valid: every error-level check passed (warnings allowed)."""
        return self.exit_code == 0

    def to_json(self) -> dict[str, Any]:
        checks = []
        for c in self.checks:
            d = asdict(c)
            d["examples"] = [{**asdict(e), "value": _json_value(e.value)} for e in c.examples]
            checks.append(d)
        return {"path": self.path, "valid": self.ok, "exit_code": self.exit_code, "readable": self.readable,
                "num_files": self.num_files, "num_rows": self.num_rows, "ray_nodes": self.ray_nodes, "checks": checks}

    @classmethod
    def from_json(cls, data: dict[str, Any], cached: bool = False) -> "ValidationReport":
        """The report that ``to_json`` wrote (bad values come back as their JSON form)."""
        checks = [CheckResult(**{**c, "examples": [Example(**e) for e in c["examples"]]}) for c in data["checks"]]
        return cls(data["path"], checks, readable=data["readable"], num_files=data["num_files"],
                   num_rows=data["num_rows"], ray_nodes=list(data["ray_nodes"]), cached=cached)

    def format(self) -> str:
        lines = [f"validate {self.path}: {self.num_files} parquet file(s), {self.num_rows:,} row(s)"
                 + (f", checked on {len(self.ray_nodes)} Ray nodes" if len(self.ray_nodes) > 1 else "")]
        width = max(len(c.name) for c in self.checks)
        for c in self.checks:
            tag = {"passed": "ok  ", "skipped": "skip"}.get(c.status, "FAIL" if c.severity == "error" else "WARN")
            text = {"passed": "passed", "skipped": f"skipped ({c.note})"}.get(
                c.status, f"{c.count:,} offending {c.unit if c.count != 1 else c.unit[:-1]}" + (f" ({c.note})" if c.note else ""))
            lines.append(f"  [{tag}] {c.name:<{width}}  {text}  -- {c.description}")
            for e in c.examples:
                lines.append(f"           {e.where()}: {e.detail}")
            if c.status == "failed" and c.count > len(c.examples):
                lines.append(f"           ... and {c.count - len(c.examples):,} more")
        if self.exit_code == 0:
            verdict = "VALID" + (f" with {len(self.warnings)} warning(s)" if self.warnings else "")
        elif self.exit_code == 1:
            verdict = f"INVALID: {', '.join(c.name for c in self.failed)} failed"
        else:
            others = [c.name for c in self.failed if c.name not in ("files", "dataset_json")]
            verdict = "NOT READABLE" + (f"; also failed: {', '.join(others)}" if others else "")
        lines.append(f"{verdict} (exit code {self.exit_code})")
        return "\n".join(lines)
