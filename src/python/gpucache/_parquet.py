"""Parquet files (or folders of them) as pack's columns, decoded one row group at a time on every
core, each straight into its rows of the output arrays.

Why not `pq.read_table` + `combine_chunks`: decoding is most of the cost of packing Parquet (a
list column carries repetition and definition levels for every value), `read_table` decodes the
row groups one after the other here, and combining the chunks of a fixed-shape column copies it
all once more. Row groups are independent, so each worker decodes one (pyarrow releases the GIL
while it decodes, numpy while it copies) and copies its fixed-shape columns into the rows that
group owns in arrays allocated once; variable-length columns (text, sequences) are joined at the
end, their offsets shifted. A file of one row group is taken as it is, without a copy.

Row groups may disagree on what a column becomes (a list column whose rows all have one length
in one group and not in another). Then the whole input is read as one table and converted as
`table_columns` converts any table, so the result never depends on how the file was cut.
"""
from __future__ import annotations

import os
import pathlib
from concurrent.futures import ThreadPoolExecutor

import numpy

from ._columns import VarColumn


class _GroupsDisagree(Exception):
    """Row groups converted to columns of different kinds or shapes."""


def parquet_files(path: pathlib.Path) -> list:
    """The Parquet files of a path: itself, or those under a folder in name order."""
    return sorted(path.rglob("*.parquet")) if path.is_dir() else [path]


def parquet_columns(pa, path: pathlib.Path, convert, input_error) -> dict:
    """name -> column (as `convert(pa, name, array)` makes them) of every row of the Parquet
    file or folder at `path`. `input_error` is the exception raised for a file that cannot be
    read or files whose schemas differ."""
    import pyarrow.parquet as pq

    groups = []  # (file, row group, first row, rows)
    schema = None
    rows = 0
    for file in parquet_files(path):
        try:
            opened = pq.ParquetFile(file)
            metadata, file_schema = opened.metadata, opened.schema_arrow
        except (OSError, pa.ArrowException) as error:
            raise input_error(f"{file}: cannot read it as Parquet: {error}") from error
        if schema is None:
            schema = file_schema
        elif not file_schema.equals(schema):
            raise input_error(f"{path}: its Parquet files have different schemas: {file} has "
                              f"{file_schema}, the first has {schema}")
        for group in range(metadata.num_row_groups):
            count = metadata.row_group(group).num_rows
            groups.append((file, group, rows, count))
            rows += count
    if len(groups) <= 1:
        table = _read_group(pa, pq, groups[0], input_error) if groups else _read_all(
            pa, pq, path, input_error)
        return {name: convert(pa, name, table.column(i))
                for i, name in enumerate(table.schema.names)}
    try:
        return _columns_by_group(pa, pq, groups, rows, convert, input_error)
    except _GroupsDisagree:
        table = _read_all(pa, pq, path, input_error)
        return {name: convert(pa, name, table.column(i))
                for i, name in enumerate(table.schema.names)}


def _read_group(pa, pq, group, input_error):
    file, index, _, _ = group
    try:
        return pq.ParquetFile(file).read_row_group(index, use_threads=False)
    except (OSError, pa.ArrowException) as error:
        raise input_error(f"{file}: cannot read row group {index} as Parquet: {error}") from error


def _read_all(pa, pq, path, input_error):
    tables = []
    for file in parquet_files(path):
        try:
            tables.append(pq.read_table(file))
        except (OSError, pa.ArrowException) as error:
            raise input_error(f"{file}: cannot read it as Parquet: {error}") from error
    if not tables:
        raise input_error(f"{path}: holds no Parquet file")
    return tables[0] if len(tables) == 1 else pa.concat_tables(tables)


class _Output:
    """The columns being assembled: fixed-shape arrays allocated from the first row group's
    columns, filled by the workers; the pieces of variable-length columns, joined at the end."""

    def __init__(self, first: dict, rows: int, groups: int):
        self.names = list(first)
        self.arrays = {name: numpy.empty((rows,) + column.shape[1:], column.dtype)
                       for name, column in first.items() if isinstance(column, numpy.ndarray)}
        self.pieces = {name: [None] * groups
                       for name, column in first.items() if isinstance(column, VarColumn)}
        self.kinds = {name: column.kind
                      for name, column in first.items() if isinstance(column, VarColumn)}

    def put(self, index: int, first_row: int, columns: dict) -> None:
        if list(columns) != self.names:
            raise _GroupsDisagree()
        for name, column in columns.items():
            if name in self.arrays:
                out = self.arrays[name]
                if (not isinstance(column, numpy.ndarray) or column.shape[1:] != out.shape[1:]
                        or column.dtype != out.dtype):
                    raise _GroupsDisagree()
                out[first_row:first_row + len(column)] = column
            elif not isinstance(column, VarColumn) or column.kind != self.kinds[name]:
                raise _GroupsDisagree()
            else:
                self.pieces[name][index] = column

    def columns(self) -> dict:
        out = {}
        for name in self.names:
            if name in self.arrays:
                out[name] = self.arrays[name]
                continue
            pieces = self.pieces[name]
            if len({piece.values.dtype for piece in pieces}) > 1:
                raise _GroupsDisagree()
            values = numpy.concatenate([piece.values for piece in pieces])
            offsets = numpy.empty(sum(len(p.offsets) - 1 for p in pieces) + 1, numpy.int64)
            offsets[0] = 0
            row, base = 0, 0
            for piece in pieces:
                count = len(piece.offsets) - 1
                offsets[row + 1:row + count + 1] = piece.offsets[1:] + base
                row += count
                base += int(piece.offsets[-1])
            out[name] = VarColumn(offsets=offsets, values=values, kind=self.kinds[name])
        return out


def _columns_by_group(pa, pq, groups, rows, convert, input_error) -> dict:
    def decode(group):
        table = _read_group(pa, pq, group, input_error)
        if table.num_rows != group[3]:
            raise input_error(f"{group[0]}: row group {group[1]} holds {table.num_rows} rows, "
                              f"its metadata says {group[3]}")
        try:
            return {name: convert(pa, name, table.column(i))
                    for i, name in enumerate(table.schema.names)}
        except input_error:
            # A null or a type gpucache cannot store: the whole-table path names the row in the
            # whole input, not in this group.
            raise _GroupsDisagree() from None

    first = decode(groups[0])
    output = _Output(first, rows, len(groups))
    output.put(0, 0, first)
    del first
    workers = min(len(groups) - 1, len(os.sched_getaffinity(0)))
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        done = [pool.submit(lambda i=i: output.put(i, groups[i][2], decode(groups[i])))
                for i in range(1, len(groups))]
        for future in done:
            future.result()  # the first failure, in row group order
    return output.columns()
