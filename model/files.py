"""Files that take their name only once they are written whole."""

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

PARTIAL_SUFFIX = ".part"  # of the file being written, beside the one it replaces


@contextmanager
def atomic_write(path: Path, mode: str = "w", **open_args) -> Iterator[IO]:
    """Yield a file opened by ``open(…, mode, **open_args)`` under a temporary name beside ``path``; when
    the block ends without an error it is synced to disk and renamed ``path``, so that ``path`` is the old
    file or the whole new one, never part of one. On an error the temporary file is removed, ``path`` left
    as it was, and the error raised.

    The temporary name is fixed (``path`` + ``.part``), not random: ``open`` gives it the permissions
    any new file gets (``mkstemp``'s would be the owner's alone), and a process killed outright leaves
    one file, which the next write replaces, rather than one more each time."""
    partial = path.with_name(path.name + PARTIAL_SUFFIX)
    try:
        with open(partial, mode, **open_args) as file:
            yield file
            file.flush()
            os.fsync(file.fileno())
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)
