"""A small JSON document on disk, shared safely by several processes.

Every change runs under an exclusive ``fcntl.flock`` on a sibling lock file
(the document itself is replaced on each write, so a lock on it would lock a
file that is about to be unlinked), re-reads the document, and writes it
back atomically: a temporary file created 0600, fsync, rename over the old
one, fsync of the folder. A crash leaves the old document or the new one,
never half of one, and a reader without the lock sees one of the two.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import orjson

from agentlog._logging import get_logger
from agentlog.errors import CorruptKeyringError, KeyStoreUnavailableError

__all__ = ["FORMAT", "KeyFile", "b64", "unb64"]

_log = get_logger(__name__)
T = TypeVar("T")

#: The ``format`` field of every keyring document.
FORMAT = "agentlog-keyring/1"


def b64(data: bytes) -> str:
    """Bytes as base64 text, for JSON."""
    return base64.b64encode(data).decode("ascii")


def unb64(text: str) -> bytes:
    """The bytes of :func:`b64` text."""
    return base64.b64decode(text.encode("ascii"), validate=True)


class KeyFile:
    """A JSON document at ``path`` with locked, atomic read-modify-write."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        """Use the document at ``path``; nothing is created until the first change."""
        self.path = Path(path)
        self._lock_path = self.path.with_name(self.path.name + ".lock")

    def read(self) -> dict[str, Any]:
        """The document as last written, or an empty one if there is no file yet."""
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return {"format": FORMAT}
        except OSError as exc:
            raise KeyStoreUnavailableError(
                f"keyring {self.path} cannot be read ({exc.strerror}); check the path and "
                "that this user may read it"
            ) from exc
        try:
            doc = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise CorruptKeyringError(str(self.path), f"not JSON ({exc})") from exc
        if not isinstance(doc, dict) or doc.get("format") != FORMAT:
            raise CorruptKeyringError(str(self.path), f"not an {FORMAT} document")
        return doc

    def update(self, change: Callable[[dict[str, Any]], tuple[T, bool]]) -> T:
        """Apply ``change`` to the latest document under the lock.

        ``change`` mutates the document in place and returns the call's result
        and whether it changed anything; only then is the file rewritten.
        """
        with self._locked():
            doc = self.read()
            result, changed = change(doc)
            if changed:
                self._write(orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS))
            return result

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self._lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            raise KeyStoreUnavailableError(
                f"keyring {self.path}: cannot open its lock file ({exc.strerror}); check that "
                "this user may write its folder"
            ) from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing the descriptor releases the lock

    def _write(self, data: bytes) -> None:
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
        try:
            with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
            dir_fd = os.open(self.path.parent, os.O_RDONLY)
            try:
                os.fsync(dir_fd)  # the rename itself is durable only once the folder is
            finally:
                os.close(dir_fd)
        except OSError as exc:
            with contextlib.suppress(OSError):
                tmp.unlink()
            raise KeyStoreUnavailableError(
                f"keyring {self.path} cannot be written ({exc.strerror}); nothing was changed. "
                "Check free space and that this user may write its folder"
            ) from exc

    def warn_if_readable_by_others(self) -> None:
        """Log a warning if the keyring file is readable by group or others."""
        with contextlib.suppress(FileNotFoundError):
            mode = stat.S_IMODE(self.path.stat().st_mode)
            if mode & 0o077:
                _log.warning(
                    "keyring_permissions_too_open",
                    path=str(self.path),
                    mode=oct(mode),
                    fix=f"chmod 600 {self.path}",
                )
