"""Writing report files so that a reader never sees half of one."""
from __future__ import annotations

import contextlib
import os
import tempfile


def write_atomic(path: str, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same folder and a rename: the
    file is either the old one (or absent) or the whole new one, even if the process is killed
    mid-write. Raises ``OSError`` as ``open`` would."""
    parent = os.path.dirname(os.path.abspath(path))
    os.makedirs(parent, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=parent)
    try:
        try:  # mkstemp makes it private; a report is as readable as the file it replaces
            mode = os.stat(path).st_mode & 0o7777
        except OSError:
            mode = 0o644
        os.chmod(tmp, mode)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


__all__ = ["write_atomic"]
