"""One process's share of ``replay --jobs N``: the traces whose id falls to it (see
:mod:`spanassert.replay.parallel`). Every process reads the whole input; a span of another share
becomes None in the batch it was read in, so each process's clock counts every span."""
from __future__ import annotations

from typing import List, Optional, Sequence

from spanassert.core.model import SpanRecord


def shard_of(trace_id: str, jobs: int) -> int:
    """The shard of a trace: from the low 32 bits of its (hex, lowercase) id; random ids spread evenly."""
    try:
        return int(trace_id[-8:], 16) % jobs
    except ValueError:
        return 0


# the ignore below: a list of Optional[SpanRecord]; a parameterised base would add a Generic layer
class ShardBatch(list):  # type: ignore[type-arg]
    """The spans of one line, already with None for another shard's spans (read so by the JSON
    Lines reader's shard route)."""

    __slots__ = ()


class Shard:
    """Shard ``index`` of ``count``. ``diverged``: set by a reader that, for one of this shard's
    spans, found the line not in the shape the other processes took it to be in, so their span
    counts may differ from one process's: the run must be done again without the shard route."""

    __slots__ = ("index", "count", "diverged", "_last", "_keep")

    def __init__(self, index: int, count: int) -> None:
        self.index = index
        self.count = count
        self.diverged = False
        self._last = ""
        self._keep = False

    def keeps(self, trace_id: str) -> bool:
        if trace_id != self._last:
            self._last = trace_id
            self._keep = shard_of(trace_id, self.count) == self.index
        return self._keep

    def only(self, batch: Sequence[SpanRecord]) -> List[Optional[SpanRecord]]:
        """``batch`` with None in place of each span of another shard."""
        keeps = self.keeps
        return [r if keeps(r.trace_id) else None for r in batch]


__all__ = ["Shard", "ShardBatch", "shard_of"]
