"""Columns in memory for gpucache.pack: each becomes (name, kind, values, offsets) over the
caller's own memory wherever it already has the layout the C++ reader takes (C-contiguous, on the
CPU), so nothing is copied before validation. Copies are made only where the data does not lie
so: a strided array or tensor (made contiguous), a CUDA tensor (copied to the host once, for
writing; its rows are validated in its own GPU memory when the CUDA backend runs on that GPU),
lists (encoded once)."""
from __future__ import annotations

from itertools import chain
from typing import Any, List, Tuple

from ._columns import NullableColumn, TimeColumn, VarColumn
from ._gpucache import Error


def _numpy():
    try:
        import numpy
    except ImportError:  # pragma: no cover - numpy comes with torch and the test environment
        raise Error("packing lists needs numpy") from None
    return numpy


def _is_torch_tensor(value) -> bool:
    module = type(value).__module__
    return module.startswith("torch") and hasattr(value, "detach") and hasattr(value, "is_cuda")


def _host_tensor(tensor):
    """A CPU tensor the C++ side reads through DLPack: detached (tensors that require grad refuse
    DLPack export), copied to the host when on CUDA, made contiguous when strided."""
    tensor = tensor.detach()
    if tensor.device.type != "cpu":
        tensor = tensor.cpu()
    if not tensor.is_contiguous():
        tensor = tensor.contiguous()
    if tensor.dtype.is_complex:
        raise Error(f"dtype {tensor.dtype} is not a type gpucache stores")
    # A numpy view of the same memory (no copy) for every dtype numpy has: older PyTorch cannot
    # export bool through DLPack. bfloat16, which numpy lacks, goes through DLPack.
    return tensor if str(tensor.dtype) == "torch.bfloat16" else tensor.numpy()


def _tensor_column(tensor):
    """(host values, device view or None) of a tensor column. A CUDA tensor is made contiguous on
    its GPU and copied to the host once: the host copy is what pack writes and hashes (the rows
    must reach the disk), and the device view (data pointer, device index, the tensor itself to
    keep it alive) lets the CUDA validation backend check the rows where they lie instead of
    uploading the host copy again. .cpu() is synchronous, so the GPU work that produced the tensor
    (on the current stream) is done before pack reads either copy."""
    tensor = tensor.detach()
    if tensor.device.type != "cuda":
        return _host_tensor(tensor), None
    if not tensor.is_contiguous():
        tensor = tensor.contiguous()
    host = _host_tensor(tensor)
    if tensor.numel() == 0:
        return host, None
    return host, (tensor.data_ptr(), tensor.device.index, tensor)


def _host_array(value, name: str):
    np = _numpy()
    array = value if isinstance(value, np.ndarray) else np.asarray(value)
    if array.dtype.kind in "USO":
        raise Error(f"memory:{name}: data: an array of {array.dtype} is not numeric; pass "
                    "a list of str for text")
    if not array.flags["C_CONTIGUOUS"]:
        array = np.ascontiguousarray(array)
    if array.dtype.byteorder == ">":
        array = array.astype(array.dtype.newbyteorder("<"))
    return array


def _text(strings: List[str], name: str):
    np = _numpy()
    try:
        encoded = [s.encode("utf-8") for s in strings]
    except (AttributeError, UnicodeEncodeError) as error:
        raise Error(f"memory:{name}: a text column needs str rows ({error})") from None
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum([len(b) for b in encoded], out=offsets[1:])
    values = np.frombuffer(b"".join(encoded), dtype=np.uint8)
    return VarColumn(offsets=offsets, values=values, kind="text")


def _sequences(rows, name: str):
    np = _numpy()
    lengths = [len(row) for row in rows]
    offsets = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    try:
        values = np.fromiter(chain.from_iterable(rows), dtype=np.int64, count=int(offsets[-1]))
    except (TypeError, ValueError, OverflowError) as error:
        raise Error(f"memory:{name}: sequence rows must hold integers ({error})") from None
    return VarColumn(offsets=offsets, values=values, kind="sequence")


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _list_column(rows: list, name: str):
    if not rows:
        raise Error(f"memory:{name}: the column has no rows")
    first = rows[0]
    if isinstance(first, str):
        return _text(rows, name)
    if isinstance(first, (list, tuple)) and all(
            isinstance(row, (list, tuple)) and all(_is_int(v) for v in row) for row in rows):
        return _sequences(rows, name)
    return _host_array(rows, name)


def _var_column(column: VarColumn, name: str) -> Tuple[str, Any, Any]:
    np = _numpy()
    if column.kind not in ("text", "sequence"):
        raise Error(f"memory:{name}: VarColumn kind must be 'text' or 'sequence', not "
                    f"{column.kind!r}")
    values = column.values
    values = _host_tensor(values) if _is_torch_tensor(values) else _host_array(values, name)
    offsets = column.offsets
    if _is_torch_tensor(offsets):
        offsets = offsets.detach().cpu().numpy()
    offsets = np.ascontiguousarray(offsets)
    if offsets.dtype != np.int64:
        if offsets.dtype.kind not in "iu":
            raise Error(f"memory:{name}: offsets must be integers, not {offsets.dtype}")
        offsets = offsets.astype(np.int64)
    return column.kind, values, offsets


# numpy's datetime64/timedelta64 units gpucache keeps as they are, and those it converts exactly to
# one it keeps (a week is 7 days, an hour 3600 seconds; a year or a month becomes the day it
# starts). Finer units than nanoseconds have no stored form.
_KEPT_UNITS = ("s", "ms", "us", "ns")
_COARSE_TO = {"Y": "D", "M": "D", "W": "D", "h": "s", "m": "s"}


def _datetime_column(array, name: str) -> TimeColumn:
    """A numpy datetime64 (timestamps; dates when its unit is days or coarser) or timedelta64
    (durations) array as a TimeColumn; NaT entries are null rows."""
    np = _numpy()
    unit, count = np.datetime_data(array.dtype)
    duration = array.dtype.kind == "m"
    if unit == "generic":
        raise Error(f"memory:{name}: a {array.dtype} array has no unit; give it one "
                    f"(e.g. .astype('{array.dtype.str[1:2]}8[ns]'))")
    target = unit if count == 1 else None
    if unit in _COARSE_TO or count != 1:
        target = _COARSE_TO.get(unit, unit)
        if duration and target == "D":
            target = "s"  # a duration's unit is s to ns
    elif duration and unit == "D":
        target = "s"
    if target not in _KEPT_UNITS + ("D",):
        raise Error(f"memory:{name}: {array.dtype} values are finer than nanoseconds, which "
                    "gpucache does not store; convert them to datetime64[ns] first")
    if target != unit or count != 1:
        try:
            array = array.astype(f"{array.dtype.str[1]}8[{target}]")
        except (TypeError, ValueError) as error:  # timedelta64 of months or years
            raise Error(f"memory:{name}: {array.dtype} values have no exact form in "
                        f"{target} ({error})") from None
    values = np.ascontiguousarray(array).view(np.int64)
    nat = np.isnat(array)
    null_rows = ()
    if nat.any():
        null_rows = np.flatnonzero(nat.reshape(len(array), -1).any(axis=1)) if array.ndim > 1 \
            else np.flatnonzero(nat)
        values = values.copy()
        values[nat] = 0
    kind = "duration" if duration else ("date" if target == "D" else "timestamp")
    return TimeColumn(values=values, kind=kind, unit=target, tz=None, null_rows=null_rows)


def _time_entry(column: TimeColumn, name: str):
    np = _numpy()
    values = _host_array(column.values, name)
    if values.dtype != np.int64:
        raise Error(f"memory:{name}: TimeColumn values must be int64, not {values.dtype}")
    null_rows = [int(row) for row in column.null_rows]
    return (name, "tensor", values, None, None,
            (column.kind, column.unit, column.tz, null_rows))


def _with_nulls(entry: tuple, null_rows) -> tuple:
    """entry with its null rows (ascending row numbers) as the seventh item, when it has any."""
    if len(null_rows) == 0:
        return entry
    return entry + (None,) * (6 - len(entry)) + ([int(row) for row in null_rows],)


def memory_columns(columns: dict) -> list:
    """[(name, kind, values, offsets or None[, device view[, time[, null rows]]])] for the
    extension's pack_json: a CUDA tensor's entry has a fifth item, (data pointer, device index,
    tensor); a date or time column (numpy datetime64/timedelta64, a TimeColumn) a sixth, (kind,
    unit, tz, null rows), with int64 values; any other column with null rows (a VarColumn's or a
    NullableColumn's, from Arrow) a seventh, the list of those rows (None in the unused items)."""
    if not columns:
        raise Error("pack() got an empty dict of columns")
    out = []
    for name, value in columns.items():
        if not isinstance(name, str):
            raise Error(f"column names must be str, not {type(name).__name__}")
        if isinstance(value, list):
            value = _list_column(value, name)
        np = _numpy()
        if isinstance(value, np.ndarray) and value.dtype.kind in "mM":
            value = _datetime_column(value, name)
        null_rows = ()
        if isinstance(value, NullableColumn):
            value, null_rows = value.values, value.null_rows
        if isinstance(value, TimeColumn):
            out.append(_time_entry(value, name))
        elif isinstance(value, VarColumn):
            kind, values, offsets = _var_column(value, name)
            out.append(_with_nulls((name, kind, values, offsets), value.null_rows))
        elif len(null_rows):
            array = _host_array(value, name)
            if array.ndim == 0:
                raise Error(f"memory:{name}: a scalar is not a column")
            out.append(_with_nulls((name, "tensor", array, None), null_rows))
        elif _is_torch_tensor(value):
            host, device = _tensor_column(value)
            out.append((name, "tensor", host, None) + ((device,) if device else ()))
        else:
            array = _host_array(value, name)
            if array.ndim == 0:
                raise Error(f"memory:{name}: a scalar is not a column")
            out.append((name, "tensor", array, None))
    return out


def host_leaf(value):
    """The C-contiguous host array (numpy, or a torch bf16 tensor) the extension reads a tensor or
    array inside an object tree from: the `prepare` of _gpucache.pack_json's tree."""
    if _is_torch_tensor(value):
        return _host_tensor(value)
    return _host_array(value, type(value).__name__)


def leaf_description(value):
    """(dtype name, shape) of a tensor or array, touching none of its data (a CUDA tensor stays
    where it is): what the extension needs to decide how to read a dict. None for anything else."""
    if _is_torch_tensor(value):
        return str(value.dtype).replace("torch.", ""), tuple(value.shape)
    np = _numpy()
    if isinstance(value, np.ndarray):
        return value.dtype.name, tuple(value.shape)
    return None

