"""Config and settings files: reading small plain YAML/JSON texts, and loading frozen config dataclasses from them.

**Reading.** Every small JSON or YAML text of ours (config and job files, converter specs, the user's settings
file, ``dataset.json``, ``sweep.json``, checkpoint metadata, ``--set`` values) is parsed by :func:`plain_yaml` or
:func:`plain_json`: YAML anchors and aliases are refused (nested aliases expand exponentially - a 528-byte
"billion laughs" file never finishes loading), and nesting deeper than :data:`MAX_DEPTH` or integers of more
than :data:`MAX_INT_DIGITS` digits are a :class:`NestingError` with a message, never a ``RecursionError`` or a
``ValueError`` from deep inside the parser. :func:`load_file` reads a file of at most :data:`MAX_CONFIG_BYTES`;
every problem is one :class:`ConfigError` naming the file.

**Loading.** Every field is type-checked against its annotation (ints become floats where a float is declared;
strings from the command line are parsed with YAML); unknown keys and bad values raise ``ConfigError`` naming
the dotted field path, and integers fit in 64 bits. :func:`check` is the one validation helper of every config's
``__post_init__``.

This module imports nothing of offlinerl: the env ids a config file names (which must never choose a module to
import) are checked a floor up, by :func:`offlinerl.trusted.load_config_file` - the reader for config and job
files a user may have been handed - which uses :func:`load_file` and :func:`apply_overrides` from here.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import types
import typing
from pathlib import Path
from typing import Any, Mapping, TypeVar

import yaml

__all__ = [
    "ConfigError", "NestingError", "check", "from_dict", "to_dict", "to_finite_json", "load_file", "apply_overrides",
    "parse_override", "merge", "plain_json", "plain_yaml", "check_nesting", "MAX_CONFIG_BYTES", "MAX_DEPTH",
    "MAX_INT_DIGITS",
]

T = TypeVar("T")

#: Largest config, job, spec or settings file :func:`load_file` reads (1 MiB; ours are a few hundred bytes).
MAX_CONFIG_BYTES = 1024 * 1024
#: Deepest nesting of lists and mappings accepted in a settings or metadata text (ours nest 4 deep).
MAX_DEPTH = 64
#: Most digits of an integer in a settings or metadata text (an int64 has 19).
MAX_INT_DIGITS = 40
_INT64 = 2**63 - 1


class ConfigError(ValueError):
    """A config value, key or file that cannot be used; the message names the field or the file."""


class NestingError(ValueError):
    """Parsed data nests deeper than :data:`MAX_DEPTH`, or holds an integer over :data:`MAX_INT_DIGITS` digits."""


# -- reading plain texts -------------------------------------------------------------------------------------
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


def yaml_error_line(exc: yaml.MarkedYAMLError) -> str:
    """A YAML syntax error in one line: ``line 5, column 8: not valid YAML: <problem> (<context> at line 4, column
    7)`` (PyYAML's own message spans several lines and names the text ``"<unicode string>"``)."""
    mark = exc.problem_mark or exc.context_mark
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    problem = (exc.problem or exc.context or "not YAML").strip()
    context = ""
    if exc.context and exc.problem and exc.context_mark is not None:
        context = f" ({exc.context.strip()} at line {exc.context_mark.line + 1}, column {exc.context_mark.column + 1})"
    return f"{where}not valid YAML: {problem}{context}"


def load_file(path: str | Path, kind: str = "config and job files") -> dict[str, Any]:
    """The mapping in ``path`` (JSON for ``.json``, else YAML), with one :class:`ConfigError` naming the file for
    any problem; ``kind`` names such files in messages (e.g. ``"specs"``). Refuses files over
    :data:`MAX_CONFIG_BYTES` and YAML anchors/aliases (``&name``/``*name``). Env ids are not checked here
    (:func:`offlinerl.trusted.load_config_file` does)."""
    path = Path(path)
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if len(raw) > MAX_CONFIG_BYTES:
        raise ConfigError(f"{path}: larger than {MAX_CONFIG_BYTES:,} bytes (1 MiB); {kind} hold a few "
                          "hundred bytes of settings, not data. Is this the right file?")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text: {exc}") from None
    try:
        data = plain_json(text) if path.suffix == ".json" else plain_yaml(text)
    except NestingError as exc:
        raise ConfigError(f"{path}: {exc}; {kind} hold a few levels of plain settings") from None
    except _AliasError as exc:
        where = f"line {exc.line}: " if exc.line else ""
        raise ConfigError(f"{path}: {where}YAML anchors and aliases are not supported in {kind} "
                          f"(found {exc}); write the repeated values out in full") from None
    except yaml.MarkedYAMLError as exc:
        raise ConfigError(f"{path}: {yaml_error_line(exc)}") from None
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        raise ConfigError(f"{path}: does not parse: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level, got {type(data).__name__}")
    return data


# -- loading config dataclasses --------------------------------------------------------------------------------
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
    return out
