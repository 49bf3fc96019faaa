"""The one report of every converter: what a conversion read, wrote, dropped and quarantined.

Each converter fills one :class:`ConversionReport`; the console gets :meth:`ConversionReport.text`
(the same lines for every format) and ``dataset.json`` gets :meth:`ConversionReport.to_json` under
``provenance["report"]``. The fields are documented in docs/convert.md ("The conversion report").
"""

from __future__ import annotations

import sys
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

from offlinerl.convert.interface import EXIT_OK, EXIT_QUARANTINED, EXIT_USAGE

__all__ = ["ConversionReport", "finish", "run_conversion"]


@dataclass
class ConversionReport:
    """Counts of one conversion (all exact), filled in as the conversion runs."""

    source_format: str
    """What was read, e.g. ``RLlib new-stack parquet (columns layout)``."""
    record_unit: str
    """What one record of the source is: ``lines``, ``step rows``, ``episode records``."""
    output: str = ""
    """The dataset directory written."""
    files: int = 0
    """Input files found."""
    files_unreadable: int = 0
    """Input files quarantined whole (unreadable, or not of the recording's layout)."""
    records_read: int = 0
    """Records in the readable files."""
    records_quarantined: int = 0
    """Records written to the quarantine file as records (samplebatch: unreadable lines; rllib: rows,
    those of an episode dropped whole included)."""
    record_reasons: dict[str, int] = field(default_factory=dict)
    """``records_quarantined`` by reason code."""
    episodes: int = 0
    """Episodes written."""
    steps: int = 0
    """Steps written."""
    rows: int = 0
    """Dataset rows written (an episode longer than ``max_steps_per_row`` takes several)."""
    terminated: int = 0
    """Episodes written that ended by termination."""
    truncated: int = 0
    """Episodes written that ended by truncation (``truncated_by_recording`` included)."""
    truncated_by_recording: int = 0
    """Episodes marked truncated because the recording stops before they end."""
    episodes_quarantined: int = 0
    """Episodes not written: ambiguous, inconsistent or partly unreadable."""
    steps_quarantined: int = 0
    """Steps of those episodes, where the format knows them (0 for rllib)."""
    episode_reasons: dict[str, int] = field(default_factory=dict)
    """``episodes_quarantined`` by reason code, where the format counts them."""
    duplicate_episodes: int = 0
    """Episodes quarantined because another record holds the same episode (samplebatch)."""
    duplicate_records: int = 0
    """Exact re-writes of records dropped (rllib writes rows again at each flush)."""
    episodes_with_duplicates: int = 0
    """Episodes written that had ``duplicate_records``."""
    observation_space_from: str = "inferred"
    """Where the observation space came from: ``given``, ``env ID``, ``recording …`` or ``inferred``."""
    action_space_from: str = "inferred"
    """Where the action space came from (as ``observation_space_from``)."""
    kept_columns: dict[str, str] = field(default_factory=dict)
    """Extra per-step columns kept: name -> dtype and shape."""
    dropped_columns: list[str] = field(default_factory=list)
    """Source columns not kept."""
    details: dict[str, Any] = field(default_factory=dict)
    """Facts of one format only (samplebatch: ``legacy_dones_lines``, ``multi_agent``, ``policies`` …;
    rllib: ``layout``)."""
    notes: list[str] = field(default_factory=list)
    """Things the user should know (inferred spaces, values out of bounds, columns not kept)."""
    quarantine_file: str | None = None
    """``_quarantine/records.jsonl`` (relative to ``output``) when something was quarantined."""
    ray_nodes: list[str] = field(default_factory=list)
    """The Ray nodes whose tasks did the conversion's work (sorted ids), where the converter records them
    (samplebatch); printed when more than one, not stored in ``dataset.json`` (the ids mean nothing once the cluster is gone)."""

    @property
    def quarantined(self) -> int:
        """Records, unreadable files and episodes quarantined: 0 iff the quarantine file is empty."""
        return self.records_quarantined + self.files_unreadable + self.episodes_quarantined

    def add_record_reason(self, reason: str, n: int = 1) -> None:
        """Count ``n`` quarantined records of one reason."""
        self.records_quarantined += n
        self.record_reasons = dict(Counter(self.record_reasons) + Counter({reason: n}))

    def add_episode_reason(self, reason: str, steps: int = 0) -> None:
        """Count one quarantined episode of ``steps`` steps."""
        self.episodes_quarantined += 1
        self.steps_quarantined += steps
        self.episode_reasons = dict(Counter(self.episode_reasons) + Counter({reason: 1}))
        if reason == "duplicate":
            self.duplicate_episodes += 1

    def to_json(self) -> dict[str, Any]:
        """The report as stored in ``dataset.json`` (``provenance["report"]``)."""
        out = asdict(self)
        del out["ray_nodes"]
        return out

    def text(self) -> str:
        """The report for the console: the same lines for every format (duplicates only when a recording had any)."""
        unit = self.record_unit
        lines = [
            f"{self.source_format} -> {self.output}",
            _line("files read", f"{self.files}" + (f" ({self.files_unreadable} unreadable)" if self.files_unreadable else "")),
            _line(f"{unit} read", self.records_read),
            _line(f"{unit} quarantined", f"{self.records_quarantined}{_reasons(self.record_reasons)}"),
            _line("episodes written", f"{self.episodes} ({self.steps} steps, {self.rows} rows)"),
            _line("  terminated", self.terminated),
            _line("  truncated", f"{self.truncated} (of which cut by the end of the recording: "
                                 f"{self.truncated_by_recording})"),
            _line("episodes quarantined", f"{self.episodes_quarantined} ({self.steps_quarantined} steps)"
                                          f"{_reasons(self.episode_reasons)}"),
            _line("observation space", self.observation_space_from),
            _line("action space", self.action_space_from),
        ]
        if self.duplicate_episodes or self.duplicate_records:  # recordings that re-write (samplebatch, rllib)
            lines.insert(-2, _line("duplicates", f"{self.duplicate_episodes} episodes quarantined, "
                                                 f"{self.duplicate_records} {unit} dropped as exact re-writes in "
                                                 f"{self.episodes_with_duplicates} episodes"))
        if self.kept_columns:
            lines.append(_line("extra columns kept", ", ".join(f"{k} ({v})" for k, v in self.kept_columns.items())))
        if self.dropped_columns:
            lines.append(_line("columns dropped", ", ".join(self.dropped_columns)))
        lines += [_line(name.replace("_", " "), value) for name, value in self.details.items()]
        lines += [f"  note: {n}" for n in self.notes]
        if self.quarantine_file:
            lines.append(_line("quarantine", f"{self.output}/{self.quarantine_file}"))
        if len(self.ray_nodes) > 1:
            lines.append(_line("ray nodes", f"{len(self.ray_nodes)} ({', '.join(self.ray_nodes)})"))
        return "\n".join(lines)


def _line(label: str, value: Any) -> str:
    return f"  {label + ':':<24}{value}"


def _reasons(counts: dict[str, int]) -> str:
    return " (" + ", ".join(f"{k}: {v}" for k, v in sorted(counts.items())) + ")" if counts else ""


def finish(report: ConversionReport, allow_quarantine: bool) -> int:
    """Print the report; the exit code of a conversion that wrote its dataset (1 if something was
    quarantined without ``--allow-quarantine``, else 0; 2 if no episode was converted)."""
    print(report.text())
    where = f"{report.output}/{report.quarantine_file}"
    if not report.episodes:  # nothing to train on, whatever --allow-quarantine says
        why = f"; {report.quarantined} record(s) quarantined, see {where}" if report.quarantined else ""
        print(f"no episodes were converted{why}: {report.output} holds no data (offlinerl validate fails it)",
              file=sys.stderr)
        return EXIT_USAGE
    if not report.quarantined:
        return EXIT_OK
    if not allow_quarantine:
        print(f"{report.quarantined} record(s) quarantined, see {where}; the dataset was written. "
              "Pass --allow-quarantine to accept this (exit 0).", file=sys.stderr)
        return EXIT_QUARANTINED
    print(f"{report.quarantined} record(s) quarantined (allowed), see {where}", file=sys.stderr)
    return EXIT_OK


def run_conversion(command: str, convert: Callable[[], ConversionReport], usage_errors: tuple[type[Exception], ...],
                   allow_quarantine: bool) -> int:
    """How a converter command ends: ``convert()``, then ``finish``; one of ``usage_errors`` (what this
    converter raises for bad arguments, inputs or outputs) is one line on stderr and ``EXIT_USAGE``."""
    from offlinerl.episodes.atomic import OutputWriteError

    try:
        report = convert()
    except OutputWriteError as exc:  # a read-only or full disk: nothing half-written was left
        print(f"offlinerl convert {command}: error: {exc}", file=sys.stderr)
        return 1
    except usage_errors as exc:
        print(f"offlinerl convert {command}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    return finish(report, allow_quarantine)
