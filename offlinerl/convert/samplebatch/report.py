"""What a ``convert samplebatch`` run did: counts for the console and for
``dataset.json`` provenance."""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["ConversionReport"]


@dataclass
class ConversionReport:
    """Counts of one conversion (all exact)."""

    files: int = 0
    lines_read: int = 0
    lines_quarantined: int = 0
    line_reasons: dict[str, int] = field(default_factory=dict)
    episodes: int = 0
    steps: int = 0
    rows: int = 0
    terminated: int = 0
    truncated: int = 0
    truncated_by_recording: int = 0
    episodes_quarantined: int = 0
    steps_quarantined: int = 0
    episode_reasons: dict[str, int] = field(default_factory=dict)
    duplicates: int = 0
    legacy_dones_lines: int = 0
    observations_out_of_bounds: int = 0
    actions_out_of_bounds: int = 0
    multi_agent: bool = False
    policies: list[str] = field(default_factory=list)
    observation_space_from: str = "inferred"
    action_space_from: str = "inferred"
    actions_unsquashed: bool = False
    kept_columns: dict[str, str] = field(default_factory=dict)
    dropped_columns: list[str] = field(default_factory=list)
    quarantine_file: str | None = None

    @property
    def quarantined(self) -> int:
        return self.lines_quarantined + self.episodes_quarantined

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def add_line_reason(self, reason: str, n: int = 1) -> None:
        self.lines_quarantined += n
        self.line_reasons = dict(Counter(self.line_reasons) + Counter({reason: n}))

    def add_episode_reason(self, reason: str, steps: int) -> None:
        self.episodes_quarantined += 1
        self.steps_quarantined += steps
        self.episode_reasons = dict(Counter(self.episode_reasons) + Counter({reason: 1}))
        if reason == "duplicate":
            self.duplicates += 1

    def to_text(self) -> str:
        def reasons(d: dict[str, int]) -> str:
            return " (" + ", ".join(f"{k}: {v}" for k, v in sorted(d.items())) + ")" if d else ""

        lines = [
            f"files:                   {self.files}",
            f"lines read:              {self.lines_read}",
            f"lines quarantined:       {self.lines_quarantined}{reasons(self.line_reasons)}",
            f"episodes written:        {self.episodes} ({self.rows} rows, {self.steps} steps)",
            f"  terminated:            {self.terminated}",
            f"  truncated:             {self.truncated} (of which cut by the end of the recording: "
            f"{self.truncated_by_recording})",
            f"episodes quarantined:    {self.episodes_quarantined} ({self.steps_quarantined} steps)"
            f"{reasons(self.episode_reasons)}",
            f"duplicate episodes:      {self.duplicates}",
            f"multi-agent:             {'yes, policies ' + ', '.join(self.policies) if self.multi_agent else 'no'}",
            f"observation space:       {self.observation_space_from}",
            f"action space:            {self.action_space_from}"
            + (" (actions unsquashed to the env bounds)" if self.actions_unsquashed else ""),
        ]
        if self.legacy_dones_lines:
            lines.append(f"legacy 'dones' lines:    {self.legacy_dones_lines} (terminated/truncated inferred)")
        if self.observations_out_of_bounds:
            lines.append(f"warning: {self.observations_out_of_bounds} episode(s) have observations outside the "
                         "observation space bounds")
        if self.actions_out_of_bounds:
            lines.append(f"warning: {self.actions_out_of_bounds} episode(s) have actions outside the action space "
                         "bounds (recorded in RLlib's normalised space? see --unsquash-actions)")
        if self.kept_columns:
            lines.append("extra columns kept:      " + ", ".join(f"{k} ({v})" for k, v in self.kept_columns.items()))
        if self.dropped_columns:
            lines.append("columns dropped:         " + ", ".join(self.dropped_columns))
        if self.quarantine_file:
            lines.append(f"quarantine:              {self.quarantine_file}")
        return "\n".join(lines)
