"""Reading a settings file (pipelines, configs, converter specs): a YAML or JSON mapping, small and plain.

Hostile files cannot make us allocate much: a file may hold at most :data:`MAX_SETTINGS_BYTES`, and
YAML anchors and aliases (``&name``/``*name``, the "billion laughs" expansion) are refused, so nothing
expands beyond what the file spells out. Every problem is a :class:`SettingsFileError` naming the file.

The same parsers read every small JSON or YAML text of ours (``dataset.json``, ``sweep.json``, checkpoint
metadata, ``--set`` values): :func:`plain_yaml` and :func:`plain_json` refuse nesting deeper than
:data:`MAX_DEPTH` and integers of more than :data:`MAX_INT_DIGITS` digits with a message, never a
``RecursionError`` or a ``ValueError`` from deep inside the parser.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

__all__ = ["MAX_SETTINGS_BYTES", "MAX_DEPTH", "MAX_INT_DIGITS", "SettingsFileError", "NestingError", "plain_yaml",
           "plain_json", "check_nesting", "read_settings"]

MAX_SETTINGS_BYTES = 1024 * 1024
#: Deepest nesting of lists and mappings accepted in a settings or metadata text (ours nest 4 deep).
MAX_DEPTH = 64
#: Most digits of an integer in a settings or metadata text (an int64 has 19).
MAX_INT_DIGITS = 40


class SettingsFileError(ValueError):
    """A settings file cannot be read, is too large, does not parse, or uses YAML anchors."""


class NestingError(ValueError):
    """Parsed data nests deeper than :data:`MAX_DEPTH`, or holds an integer over :data:`MAX_INT_DIGITS` digits."""


def check_nesting(data: Any, max_depth: int = MAX_DEPTH) -> Any:
    """``data`` if its lists and mappings nest at most ``max_depth`` deep and its integers have at most
    :data:`MAX_INT_DIGITS` digits; :class:`NestingError` otherwise. Iterative: any depth is checked safely."""
    stack = [(data, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, (dict, list, tuple)):
            if depth > max_depth:
                raise NestingError(f"nested more than {max_depth} levels deep")
            children = node.values() if isinstance(node, dict) else node
            stack.extend((child, depth + 1) for child in children)
            if isinstance(node, dict):
                stack.extend((key, depth + 1) for key in node)
        elif isinstance(node, int) and not isinstance(node, bool) and node.bit_length() > MAX_INT_DIGITS * 3.33:
            raise NestingError(f"an integer of more than {MAX_INT_DIGITS} digits")
    return data


def _bounded(parse: Any, text: str) -> Any:
    try:
        data = parse(text)
    except RecursionError:
        raise NestingError(f"nested more than {MAX_DEPTH} levels deep") from None
    except ValueError as exc:
        if "integer string conversion" in str(exc) or "Exceeds the limit" in str(exc):
            raise NestingError(f"an integer of more than {MAX_INT_DIGITS} digits") from None
        raise
    return check_nesting(data)


def plain_json(text: str | bytes) -> Any:
    """``json.loads`` without tracebacks on hostile nesting or integer sizes (:class:`NestingError`; bad
    syntax stays ``json.JSONDecodeError``)."""
    return _bounded(json.loads, text)


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


# Numbers as JSON and Python write them: YAML 1.1 also reads ``1_000`` as 1000, ``0b11``/``0x1f``/``017``
# as ints and ``1:30`` as 90 (base 60); those stay strings here, so a typed field refuses them by name.
_PlainLoader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag not in ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float")]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_PlainLoader.add_implicit_resolver("tag:yaml.org,2002:int", re.compile(r"^[-+]?(0|[1-9][0-9]*)$"), list("-+0123456789"))
_PlainLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^(?:[-+]?(?:[0-9]+\.[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?|[-+]?[0-9]+[eE][-+]?[0-9]+"
               r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"),
    list("-+0123456789."))


def plain_yaml(text: str) -> Any:
    """Parse YAML text without anchors and aliases (``yaml.YAMLError`` on either, or on bad syntax;
    :class:`NestingError` on nesting or integers over the limits)."""
    return _bounded(lambda t: yaml.load(t, Loader=_PlainLoader), text)  # noqa: S506 - a SafeLoader subclass


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
        data = plain_json(text) if path.suffix == ".json" else plain_yaml(text)
    except NestingError as exc:
        raise SettingsFileError(f"{path}: {exc}; {kind} hold a few levels of plain settings") from None
    except _AliasError as exc:
        where = f"line {exc.line}: " if exc.line else ""
        raise SettingsFileError(f"{path}: {where}YAML anchors and aliases are not supported in {kind} "
                                f"(found {exc}); write the repeated values out in full") from None
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        raise SettingsFileError(f"{path}: does not parse: {exc}") from exc
    if not isinstance(data, dict):
        raise SettingsFileError(f"{path}: expected a mapping at the top level, got {type(data).__name__}")
    return data
