"""A recording in progress on disk: Parquet parts appended beside the recording's file, never rewritten.

A recorder with ``path="runs/chess.parquet"`` writes, each time an episode ends, only the rows recorded
since the last save: one part, ``runs/chess.parquet.parts/part-00000007-00000007.parquet``, written beside
and renamed into place (`openenv_lab.files`), so a crash loses at most the rows not yet saved. The rows
written leave memory. Every 16 parts are merged into one (``part-00000001-00000016.parquet``, written
before the 16 are removed), so a long run leaves a file per 16 episodes, not one per episode; a part that a
merged one covers is skipped by readers, so a crash between the two loses and doubles nothing.

When the recording stops (``close()``, interpreter exit) its rows are written to ``path`` as one Parquet
file, streamed part by part, and the parts folder is removed; Ctrl+C and ``save()`` write that file too
and keep the parts (the recording may go on). While the folder exists it is the newer copy:
`openenv_lab.load_trajectory` reads it.

Each part carries the recording's metadata as of its writing; the parts hold no ``cut_short`` column
(an episode's last part does not know it is the last): readers work it out (`with_cut_short`).

One recorder writes a folder at a time: the folder's ``.lock`` is held (``flock``, released by the
operating system if the process dies) while a recorder writes there. A second recorder on the same path
is refused, and so is a folder left by a recorder that never closed (a crash), which names how to read it.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl

from ..files import write_atomically

try:  # every POSIX system; Windows has no flock: there, two recorders on one path are not detected
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

__all__ = ["MERGE_EVERY", "PartsWriter", "is_recording", "parts_folder", "read_parts", "refuse_if_taken"]

#: How many parts are merged into one (a long run's folder keeps about parts/16 files).
MERGE_EVERY = 16
METADATA_KEY = "openenv_lab.trajectory"
_PART = re.compile(r"^part-(\d{8})-(\d{8})\.parquet$")
_LOCK = ".lock"


def parts_folder(path: str | os.PathLike[str]) -> Path:
    """Where the parts of a recording saved to ``path`` are kept while it runs: ``path`` + ``.parts``."""
    return Path(f"{os.fspath(path)}.parts")


def _name(first: int, last: int) -> str:
    return f"part-{first:08d}-{last:08d}.parquet"


class PartsWriter:
    """Appends parts to the folder of the recording at ``path``, holding the folder's lock.

    The folder is made at the first `append` (a recorder that saves nothing leaves nothing behind).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.folder = parts_folder(path)
        self.written = 0  # parts appended so far: the next is written + 1
        self.merged = 0  # parts covered by merged ones
        self._lock: int | None = None
        refuse_if_taken(path)

    @property
    def started(self) -> bool:
        return self.written > 0

    def append(self, rows: pl.DataFrame, metadata: dict[str, Any]) -> None:
        """Write ``rows`` as the next part (and merge the last `MERGE_EVERY` parts when they are due)."""
        if self.path.is_dir():  # the recording's own file: a folder in its place cannot be replaced by it
            raise IsADirectoryError(f"Cannot save the recording to {self.path}: it is a directory")
        if self._lock is None:
            self._take()
        number = self.written + 1
        _write(self.folder / _name(number, number), rows, metadata)
        self.written = number
        if self.written - self.merged >= MERGE_EVERY:
            # The part is saved: a merge that fails (a full disk) leaves the parts as they were, to be
            # merged at a later save, and must not make this save look failed (its rows would be saved twice).
            with contextlib.suppress(OSError):
                self._merge(metadata)

    def _take(self) -> None:
        """Make the folder and hold its lock (refusing a folder that another recorder, or a crash, left)."""
        refuse_if_taken(self.path)
        try:
            self.folder.mkdir(parents=True)
        except FileExistsError:  # another recorder made it since
            refuse_if_taken(self.path)
            raise FileExistsError(_unfinished(self.path)) from None
        except OSError as exc:
            raise type(exc)(f"Cannot save the recording to {self.path}: {exc.strerror or exc}") from None
        self._lock = _hold(self.folder)
        # A recorder dropped without close(): its process lets go of the folder (left for load_trajectory).
        self._release_when_dropped = weakref.finalize(self, _close_quietly, self._lock)

    def _merge(self, metadata: dict[str, Any]) -> None:
        first, last = self.merged + 1, self.written
        small = [self.folder / _name(n, n) for n in range(first, last + 1)]
        rows = pl.concat([pl.scan_parquet(part) for part in small], how="diagonal_relaxed").collect()
        _write(self.folder / _name(first, last), rows, metadata)
        for part in small:  # after the merged one is in place: a crash here leaves parts it covers
            part.unlink(missing_ok=True)
        self.merged = last

    def scan(self) -> pl.LazyFrame | None:
        """The rows written so far (None before the first part)."""
        return read_parts(self.folder)[0] if self.started else None

    def finish(self) -> None:
        """Remove the folder (its rows are in the recording's file now) and let go of the lock."""
        if self._lock is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.release()
        self.written = self.merged = 0

    def release(self) -> None:
        """Let go of the lock, keeping the folder (a process that ends without finishing)."""
        if self._lock is not None:
            self._release_when_dropped.detach()
            os.close(self._lock)
            self._lock = None


def _close_quietly(descriptor: int) -> None:
    with contextlib.suppress(OSError):
        os.close(descriptor)


def _write(target: Path, rows: pl.DataFrame, metadata: dict[str, Any]) -> None:
    text = json.dumps(metadata, default=str)
    write_atomically(
        target,
        lambda temporary: rows.write_parquet(temporary, metadata={METADATA_KEY: text}),
        what="the recording",
    )


def _hold(folder: Path) -> int:
    """The folder's lock, held (a descriptor kept open; None of this on systems without flock)."""
    descriptor = os.open(folder / _LOCK, os.O_WRONLY | os.O_CREAT, 0o666)
    if fcntl is not None:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(descriptor)
            raise
    os.ftruncate(descriptor, 0)
    os.write(descriptor, str(os.getpid()).encode())
    return descriptor


def is_recording(folder: Path) -> bool:
    """Whether a recorder (in any process) holds the lock of the parts folder ``folder`` now."""
    if fcntl is None:
        return False
    try:
        descriptor = os.open(folder / _LOCK, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(descriptor, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(descriptor)
    return False


def refuse_if_taken(path: Path) -> None:
    """Raise if a recorder is writing the parts of ``path`` now, or one left them unfinished."""
    folder = parts_folder(path)
    if not folder.exists():
        return
    if is_recording(folder):
        raise FileExistsError(
            f"Cannot save the recording to {path}: another recorder is recording there now (its parts are "
            f"in {folder}). Give this one another path, or close the other first"
        )
    raise FileExistsError(_unfinished(path))


def _unfinished(path: Path) -> str:
    folder = parts_folder(path)
    return (
        f"Cannot save the recording to {path}: {folder} holds a recording that was never closed (its "
        f"process ended without close(): a crash or a killed kernel). Read it with "
        f"openenv_lab.load_trajectory({str(path)!r}) and save it elsewhere, or delete the folder; then "
        "record here again"
    )


def read_parts(
    folder: Path, *, load: Callable[[Path], dict[str, Any]] | None = None
) -> tuple[pl.LazyFrame, dict[str, Any]]:
    """The rows of a parts folder, lazily, in recording order, and the newest part's metadata.

    ``load`` reads and checks one part's metadata (`openenv_lab.record.trajectory` passes its own).

    Raises:
        ValueError: a part is missing (numbers the parts do not cover) or cannot be read.
    """
    found: list[tuple[int, int, Path]] = []
    for entry in os.scandir(folder):
        match = _PART.match(entry.name)
        if match:
            found.append((int(match[1]), int(match[2]), Path(entry.path)))
    found.sort(key=lambda part: (part[0], -part[1]))
    kept: list[Path] = []
    covered = 0
    for first, last, part in found:
        if last <= covered:
            continue  # merged into one already kept (a crash came between the merge and the clean-up)
        if first != covered + 1:
            raise ValueError(
                f"{folder} is missing part(s) {covered + 1} to {first - 1} of its recording (deleted or "
                "moved after they were written): their rows are lost; put them back to read it whole"
            )
        kept.append(part)
        covered = last
    if not kept:
        raise ValueError(f"{folder} holds no parts of a recording (nothing was saved there yet)")
    read = load or _metadata_of
    for part in kept:
        try:
            metadata = read(part)
        except ValueError as exc:
            raise type(exc)(
                f"{exc}. It is one part of the recording in {folder}: move it aside to read the others (its "
                "rows are then missing)"
            ) from None
    return pl.concat([pl.scan_parquet(part) for part in kept], how="diagonal_relaxed"), metadata


def _metadata_of(part: Path) -> dict[str, Any]:
    return json.loads(pl.read_parquet_metadata(part)[METADATA_KEY])
