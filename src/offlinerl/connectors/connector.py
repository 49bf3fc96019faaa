"""``ConnectorV2`` and ``ConnectorPipeline``: small callables that turn episodes
(or env observations, or module outputs) into batches, one concern each.

Contract (the Ray Data ``map_batches`` contract, plus episodes):
``connector(batch: dict[str, ndarray], episodes, state) -> batch``. ``episodes``
is the source a connector reads from (``EpisodeColumns`` on the learner side,
``None`` on the env side); ``state`` is a per-call dict connectors of one
pipeline may use to pass values along. Persistent state (e.g. observation
statistics) is exposed through ``get_state``/``set_state`` and is saved in
checkpoints.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

__all__ = ["ConnectorV2", "ConnectorPipeline", "ConnectorStateError"]

Batch = dict[str, Any]


class ConnectorStateError(ValueError):
    """A state a connector cannot take (missing, wrong size, not finite); the message starts with
    ``<connector name>.<key>`` so a caller can say where the state came from."""


class ConnectorV2:
    """Base class; stateless connectors only implement ``__call__``."""

    needs_complete_episodes: bool = False
    """True where a step's output depends on later steps of its episode (e.g. returns-to-go): online
    experience must then reach the connector as whole episodes, not chunks."""

    @property
    def name(self) -> str:
        return type(self).__name__

    def __call__(self, batch: Batch, episodes: Any = None, state: dict[str, Any] | None = None) -> Batch:
        raise NotImplementedError

    def get_state(self) -> dict[str, Any]:
        return {}

    def set_state(self, state: Mapping[str, Any]) -> None:
        if state:
            raise ValueError(f"{self.name} is stateless but got state keys {sorted(state)}")

    def __repr__(self) -> str:
        return f"{self.name}()"


class ConnectorPipeline(ConnectorV2):
    """An explicit list of connectors applied in order; its state is keyed by connector name."""

    def __init__(self, connectors: Iterable[ConnectorV2] = ()) -> None:
        self.connectors = list(connectors)
        names = [c.name for c in self.connectors]
        dupes = {n for n in names if names.count(n) > 1}
        if dupes:
            raise ValueError(f"connector names must be unique in a pipeline (state is keyed by them): {sorted(dupes)}")

    def __call__(self, batch: Batch, episodes: Any = None, state: dict[str, Any] | None = None) -> Batch:
        state = {} if state is None else state
        for connector in self.connectors:
            batch = connector(batch, episodes, state)
        return batch

    @property
    def needs_complete_episodes(self) -> bool:  # type: ignore[override]
        return any(c.needs_complete_episodes for c in self.connectors)

    def find(self, cls: type) -> list[ConnectorV2]:
        """Connectors of a given class (e.g. to share ``NormalizeObservations`` state)."""
        return [c for c in self.connectors if isinstance(c, cls)]

    def get_state(self) -> dict[str, Any]:
        return {c.name: s for c in self.connectors if (s := c.get_state())}

    def set_state(self, state: Mapping[str, Any]) -> None:
        by_name = {c.name: c for c in self.connectors}
        unknown = set(state) - set(by_name)
        if unknown:
            raise ValueError(f"connector state for {sorted(unknown)}, but the pipeline has {sorted(by_name)}")
        for name, s in state.items():
            by_name[name].set_state(s)

    def __repr__(self) -> str:
        return f"ConnectorPipeline({', '.join(map(repr, self.connectors))})"
