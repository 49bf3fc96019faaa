"""The one place converters turn an env id into observation/action spaces and an env spec."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import gymnasium as gym

from offlinerl.convert.interface import ConvertUsageError
from offlinerl.trusted import UntrustedNameError, make_env

__all__ = ["EnvSpaces", "env_spaces"]


@dataclass(frozen=True)
class EnvSpaces:
    """What a converter takes from an env."""

    observation_space: gym.Space
    action_space: gym.Space
    env_spec: dict[str, Any] | None
    """The made env's spec in gymnasium's JSON form (kwargs included); None if it does not serialise."""


def env_spaces(env_id: str, env_kwargs: dict[str, Any] | None = None, *, trusted: bool = True,
               what: str = "--env") -> EnvSpaces:
    """Make ``env_id`` (with ``env_kwargs``) once and return its spaces and spec, the kwargs included;
    ``ConvertUsageError`` if it cannot be made.

    ``trusted=False`` for an id read from a file (a recording, a spec): ``module:Env-v0`` ids (which
    would import ``module``) are refused unless allow-listed (:func:`offlinerl.trusted.env_id_problem`).
    """
    try:
        env = make_env(env_id, env_kwargs, what=what, explicit=trusted)  # refuses an id that would import
    except UntrustedNameError as exc:
        raise ConvertUsageError(str(exc)) from None
    except Exception as exc:  # gymnasium raises several error types for unknown or broken ids
        raise ConvertUsageError(f"{what} {env_id}: cannot make the environment: {type(exc).__name__}: {exc}") from exc
    try:
        spec = None
        if env.spec is not None:
            try:
                spec = json.loads(env.spec.to_json())
            except Exception:  # a spec with non-JSON kwargs: keep none
                spec = None
        return EnvSpaces(env.observation_space, env.action_space, spec)
    finally:
        env.close()
