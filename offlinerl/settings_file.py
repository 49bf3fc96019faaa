"""Reading a settings file (pipelines, configs, converter specs): a YAML or JSON mapping, small and plain.

Hostile files cannot make us allocate much: a file may hold at most :data:`MAX_SETTINGS_BYTES`, and
YAML anchors and aliases (``&name``/``*name``, the "billion laughs" expansion) are refused, so nothing
expands beyond what the file spells out. Every problem is a :class:`SettingsFileError` naming the file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

__all__ = ["MAX_SETTINGS_BYTES", "SettingsFileError", "plain_yaml", "read_settings"]

MAX_SETTINGS_BYTES = 1024 * 1024


class SettingsFileError(ValueError):
    """A settings file cannot be read, is too large, does not parse, or uses YAML anchors."""


class _AliasError(yaml.YAMLError):
    def __init__(self, mark: yaml.Mark | None, text: str):
        super().__init__(text)
        self.line = mark.line + 1 if mark is not None else None


class _PlainLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` without anchors and aliases."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent):
            raise _AliasError(event.start_mark, f"alias *{event.anchor}")
        if getattr(event, "anchor", None) is not None:
            raise _AliasError(event.start_mark, f"anchor &{event.anchor}")
        return super().compose_node(parent, index)


def plain_yaml(text: str) -> Any:
    """Parse YAML text without anchors and aliases (``yaml.YAMLError`` on either, or on bad syntax)."""
    return yaml.load(text, Loader=_PlainLoader)  # noqa: S506 - a SafeLoader subclass


def read_settings(path: str | Path, kind: str) -> dict[str, Any]:
    """The mapping in ``path`` (JSON for ``.json``, else YAML); ``kind`` names such files in messages
    (e.g. ``"config and pipeline files"``)."""
    path = Path(path)
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_SETTINGS_BYTES + 1)
    except OSError as exc:
        raise SettingsFileError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    if len(raw) > MAX_SETTINGS_BYTES:
        raise SettingsFileError(f"{path}: larger than {MAX_SETTINGS_BYTES:,} bytes (1 MiB); {kind} hold a few "
                                "hundred bytes of settings, not data. Is this the right file?")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SettingsFileError(f"{path}: not UTF-8 text: {exc}") from exc
    try:
        data = json.loads(text) if path.suffix == ".json" else plain_yaml(text)
    except _AliasError as exc:
        where = f"line {exc.line}: " if exc.line else ""
        raise SettingsFileError(f"{path}: {where}YAML anchors and aliases are not supported in {kind} "
                                f"(found {exc}); write the repeated values out in full") from None
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        raise SettingsFileError(f"{path}: does not parse: {exc}") from exc
    if not isinstance(data, dict):
        raise SettingsFileError(f"{path}: expected a mapping at the top level, got {type(data).__name__}")
    return data
