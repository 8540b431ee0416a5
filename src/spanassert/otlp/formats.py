"""What the OTLP readers share: the bytes that tell the input forms apart, their bounds, what a
reader yields, and the optional zstd module."""
from __future__ import annotations

import sys
from typing import Any, List, Optional, Tuple, Union

from spanassert.core.model import SpanRecord
from spanassert.otlp.issues import ERROR, InputIssue

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
GZIP_MAGIC = b"\x1f\x8b"
BOM = b"\xef\xbb\xbf"
WHITESPACE = b" \t\r\n"

# A frame longer than this is taken as a sign the file is not length-prefixed at all.
MAX_FRAME_BYTES = 1 << 30
# The most one JSON line, one JSON document or one protobuf file is read into memory (the same
# bound as a frame): a line of a gzip or zstd file can decompress to any size (a 500 KB gzip file
# held one 500 MB line), so without a bound one small input could take all the memory.
MAX_RECORD_BYTES = MAX_FRAME_BYTES
CHUNK = 1 << 16
ZSTD_INSTALL_HINT = "pip install 'spanassert[zstd]'"

# What a file reader yields: the records of one line/message, or an issue.
Item = Union[List[SpanRecord], InputIssue]


def number_too_long() -> str:
    """Why ``json.loads`` raised a plain ValueError: Python reads no integer of more digits than
    ``sys.get_int_max_str_digits()`` (a denial-of-service bound); without this the reader's
    last-resort catch ended the whole file at that line."""
    limit = getattr(sys, "get_int_max_str_digits", lambda: 4300)()
    return f"a JSON number has more than {limit} digits, too long to read (OTLP integers have at most 20 digits)"


def zstd_module(name: str) -> Tuple[Any, Optional[InputIssue]]:
    try:
        import zstandard
    except ImportError:
        return None, InputIssue(
            name,
            None,
            None,
            f"this input is zstd-compressed and the optional 'zstandard' module is not installed; "
            f"install it with: {ZSTD_INSTALL_HINT}",
            ERROR,
        )
    return zstandard, None
