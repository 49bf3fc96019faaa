"""offlinerl: offline-first, data-centric reinforcement learning on Ray Data and PyTorch.

The Python API, imported on first use (``import offlinerl`` itself stays instant)::

    from offlinerl import CQLConfig, load_policy

    algo = CQLConfig(normalize_observations=True).build("datasets/pendulum-mixed")
    result = algo.fit(updates=4000)              # the run directory `offlinerl train` writes
    policy = load_policy(result["checkpoint"])   # no dataset, no Ray
    action = policy.predict(obs)
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

#: Public name -> the module that defines it (imported when the name is first used).
_LAZY = {
    "BCConfig": "offlinerl.algorithms.bc",
    "CQLConfig": "offlinerl.algorithms.cql",
    "IQLConfig": "offlinerl.algorithms.iql",
    "MARWILConfig": "offlinerl.algorithms.marwil",
    "TD3BCConfig": "offlinerl.algorithms.td3bc",
    "ReBRACConfig": "offlinerl.algorithms.rebrac",
    "EDACConfig": "offlinerl.algorithms.edac",
    "Trainer": "offlinerl.api",
    "Policy": "offlinerl.api",
    "load_policy": "offlinerl.api",
    "LoggingConfig": "offlinerl.api",
}

__all__ = ["__version__", *_LAZY]

if TYPE_CHECKING:
    from offlinerl.algorithms.bc import BCConfig
    from offlinerl.algorithms.cql import CQLConfig
    from offlinerl.algorithms.edac import EDACConfig
    from offlinerl.algorithms.iql import IQLConfig
    from offlinerl.algorithms.marwil import MARWILConfig
    from offlinerl.algorithms.rebrac import ReBRACConfig
    from offlinerl.algorithms.td3bc import TD3BCConfig
    from offlinerl.api import LoggingConfig, Policy, Trainer, load_policy


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'offlinerl' has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY[name]), name)
    globals()[name] = value  # once imported, a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
