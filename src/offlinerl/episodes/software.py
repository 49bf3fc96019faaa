"""The software a generated dataset was made with, as its ``card.json`` records it (``made_with``).

The same generator, steps and seed write the same bytes only with the same software: MuJoCo 4 simulates otherwise
than 3, and a simulator or torch may take other vector kernels on another CPU. A dataset made with other simulation
packages than the ones installed here is evaluated on a slightly different task than the one that made it, which
``offlinerl train`` and ``offlinerl benchmark`` say (:func:`simulator_note`). A card comes from a file the user may
have been handed: every reader here takes any shape and says less rather than raise.
"""

from __future__ import annotations

import platform
from importlib import metadata
from typing import Any

__all__ = ["SIMULATION_PACKAGES", "made_with", "made_with_text", "simulator_mismatch", "simulator_note"]

#: The distributions whose version decides what an env simulates: a dataset made under one version and evaluated
#: under another is scored on a slightly different task.
SIMULATION_PACKAGES = ("mujoco", "gymnasium", "gymnasium-robotics")
#: Beside those, what a generator's bytes depend on (the actors run in torch; the recipes' noise is numpy's).
_DATA_PACKAGES = ("torch", "numpy")


def _version(distribution: str) -> str | None:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def made_with() -> dict[str, Any]:
    """What a generated dataset is written with: Python, the versions of the packages its bytes depend on (None:
    not installed) and the CPU (its architecture and the vector instruction set torch dispatches to)."""
    import torch

    packages = {name: _version(name) for name in (*SIMULATION_PACKAGES, *_DATA_PACKAGES)}
    return {"python": platform.python_version(), "packages": packages,
            "cpu": {"machine": platform.machine(), "torch_capability": torch.backends.cpu.get_cpu_capability()}}


def made_with_text(record: dict[str, Any] | None) -> str | None:
    """``MuJoCo 3.17.0, gymnasium 1.4.0, torch 2.13.0+cpu, numpy 2.4.6 on x86_64 (AVX512)``; None for a card
    written before cards recorded it."""
    if not isinstance(record, dict) or not isinstance(record.get("packages"), dict):
        return None
    names = {"mujoco": "MuJoCo"}
    parts = [f"{names.get(k, k)} {v}" for k, v in record["packages"].items() if v]
    cpu = record.get("cpu")
    where = f" on {cpu.get('machine')} ({cpu.get('torch_capability')})" if isinstance(cpu, dict) and cpu else ""
    return ", ".join(parts) + where


def simulator_mismatch(card: dict[str, Any] | None) -> list[str]:
    """``["mujoco 4.0.1 (this machine: 3.17.0)", ...]``: the simulation packages the card's dataset was made with
    in another version than the one installed here (empty when the same, or when the card does not say)."""
    record = (card or {}).get("made_with")
    packages = record.get("packages") if isinstance(record, dict) else None
    if not isinstance(packages, dict):
        return []
    out = []
    for name in SIMULATION_PACKAGES:
        made, here = packages.get(name), _version(name)
        if made and made != here:
            out.append(f"{name} {made} (this machine: {here or 'not installed'})")
    return out


def simulator_note(what: str, card: dict[str, Any] | None) -> str | None:
    """The note a job or benchmark logs when ``what`` (a dataset) was made with other simulation packages than this
    machine's (:func:`simulator_mismatch`); None when they are the same or the card does not say."""
    mismatch = simulator_mismatch(card)
    if not mismatch:
        return None
    return (f"note: {what} was made with {', '.join(mismatch)}: evaluation runs this machine's simulator, not the "
            "one that made the data, so returns and scores are on a slightly different task (make the data again "
            "here, or install the versions it was made with)")
