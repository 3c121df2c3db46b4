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

from ._gpucache import Error

# PyTorch before 2.3 has no uint16/32/64; the native layer then sends those columns as signed
# integers of the same width (same bits).
TORCH_HAS_WIDE_UNSIGNED = torch is not None and hasattr(torch, "uint64")


def backend() -> str:
    if torch is not None:
        return "torch"
    if numpy is not None:
        return "numpy"
    raise Error("gpucache needs PyTorch or numpy to return arrays; install one of them")


def _torch_dtype(name: str):
    table = {
        "f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16, "f64": torch.float64,
        "i64": torch.int64, "i32": torch.int32, "i16": torch.int16, "i8": torch.int8,
        "u8": torch.uint8, "bool": torch.bool,
        "fp8_e4m3": getattr(torch, "float8_e4m3fn", torch.uint8),
        "fp8_e5m2": getattr(torch, "float8_e5m2", torch.uint8),
    }
    wide = {"u16": (torch.int16, "uint16"), "u32": (torch.int32, "uint32"),
            "u64": (torch.int64, "uint64")}
    if name in wide:
        signed, unsigned = wide[name]
        return getattr(torch, unsigned) if TORCH_HAS_WIDE_UNSIGNED else signed
    return table[name]


def _numpy_dtype(name: str):
    table = {
        "f32": numpy.float32, "f16": numpy.float16, "bf16": numpy.uint16, "f64": numpy.float64,
        "i64": numpy.int64, "i32": numpy.int32, "i16": numpy.int16, "i8": numpy.int8,
        "u8": numpy.uint8, "u16": numpy.uint16, "u32": numpy.uint32, "u64": numpy.uint64,
        "bool": numpy.bool_, "fp8_e4m3": numpy.uint8, "fp8_e5m2": numpy.uint8,
    }
    return table[name]


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
