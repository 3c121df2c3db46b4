"""Column forms that gpucache.pack accepts besides arrays and lists."""
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class VarColumn:
    """Rows of varying length, Arrow-style: row i is values[offsets[i]:offsets[i + 1]].

    kind is "text" (values: uint8 UTF-8 bytes) or "sequence" (values: a numeric array).
    offsets: int64 array of rows + 1 entries, starting at 0, non-decreasing.
    """

    offsets: Any
    values: Any
    kind: str
