"""Sequence columns (rows of varying length, such as token ids) and padded batches of them."""
from __future__ import annotations

from typing import NamedTuple, Optional

from . import _arrays
from ._gpucache import Error


class PaddedBatch(NamedTuple):
    """Rows of a sequence column as one rectangular batch.

    values: [B, L] of the column's dtype; row b holds its first lengths[b] values, then pad_value.
    lengths: [B] int64, how many values of each row are in the batch (at most L).
    """
    values: object
    lengths: object


def pad_sequences(values, offsets, rows, max_length: Optional[int] = None,
                  pad_value=0) -> PaddedBatch:
    """Rows `rows` (indices) of the sequence (values, offsets) as a padded [B, L] batch.

    Computed on the data's device with array operations (no loop over rows). L is max_length
    when given (longer rows are cut to it: no host synchronisation at all), else the longest of
    the selected rows (one synchronisation on CUDA, to learn L).
    """
    if _arrays.backend() == "torch":
        return _pad_torch(values, offsets, rows, max_length, pad_value)
    return _pad_numpy(values, offsets, rows, max_length, pad_value)


def _pad_torch(values, offsets, rows, max_length, pad_value) -> PaddedBatch:
    torch = _arrays.torch
    rows = torch.as_tensor(rows, device=offsets.device).to(torch.int64).reshape(-1)
    starts = offsets.index_select(0, rows)
    lengths = offsets.index_select(0, rows + 1) - starts
    if max_length is None:
        width = int(lengths.max()) if rows.numel() else 0
    else:
        if max_length < 0:
            raise Error(f"max_length must not be negative, not {max_length}")
        width = int(max_length)
        lengths = lengths.clamp(max=width)
    positions = torch.arange(width, device=offsets.device)
    inside = positions[None, :] < lengths[:, None]
    if values.numel() == 0 or width == 0:
        padded = torch.full((rows.numel(), width), pad_value, dtype=values.dtype,
                            device=values.device)
        return PaddedBatch(padded, lengths)
    index = torch.where(inside, starts[:, None] + positions[None, :], 0)
    gathered = values.index_select(0, index.reshape(-1)).reshape(index.shape)
    return PaddedBatch(gathered.masked_fill(~inside, pad_value), lengths)


def _pad_numpy(values, offsets, rows, max_length, pad_value) -> PaddedBatch:
    numpy = _arrays.numpy
    rows = numpy.asarray(rows, dtype=numpy.int64).reshape(-1)
    starts = offsets[rows]
    lengths = offsets[rows + 1] - starts
    if max_length is None:
        width = int(lengths.max()) if rows.size else 0
    else:
        if max_length < 0:
            raise Error(f"max_length must not be negative, not {max_length}")
        width = int(max_length)
        lengths = numpy.minimum(lengths, width)
    positions = numpy.arange(width)
    inside = positions[None, :] < lengths[:, None]
    padded = numpy.full((rows.size, width), pad_value, dtype=values.dtype)
    if values.size and width:
        padded[inside] = values[(starts[:, None] + positions[None, :])[inside]]
    return PaddedBatch(padded, lengths)


class Sequences:
    """A sequence column of a loaded Dataset (ds.sequences[name]).

    values: every selected row's values back to back (1-D, the column's dtype).
    offsets: [rows + 1] int64; row i is values[offsets[i]:offsets[i + 1]]; offsets[0] == 0.
    Both live where the Dataset's tensors do: in the device allocation for device="cuda", in host
    memory for device="cpu" (values are a view of the mapping when the rows lie in one shard).
    """

    def __init__(self, name: str, values, offsets):
        self.name = name
        self.values = values
        self.offsets = offsets

    def __len__(self) -> int:
        return int(self.offsets.shape[0]) - 1

    @property
    def lengths(self):
        """[rows] int64: the number of values of each row."""
        return self.offsets[1:] - self.offsets[:-1]

    def __getitem__(self, row: int):
        """Row `row`'s values (a view; reads two offsets, so a host synchronisation on CUDA)."""
        rows = len(self)
        if not -rows <= row < rows:
            raise IndexError(f"row {row} of sequence column '{self.name}' with {rows} rows")
        row %= rows
        return self.values[int(self.offsets[row]):int(self.offsets[row + 1])]

    def batch(self, rows, max_length: Optional[int] = None, pad_value=0) -> PaddedBatch:
        """Rows `rows` as a PaddedBatch ([B, L] values, [B] lengths); see pad_sequences."""
        return pad_sequences(self.values, self.offsets, rows, max_length, pad_value)

    def __repr__(self) -> str:
        return (f"gpucache.Sequences({self.name!r}, rows={len(self)}, "
                f"values={int(self.values.shape[0])}, dtype={self.values.dtype})")
