"""Outputs written atomically, and what ``--overwrite`` may replace.

Every writer of a directory (datasets, checkpoints, Minari exports) goes through
:func:`atomic_directory`, and every writer of a file at a path the user gave (OPE reports, exported
policies, plots) through :func:`atomic_file` / :func:`write_file`: each checks the output against the
command's inputs, the protected places and the outputs already on disk, removes what writers that
were killed left behind, and renames a finished temporary directory or file into place. A write that
fails (read-only or full filesystem, quota, permission) is one :class:`OutputWriteError` and leaves
nothing half-written. docs/safety.md ("Writers: what --overwrite may replace") states the rules.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import uuid
from pathlib import Path
from typing import Callable, Iterator, Sequence

from offlinerl.episodes.stale import (OWNER_FILE, clean_stale_files, clean_stale_siblings, old_name, tmp_name,
                                      write_owner)

__all__ = [
    "OUTPUT_KINDS",
    "OutputExistsError",
    "OutputWriteError",
    "UnsafeOutputError",
    "QuarantineKeptError",
    "atomic_directory",
    "atomic_file",
    "check_output",
    "check_output_file",
    "check_output_place",
    "refuse_quarantine_over_existing",
    "replace_file",
    "write_file",
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


#: errno of a failed write -> (what happened, what to do).
_WRITE_PROBLEMS = {
    errno.EROFS: ("the filesystem is read-only", "choose an output on a writable filesystem"),
    errno.ENOSPC: ("no space is left on the device", "free some space or choose another output"),
    errno.EDQUOT: ("the disk quota is exceeded", "free some space or choose another output"),
    errno.EFBIG: ("the file is larger than the filesystem or the file-size limit (ulimit -f) allows",
                  "choose another output"),
    errno.EACCES: ("permission denied", "choose a directory you may write to"),
    errno.EPERM: ("operation not permitted", "choose a directory you may write to"),
}
#: Only a write meets these; EACCES and EPERM may also come from reading an input.
_WRITE_ONLY = (errno.EROFS, errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


class OutputWriteError(OSError, ValueError):
    """Writing an output failed: a read-only or full filesystem, a quota, no permission. Nothing half-written
    is left. An ``OSError`` (its ``errno`` kept) and, like the project's other one-line errors, a ``ValueError``,
    so every command reports it as one line."""

    @classmethod
    def from_os_error(cls, exc: OSError, path: str | Path,
                      left: str = "nothing was left half-written") -> "OutputWriteError":
        """The error for ``exc``, met writing ``path``; ``left``: what the failed write left on disk."""
        what, todo = _WRITE_PROBLEMS.get(exc.errno, (exc.strerror or str(exc), "choose another output"))
        code = f" ({errno.errorcode[exc.errno]})" if exc.errno in errno.errorcode else ""
        err = cls(f"{path}: cannot write: {what}{code}; {left}; {todo}")
        err.errno = exc.errno  # (strerror and filename stay unset: they would replace the message in str())
        return err


def _write_error(exc: OSError, out: Path) -> OSError:
    """``exc`` as an :class:`OutputWriteError` when writing ``out`` (or beside it) met it, else ``exc`` itself."""
    if isinstance(exc, (OutputWriteError, FileExistsError)) or exc.errno not in _WRITE_PROBLEMS:
        return exc
    area = out.parent
    name = exc.filename if isinstance(exc.filename, (str, bytes, os.PathLike)) else None
    named = name is not None and _within(Path(os.path.abspath(os.fsdecode(name))), area)
    if name is not None and not named:
        return exc  # a file elsewhere, e.g. an input that cannot be read
    if exc.errno not in _WRITE_ONLY and not named and str(area) not in str(exc):
        return exc
    return OutputWriteError.from_os_error(exc, out)


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


def _shown(path: str | Path, out: Path) -> str:
    return str(out) if Path(path) == out else f"{path} (resolved: {out})"


def _marked(directory: Path) -> str | None:
    """The kind of output ``directory`` is (it holds that kind's marker file), or None."""
    for kind, marker in OUTPUT_KINDS.items():
        try:
            if (directory / marker).is_file():
                return kind
        except OSError:  # e.g. no permission to look: not one we can tell
            pass
    return None


def check_output_place(path: str | Path, *, inputs: Sequence[str | Path] = ()) -> Path:
    """The resolved ``path``, unless no writer may write there, whatever exists there now.

    Raises :class:`UnsafeOutputError` when it is ``/``, the home directory, the current directory or one of
    their ancestors; is an input of the command, holds one or lies inside one; or lies inside a dataset,
    checkpoint or Minari dataset (a directory, at any level above it, holding an ``OUTPUT_KINDS`` marker).
    All paths are resolved (symlinks followed).
    """
    out = Path(path).resolve()
    shown = _shown(path, out)
    for place, what in _protected().items():
        if _within(place, out):
            held = "is" if place == out else "holds"
            raise UnsafeOutputError(f"{shown}: refusing to write here: it {held} {what}")
    sources = [Path(item).resolve() for item in inputs]
    if out in sources:
        kind = _marked(out)
        raise UnsafeOutputError(f"{shown}: refusing to write here: it is an input of this command"
                                + (f" (the {kind} it reads)" if kind else ""))
    for src in sources:
        if out in src.parents:
            raise UnsafeOutputError(f"{shown}: refusing to write here: it holds the input {src}")
    for src in sources:
        if src in out.parents:
            kind = _marked(src)
            raise UnsafeOutputError(f"{shown}: refusing to write here: it lies inside the input directory {src}"
                                    + (f" (the {kind} it reads)" if kind else ""))
    for parent in out.parents:
        if (kind := _marked(parent)) is not None:
            raise UnsafeOutputError(f"{shown}: refusing to write here: it lies inside the {kind} {parent} "
                                    f"(a directory holding {OUTPUT_KINDS[kind]}); write beside it instead")
    return out


def check_output(
    path: str | Path, overwrite: bool = False, *, kind: str, inputs: Sequence[str | Path] = ()
) -> Path:
    """The resolved output directory, if a writer of ``kind`` may write (or, with ``overwrite``, replace) it.

    Raises :class:`UnsafeOutputError` where :func:`check_output_place` refuses the path, or where it exists
    as something ``overwrite`` may not replace (a file; a non-empty directory without the kind's marker
    file). Raises :class:`OutputExistsError` for a replaceable output without ``overwrite``.
    """
    if kind not in OUTPUT_KINDS:
        raise ValueError(f"unknown output kind {kind!r} (one of {', '.join(OUTPUT_KINDS)})")
    out = check_output_place(path, inputs=inputs)
    shown = _shown(path, out)
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


def check_output_file(path: str | Path, overwrite: bool = False, *, inputs: Sequence[str | Path] = ()) -> Path:
    """The resolved path of a file output (a report, a policy file, a plot), if it may be written there.

    Raises :class:`UnsafeOutputError` where :func:`check_output_place` refuses the path (so never an input,
    nor a file inside a dataset or checkpoint), or where it exists as a directory or as something other
    than a regular file (a device, a pipe). Raises :class:`OutputExistsError` for an existing file without
    ``overwrite``, and :class:`OutputWriteError` where the nearest existing directory above it cannot be
    written (read-only filesystem, no permission): found now, before the work. A missing parent directory
    is fine: :func:`atomic_file` creates it.
    """
    out = check_output_place(path, inputs=inputs)
    shown = _shown(path, out)
    if out.is_dir():
        raise UnsafeOutputError(f"{shown} is a directory; give the path of the file to write (e.g. "
                                f"{out / 'report.json'})")
    if out.exists() and not out.is_file():
        raise UnsafeOutputError(f"{shown} exists and is not a regular file (a device, a pipe or a socket); "
                                f"choose a file to write")
    if out.exists() and not overwrite:
        raise OutputExistsError(f"{shown} already exists (pass --overwrite / overwrite=True to replace it)")
    above = next((p for p in out.parents if p.exists()), Path("/"))
    if not above.is_dir():
        raise UnsafeOutputError(f"{shown}: cannot write: {above} is not a directory")
    if not os.access(above, os.W_OK | os.X_OK):
        probe = errno.EROFS if _read_only(above) else errno.EACCES
        raise OutputWriteError.from_os_error(OSError(probe, os.strerror(probe), str(above)), out)
    return out


def _read_only(directory: Path) -> bool:
    try:
        return bool(os.statvfs(directory).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def refuse_quarantine_over_existing(path: str | Path, quarantined: int, allow_quarantine: bool, *,
                                    episodes: int | None = None) -> None:
    """Raise :class:`QuarantineKeptError` when ``quarantined`` records would replace an existing output, or
    (whatever ``allow_quarantine`` says) a conversion of no ``episodes`` would.

    Call it inside :func:`atomic_directory`, before its block ends: the temporary directory is then
    removed and the existing output stays as it was.
    """
    out = Path(path).resolve()
    if quarantined and not allow_quarantine and out.exists():
        raise QuarantineKeptError(
            f"{quarantined} record(s) were quarantined, so the existing dataset at {out} was kept. Rerun "
            f"with --allow-quarantine (allow_quarantine=True) to replace it anyway, or write to a new -o."
        )
    if episodes == 0 and out.exists():
        raise QuarantineKeptError(
            f"no episodes were converted ({quarantined} record(s) quarantined), so the existing dataset at {out} "
            f"was kept")


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
    _make_parents(out)
    clean_stale_siblings(out)
    out = check_output(out, overwrite, kind=kind, inputs=inputs)  # a restored old copy counts as existing
    token = uuid.uuid4().hex[:8]
    tmp = out.parent / tmp_name(out.name, token)
    try:
        tmp.mkdir()
    except OSError as exc:
        raise OutputWriteError.from_os_error(exc, out) from exc
    try:
        write_owner(tmp)
        yield tmp
        check_output(out, overwrite, kind=kind, inputs=inputs)  # something may have appeared meanwhile
        (tmp / OWNER_FILE).unlink()
        _commit(tmp, out, out.parent / old_name(out.name, token), overwrite)
    except OSError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        if (err := _write_error(exc, out)) is exc:
            raise
        raise err from exc
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _make_parents(out: Path) -> None:
    """Create the missing directories above ``out``; a failure is one message naming ``out``."""
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        blocker = next((p for p in reversed(out.parents) if p.exists() and not p.is_dir()), out.parent)
        raise UnsafeOutputError(f"{out}: cannot write: {blocker} is not a directory") from None
    except OSError as exc:
        raise OutputWriteError.from_os_error(exc, out) from exc


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


@contextlib.contextmanager
def _replacing(out: Path, before_rename: Callable[[], object] = lambda: None) -> Iterator[Path]:
    """Yield a temporary path beside ``out``; once the block wrote it, flush it to disk and rename it onto
    ``out``. On any exception the temporary file is removed; a write failure is an :class:`OutputWriteError`."""
    tmp = out.parent / tmp_name(out.name, uuid.uuid4().hex[:8])
    try:
        yield tmp
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)  # a full disk may only show here (delayed allocation, network filesystems)
        finally:
            os.close(fd)
        before_rename()
        os.replace(tmp, out)
    except OSError as exc:
        if (err := _write_error(exc, out)) is exc:
            raise
        raise err from exc
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)


@contextlib.contextmanager
def atomic_file(path: str | Path, overwrite: bool = False, *, inputs: Sequence[str | Path] = ()) -> Iterator[Path]:
    """Yield a temporary file path beside the file output ``path``; on success rename it to ``path``.

    :func:`check_output_file` decides, before and again right before the rename, whether ``path`` may be
    written or replaced; a missing parent directory is created; temporary files of killed writers beside
    it are removed first (and logged). On any exception the temporary file is removed and ``path`` is left
    as it was; a failed write (read-only or full filesystem, quota, permission) is an
    :class:`OutputWriteError` naming ``path``.
    """
    out = check_output_file(path, overwrite, inputs=inputs)
    _make_parents(out)
    clean_stale_files(out)
    with _replacing(out, lambda: check_output_file(out, overwrite, inputs=inputs)) as tmp:
        yield tmp


def write_file(path: str | Path, data: str | bytes, overwrite: bool = False, *,
               inputs: Sequence[str | Path] = ()) -> Path:
    """Write ``data`` (text as UTF-8) to the file output ``path`` through :func:`atomic_file`; the resolved path."""
    with atomic_file(path, overwrite, inputs=inputs) as tmp:
        tmp.write_bytes(data.encode() if isinstance(data, str) else data)
    return Path(path).resolve()


def replace_file(path: str | Path, data: str | bytes) -> Path:
    """Write ``data`` to ``path``, a file of a directory the caller owns (``result.json`` of a run, a sweep's
    summary), through a temporary file renamed onto it: no checks, never half-written, and a failed write
    is an :class:`OutputWriteError`."""
    out = Path(path)
    with _replacing(out) as tmp:
        tmp.write_bytes(data.encode() if isinstance(data, str) else data)
    return out
