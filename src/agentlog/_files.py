"""Files and folders agentlog creates: private to their owner unless told otherwise.

A log or an archive of runs recorded in clear holds every input, result and
answer of those runs, so on a shared host the files agentlog creates are
0600 and its folders 0700, whatever the process umask says. The user can ask
for another mode (``file_mode=0640`` on a ``sqlite://`` or ``file://`` URL,
or ``file_mode=`` in code); folders then get the same bits plus search
(``x``) wherever the mode reads (0640 -> 0750). Files and folders that
already exist are never chmod-ed: they are the user's.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import BinaryIO

from agentlog.errors import ConfigError

__all__ = [
    "DEFAULT_FILE_MODE",
    "create_file",
    "folder_mode",
    "make_folders",
    "open_new",
    "parse_file_mode",
]

#: Owner read and write, nobody else.
DEFAULT_FILE_MODE = 0o600


def parse_file_mode(text: str, where: str) -> int:
    """The mode of ``file_mode=TEXT`` (octal, such as ``0640``).

    Raises:
        ConfigError: not an octal mode, or one that does not let the owner
            read and write (agentlog could not use its own file).
    """
    try:
        mode = int(text.removeprefix("0o"), 8)
    except ValueError:
        mode = -1
    if not 0 <= mode <= 0o777 or mode & 0o600 != 0o600:
        raise ConfigError(
            f"{where}: file_mode={text!r} is not a file mode agentlog can use; give an octal "
            "mode that lets the owner read and write, such as 0600 (the default) or 0640"
        )
    return mode


def folder_mode(file_mode: int) -> int:
    """The mode of a folder holding files of ``file_mode``: search wherever it reads."""
    return file_mode | ((file_mode & 0o444) >> 2)


def make_folders(path: Path, file_mode: int = DEFAULT_FILE_MODE) -> list[Path]:
    """Create ``path`` and its missing parents with :func:`folder_mode`; return
    the folders created, outermost first (folders that existed are left alone)."""
    missing = []
    while not path.exists():
        missing.append(path)
        path = path.parent
    created = []
    for folder in reversed(missing):
        try:
            folder.mkdir()
        except FileExistsError:
            continue  # another process made it first: not ours to chmod
        os.chmod(folder, folder_mode(file_mode))  # exactly, whatever the umask
        created.append(folder)
    return created


def open_new(path: Path, file_mode: int = DEFAULT_FILE_MODE) -> BinaryIO:
    """A new file at ``path``, open for writing, with exactly ``file_mode``.

    Raises:
        FileExistsError: something is at ``path`` already.
    """
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, file_mode)
    try:
        os.fchmod(fd, file_mode)  # exactly, whatever the umask
        return os.fdopen(fd, "wb")
    except BaseException:
        os.close(fd)
        raise


def create_file(path: Path, file_mode: int = DEFAULT_FILE_MODE) -> bool:
    """Create ``path`` empty with ``file_mode`` unless it exists; True if this call made it."""
    try:
        open_new(path, file_mode).close()
    except FileExistsError:
        return False
    return True
