"""Which files a replay reads: files, folders (recursively, in sorted order), glob patterns and
``-`` for stdin; special files (FIFOs, sockets, devices) found in a folder or by a pattern are
skipped with a warning, never opened."""
from __future__ import annotations

import os
import re
import stat
from typing import Iterator, List, Optional, Sequence, Tuple, Union

from spanassert.otlp.issues import ERROR, WARNING, InputIssue

PathArg = Union[str, "os.PathLike[str]"]
_GLOB_CHARS = re.compile(r"[*?[]")
STDIN_NAME = "<stdin>"


def _walk(directory: str) -> List[Union[str, InputIssue]]:
    """The regular files below ``directory`` in sorted order; a FIFO, socket or device found there is
    skipped with a warning (opening a FIFO would wait for a writer forever)."""
    found: List[str] = []
    for root, dirs, files in os.walk(directory):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        found.extend(os.path.join(root, f) for f in sorted(files) if not f.startswith("."))
    return _regular(found)


def _regular(paths: List[str]) -> List[Union[str, InputIssue]]:
    """``paths`` with each special file (found in a folder or by a glob) replaced by a warning."""
    out: List[Union[str, InputIssue]] = []
    for path in paths:
        special = _special_kind(path)
        out.append(path if special is None else InputIssue(
            path, None, None, f"skipped: a {special}, not a regular file (it is never opened, so a FIFO "
            "cannot block the read); name it on the command line to read it", WARNING))
    return out


def _special_kind(path: str) -> Optional[str]:
    """What kind of special file ``path`` is (following symlinks), or None for a regular file or
    one that cannot be examined (opening it reports why)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISFIFO(mode):
        return "FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "device"
    return "special file"


def expand(paths: Sequence[PathArg]) -> Iterator[Union[Tuple[str, Optional[str]], InputIssue]]:
    for p in paths:
        if p == "-":
            yield STDIN_NAME, None
            continue
        path = os.fspath(p)
        if os.path.isdir(path):
            files = _walk(path)
            if not files:
                yield InputIssue(path, None, None, "directory holds no files", WARNING)
            for f in files:
                yield f if isinstance(f, InputIssue) else (f, f)
        elif os.path.exists(path):
            yield path, path
        elif _GLOB_CHARS.search(path):
            import glob

            matches = sorted(glob.glob(path, recursive=True))
            if not matches:
                yield InputIssue(path, None, None, "no file matches this pattern", ERROR)
            for m in matches:
                for f in _walk(m) if os.path.isdir(m) else _regular([m]):
                    yield f if isinstance(f, InputIssue) else (f, f)
        else:
            yield InputIssue(path, None, None, "no such file or directory", ERROR)
