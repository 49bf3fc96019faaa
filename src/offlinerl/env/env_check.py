"""Check, before any work, that an env can be made and acts in the spaces a module was built for.

Called before the first update of a job (its evaluation env), before
``evaluate`` runs a checkpoint and before ``collect`` acts with one, so a wrong
env id or an env with other spaces is a one-line message, not a traceback after
training.
"""

from __future__ import annotations

from typing import Any, Mapping

import gymnasium as gym

from offlinerl.core.policy_mapping import PolicyMapping, UnmappedAgentError, map_agent, mapped_module_id
from offlinerl.trusted import UntrustedNameError, is_pettingzoo, make_env, make_parallel_env

__all__ = ["EnvMismatchError", "check_env", "check_team_env", "space_mismatch", "unmapped_agents"]


class EnvMismatchError(ValueError):
    """The env cannot be made, or its spaces differ from the module's."""


def space_mismatch(expected: gym.Space, actual: gym.Space, where: str = "") -> str | None:
    """Why a module built for ``expected`` cannot act in ``actual`` (``None`` if it can).

    Compared: the kind of space, Box shapes, Discrete ``n``/``start``,
    MultiDiscrete ``nvec``, Dict keys and Tuple lengths, recursively. Box bounds
    and dtypes may differ (recorded data often states other bounds than the env).
    """
    label = where or "space"
    if type(expected) is not type(actual):
        return f"{label}: {type(expected).__name__} expected, the env has {type(actual).__name__}"
    if isinstance(expected, gym.spaces.Box) and expected.shape != actual.shape:
        return f"{label}: shape {expected.shape} expected, the env has {actual.shape}"
    if isinstance(expected, gym.spaces.Discrete) and (expected.n, expected.start) != (actual.n, actual.start):
        return f"{label}: Discrete({expected.n}, start={expected.start}) expected, the env has Discrete({actual.n}, start={actual.start})"
    if isinstance(expected, gym.spaces.MultiDiscrete) and expected.nvec.tolist() != actual.nvec.tolist():
        return f"{label}: MultiDiscrete{expected.nvec.tolist()} expected, the env has {actual.nvec.tolist()}"
    if isinstance(expected, gym.spaces.MultiBinary) and expected.shape != actual.shape:
        return f"{label}: MultiBinary{expected.shape} expected, the env has {actual.shape}"
    if isinstance(expected, gym.spaces.Dict):
        if set(expected.spaces) != set(actual.spaces):
            return f"{label}: keys {sorted(expected.spaces)} expected, the env has {sorted(actual.spaces)}"
        return next((r for k in expected.spaces
                     if (r := space_mismatch(expected[k], actual[k], f"{label}.{k}"))), None)
    if isinstance(expected, gym.spaces.Tuple):
        if len(expected.spaces) != len(actual.spaces):
            return f"{label}: {len(expected.spaces)} entries expected, the env has {len(actual.spaces)}"
        return next((r for i, (e, a) in enumerate(zip(expected.spaces, actual.spaces))
                     if (r := space_mismatch(e, a, f"{label}.{i}"))), None)
    return None


def _make(env_id: str, env_kwargs: Mapping[str, Any] | None, what: str, trusted: bool) -> Any:
    """The env, or ``EnvMismatchError`` saying in one line why it cannot be made (an unknown id, a keyword the env
    does not take, an id that would import a module)."""
    try:
        return make_env(env_id, env_kwargs, what=what, explicit=trusted)  # refuses an id that would import
    except UntrustedNameError as exc:
        raise EnvMismatchError(str(exc)) from None
    except Exception as exc:  # noqa: BLE001 - gymnasium raises many kinds; all mean "cannot make it"
        hint = ("; if a package registers it (PointMaze ids: gymnasium_robotics), allow that package with "
                "--env-package NAME") if type(exc).__name__ in ("NameNotFound", "NamespaceNotFound") else ""
        raise EnvMismatchError(f"cannot make the env {env_id!r}: {type(exc).__name__}: {str(exc)[:300]}{hint}") from None


def check_env_makes(env_id: str, env_kwargs: Mapping[str, Any] | None = None) -> None:
    """Make ``env_id`` (an id the user named) with ``env_kwargs`` once and close it: ``EnvMismatchError`` in one line
    if it cannot be made, before any work."""
    _make(env_id, env_kwargs, "the command line", True).close()


def check_env(env_id: str, observation_space: gym.Space, action_space: gym.Space,
              env_kwargs: Mapping[str, Any] | None = None, *, trusted: bool = True, what: str = "the data") -> None:
    """Make ``env_id`` once and compare its spaces with ``what``'s; raise ``EnvMismatchError`` naming the difference.

    ``trusted=False`` for an env id read from a file (a dataset, checkpoint or job file): an id of the
    form ``module:Env-v0`` would make gymnasium import ``module``, so such ids are refused unless the
    module is allow-listed or the user names the env themselves (:mod:`offlinerl.trusted`).
    """
    if not isinstance(env_id, str) or not env_id:
        raise EnvMismatchError(f"{what} names no usable env id ({env_id!r}); pass --env")
    if is_pettingzoo(env_id):
        raise EnvMismatchError(f"the env {env_id!r} is a multi-agent PettingZoo env; {what} holds one single-agent "
                               "module")
    env = _make(env_id, env_kwargs, what, trusted)
    try:
        problems = [p for p in (space_mismatch(observation_space, env.observation_space, "observation space"),
                                space_mismatch(action_space, env.action_space, "action space")) if p]
    finally:
        env.close()
    if problems:
        raise EnvMismatchError(f"the env {env_id!r} does not fit {what}: {'; '.join(problems)}")


def _module_of(policy_mapping: PolicyMapping | None, agent: str, module_ids: list[str]) -> str | None:
    """The module acting for ``agent`` as :func:`unmapped_agents` finds it (None: no module)."""
    if policy_mapping is None and len(module_ids) == 1:
        return module_ids[0]
    try:
        return mapped_module_id(policy_mapping, None, agent)
    except UnmappedAgentError:
        return None


def unmapped_agents(agents: list[str], module_ids: list[str], policy_mapping: PolicyMapping | None = None) -> list[str]:
    """Why some of ``agents`` have no module of ``module_ids`` to act for them (``[]``: every agent has one), as
    ``MultiRLModule.module_for_agent`` finds it: without a mapping one module acts for every agent and several
    each for the agent of its id; with ``policy_mapping``, the module it maps the agent to."""
    if policy_mapping is None:
        missing = [a for a in agents if len(module_ids) > 1 and a not in module_ids]
        return [f"the agents {missing} have no module (the modules are {module_ids})"] if missing else []
    problems, unmatched = [], []
    for agent in agents:
        try:
            module_id = map_agent(policy_mapping, agent)
        except UnmappedAgentError:
            unmatched.append(agent)
            continue
        if module_id not in module_ids:
            problems.append(f"policy_mapping maps the agent {agent} to the module {module_id!r}, which is not trained "
                            f"(the modules are {module_ids})")
    if unmatched:
        problems.insert(0, f"the agents {unmatched} match no pattern of policy_mapping {list(policy_mapping)}")
    return problems


def check_team_env(env_id: str, observation_space: gym.Space, action_space: gym.Space, module_ids: list[str],
                   env_kwargs: Mapping[str, Any] | None = None, *, policy_mapping: PolicyMapping | None = None,
                   trusted: bool = True, what: str = "the data",
                   module_spaces: Mapping[str, tuple[gym.Space, gym.Space]] | None = None) -> None:
    """Make the PettingZoo env ``env_id`` (``pettingzoo:MODULE``) once and check that every agent acts in
    ``what``'s spaces (``module_spaces``: those of the module it maps to) and has a module (:func:`unmapped_agents`:
    through ``policy_mapping``, the config's, when given). ``EnvMismatchError`` naming the difference."""
    if not is_pettingzoo(env_id):
        raise EnvMismatchError(f"{what} holds {len(module_ids)} modules ({', '.join(module_ids)}); evaluating them "
                               f"needs a multi-agent env (pettingzoo:MODULE), not {env_id!r}")
    try:
        env = make_parallel_env(env_id, env_kwargs, what=what, explicit=trusted)
    except UntrustedNameError as exc:
        raise EnvMismatchError(str(exc)) from None
    except Exception as exc:  # noqa: BLE001 - a user's env may raise anything while it is made
        raise EnvMismatchError(f"cannot make the env {env_id!r}: {type(exc).__name__}: {str(exc)[:300]}") from None
    try:
        agents = [str(a) for a in env.possible_agents]
        expected = {a: (observation_space, action_space) for a in agents}
        if module_spaces is not None:  # each agent in its module's spaces (an unmapped agent is reported below)
            modules = {a: _module_of(policy_mapping, a, list(module_ids)) for a in agents}
            expected = {a: module_spaces[m] for a, m in modules.items() if m in module_spaces}
        problems = [p for a, (obs, act) in expected.items()
                    for p in (space_mismatch(obs, env.observation_space(a), f"agent {a}: observation space"),
                              space_mismatch(act, env.action_space(a), f"agent {a}: action space")) if p]
    finally:
        env.close()
    problems += unmapped_agents(agents, list(module_ids), policy_mapping)
    if problems:
        raise EnvMismatchError(f"the env {env_id!r} does not fit {what}: {'; '.join(problems)}")
