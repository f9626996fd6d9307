"""Saving files atomically, with the permissions any other program's new file would get.

`write_atomically` writes to a temporary file beside the target and renames it into place, so a file is
never left half-written, even if the process dies mid-write; the temporary file is removed when anything
fails. Unlike ``tempfile.mkstemp`` (always ``0o600``), a new file gets ``0o666`` less the umask, and a file
that is overwritten keeps its mode. `check_writable` says early, with a clear message, why a path cannot be
written (it is a directory, a parent is a file, no permission); errors never name the temporary file.
"""

from __future__ import annotations

import os
import secrets
import stat
from collections.abc import Callable
from pathlib import Path

__all__ = ["check_writable", "write_atomically", "write_text_atomically"]


def check_writable(path: str | os.PathLike[str], what: str = "the file") -> Path:
    """Check, without creating anything, that ``what`` can be saved to ``path``: it is not a directory,
    and its parent is a directory we may write in or one that can be created. Returns ``path`` as a Path.

    Raises:
        IsADirectoryError, NotADirectoryError, PermissionError: with a message naming ``path``.
    """
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(
            f"Cannot save {what} to {path}: it is a directory; give a file name (inside it, say)"
        )
    ancestor = path.parent
    while not ancestor.exists() and ancestor != ancestor.parent:  # the directories save() would create
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise NotADirectoryError(
            f"Cannot save {what} to {path}: {ancestor} is a file, not a directory; choose another path"
        )
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise PermissionError(
            f"Cannot save {what} to {path}: no permission to write in {ancestor}; choose another path"
        )
    return path


def write_atomically(
    path: str | os.PathLike[str], write: Callable[[Path], None], what: str = "the file"
) -> Path:
    """Save ``what`` to ``path`` atomically: ``write`` fills a temporary file beside it, then a rename.

    Missing parent directories are created. A new file gets the mode a plain ``open()`` gives
    (``0o666`` less the umask), an existing one keeps its mode. On failure the temporary file is removed
    and the target is left as it was.

    Raises:
        OSError: of the original kind, saying that ``what`` could not be saved to ``path`` and why.
    """
    path = check_writable(path, what)
    temporary: Path | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = _new_file_beside(path)
        write(temporary)
        _keep_mode(path, temporary)
        os.replace(temporary, path)
    except BaseException as exc:
        if temporary is not None:
            temporary.unlink(missing_ok=True)
        if isinstance(exc, OSError):  # its own message may name the temporary file: say what failed instead
            reason = exc.strerror or str(exc)
            raise type(exc)(f"Cannot save {what} to {path}: {reason}") from None
        raise
    return path


def write_text_atomically(path: str | os.PathLike[str], text: str, what: str = "the file") -> Path:
    """`write_atomically` for text (UTF-8)."""
    return write_atomically(path, lambda temporary: temporary.write_text(text, encoding="utf-8"), what)


def _new_file_beside(path: Path) -> Path:
    """A new empty file in ``path``'s directory, with a new file's usual mode (``0o666`` less the umask)."""
    for _ in range(100):
        temporary = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
        try:
            # 0o666 is filtered by the umask, as for any new file; O_EXCL: never someone else's file.
            descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:
            continue
        os.close(descriptor)
        return temporary
    raise FileExistsError(f"No free temporary name beside {path}")


def _keep_mode(path: Path, temporary: Path) -> None:
    """Give ``temporary`` the mode of the file it replaces, if there is one (after writing: the mode may
    be read-only)."""
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        return
    os.chmod(temporary, mode)
