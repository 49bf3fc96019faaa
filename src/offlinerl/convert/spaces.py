"""The one place converters turn an env id into observation/action spaces and an env spec."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import gymnasium as gym

from offlinerl.convert.interface import ConvertUsageError
from offlinerl.trusted import UntrustedNameError, is_pettingzoo, make_env, make_parallel_env

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
    would import ``module``) are refused unless allow-listed (:func:`offlinerl.trusted.env_id_problem`). A
    PettingZoo env (``pettingzoo:MODULE``) gives the spaces its agents share (agents that differ are refused).
    """
    if is_pettingzoo(env_id):
        return _team_spaces(env_id, env_kwargs, trusted=trusted, what=what)
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


def _team_spaces(env_id: str, env_kwargs: dict[str, Any] | None, *, trusted: bool, what: str) -> EnvSpaces:
    try:
        env = make_parallel_env(env_id, env_kwargs, what=what, explicit=trusted)
    except UntrustedNameError as exc:
        raise ConvertUsageError(str(exc)) from None
    except Exception as exc:  # noqa: BLE001 - a user's env may raise anything while it is made
        raise ConvertUsageError(f"{what} {env_id}: cannot make the environment: {type(exc).__name__}: {exc}") from exc
    try:
        agents = list(env.possible_agents)
        obs, act = env.observation_space(agents[0]), env.action_space(agents[0])
        for agent in agents[1:]:
            if env.observation_space(agent) != obs or env.action_space(agent) != act:
                raise ConvertUsageError(f"{what} {env_id}: agents {agents[0]} and {agent} act in different spaces; "
                                        "a dataset has one observation space and one action space")
        return EnvSpaces(obs, act, {"id": env_id, "kwargs": dict(env_kwargs or {})})
    finally:
        env.close()
