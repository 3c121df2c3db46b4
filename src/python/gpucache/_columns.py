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
    null_rows: Any = ()  # rows that held a null (empty here); pack drops them (reason null)


@dataclass(frozen=True)
class TimeColumn:
    """Dates and times as gpucache stores them: int64 `values` (one per row) whose meaning is
    kind ("timestamp", "date", "time" or "duration"), unit ("s", "ms", "us", "ns"; "D" for
    dates) and, for a timestamp recorded in a time zone, tz (its name; the values are then
    instants since the UTC epoch). null_rows: the rows that held a null (NaT), whose values are
    placeholders; pack drops them with the reason null (or refuses them: on_null="error")."""

    values: Any
    kind: str
    unit: str
    tz: Any = None
    null_rows: Any = ()


@dataclass(frozen=True)
class NullableColumn:
    """An array (one entry per row) whose rows `null_rows` held a null (an Arrow null, pandas'
    pd.NA), their values 0: what _arrow.py gives for a numeric or fixed-size-list column with
    nulls. pack drops those rows with the reason null (or refuses them: on_null="error")."""

    values: Any
    null_rows: Any = ()
