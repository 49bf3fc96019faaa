"""The one place converters turn an env id into observation/action spaces and an env spec."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import gymnasium as gym

from offlinerl.convert.interface import ConvertUsageError
from offlinerl.episodes.agent_spaces import AgentSpacesError, storage_spaces
from offlinerl.trusted import UntrustedNameError, is_pettingzoo, make_env, make_parallel_env

__all__ = ["EnvSpaces", "env_spaces"]


@dataclass(frozen=True)
class EnvSpaces:
    """What a converter takes from an env."""

    observation_space: gym.Space
    action_space: gym.Space
    env_spec: dict[str, Any] | None
    """The made env's spec in gymnasium's JSON form (kwargs included); None if it does not serialise."""
    agent_spaces: dict[str, tuple[gym.Space, gym.Space]] | None = None
    """A PettingZoo env whose agents act in different spaces: each agent's (the two above are then the storage
    spaces, ``offlinerl.episodes.agent_spaces``); None: every agent acts in the two above."""


def env_spaces(env_id: str, env_kwargs: dict[str, Any] | None = None, *, trusted: bool = True,
               what: str = "--env") -> EnvSpaces:
    """Make ``env_id`` (with ``env_kwargs``) once and return its spaces and spec, the kwargs included;
    ``ConvertUsageError`` if it cannot be made.

    ``trusted=False`` for an id read from a file (a recording, a spec): ``module:Env-v0`` ids (which
    would import ``module``) are refused unless allow-listed (:func:`offlinerl.trusted.env_id_problem`). A
    PettingZoo env (``pettingzoo:MODULE``) gives the spaces its agents share, or, where they differ, the storage
    spaces and each agent's (``episodes.agent_spaces``; agents that cannot share columns are refused).
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
        agents = [str(a) for a in env.possible_agents]
        try:
            obs, act, agent_spaces = storage_spaces({a: env.observation_space(a) for a in agents},
                                                    {a: env.action_space(a) for a in agents}, what=f"{what} {env_id}")
        except AgentSpacesError as exc:
            raise ConvertUsageError(str(exc)) from None
        return EnvSpaces(obs, act, {"id": env_id, "kwargs": dict(env_kwargs or {})}, agent_spaces)
    finally:
        env.close()
