"""What the step rows hold, per agent: the spaces inferred from it, and the refusal when agents differ.

One pass over the typed rows (``map_batches``) counts, per agent (one group ``""`` without the spec's
``agent``), the widths of each observation leaf and of the action, and whether the actions are integers 0 or
more. Agents whose widths differ get spaces of their own (inferred per agent, a version-2 dataset); agents whose
actions differ in kind (``Discrete`` against ``Box``), whose Dict observations differ, or that differ from one
declared space are refused with an error naming the two agents and the difference.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from functools import reduce
from typing import Mapping, Sequence

import gymnasium as gym
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from offlinerl.convert.interface import ConvertUsageError
from offlinerl.convert.table.rows import ACTION, ACTION_INT, AGENT, ERROR, FILE, POS, obs_col
from offlinerl.convert.table.spec import LEAF, TableSpec

__all__ = ["Seen", "seen_by_agent", "merged", "check_agents_agree", "infer_spaces"]

#: How many unreadable files an error about having no readable rows names.
_NAMED_FILES = 3


@dataclass(frozen=True)
class Seen:
    """What the readable step rows of one agent (or of several, merged) hold."""

    widths: Mapping[str, Mapping[int, int]] = field(default_factory=dict)
    """Per row-table column (each observation leaf, the action): how many rows have each width."""
    integers: bool = True
    """Every action was written as integers."""
    low: float | None = None
    """Smallest action value; None: no action was read."""
    high: float | None = None
    """Largest action value; None: no action was read."""

    @property
    def readable(self) -> bool:
        """Whether any action was read (a space can be inferred)."""
        return bool(self.widths.get(ACTION))

    def top(self, name: str) -> int | None:
        """The most common width of a column (ties: the smaller), or None when no value was read."""
        counts = self.widths.get(name) or {}
        return max(counts.items(), key=lambda kv: (kv[1], -kv[0]))[0] if counts else None

    def merge(self, other: "Seen") -> "Seen":
        """What both hold."""
        widths = {n: dict(Counter(self.widths.get(n, {})) + Counter(other.widths.get(n, {})))
                  for n in {*self.widths, *other.widths}}
        lows = [x for x in (self.low, other.low) if x is not None]
        highs = [x for x in (self.high, other.high) if x is not None]
        return Seen(widths, self.integers and other.integers, min(lows) if lows else None,
                    max(highs) if highs else None)


def _stats(batch: pa.Table, leaves: tuple[str, ...], by_agent: bool, files: tuple[str, ...]) -> pa.Table:
    """Per block, one JSON row: each agent's :class:`Seen` and the files that could not be read."""
    ok = batch.filter(pc.is_null(batch.column(ERROR)))
    agents = ok.column(AGENT).to_pylist() if by_agent else [""] * ok.num_rows
    values = {name: ok.column(name).to_pylist() for name in (*leaves, ACTION)}
    ints = ok.column(ACTION_INT).to_pylist()
    seen: dict[str, dict] = {}
    for i, agent in enumerate(agents):
        s = seen.setdefault(agent, {"widths": {n: Counter() for n in values}, "integers": True, "low": None,
                                    "high": None})
        for name, column in values.items():
            if column[i] is not None:
                s["widths"][name][len(column[i])] += 1
        action = values[ACTION][i]
        if action is not None:
            s["integers"] = s["integers"] and bool(ints[i])
            if action:
                s["low"] = min(action) if s["low"] is None else min(s["low"], *action)
                s["high"] = max(action) if s["high"] is None else max(s["high"], *action)
    unread = batch.filter(pc.and_(pc.is_null(batch.column(POS)), pc.is_valid(batch.column(ERROR))))
    errors = (e.split("\t", 1) for e in unread.column(ERROR).to_pylist())  # "reason\tmessage"
    problems = [f"{files[f]}: {message}" for f, (_, message) in zip(unread.column(FILE).to_pylist(), errors)]
    return pa.table({"stats": [json.dumps({"agents": seen, "unread": problems})]})


def seen_by_agent(rows, spec: TableSpec, files: Sequence[str]) -> tuple[dict[str, Seen], list[str]]:
    """Each agent's :class:`Seen` (one agent ``""`` without the spec's ``agent``) and, for each file that could
    not be read, ``"path: why"``."""
    leaves = tuple(obs_col(k) for k, _ in spec.observation.leaves)
    blocks = rows.map_batches(_stats, batch_format="pyarrow", fn_kwargs={
        "leaves": leaves, "by_agent": bool(spec.agent), "files": tuple(files)}).take_all()
    by_agent: dict[str, Seen] = {}
    unread: list[str] = []
    for block in blocks:
        stats = json.loads(block["stats"])
        unread += stats["unread"]
        for agent, s in stats["agents"].items():
            seen = Seen({n: {int(w): c for w, c in counts.items()} for n, counts in s["widths"].items()},
                        s["integers"], s["low"], s["high"])
            by_agent[agent] = by_agent.get(agent, Seen()).merge(seen)
    return dict(sorted(by_agent.items())), unread


def merged(by_agent: Mapping[str, Seen]) -> Seen:
    """What every agent's rows hold together."""
    return reduce(Seen.merge, by_agent.values(), Seen())


def _discrete(seen: Seen, spec: TableSpec) -> bool:
    """Whether the actions look like a ``Discrete`` space: one column, one value, integers 0 or more."""
    return (len(spec.action.leaves[0][1]) == 1 and seen.top(ACTION) == 1 and seen.integers
            and seen.low is not None and seen.low >= 0)


def _values(n: int) -> str:
    return f"{n} value" if n == 1 else f"{n} values"


def _signature(seen: Seen, spec: TableSpec, infer_action: bool) -> dict[str, str]:
    """What must be alike across agents: ``what -> value``, for the values the agent's rows hold."""
    out = {}
    for key, _ in spec.observation.leaves:
        if (width := seen.top(obs_col(key))) is not None:
            out[f"observation{'.' + key if key else ''} width"] = _values(width)
    if (width := seen.top(ACTION)) is not None:
        out["action width"] = _values(width)
        if infer_action:
            out["action kind"] = "integers 0 or more (Discrete)" if _discrete(seen, spec) else "other numbers (Box)"
    return out


def check_agents_agree(by_agent: Mapping[str, Seen], spec: TableSpec, infer_action: bool) -> None:
    """Refuse (:class:`ConvertUsageError`) agents whose observations or actions differ in width, or in kind when
    the action space is inferred (``infer_action``), naming the two agents and the difference."""
    first: dict[str, tuple[str, str]] = {}  # what -> (agent, value) of the first agent that has it
    for agent, seen in by_agent.items():
        for what, value in _signature(seen, spec, infer_action).items():
            other, theirs = first.setdefault(what, (agent, value))
            if theirs != value:
                hint = ("a dataset has one observation space and one action space for all its agents: convert "
                        "agents that differ into datasets of their own"
                        if what == "action kind" or spec.observation.is_dict else
                        "a declared observation_space / action_space applies to every agent: declare each agent's "
                        "spaces in agent_spaces, or leave them out to infer them per agent")
                raise ConvertUsageError(f"agents {other!r} and {agent!r} differ in {what}: {theirs} for {other!r}, "
                                        f"{value} for {agent!r} (column {spec.agent!r}); {hint}")


def infer_spaces(seen: Seen, spec: TableSpec, observation_space: gym.Space | None = None,
                 action_space: gym.Space | None = None, unread: Sequence[str] = ()
                 ) -> tuple[gym.Space, gym.Space, list[str]]:
    """The spaces not given, inferred from what every agent's rows hold (``seen``): observation
    Box(-inf, inf, float32) of each leaf's most common width; action Discrete(max + 1) when one column holds
    only integers written as integers, 0 or more, else Box(-inf, inf, float32). The note names only the spaces
    inferred. With no readable row, :class:`ConvertUsageError` naming the first files not read (``unread``)."""
    if not seen.readable:
        why = "".join(f"; file not read: {u}" for u in unread[:_NAMED_FILES])
        raise ConvertUsageError(f"no readable step rows: cannot infer the spaces (declare them in the spec){why}")
    boxes = {k: gym.spaces.Box(-np.inf, np.inf, shape=(seen.top(obs_col(k)) or 1,), dtype=np.float32)
             for k, _ in spec.observation.leaves}
    obs = gym.spaces.Dict(boxes) if spec.observation.is_dict else boxes[LEAF]
    act: gym.Space = (gym.spaces.Discrete(int(seen.high) + 1) if _discrete(seen, spec)
                      else gym.spaces.Box(-np.inf, np.inf, shape=(seen.top(ACTION),), dtype=np.float32))
    inferred = {what: space for what, space, given in (("observation", obs, observation_space),
                                                       ("action", act, action_space)) if given is None}
    note = (f"spaces inferred from the data: {', '.join(f'{w} {s}' for w, s in inferred.items())} (check them; "
            f"declare {'/'.join(f'{w}_space' for w in inferred)} in the spec for the real bounds)")
    return (obs if observation_space is None else observation_space,
            act if action_space is None else action_space, [note])
