"""Loading frozen config dataclasses from dicts, YAML and JSON, and ``key=value`` overrides.

Every field is type-checked against its annotation (ints become floats where a
float is declared; strings from the command line are parsed with YAML); unknown
keys and bad values raise ``ConfigError`` naming the dotted field path.

Config files are plain data: YAML anchors and aliases are refused (nested
aliases expand exponentially — a 528-byte "billion laughs" file never finishes
loading), a file may hold at most :data:`MAX_CONFIG_BYTES`, nest at most
``offlinerl.settings_file.MAX_DEPTH`` deep, and integers fit in 64 bits. A
config file may have been handed over, so the env ids it names (any ``env``
key, e.g. ``evaluation.env``, ``online.env``) and those of ``--set`` go through
:func:`offlinerl.trusted.env_id_problem`: they never choose a module to import.
"""

from __future__ import annotations

import dataclasses
import json
import math
import types
import typing
from pathlib import Path
from typing import Any, Mapping, TypeVar

import yaml

from offlinerl.settings_file import MAX_SETTINGS_BYTES, NestingError, SettingsFileError, plain_yaml, read_settings
from offlinerl.trusted import env_id_problem

__all__ = [
    "ConfigError", "check", "from_dict", "to_dict", "to_finite_json", "load_file", "apply_overrides", "parse_override",
    "merge", "MAX_CONFIG_BYTES",
]

T = TypeVar("T")

#: Largest config or pipeline file :func:`load_file` reads (1 MiB; ours are a few hundred bytes).
MAX_CONFIG_BYTES = MAX_SETTINGS_BYTES
#: Config keys whose string values are gymnasium env ids.
ENV_ID_KEYS = frozenset({"env"})
_INT64 = 2**63 - 1


class ConfigError(ValueError):
    """A config value, key or file that cannot be used; the message names the field."""


def check(ok: bool, field_name: str, message: str) -> None:
    """The one config check: ``ConfigError("<field_name>: <message>")`` unless ``ok`` (a config's
    ``__post_init__`` calls it once per rule, e.g. ``check(self.lr > 0, "lr", f"must be positive, got {self.lr}")``)."""
    if not ok:
        raise ConfigError(f"{field_name}: {message}")


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
            out = float(value)
        except (ValueError, OverflowError):
            raise ConfigError(f"{path}: expected a number, got {str(value)[:60]!r}") from None
        if isinstance(value, str) and "_" in value:  # float() reads "1_000" as 1000
            raise ConfigError(f"{path}: expected a number, got {value!r}")
        return out
    if tp is int:
        if isinstance(value, bool) or not (isinstance(value, int) or (isinstance(value, float) and value.is_integer())):
            raise ConfigError(f"{path}: expected an integer, got {value!r}")
        if abs(value) > _INT64:
            raise ConfigError(f"{path}: {str(value)[:30]}... does not fit in 64 bits")
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


def to_finite_json(value: Any) -> Any:
    """``value`` with every NaN or infinite float (in nested dicts and lists too) replaced by ``None``: what
    strict JSON (``metrics.jsonl``, ``result.json``, ``algorithm.json``, summaries) can hold."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {k: to_finite_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_finite_json(v) for v in value]
    return value


def load_file(path: str | Path) -> dict[str, Any]:
    """Read a YAML or JSON mapping, with a clear error naming the file.

    Refuses files over :data:`MAX_CONFIG_BYTES` and YAML anchors/aliases (``&name``/``*name``).
    """
    try:
        data = read_settings(path, "config and pipeline files")
    except SettingsFileError as exc:
        raise ConfigError(str(exc)) from None
    check_env_ids(data, str(path))
    return data


def check_env_ids(data: Mapping[str, Any], where: str) -> None:
    """Refuse (``ConfigError``) an env id under any :data:`ENV_ID_KEYS` key of ``data`` that would import a
    module nobody allowed (:func:`offlinerl.trusted.env_id_problem`); ``where`` names the source."""
    stack: list[tuple[str, Any]] = [("", data)]
    while stack:
        prefix, node = stack.pop()
        for key, value in node.items():
            dotted = f"{prefix}{key}"
            if isinstance(value, Mapping):
                stack.append((dotted + ".", value))
            elif key in ENV_ID_KEYS and isinstance(value, str):
                if (problem := env_id_problem(value, f"{where}: {dotted}")) is not None:
                    raise ConfigError(problem)


def parse_override(text: str) -> tuple[list[str], Any]:
    """``"a.b=0.5"`` -> (["a", "b"], 0.5); the value is parsed as YAML (numbers, lists, true/false).

    YAML reads ``1e-3`` as a string; ``from_dict`` turns it into a float where a float is declared.
    """
    if "=" not in text:
        raise ConfigError(f"--set expects KEY=VALUE, got {text!r}")
    key, raw = text.split("=", 1)
    try:
        value = plain_yaml(raw) if raw.strip() else ""
    except yaml.YAMLError:
        value = raw
    except NestingError as exc:
        raise ConfigError(f"--set {key.strip()}: {exc}") from None
    return [k for k in key.strip().split(".") if k], value


def merge(base: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with ``overrides`` applied key by key, nested mappings merged (a copy): ``{"evaluation":
    {"episodes": 50}}`` changes the episodes and keeps the rest of ``base["evaluation"]``."""
    out = dict(base)
    for k, v in overrides.items():
        out[k] = merge(out[k], v) if isinstance(v, Mapping) and isinstance(out.get(k), Mapping) else v
    return out


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
        given = value  # only what this override sets: the file's own values were checked when it was read
        for k in reversed(keys):
            given = {k: given}
        check_env_ids(given, "--set")
    return out
