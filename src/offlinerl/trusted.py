"""Which names read from files may reach an import: the one check for env ids and env packages.

A gymnasium id of the form ``module:Env-v0`` makes ``gymnasium.make`` import ``module`` (its top-level
code runs). Files a user may have been handed - converter specs, job files, run and sweep directories,
datasets, checkpoints - therefore never choose a module to import. A name is trusted when it comes from

- gymnasium's registry (a plain id such as ``CartPole-v1``: whatever registered it was imported by
  trusted code),
- the user's allow-list of env packages: ``--env-package NAME`` on the command line (repeatable),
  ``OFFLINERL_ENV_PACKAGES`` (comma-separated), or ``env_packages: [NAME, ...]`` in the user's own settings
  file (``~/.config/offlinerl/settings.yaml``, or the file ``OFFLINERL_SETTINGS`` names) - never a file the
  user may have been handed; allow-listed packages are imported before an env is made, so the envs they
  register are found, and ids ``NAME:Env-v0`` / ``NAME.sub:Env-v0`` are made,
- an explicit argument of the user (``--env ID`` on the command line, an ``env=`` argument in Python).

PettingZoo parallel envs are named ``pettingzoo:MODULE`` (``MODULE.parallel_env(**kwargs)`` makes one, e.g.
``pettingzoo:mpe2.simple_spread_v3``): the same rule, with ``MODULE`` the module the id would import.

Config and job files are read through :func:`load_config_file`: the env ids they name (any ``env`` key, e.g.
``evaluation.env``, ``online.env``) and those ``--set`` gives go through :func:`env_id_problem`.

Class names read from checkpoints are looked up in a registry table (``offlinerl.training.checkpoint``),
never imported.
"""

from __future__ import annotations

import importlib
import os
import re
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from offlinerl.config_io import ConfigError, apply_overrides, load_file, parse_override
from offlinerl.simulator_log import route_mujoco_warnings

__all__ = [
    "ENV_PACKAGES_VAR", "SETTINGS_VAR", "MAX_ENV_ID_CHARS", "ENV_ID_KEYS", "user_settings_file", "UntrustedNameError",
    "allowed_env_packages", "allow_env_packages", "split_packages", "import_env_packages", "env_id_problem",
    "check_env_id", "check_env_ids", "load_config_file", "make_env", "env_spec_of", "PETTINGZOO_PREFIX",
    "is_pettingzoo", "make_parallel_env",
]

#: Environment variable holding the allow-list of env packages (comma- or space-separated module names).
ENV_PACKAGES_VAR = "OFFLINERL_ENV_PACKAGES"
#: Environment variable naming the user's settings file (default ``~/.config/offlinerl/settings.yaml``).
SETTINGS_VAR = "OFFLINERL_SETTINGS"
#: Longest env id accepted from anywhere (gymnasium ids are a few dozen characters).
MAX_ENV_ID_CHARS = 200
#: Config keys whose string values are gymnasium env ids.
ENV_ID_KEYS = frozenset({"env"})
#: Prefix of a PettingZoo parallel env's id: ``pettingzoo:MODULE``.
PETTINGZOO_PREFIX = "pettingzoo:"

_MODULE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")
_HOW = ("ids read from files never import a module; if you trust it, allow its package with "
        f"--env-package {{pkg}} (or {ENV_PACKAGES_VAR}={{pkg}}), or pass the env explicitly with --env")


class UntrustedNameError(ValueError):
    """A name read from a file would import a module nobody allowed, or is not a usable name at all."""


def split_packages(text: str | None) -> list[str]:
    """The module names of an allow-list text (comma- or space-separated)."""
    return [p for p in re.split(r"[,\s]+", text or "") if p]


def user_settings_file() -> Path:
    """The user's own settings file: ``$OFFLINERL_SETTINGS``, else ``~/.config/offlinerl/settings.yaml``."""
    return Path(os.environ.get(SETTINGS_VAR) or Path.home() / ".config" / "offlinerl" / "settings.yaml")


def _settings_packages() -> list[str]:
    path = user_settings_file()
    if not path.is_file():
        return []
    try:
        packages = load_file(path, "settings files").get("env_packages", [])
    except ConfigError as exc:
        raise UntrustedNameError(f"your settings file {exc}") from None
    if not isinstance(packages, list) or not all(isinstance(p, str) for p in packages):
        raise UntrustedNameError(f"{path}: env_packages must be a list of module names, got {packages!r}")
    return packages


def allowed_env_packages() -> frozenset[str]:
    """The allow-list: the module names in ``OFFLINERL_ENV_PACKAGES`` and the user's settings file."""
    return frozenset(split_packages(os.environ.get(ENV_PACKAGES_VAR, ""))) | frozenset(_settings_packages())


def allow_env_packages(names: Iterable[str]) -> frozenset[str]:
    """Add ``names`` (``--env-package``) to the allow-list of this process and of the processes it starts
    (Ray workers, sweep trials inherit ``OFFLINERL_ENV_PACKAGES``); :class:`UntrustedNameError` for a name
    that is not a module name. Returns the whole allow-list."""
    names = list(names)
    bad = [n for n in names if not isinstance(n, str) or not _MODULE.fullmatch(n)]
    if bad:
        raise UntrustedNameError(f"--env-package {bad[0]!r}: not a module name (e.g. gymnasium_robotics)")
    merged = sorted(allowed_env_packages() | set(names))
    if merged:
        os.environ[ENV_PACKAGES_VAR] = ",".join(merged)
    return frozenset(merged)


def _allowed(module: str, allowed: frozenset[str]) -> bool:
    return any(module == pkg or module.startswith(pkg + ".") for pkg in allowed)


def import_env_packages() -> None:
    """Import every allow-listed env package (so the envs they register can be made); a package that cannot
    be imported is an :class:`UntrustedNameError` naming it."""
    for pkg in sorted(allowed_env_packages()):
        if not _MODULE.fullmatch(pkg):
            raise UntrustedNameError(f"{ENV_PACKAGES_VAR}: {pkg!r} is not a module name")
        try:
            importlib.import_module(pkg)
        except Exception as exc:  # noqa: BLE001 - any failure of a user's package is "cannot import it"
            raise UntrustedNameError(f"env package {pkg!r} (--env-package / {ENV_PACKAGES_VAR}) cannot be "
                                     f"imported: {type(exc).__name__}: {str(exc)[:300]}") from None


def env_id_problem(env_id: Any, what: str = "the data", *, explicit: bool = False) -> str | None:
    """Why ``env_id`` (found in ``what``) must not be made; ``None`` if it may.

    Any source: a non-empty string of at most :data:`MAX_ENV_ID_CHARS` printable characters. Not
    ``explicit`` (read from a file): a ``module:Env`` id only if ``module`` is allow-listed.
    """
    if not isinstance(env_id, str) or not env_id:
        return f"{what} names no usable env id ({str(env_id)[:80]!r})"
    if len(env_id) > MAX_ENV_ID_CHARS or not env_id.isprintable():
        return f"{what}: {env_id[:80]!r}{'...' if len(env_id) > 80 else ''} is not a gymnasium env id"
    pettingzoo = is_pettingzoo(env_id)
    if pettingzoo and not _MODULE.fullmatch(env_id[len(PETTINGZOO_PREFIX):]):
        return f"{what}: {env_id!r} does not name a module (pettingzoo:MODULE, e.g. pettingzoo:mpe2.simple_spread_v3)"
    if explicit or ":" not in env_id:
        return None
    module = env_id[len(PETTINGZOO_PREFIX):] if pettingzoo else env_id.split(":", 1)[0]
    if _MODULE.fullmatch(module) and _allowed(module, allowed_env_packages()):
        return None
    pkg = module.split(".")[0] if _MODULE.fullmatch(module) else "NAME"
    return f"{what} names the env {env_id!r}, which would import the module {module!r}; " + _HOW.format(pkg=pkg)


def check_env_id(env_id: Any, what: str = "the data", *, explicit: bool = False) -> str:
    """``env_id`` if it may be made (:func:`env_id_problem`), else :class:`UntrustedNameError`."""
    if (problem := env_id_problem(env_id, what, explicit=explicit)) is not None:
        raise UntrustedNameError(problem)
    return env_id


def check_env_ids(data: Mapping[str, Any], where: str) -> None:
    """Refuse (``ConfigError``) an env id under any :data:`ENV_ID_KEYS` key of config data ``data`` that would
    import a module nobody allowed (:func:`env_id_problem`); ``where`` names the source."""
    stack: list[tuple[str, Any]] = [("", data)]
    while stack:
        prefix, node = stack.pop()
        for key, value in node.items():
            dotted = f"{prefix}{key}"
            if isinstance(value, Mapping):
                stack.append((dotted + ".", value))
            elif key in ENV_ID_KEYS and isinstance(value, str):
                if (problem := env_id_problem(value, f"{where}: {dotted}")) is not None:
                    raise ConfigError(problem)


def load_config_file(path: str | Path, overrides: Sequence[str] = ()) -> dict[str, Any]:
    """A config or job file's mapping (``offlinerl.config_io.load_file``) with ``overrides`` (``--set
    KEY=VALUE``) applied; the env ids of the file and of each override are checked (:func:`check_env_ids`), so a
    file a user was handed never chooses a module to import. One ``ConfigError`` naming the file or the
    override for any problem."""
    data = load_file(path)
    check_env_ids(data, str(path))
    out = apply_overrides(data, list(overrides))
    for text in overrides:  # only what each override sets: the file's own values were checked above
        keys, given = parse_override(text)
        for k in reversed(keys):
            given = {k: given}
        check_env_ids(given, "--set")
    return out


def is_pettingzoo(env_id: Any) -> bool:
    """Whether ``env_id`` names a PettingZoo parallel env (``pettingzoo:MODULE``)."""
    return isinstance(env_id, str) and env_id.startswith(PETTINGZOO_PREFIX)


def make_parallel_env(env_id: str, env_kwargs: Mapping[str, Any] | None = None, *, what: str = "the data",
                      explicit: bool = False) -> Any:
    """``MODULE.parallel_env(**env_kwargs)`` for ``env_id`` = ``pettingzoo:MODULE`` after :func:`check_env_id`
    and :func:`import_env_packages`; :class:`UntrustedNameError` for a module that cannot be imported or has no
    ``parallel_env``."""
    check_env_id(env_id, what, explicit=explicit)
    if not is_pettingzoo(env_id):
        raise UntrustedNameError(f"{what}: {env_id!r} is not a PettingZoo env id (pettingzoo:MODULE)")
    import_env_packages()
    module = env_id[len(PETTINGZOO_PREFIX):]
    try:
        factory = getattr(importlib.import_module(module), "parallel_env")
    except ModuleNotFoundError as exc:
        raise UntrustedNameError(f"{what}: the env {env_id!r}: no module {exc.name!r} (is its package installed? "
                                 "pip install 'offlinerl[multiagent]' for MPE)") from None
    except AttributeError:
        raise UntrustedNameError(f"{what}: the env {env_id!r}: module {module!r} has no parallel_env()") from None
    return factory(**dict(env_kwargs or {}))


def make_env(env_id: str, env_kwargs: Mapping[str, Any] | None = None, *, what: str = "the data",
             explicit: bool = False) -> Any:
    """``gymnasium.make(env_id, **env_kwargs)`` after :func:`check_env_id` and :func:`import_env_packages`:
    the only way offlinerl makes an env from a name."""
    check_env_id(env_id, what, explicit=explicit)
    if is_pettingzoo(env_id):
        raise UntrustedNameError(f"{what}: {env_id!r} is a multi-agent PettingZoo env; this needs a single-agent "
                                 "gymnasium env")
    import_env_packages()
    import gymnasium as gym

    _load_env_module(gym, env_id)
    return gym.make(env_id, **dict(env_kwargs or {}))


def _load_env_module(gym: Any, env_id: str) -> None:
    """Import the module of the (checked) id's entry point, as ``gym.make`` is about to, so that an env built on
    MuJoCo has it loaded before its model compiles and MuJoCo's warnings go to logging
    (:mod:`offlinerl.simulator_log`). Whatever fails here, ``gym.make`` reports in its own words next."""
    try:
        entry_point = gym.spec(env_id).entry_point
        if isinstance(entry_point, str):
            importlib.import_module(entry_point.split(":")[0])
    except Exception:  # noqa: BLE001 - gym.make raises the same error with its own message
        return
    route_mujoco_warnings()


def env_spec_of(env_id: str, *, what: str = "the data", explicit: bool = False) -> Any:
    """``gymnasium.spec(env_id)`` under the same rule as :func:`make_env`."""
    check_env_id(env_id, what, explicit=explicit)
    import_env_packages()
    import gymnasium as gym

    return gym.spec(env_id)
