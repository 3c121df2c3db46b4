"""Turns the native DLPack arrays into torch tensors (or numpy arrays when torch is absent)."""
from __future__ import annotations

try:
    import torch
except ImportError:  # numpy-only installs still get host data
    torch = None

try:
    import numpy
except ImportError:
    numpy = None

from ._gpucache import Error, dtype_table

# PyTorch before 2.3 has no uint16/32/64; the native layer then sends those columns as signed
# integers of the same width (same bits).
TORCH_HAS_WIDE_UNSIGNED = torch is not None and hasattr(torch, "uint64")


def backend() -> str:
    if torch is not None:
        return "torch"
    if numpy is not None:
        return "numpy"
    raise Error("gpucache needs PyTorch or numpy to return arrays; install one of them")


# The dtype table's rows (src/common/dtype.cpp): name -> (torch dtype name, numpy kind letter or
# "" where numpy has none, bytes).
_DTYPES = {name: (torch_name, kind, size) for name, torch_name, kind, size in dtype_table()}


def _torch_dtype(name: str):
    torch_name, kind, size = _DTYPES[name]
    found = getattr(torch, torch_name, None)
    if found is not None:
        return found
    if kind == "u":
        # Same bits, signed: what the native layer sends when unsigned_as_signed.
        return getattr(torch, f"int{size * 8}")
    return torch.uint8  # fp8 before torch has it: its bytes


def _numpy_dtype(name: str):
    _, kind, size = _DTYPES[name]
    # numpy has no bf16 or fp8: their bits, as unsigned integers of their size.
    return numpy.dtype(f"{kind or 'u'}{size}").type


def dtype_for(name: str):
    """The framework dtype a column of this gpucache dtype comes back as."""
    return _torch_dtype(name) if backend() == "torch" else _numpy_dtype(name)


def wire_flags() -> dict:
    if backend() == "torch":
        return {"unsigned_as_signed": not TORCH_HAS_WIDE_UNSIGNED}
    return {"numpy": True}


def from_native(array, column: dict):
    """A framework array over the native one (zero-copy), viewed as the column's dtype."""
    if backend() == "torch":
        tensor = torch.utils.dlpack.from_dlpack(array)
        wanted = _torch_dtype(column["dtype"])
        return tensor if tensor.dtype == wanted else tensor.view(wanted)
    out = array  # already a numpy array (the native layer made it)
    wanted = _numpy_dtype(column["dtype"])
    return out if out.dtype == wanted else out.view(wanted)


def stored_row_shape(column: dict) -> tuple:
    """The stored shape of one row: row_shape with its innermost dimension padded_dim."""
    shape = tuple(column["row_shape"])
    return shape[:-1] + (column["padded_dim"],) if shape else ()


def empty(column: dict, device: str):
    shape = (0,) + stored_row_shape(column)
    if backend() == "torch":
        return torch.empty(shape, dtype=_torch_dtype(column["dtype"]), device=device)
    return numpy.empty(shape, dtype=_numpy_dtype(column["dtype"]))


def concatenate(parts):
    if backend() == "torch":
        return torch.cat(parts)
    return numpy.concatenate(parts)


def logical_view(padded, column: dict):
    """The [rows, *row_shape] view of the stored [rows, ..., padded_dim] rows (no copy)."""
    if column["row_shape"] and column["dim"] != column["padded_dim"]:
        return padded[..., : column["dim"]]
    return padded
