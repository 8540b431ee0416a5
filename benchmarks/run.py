"""`make bench`: every figure the performance issue asks for, with its same-run baseline."""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

from common import table  # noqa: E402


def main() -> int:
    import live

    rows = []
    rows += live.run()
    print(table(rows, ["figure", "ours", "baseline", "ratio", "target", "met"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
