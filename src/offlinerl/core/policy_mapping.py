"""The agent -> module mapping of a multi-agent job: ``policy_mapping`` in the algorithm config.

    None                                   each row trains the module of its module_id, else its agent_id
    "shared"                               every agent's rows train one module, which acts for every agent
    {"adversary_*": adv, "agent_*": good}  glob patterns (fnmatch, case-sensitive), the first that matches wins

A mapping is applied to an agent id: a row's ``agent_id`` (a row without one: its ``module_id``, else
``default_policy``) when the data is read, an env agent's id when the team acts (``MultiRLModule.module_for_agent``
through :class:`AgentToModule`) and when an env is checked before a job. With a mapping, the rows' ``module_id``
only stands in for a missing ``agent_id``. An agent no pattern matches is an :class:`UnmappedAgentError` naming it.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from typing import Any, Mapping, Union

from offlinerl.config_io import ConfigError
from offlinerl.episodes import schema as S

__all__ = ["PolicyMapping", "UnmappedAgentError", "AgentToModule", "policy_mapping_problem", "map_agent",
           "mapped_module_id"]

#: A module id (every agent's) or ``{glob pattern: module id}`` in order of precedence.
PolicyMapping = Union[str, Mapping[str, str]]


class UnmappedAgentError(ConfigError):
    """An agent id that no pattern of ``policy_mapping`` matches."""


def policy_mapping_problem(mapping: Any) -> str | None:
    """Why ``mapping`` is no usable ``policy_mapping`` (None if it is): a module id, or a non-empty mapping of
    non-empty patterns to module ids; a module id is a non-empty string without dots."""
    if mapping is None:
        return None
    if isinstance(mapping, str):
        return S.module_id_problem(mapping)
    if not isinstance(mapping, Mapping) or not mapping:
        return f"a module id or a non-empty mapping {{pattern: module id}}, got {mapping!r}"
    for pattern, module_id in mapping.items():
        if not isinstance(pattern, str) or not pattern:
            return f"a pattern must be a non-empty string, got {pattern!r}"
        problem = S.module_id_problem(module_id)
        if problem:
            return f"{pattern!r}: {problem}"
    return None


def map_agent(mapping: PolicyMapping, agent_id: str) -> str:
    """The module ``mapping`` gives ``agent_id``: the module id itself, or that of the first pattern matching it."""
    if isinstance(mapping, str):
        return mapping
    for pattern, module_id in mapping.items():
        if fnmatch.fnmatchcase(agent_id, pattern):
            return module_id
    hint = " (rows without an agent_id count as that agent)" if agent_id == S.DEFAULT_MODULE_ID else ""
    raise UnmappedAgentError(f"policy_mapping: the agent {agent_id!r} matches none of the patterns "
                             f"{list(mapping)}{hint}; add one for it (a last \"*\": MODULE catches every agent)")


def mapped_module_id(mapping: PolicyMapping | None, module_id: str | None, agent_id: str | None) -> str:
    """The module a row of ``module_id`` and ``agent_id`` trains: without a mapping ``schema.row_module_id``; with
    one, the mapped agent id (``agent_id``, else ``module_id``, else ``default_policy``)."""
    if mapping is None:
        return S.row_module_id(module_id, agent_id)
    key = agent_id if agent_id is not None else (module_id if module_id is not None else S.DEFAULT_MODULE_ID)
    return map_agent(mapping, key)


@dataclass(frozen=True)
class AgentToModule:
    """``policy_mapping`` as ``MultiRLModule``'s ``agent_to_module``: a picklable callable from an agent id to its
    module id (an agent of None: ``default_policy``)."""

    mapping: str | tuple[tuple[str, str], ...]
    """The module id, or the ``(pattern, module id)`` pairs in order."""

    @classmethod
    def of(cls, mapping: PolicyMapping) -> "AgentToModule":
        return cls(mapping if isinstance(mapping, str) else tuple((str(p), str(m)) for p, m in mapping.items()))

    def __call__(self, agent_id: str | None) -> str:
        mapping = self.mapping if isinstance(self.mapping, str) else dict(self.mapping)
        return map_agent(mapping, S.DEFAULT_MODULE_ID if agent_id is None else str(agent_id))
