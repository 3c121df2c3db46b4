"""Arrow-backed inputs as the columns gpucache.pack takes: pyarrow Tables and RecordBatches,
pandas DataFrames (through Table.from_pandas), polars DataFrames (DataFrame.to_arrow), Parquet files (or folders of them; gpucache.pack
reads those with the C++ reader when it is built, and comes here only without it), Arrow IPC files
(.arrow, .feather: memory-mapped) and Hugging Face `datasets.Dataset` objects.

pyarrow is imported only when one of these is packed, and `datasets` never by this module: a
Dataset is recognised only when the caller already imported it. Wherever Arrow's buffers allow,
the arrays returned view Arrow's memory instead of copying it (numpy.shares_memory says so):

  Arrow type                                   column
  int*/uint*/float16/32/64                     1-D numpy array, zero-copy
  bool                                         1-D numpy bool array (a copy: Arrow packs bits)
  fixed_size_list<number> (nested any depth)   [rows, d0, d1, ...] array, zero-copy
  list/large_list<float> all of one length     [rows, length] array, zero-copy
  list/large_list<number> otherwise            VarColumn(kind="sequence"), values zero-copy
  string/large_string                          VarColumn(kind="text"), values zero-copy (UTF-8)
  dictionary<string> (pandas categories)       decoded to text (a copy)
  timestamp[unit, tz], duration[unit]          TimeColumn of int64 (zero-copy without nulls)
  date32, date64, time32, time64               TimeColumn of int64 (date32, time32 widened)

A column of several chunks is combined first (one copy). A null row in any of these columns
(pandas' NaN in a nullable column, pd.NA, NaT, None) is listed with the column (NullableColumn,
VarColumn.null_rows, TimeColumn.null_rows) and its values filled (0; an empty string or list; the
column is then a copy): pack drops such rows with the reason null, counted in `dropped` and listed
in the rejects, as it does for the same data read from Parquet, or refuses them with
on_null="error" (naming the column and the row). Only the columns packed count. A null element
inside a row's list (not the row) is an error naming the column and the row.
"""
import os
import pathlib
import sys

import numpy

from ._columns import NullableColumn, TimeColumn, VarColumn
from ._gpucache import Error


class ArrowInputError(Error, ValueError):
    """An Arrow column gpucache cannot take: a null inside a list, or a type it cannot store. A
    gpucache.Error (and a ValueError)."""


def _pyarrow():
    try:
        import pyarrow
    except ImportError as error:
        raise ImportError("packing Arrow, Parquet or Hugging Face datasets inputs needs pyarrow "
                          "(pip install pyarrow)") from error
    return pyarrow


def _kind(obj):
    """("pyarrow", "Table"), ("pandas...", "DataFrame"), ...: what an object is, by its type's
    module and name, so that no library is imported to find out."""
    return (type(obj).__module__ or "").split(".")[0], type(obj).__name__


def is_arrow_input(obj) -> bool:
    """True for what table_columns takes, without importing pyarrow or datasets to find out."""
    if _is_parquet_path(obj) or _is_arrow_file(obj) or _is_hf_dataset(obj):
        return True
    return _kind(obj) in (("pyarrow", "Table"), ("pyarrow", "RecordBatch"),
                          ("pandas", "DataFrame"), ("polars", "DataFrame"))


def table_columns(obj) -> dict:
    """The columns of an Arrow-backed input, by name: numpy arrays and VarColumns (see the module
    docstring for the mapping). Raises ArrowInputError for a null inside a list or a type
    gpucache cannot store, TypeError for an object that is none of the accepted inputs."""
    pa = _pyarrow()
    if _is_parquet_path(obj):
        table = _read_parquet(pa, pathlib.Path(obj))
    elif _is_arrow_file(obj):
        table = _read_arrow_file(pa, pathlib.Path(obj))
    elif _is_hf_dataset(obj):
        table = _hf_table(obj)
    elif isinstance(obj, (pa.Table, pa.RecordBatch)):
        table = obj
    elif _kind(obj) == ("pandas", "DataFrame"):
        # Numeric columns convert without a copy; object columns (lists, str) are converted.
        table = pa.Table.from_pandas(obj, preserve_index=False)
    elif _kind(obj) == ("polars", "DataFrame"):
        table = obj.to_arrow()  # polars' columns are Arrow arrays: no copy
    elif _kind(obj) == ("datasets", "DatasetDict"):
        raise TypeError(f"a DatasetDict holds several splits ({', '.join(obj)}): pack one, "
                        "e.g. dataset['train']")
    else:
        raise TypeError(f"table_columns takes a pyarrow Table or RecordBatch, a pandas or polars "
                        f"DataFrame, "
                        f"a .parquet path or folder, or a datasets.Dataset, not "
                        f"{type(obj).__name__}")
    return {name: _column(pa, name, table.column(i))
            for i, name in enumerate(table.schema.names)}


def _parquet_suffixes() -> tuple:
    """The Parquet suffixes of the library's input registry (".parquet", ".pq")."""
    from . import _gpucache

    return tuple(_gpucache.input_format_suffixes()["parquet"])


def _is_parquet_file(path: pathlib.Path) -> bool:
    return path.suffix.lower() in _parquet_suffixes()


def _is_parquet_path(obj) -> bool:
    if not isinstance(obj, (str, os.PathLike)):
        return False
    path = pathlib.Path(obj)
    return _is_parquet_file(path) or (
        path.is_dir() and any(_is_parquet_file(p) for p in path.rglob("*")))


def _is_arrow_file(obj) -> bool:
    return (isinstance(obj, (str, os.PathLike))
            and pathlib.Path(obj).suffix.lower() in (".arrow", ".feather"))


def _read_arrow_file(pa, path: pathlib.Path):
    """An Arrow IPC file (Feather v2, `.arrow`) or stream (the Arrow files Hugging Face datasets
    keep in its cache and `save_to_disk` writes), memory-mapped: its buffers are used where they
    lie in the file."""
    import pyarrow.ipc

    try:
        source = pa.memory_map(str(path))
    except (OSError, pa.ArrowException) as error:
        raise ArrowInputError(f"{path}: cannot read it as Arrow: {error}") from error
    try:
        return pyarrow.ipc.open_file(source).read_all()
    except pa.ArrowInvalid:
        source.seek(0)
    try:
        return pyarrow.ipc.open_stream(source).read_all()
    except (OSError, pa.ArrowException) as error:
        raise ArrowInputError(f"{path}: cannot read it as Arrow IPC (file or stream): "
                              f"{error}") from error


def _is_hf_dataset(obj) -> bool:
    datasets = sys.modules.get("datasets")
    return datasets is not None and isinstance(obj, datasets.Dataset)


def _read_parquet(pa, path: pathlib.Path):
    import pyarrow.parquet as pq

    files = sorted(p for p in path.rglob("*") if _is_parquet_file(p)) if path.is_dir() else [path]
    tables = []
    for file in files:
        try:
            tables.append(pq.read_table(file))
        except (OSError, pa.ArrowException) as error:
            raise ArrowInputError(f"{file}: cannot read it as Parquet: {error}") from error
    try:
        return tables[0] if len(tables) == 1 else pa.concat_tables(tables)
    except pa.ArrowInvalid as error:
        raise ArrowInputError(f"{path}: its Parquet files have different schemas: "
                              f"{error}") from error


def _hf_table(dataset):
    table = dataset.data.table
    # After select/shuffle/filter a Dataset reads its rows through an indices mapping.
    indices = getattr(dataset, "_indices", None)
    if indices is not None:
        table = table.take(indices.column(0))
    return table


def _one_chunk(pa, column):
    if isinstance(column, pa.ChunkedArray):
        if column.num_chunks == 1:
            return column.chunk(0)
        if column.num_chunks == 0:
            return pa.array([], type=column.type)
        return column.combine_chunks()
    return column


def _null_mask(array):
    """A numpy bool array, True at the null entries of `array`; None when it has none."""
    if not array.null_count:
        return None
    return array.is_null().to_numpy(zero_copy_only=False)


def _refuse_inner_nulls(name, array, per_row, row_nulls):
    """A null element inside a row's list (not a null row) names that row: a list cannot be
    stored with a hole in it. Elements of null rows do not count: those rows are dropped."""
    mask = _null_mask(array)
    if mask is None:
        return
    for element in numpy.flatnonzero(mask):
        row = int(element) // per_row
        if row_nulls is None or not row_nulls[row]:
            raise ArrowInputError(f"column '{name}': row {row} holds a null inside its list; "
                                  "gpucache stores whole lists only (fill the null or drop the "
                                  "row first)")


def _nullable(values, row_nulls):
    """values as pack takes them: a NullableColumn when some rows are null (values 0 there)."""
    if row_nulls is None:
        return values
    if isinstance(values, numpy.ndarray):
        values = values.copy()
        values[row_nulls] = 0
    return NullableColumn(values=values, null_rows=numpy.flatnonzero(row_nulls))


def _numbers(pa, name, array):
    """A primitive numeric array as numpy, zero-copy unless it is bool or has nulls (whose
    entries become 0)."""
    kind = array.type
    if pa.types.is_boolean(kind):
        if array.null_count:
            array = array.fill_null(False)
        return array.to_numpy(zero_copy_only=False)
    if not (pa.types.is_integer(kind) or pa.types.is_floating(kind)):
        raise ArrowInputError(f"column '{name}' holds {kind} values, which gpucache cannot store "
                              "(numbers, lists of numbers and strings can be packed)")
    if not array.null_count:
        return array.to_numpy(zero_copy_only=True)
    # With nulls, Arrow's values buffer still holds one (arbitrary) value per entry.
    buffer = array.buffers()[1]
    dtype = array.slice(0, 0).to_numpy(zero_copy_only=True).dtype  # (no pandas needed)
    values = (numpy.frombuffer(buffer, dtype=dtype)[array.offset:array.offset + len(array)]
              if buffer is not None else numpy.zeros(len(array), dtype=dtype))
    return numpy.where(_null_mask(array), numpy.zeros((), dtype=dtype), values)


def _column(pa, name, column):
    array = _one_chunk(pa, column)
    kind = array.type
    if pa.types.is_dictionary(kind):
        array = array.dictionary_decode()
        kind = array.type
    if hasattr(pa.types, "is_string_view") and pa.types.is_string_view(kind):
        array = array.cast(pa.large_string())
        kind = array.type
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return _text(pa, name, array)
    if pa.types.is_temporal(kind):
        return _time(pa, name, array)
    if pa.types.is_fixed_size_list(kind):
        return _fixed_size_lists(pa, name, array)
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        return _lists(pa, name, array)
    return _nullable(_numbers(pa, name, array), _null_mask(array))


def _empty_null_rows(offsets, values, row_nulls):
    """(offsets from 0, values) with the null rows made empty: a null row's range is usually
    empty already (nothing is copied then); otherwise the other rows' values are gathered."""
    offsets = offsets.astype(numpy.int64) - int(offsets[0])
    if row_nulls is None:
        return offsets, values
    lengths = numpy.diff(offsets)
    if not lengths[row_nulls].any():
        return offsets, values
    keep = numpy.repeat(~row_nulls, lengths)
    lengths = numpy.where(row_nulls, 0, lengths)
    return numpy.concatenate(([0], numpy.cumsum(lengths))).astype(numpy.int64), values[keep]


def _text(pa, name, array):
    _, offsets_buffer, data = array.buffers()
    offset_type = numpy.int64 if pa.types.is_large_string(array.type) else numpy.int32
    offsets = numpy.frombuffer(offsets_buffer, dtype=offset_type)[
        array.offset:array.offset + len(array) + 1]
    start, end = int(offsets[0]), int(offsets[-1])
    values = (numpy.frombuffer(data, dtype=numpy.uint8)[start:end] if data is not None
              else numpy.zeros(0, dtype=numpy.uint8))
    row_nulls = _null_mask(array)
    if row_nulls is None and offset_type is numpy.int64 and start == 0:
        return VarColumn(offsets=offsets, values=values, kind="text")
    offsets, values = _empty_null_rows(offsets, values, row_nulls)
    null_rows = () if row_nulls is None else numpy.flatnonzero(row_nulls)
    return VarColumn(offsets=offsets, values=values, kind="text", null_rows=null_rows)


def _fixed_size_lists(pa, name, array):
    rows = len(array)
    shape = []
    per_row = 1
    row_nulls = _null_mask(array)
    while pa.types.is_fixed_size_list(array.type):
        size = array.type.list_size
        shape.append(size)
        per_row *= size
        # The child's values of these rows (a zero-copy slice), null rows' included: `flatten`
        # may leave those out, and the rows must keep their places.
        array = array.values.slice(array.offset * size, len(array) * size)
        if pa.types.is_fixed_size_list(array.type) or not (
                pa.types.is_list(array.type) or pa.types.is_large_list(array.type)):
            _refuse_inner_nulls(name, array, per_row, row_nulls)
    if pa.types.is_list(array.type) or pa.types.is_large_list(array.type):
        raise ArrowInputError(f"column '{name}' holds fixed-size lists of variable-length lists, "
                              "which gpucache cannot store")
    values = _numbers(pa, name, array)
    return _nullable(values.reshape(rows, *shape), row_nulls)


def _lists(pa, name, array):
    offsets = array.offsets.to_numpy(zero_copy_only=True)
    start, end = int(offsets[0]), int(offsets[-1])
    child = array.values
    if not (pa.types.is_integer(child.type) or pa.types.is_floating(child.type)
            or pa.types.is_boolean(child.type)):
        raise ArrowInputError(f"column '{name}' holds lists of {child.type}, which gpucache "
                              "cannot store (lists of numbers can be packed)")
    child = child.slice(start, end - start)
    row_nulls = _null_mask(array)
    # A null value inside a list (not in a null row) names the row that holds it.
    inner = _null_mask(child)
    if inner is not None:
        rows_of = numpy.searchsorted(offsets, start + numpy.flatnonzero(inner), side="right") - 1
        for row in rows_of:
            if row_nulls is None or not row_nulls[row]:
                raise ArrowInputError(f"column '{name}': row {int(row)} holds a null inside its "
                                      "list; gpucache stores whole lists only (fill the null or "
                                      "drop the row first)")
    values = _numbers(pa, name, child)
    offsets, values = _empty_null_rows(offsets, values, row_nulls)
    lengths = numpy.diff(offsets)
    rows = len(array)
    kept = lengths if row_nulls is None else lengths[~row_nulls]
    if pa.types.is_floating(child.type) and len(kept) and (kept == kept[0]).all():
        # Float vectors all of one length are a tensor; a null row's vector is zeros.
        width = int(kept[0])
        if row_nulls is None:
            return values.reshape(rows, width)
        matrix = numpy.zeros((rows, width), dtype=values.dtype)
        matrix[~row_nulls] = values.reshape(-1, width)
        return _nullable(matrix, row_nulls)
    null_rows = () if row_nulls is None else numpy.flatnonzero(row_nulls)
    return VarColumn(offsets=offsets, values=values, kind="sequence", null_rows=null_rows)


def _time(pa, name, array):
    """A timestamp, date, time or duration array as a TimeColumn of int64: Arrow's own integers
    (date32 and time32 widened), with its unit and time zone; null rows listed, their values 0."""
    kind = array.type
    if pa.types.is_timestamp(kind):
        time = ("timestamp", kind.unit, kind.tz or None)
    elif pa.types.is_duration(kind):
        time = ("duration", kind.unit, None)
    elif pa.types.is_date32(kind):
        time = ("date", "D", None)
    elif pa.types.is_date64(kind):
        time = ("date", "ms", None)
    elif pa.types.is_time(kind):
        time = ("time", kind.unit, None)
    else:
        raise ArrowInputError(f"column '{name}' holds {kind} values, which gpucache cannot store "
                              "(timestamps, dates, times of day and durations can be packed)")
    width = numpy.int32 if kind.bit_width == 32 else numpy.int64
    buffer = array.buffers()[1]
    values = (numpy.frombuffer(buffer, dtype=width)[array.offset:array.offset + len(array)]
              if buffer is not None else numpy.zeros(0, dtype=width))
    null_rows = ()
    if array.null_count:
        nulls = array.is_null().to_numpy(zero_copy_only=False)
        null_rows = numpy.flatnonzero(nulls)
        values = numpy.where(nulls, 0, values)
    if values.dtype != numpy.int64:
        values = values.astype(numpy.int64)
    return TimeColumn(values=values, kind=time[0], unit=time[1], tz=time[2], null_rows=null_rows)
