"""Agents of different spaces in one dataset (format version 2): per-agent spaces over padded storage columns.

A parquet column has one Arrow type, so a dataset holds one observation and one action type. Agents whose spaces
differ only in size (MPE's adversaries and good agents: ``Box(8,)`` and ``Box(10,)``; a speaker's ``Discrete(3)``
and a listener's ``Discrete(5)``) share columns of the *storage* spaces: a 1-D Box as wide as the widest agent's,
each agent's values first and zeros after them; a Discrete of the largest ``n``. ``dataset.json`` then records
``agent_spaces`` (each agent's own two spaces) beside the storage spaces, and ``format_version`` 2, so a reader
that does not know this layout refuses the dataset instead of reading the padding as data.

Readers decode a row with its agent's space (``arrow.from_arrow`` takes a space narrower than the stored values:
their first columns); a module is built and trained on the spaces of the agents it acts for
(:func:`module_spaces`), which must agree.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any, Iterable, Mapping

import gymnasium as gym
import numpy as np

from offlinerl.episodes.spaces import MAX_BOX_ELEMENTS, space_from_json, space_to_json

__all__ = ["AgentSpaces", "AgentSpacesError", "storage_spaces", "pad_episode", "module_spaces", "agent_spaces_json",
           "agent_spaces_from_json", "check_fits_storage", "spaces_differ"]

#: ``{agent_id: (observation space, action space)}``.
AgentSpaces = Mapping[str, tuple[gym.Space, gym.Space]]


class AgentSpacesError(ValueError):
    """Agents' spaces that one dataset (or one module) cannot hold together; the message names two of them."""


def _is_flat_box(space: gym.Space) -> bool:
    return isinstance(space, gym.spaces.Box) and len(space.shape) == 1


def _storage(spaces: list[gym.Space], agents: list[str], kind: str, what: str) -> gym.Space:
    """The storage space of one kind (observation or action) for ``spaces`` (of ``agents``, for messages)."""
    first = spaces[0]
    if all(s == first for s in spaces):
        return first
    if all(isinstance(s, gym.spaces.Discrete) and int(s.start) == 0 for s in spaces):
        return gym.spaces.Discrete(max(int(s.n) for s in spaces))
    if all(_is_flat_box(s) and s.dtype == first.dtype for s in spaces):
        width = max(s.shape[0] for s in spaces)  # padding is 0: the bounds hold 0 wherever an agent pads
        lows = np.stack([np.pad(s.low.astype(np.float64), (0, width - s.shape[0])) for s in spaces])
        highs = np.stack([np.pad(s.high.astype(np.float64), (0, width - s.shape[0])) for s in spaces])
        return gym.spaces.Box(lows.min(0).astype(first.dtype), highs.max(0).astype(first.dtype), (width,), first.dtype)
    other = next(i for i, s in enumerate(spaces) if s != first)
    raise AgentSpacesError(
        f"{what}: agents {agents[0]} and {agents[other]} have {kind} spaces {first} and {spaces[other]}; one dataset "
        f"holds agents of different {kind} spaces only when all are 1-D Boxes of one dtype or all are Discrete "
        "(starting at 0)")


def storage_spaces(observation_spaces: Mapping[str, gym.Space], action_spaces: Mapping[str, gym.Space], *,
                   what: str = "the env") -> tuple[gym.Space, gym.Space, dict[str, tuple[gym.Space, gym.Space]] | None]:
    """``(observation storage space, action storage space, agent spaces)`` for agents acting in the given spaces;
    ``agent spaces`` is None when every agent has the same two spaces (a dataset of format version 1).
    ``AgentSpacesError`` for spaces that cannot share columns."""
    agents = sorted(observation_spaces)
    obs = [observation_spaces[a] for a in agents]
    act = [action_spaces[a] for a in agents]
    if all(o == obs[0] for o in obs) and all(a == act[0] for a in act):
        return obs[0], act[0], None
    return (_storage(obs, agents, "observation", what), _storage(act, agents, "action", what),
            {a: (o, s) for a, o, s in zip(agents, obs, act)})


def spaces_differ(spaces: AgentSpaces | None) -> bool:
    """Whether the agents of ``spaces`` act in more than one pair of spaces (None: no)."""
    pairs = list((spaces or {}).values())
    return any(p != pairs[0] for p in pairs[1:])


def _pad(values: Any, space: gym.Space) -> Any:
    """Values of one agent's space as values of the storage ``space`` (zeros after a narrower Box's)."""
    if not isinstance(space, gym.spaces.Box):
        return values
    values = np.asarray(values)
    width = space.shape[0]
    if values.shape[-1] == width:
        return values
    out = np.zeros((*values.shape[:-1], width), dtype=values.dtype)
    out[..., :values.shape[-1]] = values
    return out


def pad_episode(episode: Any, observation_space: gym.Space, action_space: gym.Space) -> Any:
    """``episode`` (a ``SingleAgentEpisode`` in its agent's spaces) with observations and actions in the storage
    spaces."""
    return replace(episode, obs=_pad(episode.obs, observation_space), actions=_pad(episode.actions, action_space))


def agent_spaces_json(spaces: AgentSpaces | None) -> dict[str, dict[str, Any]] | None:
    """The JSON form ``dataset.json`` and checkpoints record (None stays None)."""
    if spaces is None:
        return None
    return {a: {"observation_space": space_to_json(o), "action_space": space_to_json(s)}
            for a, (o, s) in sorted(spaces.items())}


def _declared_elements(data: Any) -> int:
    """Elements the Box bounds of a space's JSON form would take, counted before any is made (0: not a Box)."""
    if not isinstance(data, dict):
        return 0
    if data.get("type") == "Box" and isinstance(data.get("shape"), list):
        try:
            return math.prod(max(0, int(s)) for s in data["shape"])
        except (TypeError, ValueError):
            return 0
    subspaces = data.get("subspaces")
    children = subspaces.values() if isinstance(subspaces, dict) else subspaces if isinstance(subspaces, list) else ()
    return sum(_declared_elements(c) for c in children)


def agent_spaces_from_json(data: Any, source: str) -> dict[str, tuple[gym.Space, gym.Space]] | None:
    """Inverse of :func:`agent_spaces_json`; ``ValueError`` naming ``source`` for a malformed value, or for spaces
    whose bounds together would take more than ``MAX_BOX_ELEMENTS`` elements (checked before any is made)."""
    if data is None:
        return None
    if not isinstance(data, dict) or not data:
        raise ValueError(f"{source}: agent_spaces must be a non-empty object of agent ids, got {type(data).__name__}")
    total = sum(_declared_elements(e.get(k)) for e in data.values() if isinstance(e, dict)
                for k in ("observation_space", "action_space"))
    if total > MAX_BOX_ELEMENTS:
        raise ValueError(f"{source}: agent_spaces declare {total:,} Box elements in all, more than {MAX_BOX_ELEMENTS:,}")
    out = {}
    for agent, entry in data.items():
        if not isinstance(entry, dict) or set(entry) != {"observation_space", "action_space"}:
            raise ValueError(f"{source}: agent_spaces[{agent!r}] must hold observation_space and action_space")
        try:
            out[str(agent)] = (space_from_json(entry["observation_space"]), space_from_json(entry["action_space"]))
        except ValueError as exc:
            raise ValueError(f"{source}: agent_spaces[{agent!r}]: {exc}") from None
    return out


def check_fits_storage(spaces: AgentSpaces, observation_space: gym.Space, action_space: gym.Space,
                       source: str) -> None:
    """``ValueError`` unless every agent's spaces are stored in the storage spaces (a wider Box or a larger
    Discrete of the same kind)."""
    for agent, pair in spaces.items():
        for kind, own, storage in (("observation", pair[0], observation_space), ("action", pair[1], action_space)):
            if own == storage:
                continue
            fits = ((_is_flat_box(own) and _is_flat_box(storage) and own.dtype == storage.dtype
                     and own.shape[0] <= storage.shape[0])
                    or (isinstance(own, gym.spaces.Discrete) and isinstance(storage, gym.spaces.Discrete)
                        and int(own.start) == 0 and int(storage.start) == 0 and own.n <= storage.n))
            if not fits:
                raise ValueError(f"{source}: agent {agent!r}'s {kind} space {own} is not stored in the dataset's "
                                 f"{kind} space {storage}")


def module_spaces(module_of_agent: Iterable[tuple[str, str | None]], spaces: AgentSpaces | None,
                  observation_space: gym.Space, action_space: gym.Space,
                  module_ids: Iterable[str]) -> dict[str, tuple[gym.Space, gym.Space]]:
    """Each module's ``(observation space, action space)``: the dataset's for every module when it records no agent
    spaces; else those of the agents the module acts for (``module_of_agent``: ``(module_id, agent_id)`` pairs of
    the rows), which must agree (``AgentSpacesError`` naming two agents that do not)."""
    out: dict[str, tuple[gym.Space, gym.Space]] = {m: (observation_space, action_space) for m in module_ids}
    if spaces is None:
        return out
    owner: dict[str, str] = {}
    for mid, agent in sorted(module_of_agent, key=str):
        if agent is None or agent not in spaces:
            raise AgentSpacesError(f"a row of module {mid!r} names the agent {agent!r}, which has no entry in "
                                   "dataset.json's agent_spaces")
        if mid in owner and spaces[owner[mid]] != spaces[agent]:
            a, b = owner[mid], agent
            raise AgentSpacesError(
                f"module {mid!r} would act for agents {a} and {b}, whose spaces differ ({spaces[a][0]}, "
                f"{spaces[a][1]} against {spaces[b][0]}, {spaces[b][1]}); a module acts in one observation and one "
                "action space: map them to different modules (policy_mapping)")
        owner.setdefault(mid, agent)
        out[mid] = spaces[agent]
    return out
