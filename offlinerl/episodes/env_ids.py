"""Env ids read from files (recordings, datasets, checkpoints): which ones may be made."""

from __future__ import annotations

__all__ = ["importing_id_problem"]


def importing_id_problem(env_id: str, what: str = "the data") -> str | None:
    """Why an env id read from a file must not be made (``None`` if it may).

    ``module:Env-v0`` ids make gymnasium import ``module``: a file could run code that way, so such
    ids are only made when the user passes them (``--env`` / ``evaluation.env``).
    """
    if ":" not in env_id:
        return None
    return (f"{what} names the env {env_id!r}, which would import the module {env_id.split(':')[0]!r}; ids read "
            "from files are not imported - pass the env explicitly (--env / evaluation.env) if you trust it")
