"""What the one job loop (``offlinerl.jobs.loop.run_job``: train and finetune) checks after every iteration.

- ``metrics_json``: one ``metrics.jsonl`` line that is always valid JSON (a
  non-finite value is written as ``null``, never as a bare ``NaN`` token).
- ``check_losses``: a loss that became NaN or infinite stops the job with
  :class:`NonFiniteLossError`, raised before that iteration is checkpointed, so
  the last checkpoint on disk is the last good one.
- ``saturated_actor``: a deterministic tanh actor (TD3+BC, ReBRAC) whose actions sit at the action bounds
  while the data's do not; the loop says so once, with the setting to change.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Mapping

from offlinerl.config_io import to_finite_json
from offlinerl.core import metrics as M

__all__ = ["NonFiniteLossError", "check_losses", "metrics_json", "saturated_actor"]


def metrics_json(metrics: Mapping[str, Any]) -> str:
    """One ``metrics.jsonl`` line (without the newline): strict JSON, non-finite values as ``null``."""
    return json.dumps(to_finite_json(metrics), allow_nan=False)


class NonFiniteLossError(RuntimeError):
    """Loss terms became NaN or infinite; the message names them, the iteration, the updates and the last good
    checkpoint."""

    def __init__(self, terms: Mapping[str, float], iteration: int, updates: tuple[int, int],
                 last_checkpoint: str | Path | None) -> None:
        self.terms, self.iteration, self.updates = dict(terms), iteration, updates
        self.last_checkpoint = None if last_checkpoint is None else str(last_checkpoint)
        where = (f"the last good checkpoint is {self.last_checkpoint}" if self.last_checkpoint
                 else "no checkpoint was written before it")
        super().__init__(f"{_describe(self.terms)} at iteration {iteration} (updates {updates[0]}-{updates[1]}); {where}")


def _describe(terms: Mapping[str, float]) -> str:
    """``loss 'critic' became nan``, ``losses 'actor' and 'critic' became nan``, ``losses 'a' (nan) and 'b' (inf) ...``."""
    def listed(parts: list[str]) -> str:
        return parts[0] if len(parts) == 1 else f"{', '.join(parts[:-1])} and {parts[-1]}"

    values = {str(v) for v in terms.values()}
    if len(values) == 1:
        return f"loss{'es' if len(terms) > 1 else ''} {listed(list(terms))} became {values.pop()}"
    return f"losses {listed([f'{n} ({v})' for n, v in terms.items()])} became non-finite"


def _loss_name(key: str) -> str:
    """``losses/critic`` -> ``'critic'``; ``agent_0/losses/critic`` -> ``'critic' of module 'agent_0'``."""
    module, name = M.loss_term(key)
    return f"{name!r}" + (f" of module {module!r}" if module else "")


def check_losses(metrics: Mapping[str, Any], *, updates_before: int,
                 last_checkpoint: str | Path | None) -> None:
    """Raise :class:`NonFiniteLossError` if any ``[<module>/]losses/<name>`` metric of one iteration is not finite."""
    bad = {_loss_name(k): v for k, v in metrics.items()
           if M.is_loss(k) and isinstance(v, (int, float)) and not math.isfinite(v)}
    if bad:
        updates = (updates_before + 1, int(metrics.get(M.UPDATES, updates_before)))
        raise NonFiniteLossError(bad, int(metrics.get(M.ITERATION, 0)), updates, last_checkpoint)


#: An actor is reported saturated when at least this share of its action components lie within 1% of a bound ...
SATURATED = 0.5
#: ... and the data's share is at least this much lower.
SATURATED_ABOVE_DATA = 0.4
#: The setting that pulls each algorithm's actor back towards the data's actions.
_BC_KNOB = {"rebrac": "raise config.actor_bc_coef", "td3bc": "lower config.alpha"}


def saturated_actor(metrics: Mapping[str, Any]) -> str | None:
    """A one-line notice if an iteration's ``[<module>/]<algo>/actor_at_bounds`` is at least ``SATURATED`` and
    ``SATURATED_ABOVE_DATA`` above the data's ``<algo>/data_at_bounds``; else None. Where a tanh actor sits at a
    bound its gradient is ~0: neither its BC term nor its Q term pulls those actions back."""
    for key, value in metrics.items():
        if not key.endswith("/actor_at_bounds") or not isinstance(value, (int, float)):
            continue
        data = metrics.get(key[: -len("actor_at_bounds")] + "data_at_bounds")
        if not isinstance(data, (int, float)) or value < SATURATED or value - data < SATURATED_ABOVE_DATA:
            continue
        algo = key.split("/")[-2]
        knob = _BC_KNOB.get(algo, "weigh the actor's BC term more")
        updates = metrics.get(M.UPDATES)
        when = f" after {int(updates):,} updates" if isinstance(updates, (int, float)) else ""
        return (f"the actor is at the action bounds{when}: {value:.0%} of its action components lie within 1% of a "
                f"bound, against {data:.0%} of the data's ({key}). There tanh's gradient is ~0, so neither the BC "
                f"term nor Q pulls them back; if its evaluations stay low, {knob} (docs/training.md, 'An actor at "
                f"the action bounds')")
    return None
