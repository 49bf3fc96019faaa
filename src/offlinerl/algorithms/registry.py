"""Algorithms by name: ``"bc"`` -> (config class, learner class, module class, algorithm class).

An algorithm package calls ``register_algorithm`` when imported; ``get_algorithm``
imports the packages it knows about on first use.
"""

from __future__ import annotations

import importlib
from typing import NamedTuple

__all__ = ["AlgorithmSpec", "register_algorithm", "get_algorithm", "algorithm_names", "algorithm_of_config"]

#: Packages imported on demand to find an algorithm by name.
KNOWN_PACKAGES = {
    "bc": "offlinerl.algorithms.bc",
    "marwil": "offlinerl.algorithms.marwil",
    "cql": "offlinerl.algorithms.cql",
    "iql": "offlinerl.algorithms.iql",
    "td3bc": "offlinerl.algorithms.td3bc",
    "sac": "offlinerl.algorithms.sac",
    "rebrac": "offlinerl.algorithms.rebrac",
    "edac": "offlinerl.algorithms.edac",
}

_REGISTRY: dict[str, "AlgorithmSpec"] = {}


class AlgorithmSpec(NamedTuple):
    config_cls: type
    learner_cls: type
    module_cls: type
    algorithm_cls: type | None = None
    """None = the base ``Algorithm``."""


def register_algorithm(name: str, config_cls: type, learner_cls: type, module_cls: type, algorithm_cls: type | None = None) -> None:
    _REGISTRY[name] = AlgorithmSpec(config_cls, learner_cls, module_cls, algorithm_cls)


def get_algorithm(name: str) -> AlgorithmSpec:
    if name not in _REGISTRY and name in KNOWN_PACKAGES:
        try:
            importlib.import_module(KNOWN_PACKAGES[name])
        except ModuleNotFoundError as exc:
            if exc.name != KNOWN_PACKAGES[name]:
                raise
    if name not in _REGISTRY:
        raise KeyError(f"unknown algorithm {name!r}; available: {', '.join(algorithm_names())}")
    return _REGISTRY[name]


def algorithm_names() -> list[str]:
    for name, package in KNOWN_PACKAGES.items():
        if name not in _REGISTRY:
            try:
                importlib.import_module(package)
            except ModuleNotFoundError:
                pass
    return sorted(_REGISTRY)


def algorithm_of_config(config_cls: type) -> str:
    """The registered name whose config class is exactly ``config_cls`` (``CQLConfig`` -> ``"cql"``); ``KeyError``
    if none or several are."""
    names = [name for name in algorithm_names() if _REGISTRY[name].config_cls is config_cls]
    if len(names) != 1:
        what = "no registered algorithm uses" if not names else f"the algorithms {names} all use"
        raise KeyError(f"{what} {config_cls.__name__}; register it with register_algorithm, or name the algorithm "
                       "(build(dataset, algorithm=...))")
    return names[0]
