"""Output directories written atomically, and what ``--overwrite`` may replace.

Every writer (datasets, checkpoints, Minari exports) goes through
:func:`atomic_directory`: it checks the output against the command's inputs
and the kind of output it writes, removes temporary directories left by
writers that were killed, and renames a finished temporary directory into
place. docs/safety.md ("Writers: what --overwrite may replace") states the rules.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import uuid
from pathlib import Path
from typing import Iterator, Sequence

from offlinerl.episodes.stale import OWNER_FILE, clean_stale_siblings, old_name, tmp_name, write_owner

__all__ = [
    "OUTPUT_KINDS",
    "OutputExistsError",
    "UnsafeOutputError",
    "QuarantineKeptError",
    "atomic_directory",
    "check_output",
    "refuse_quarantine_over_existing",
]

#: What a writer produces -> the file (relative to the output directory) that marks an existing output
#: of that kind. ``--overwrite`` replaces only a directory holding its kind's marker (or an empty one).
OUTPUT_KINDS: dict[str, str] = {
    "dataset": "dataset.json",  # an episode dataset (offlinerl.episodes.info.INFO_FILE)
    "checkpoint": "algorithm.json",  # a training checkpoint
    "minari": "data/metadata.json",  # a Minari dataset written by `offlinerl export minari`
}


class OutputExistsError(FileExistsError):
    """The output path exists and ``overwrite`` was not asked for."""


class UnsafeOutputError(OutputExistsError):
    """The output may not be written there, even with ``overwrite``: it is, holds or lies inside an input,
    is a protected directory, or is something other than an output of the same kind."""


class QuarantineKeptError(OutputExistsError):
    """Records were quarantined, so the existing output was kept instead of being replaced."""


def _protected() -> dict[Path, str]:
    places = {Path("/"): "the filesystem root"}
    for where, what in ((Path.home, "your home directory"), (Path.cwd, "the current directory")):
        try:
            places[where().resolve()] = what
        except (OSError, RuntimeError):  # no home directory known, or the current one was deleted
            pass
    return places


def _within(child: Path, parent: Path) -> bool:
    return child == parent or parent in child.parents


def check_output(
    path: str | Path, overwrite: bool = False, *, kind: str, inputs: Sequence[str | Path] = ()
) -> Path:
    """The resolved output path, if a writer of ``kind`` may write (or, with ``overwrite``, replace) it.

    Raises :class:`UnsafeOutputError` when the output is an input, holds one or lies inside one (all
    paths resolved, symlinks followed), is ``/``, the home directory, the current directory or one of
    their ancestors, or exists as something ``overwrite`` may not replace (a file; a non-empty
    directory without the kind's marker file). Raises :class:`OutputExistsError` for a replaceable
    output without ``overwrite``.
    """
    if kind not in OUTPUT_KINDS:
        raise ValueError(f"unknown output kind {kind!r} (one of {', '.join(OUTPUT_KINDS)})")
    out = Path(path).resolve()
    shown = str(out) if Path(path) == out else f"{path} (resolved: {out})"
    for place, what in _protected().items():
        if _within(place, out):
            held = "is" if place == out else "holds"
            raise UnsafeOutputError(f"{shown}: refusing to write here: it {held} {what}")
    sources = [Path(item).resolve() for item in inputs]
    if out in sources:
        raise UnsafeOutputError(f"{shown}: refusing to write here: it is an input of this command")
    for src in sources:
        if out in src.parents:
            raise UnsafeOutputError(f"{shown}: refusing to write here: it holds the input {src}")
    for src in sources:
        if src in out.parents:
            raise UnsafeOutputError(f"{shown}: refusing to write here: it lies inside the input directory {src}")
    if not out.exists():
        return out
    marker = OUTPUT_KINDS[kind]
    if not out.is_dir():
        raise UnsafeOutputError(f"{shown} exists and is not a directory; --overwrite replaces only a {kind} "
                                f"directory, so remove it yourself or choose another output")
    if any(out.iterdir()) and not (out / marker).is_file():
        raise UnsafeOutputError(f"{shown} is a non-empty directory that is not a {kind} (no {marker}); "
                                f"--overwrite replaces only a {kind}, so choose another output")
    if not overwrite:
        raise OutputExistsError(f"{shown} already exists (pass overwrite=True / --overwrite to replace it)")
    return out


def refuse_quarantine_over_existing(path: str | Path, quarantined: int, allow_quarantine: bool) -> None:
    """Raise :class:`QuarantineKeptError` when ``quarantined`` records would replace an existing output.

    Call it inside :func:`atomic_directory`, before its block ends: the temporary directory is then
    removed and the existing output stays as it was.
    """
    out = Path(path).resolve()
    if quarantined and not allow_quarantine and out.exists():
        raise QuarantineKeptError(
            f"{quarantined} record(s) were quarantined, so the existing dataset at {out} was kept. Rerun "
            f"with --allow-quarantine (allow_quarantine=True) to replace it anyway, or write to a new -o."
        )


@contextlib.contextmanager
def atomic_directory(
    path: str | Path, overwrite: bool = False, *, kind: str, inputs: Sequence[str | Path] = ()
) -> Iterator[Path]:
    """Yield a fresh temporary directory beside ``path``; on success rename it to ``path``.

    ``kind`` (a key of :data:`OUTPUT_KINDS`) names what is written, and ``inputs`` the paths the
    command reads; :func:`check_output` decides, before and again right before the rename, whether
    ``path`` may be written or replaced. Temporary directories of killed writers beside ``path`` are
    removed first (and logged). On any exception the temporary directory is removed and ``path`` is
    left as it was.
    """
    out = check_output(path, overwrite, kind=kind, inputs=inputs)
    out.parent.mkdir(parents=True, exist_ok=True)
    clean_stale_siblings(out)
    out = check_output(out, overwrite, kind=kind, inputs=inputs)  # a restored old copy counts as existing
    token = uuid.uuid4().hex[:8]
    tmp = out.parent / tmp_name(out.name, token)
    tmp.mkdir()
    try:
        write_owner(tmp)
        yield tmp
        check_output(out, overwrite, kind=kind, inputs=inputs)  # something may have appeared meanwhile
        (tmp / OWNER_FILE).unlink()
        _commit(tmp, out, out.parent / old_name(out.name, token), overwrite)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _commit(tmp: Path, out: Path, old: Path, overwrite: bool) -> None:
    """Rename ``tmp`` to ``out``; with ``overwrite`` an existing ``out`` is moved aside first and put back
    if that fails. Without it the plain rename fails on anything but an empty directory that appeared
    since the last check."""
    if not overwrite or not out.exists():
        os.rename(tmp, out)
        return
    os.rename(out, old)
    try:
        os.rename(tmp, out)
    except BaseException:
        os.rename(old, out)
        raise
    shutil.rmtree(old, ignore_errors=True)
