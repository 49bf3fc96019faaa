"""Loading frozen config dataclasses from dicts, YAML and JSON, and ``key=value`` overrides.

Every field is type-checked against its annotation (ints become floats where a
float is declared; strings from the command line are parsed with YAML); unknown
keys and bad values raise ``ConfigError`` naming the dotted field path.

Config files are plain data: YAML anchors and aliases are refused (nested
aliases expand exponentially — a 528-byte "billion laughs" file never finishes
loading) and a file may hold at most :data:`MAX_CONFIG_BYTES`.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from pathlib import Path
from typing import Any, Mapping, TypeVar

import yaml

__all__ = [
    "ConfigError", "from_dict", "to_dict", "load_file", "apply_overrides", "parse_override", "MAX_CONFIG_BYTES",
]

T = TypeVar("T")

#: Largest config or pipeline file :func:`load_file` reads (1 MiB; ours are a few hundred bytes).
MAX_CONFIG_BYTES = 1024 * 1024


class ConfigError(ValueError):
    """A config value, key or file that cannot be used; the message names the field."""


class _AliasError(yaml.YAMLError):
    """A YAML anchor or alias, which config files do not support."""

    def __init__(self, mark: yaml.Mark | None, text: str):
        super().__init__(text)
        self.line = mark.line + 1 if mark is not None else None


class _PlainDataLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` without anchors and aliases: nothing can expand beyond what the file spells out."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent):
            raise _AliasError(event.start_mark, f"alias *{event.anchor}")
        if getattr(event, "anchor", None) is not None:
            raise _AliasError(event.start_mark, f"anchor &{event.anchor}")
        return super().compose_node(parent, index)


def _yaml_load(text: str) -> Any:
    return yaml.load(text, Loader=_PlainDataLoader)  # noqa: S506 - a SafeLoader subclass


def _coerce(value: Any, tp: Any, path: str) -> Any:
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if tp is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        options = [a for a in args if a is not type(None)]
        if len(options) == 1:  # X | None: X's own message names the field that is wrong
            return _coerce(value, options[0], path)
        errors = []
        for arg in (a for a in args if a is not type(None)):
            try:
                return _coerce(value, arg, path)
            except ConfigError as exc:
                errors.append(str(exc))
        raise ConfigError(f"{path}: {value!r} matches none of {tp}")
    if origin is typing.Literal:
        if value not in args:
            raise ConfigError(f"{path}: must be one of {list(args)}, got {value!r}")
        return value
    if dataclasses.is_dataclass(tp):
        if isinstance(value, tp):
            return value
        if not isinstance(value, Mapping):
            raise ConfigError(f"{path}: expected a mapping for {tp.__name__}, got {value!r}")
        return from_dict(tp, value, path)
    if origin in (tuple, list):
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{path}: expected a list, got {value!r}")
        item = args[0] if args else Any
        return origin(_coerce(v, item, f"{path}[{i}]") for i, v in enumerate(value))
    if origin is dict or tp is dict:
        if not isinstance(value, Mapping):
            raise ConfigError(f"{path}: expected a mapping, got {value!r}")
        return dict(value)
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            raise ConfigError(f"{path}: expected a number, got {value!r}")
        try:
            return float(value)
        except ValueError:
            raise ConfigError(f"{path}: expected a number, got {value!r}") from None
    if tp is int:
        if isinstance(value, bool) or not (isinstance(value, int) or (isinstance(value, float) and value.is_integer())):
            raise ConfigError(f"{path}: expected an integer, got {value!r}")
        return int(value)
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{path}: expected true or false, got {value!r}")
        return value
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"{path}: expected a string, got {value!r}")
        return value
    return value


def from_dict(cls: type[T], data: Mapping[str, Any], path: str = "") -> T:
    """Build dataclass ``cls`` from ``data``, recursing into nested dataclass fields."""
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    unknown = set(data) - set(fields)
    if unknown:
        where = f"{path}." if path else ""
        raise ConfigError(f"unknown config key(s) {', '.join(where + k for k in sorted(unknown))} for {cls.__name__}; "
                          f"known: {', '.join(sorted(fields))}")
    kwargs = {k: _coerce(v, hints[k], f"{path}.{k}" if path else k) for k, v in data.items()}
    try:
        return cls(**kwargs)
    except ConfigError:
        raise
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{path or cls.__name__}: {exc}") from exc


def to_dict(obj: Any) -> Any:
    """Plain JSON/YAML-serialisable form of a (nested) dataclass."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_dict(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, (list, tuple)):
        return [to_dict(v) for v in obj]
    if isinstance(obj, dict):
        return {k: to_dict(v) for k, v in obj.items()}
    return obj


def load_file(path: str | Path) -> dict[str, Any]:
    """Read a YAML or JSON mapping, with a clear error naming the file.

    Refuses files over :data:`MAX_CONFIG_BYTES` and YAML anchors/aliases (``&name``/``*name``).
    """
    path = Path(path)
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    if len(raw) > MAX_CONFIG_BYTES:
        raise ConfigError(f"{path}: larger than {MAX_CONFIG_BYTES:,} bytes (1 MiB); a config or pipeline file is a "
                          "few hundred bytes of settings, not data. Is this the right file?")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text: {exc}") from exc
    try:
        data = json.loads(text) if path.suffix == ".json" else _yaml_load(text)
    except _AliasError as exc:
        where = f"line {exc.line}: " if exc.line else ""
        raise ConfigError(f"{path}: {where}YAML anchors and aliases are not supported in config and pipeline files "
                          f"(found {exc}); write the repeated values out in full") from None
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        raise ConfigError(f"{path}: does not parse: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level, got {type(data).__name__}")
    return data


def parse_override(text: str) -> tuple[list[str], Any]:
    """``"a.b=0.5"`` -> (["a", "b"], 0.5); the value is parsed as YAML (numbers, lists, true/false).

    YAML reads ``1e-3`` as a string; ``from_dict`` turns it into a float where a float is declared.
    """
    if "=" not in text:
        raise ConfigError(f"--set expects KEY=VALUE, got {text!r}")
    key, raw = text.split("=", 1)
    try:
        value = _yaml_load(raw) if raw.strip() else ""
    except yaml.YAMLError:
        value = raw
    return [k for k in key.strip().split(".") if k], value


def apply_overrides(data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Apply ``key.path=value`` overrides to a nested dict (a copy)."""
    out = json.loads(json.dumps(data))
    for text in overrides:
        keys, value = parse_override(text)
        if not keys:
            raise ConfigError(f"--set {text!r}: empty key")
        node = out
        for k in keys[:-1]:
            node = node.setdefault(k, {})
            if not isinstance(node, dict):
                raise ConfigError(f"--set {text!r}: {k!r} is not a mapping")
        node[keys[-1]] = value
    return out
