"""Decoding RLlib new-stack episode states (``output_write_episodes=True``) without pickle.

Each parquet row holds ``msgpack.packb(SingleAgentEpisode.get_state(),
default=msgpack_numpy.encode)``. msgpack-numpy writes an array as a map with keys
``nd`` (array or scalar), ``type`` (dtype string), ``kind``, ``shape`` and
``data`` (raw bytes); plain msgpack plus :func:`_decode_ndarray` rebuilds it.
Object arrays (``|O``) and structured dtypes (``kind == "V"``) are the cases
where msgpack-numpy pickles or needs ``eval``; they are refused.

Spaces come in RLlib's ``gym_space_to_dict`` form; Box bounds and MultiDiscrete
``nvec`` are ``base64(zlib(.npy bytes))`` and are read with
``np.load(allow_pickle=False)``.

Sizes are checked before allocation (:mod:`offlinerl.convert.limits`): msgpack's
own length limits are bounded by the record, every array's declared
``shape × itemsize`` must fit the per-value cap and match its data, zlib streams
stop at the cap, and a ``.npy`` header's shape is checked before ``np.load``.
"""

from __future__ import annotations

import base64
import binascii
import io
import functools
import zlib
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import msgpack
import numpy as np

from offlinerl.convert.limits import (
    DecodeBudget, DecodeLimits, ValueTooLargeError, array_nbytes, check_array, zlib_decompress,
)
from offlinerl.convert.packing import PackedDecodeError, RefusedPickleError
from offlinerl.episodes.arrow import batch_len, batch_map

__all__ = ["EpisodeStateError", "EpisodeChunk", "decode_state", "space_from_rllib", "chunk_from_state"]


class EpisodeStateError(ValueError):
    """An episode record that cannot be decoded safely or is inconsistent."""


def _key(k: Any) -> Any:
    return k.decode("utf-8") if isinstance(k, bytes) else k


def _decode_ndarray(obj: dict, max_bytes: int) -> Any:
    """msgpack ``object_hook``: rebuild msgpack-numpy arrays and scalars (at most ``max_bytes`` each), refuse pickles."""
    keys = {_key(k): v for k, v in obj.items()}
    if "nd" not in keys or "data" not in keys:
        if keys.get("complex") is True:
            return complex(_key(keys["data"]))
        return {_key(k): v for k, v in obj.items()}
    kind = _key(keys.get("kind", b"")) or ""
    descr = keys.get("type")
    if kind == "V" or not isinstance(descr, (str, bytes)):
        raise EpisodeStateError(f"refused structured/void array (type {descr!r}): msgpack-numpy would eval/pickle it")
    try:
        dtype = np.dtype(_key(descr))
    except TypeError as exc:
        raise EpisodeStateError(f"unknown array dtype {descr!r}") from exc
    if dtype.hasobject:
        raise RefusedPickleError(f"refused object array (dtype {dtype.str}): its data is a pickle")
    data = keys["data"]
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise EpisodeStateError(f"array data is {type(data).__name__}, expected bytes")
    if keys["nd"]:
        shape = keys.get("shape") or ()
        try:
            check_array(shape, dtype, max_bytes, "msgpack array")
        except ValueTooLargeError:
            raise
        except ValueError as exc:
            raise EpisodeStateError(str(exc)) from exc
        if array_nbytes(shape, dtype) != len(data):
            raise EpisodeStateError(f"array of shape {tuple(shape)} and dtype {dtype.str} holds {len(data)} bytes")
        return np.frombuffer(bytes(data), dtype=dtype).reshape(tuple(shape)).copy()
    flat = np.frombuffer(bytes(data), dtype=dtype)
    if flat.size != 1:
        raise EpisodeStateError(f"numpy scalar holds {flat.size} values")
    return flat[0]


def decode_state(raw: bytes, limits: DecodeLimits | None = None) -> dict[str, Any]:
    """msgpack bytes -> episode state dict (str keys, numpy arrays); no pickle is run.

    No string, binary, array or map may declare more entries than the record has bytes,
    and no array more than ``limits.max_value_bytes``.
    """
    limits = limits or DecodeLimits()
    n = len(raw)
    hook = functools.partial(_decode_ndarray, max_bytes=limits.max_value_bytes)
    try:
        state = msgpack.unpackb(
            raw, raw=False, object_hook=hook, strict_map_key=False,
            max_str_len=n, max_bin_len=n, max_array_len=n, max_map_len=n // 2, max_ext_len=n,
        )
    except (EpisodeStateError, PackedDecodeError, ValueTooLargeError):
        raise
    except Exception as exc:  # msgpack raises several unrelated types on corrupt input
        raise EpisodeStateError(f"not a valid msgpack record: {type(exc).__name__}: {exc}") from exc
    if not isinstance(state, dict):
        raise EpisodeStateError(f"record is a {type(state).__name__}, expected an episode state map")
    return state


def _ndarray_field(text: Any, what: str, budget: DecodeBudget) -> np.ndarray:
    try:
        payload = zlib_decompress(base64.b64decode(_key(text), validate=True), budget, f"space {what}")
    except ValueTooLargeError:
        raise
    except (binascii.Error, ValueError, zlib.error, TypeError) as exc:
        raise EpisodeStateError(f"space {what}: bad base64/zlib array: {exc}") from exc
    stream = io.BytesIO(payload)
    try:  # the .npy header first: its shape must fit the cap and the data that follows
        version = np.lib.format.read_magic(stream)
        read_header = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}
        if version not in read_header:
            raise ValueError(f".npy version {version} is not supported")
        shape, _, dtype = read_header[version](stream)
        check_array(shape, dtype, budget.limits.max_value_bytes, f"space {what}")
        if array_nbytes(shape, dtype) > len(payload) - stream.tell():
            raise ValueError(f"the header declares shape {shape} but the data is shorter")
        stream.seek(0)  # the .npy format; object arrays (which would need pickle) are refused by allow_pickle=False
        return np.load(stream, allow_pickle=False)
    except ValueTooLargeError:
        raise
    except ValueError as exc:
        raise EpisodeStateError(f"space {what}: not a plain .npy array: {exc}") from exc


def space_from_rllib(d: Any, limits: DecodeLimits | None = None, budget: DecodeBudget | None = None) -> gym.Space:
    """Convert RLlib's ``gym_space_to_dict`` form into a gymnasium space.

    One value of the space (a Box of ``shape``, a MultiBinary of ``n``) must fit ``limits.max_value_bytes``;
    the zlib bounds of all its parts share one ``budget``.
    """
    limits = limits or DecodeLimits()
    budget = budget or limits.budget(0)
    if not isinstance(d, dict) or "space" not in d:
        raise EpisodeStateError(f"not an RLlib space dict: {d!r:.200}")
    kind = _key(d["space"])
    if kind == "box":
        dtype = np.dtype(_key(d.get("dtype", "float32")))
        shape = _space_shape(d.get("shape"), dtype, limits, "box")
        low, high = _ndarray_field(d["low"], "low", budget), _ndarray_field(d["high"], "high", budget)
        return gym.spaces.Box(low=low, high=high, shape=shape, dtype=dtype)
    if kind == "discrete":
        return gym.spaces.Discrete(int(d["n"]), start=int(d.get("start", 0)))
    if kind == "multi-binary":
        return gym.spaces.MultiBinary(list(_space_shape(d["n"], np.int8, limits, "multi-binary")))
    if kind == "multi-discrete":
        nvec = _ndarray_field(d["nvec"], "nvec", budget)
        return gym.spaces.MultiDiscrete(nvec, dtype=np.dtype(_key(d.get("dtype", "int64"))))
    if kind == "tuple":
        return gym.spaces.Tuple([space_from_rllib(s, limits, budget) for s in d["spaces"]])
    if kind == "dict":
        return gym.spaces.Dict({_key(k): space_from_rllib(s, limits, budget) for k, s in d["spaces"].items()})
    raise EpisodeStateError(f"unsupported RLlib space type {kind!r}")


def _space_shape(shape: Any, dtype: Any, limits: DecodeLimits, kind: str) -> tuple[int, ...]:
    """A space's declared shape, refused if one value of it would be over the per-value cap."""
    try:
        check_array(shape, dtype, limits.max_value_bytes, f"one value of the recorded {kind} space")
    except ValueTooLargeError:
        raise
    except ValueError as exc:
        raise EpisodeStateError(f"recorded {kind} space: {exc}") from exc
    return tuple(int(x) for x in shape) if isinstance(shape, (list, tuple)) else (int(shape),)


def _stack(items: list[Any], dtype: Any = None) -> Any:
    """Stack a list of per-step values (arrays, scalars or dicts/tuples of them) into a batch."""
    first = items[0]
    if isinstance(first, dict):
        return {k: _stack([it[k] for it in items], dtype) for k in first}
    if isinstance(first, (tuple, list)) and not isinstance(first, np.ndarray):
        return tuple(_stack([it[i] for it in items], dtype) for i in range(len(first)))
    return np.asarray(np.stack([np.asarray(x) for x in items]), dtype=dtype)


def _buffer(buf: Any, name: str, expected: int, dtype: Any = None) -> Any:
    """The part of a lookback-buffer state that belongs to this chunk.

    ``data`` holds ``lookback`` entries of the previous chunk followed by this
    chunk's own ``expected`` entries; finalized buffers hold one batch instead
    of a list of per-step values.
    """
    if not isinstance(buf, dict) or "data" not in buf:
        raise EpisodeStateError(f"{name}: missing lookback buffer")
    lookback = int(buf.get("lookback") or 0)
    data = buf["data"]
    if buf.get("finalized"):
        data = _as_batch(data)
        n = batch_len(data)
    elif isinstance(data, list):
        n = len(data)
    else:
        raise EpisodeStateError(f"{name}: buffer data is {type(data).__name__}, expected a list")
    if n != lookback + expected:
        raise EpisodeStateError(f"{name}: {n} entries, expected lookback {lookback} + {expected} of this chunk")
    if buf.get("finalized"):
        return batch_map(lambda a: np.asarray(a[lookback:], dtype=dtype), data)
    return _stack(data[lookback:], dtype)


def _as_batch(data: Any) -> Any:
    if isinstance(data, dict):
        return {k: _as_batch(v) for k, v in data.items()}
    if isinstance(data, (list, tuple)) and data and isinstance(data[0], (np.ndarray, dict, list)):
        return tuple(_as_batch(v) for v in data)
    return np.asarray(data)


@dataclass
class EpisodeChunk:
    """One decoded record: a chunk of an episode, starting at env step ``t_started``."""

    id: str
    t_started: int
    obs: Any
    actions: Any
    rewards: np.ndarray
    terminated: bool
    truncated: bool
    agent_id: str | None = None
    module_id: str | None = None
    extras: dict[str, np.ndarray] = field(default_factory=dict)
    infos: list[Any] | None = None

    def __len__(self) -> int:
        return len(self.rewards)


def chunk_from_state(state: dict[str, Any]) -> EpisodeChunk:
    """Cut an episode state into the data of its own chunk (the lookback part is a previous chunk's)."""
    if "agent_episodes" in state:
        raise EpisodeStateError("a MultiAgentEpisode record: only SingleAgentEpisode records are supported (issue 3)")
    try:
        t0, t1 = int(state["t_started"]), int(state["t"])
        eid = _key(state["id_"])
    except (KeyError, TypeError, ValueError) as exc:
        raise EpisodeStateError(f"missing or bad id_/t_started/t: {exc}") from exc
    steps = t1 - t0
    if steps < 1:
        raise EpisodeStateError(f"episode {eid!r}: chunk has {steps} steps (t_started={t0}, t={t1})")
    obs = _buffer(state.get("observations"), "observations", steps + 1)
    actions = _buffer(state.get("actions"), "actions", steps)
    rewards = np.asarray(_buffer(state.get("rewards"), "rewards", steps, np.float64), dtype=np.float64).reshape(-1)
    extras = {}
    for name, buf in (state.get("extra_model_outputs") or {}).items():
        extras[_key(name)] = np.asarray(_buffer(buf, f"extra_model_outputs.{_key(name)}", steps))
    infos = None
    if isinstance(state.get("infos"), dict):
        all_infos = _buffer_list(state["infos"], steps + 1)
        infos = all_infos[1:] if all_infos is not None else None
    terminated, truncated = bool(state.get("is_terminated")), bool(state.get("is_truncated"))
    if terminated and truncated:
        raise EpisodeStateError(f"episode {eid!r}: both is_terminated and is_truncated")
    return EpisodeChunk(
        id=str(eid), t_started=t0, obs=obs, actions=actions, rewards=rewards,
        terminated=terminated, truncated=truncated,
        agent_id=None if state.get("agent_id") is None else str(_key(state["agent_id"])),
        module_id=None if state.get("module_id") is None else str(_key(state["module_id"])),
        extras=extras, infos=infos,
    )


def _buffer_list(buf: dict, expected: int) -> list[Any] | None:
    data, lookback = buf.get("data"), int(buf.get("lookback") or 0)
    if not isinstance(data, list) or len(data) != lookback + expected:
        return None
    return list(data[lookback:])

