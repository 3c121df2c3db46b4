"""The batch order of gpucache/batch_order.hpp for GPUBatches: which rows make up each batch of an
epoch, from the batch's index alone. The runtime computes it (NativeOrder, on the CPU threads,
without the GIL); this module only moves the rows to the data's device, once per epoch, so
GPUBatches over a resident dataset and gpucache.stream yield the same batches by construction."""
from __future__ import annotations

from dataclasses import dataclass

from . import _arrays
from ._gpucache import Error, NativeOrder


@dataclass(frozen=True)
class OrderOptions:
    """As gpucache::runtime::OrderOptions (docs/python.md "Batch order"). pad is always False in
    the Python package: with drop_last False every row comes exactly once (ranks differ by at most
    one row) instead of ranks being padded with repeated rows."""
    rows: int
    batch_size: int
    shuffle: bool = True
    seed: int = 0
    epoch: int = 0
    rank: int = 0
    world_size: int = 1
    drop_last: bool = False
    block_rows: int = 0
    window_blocks: int = 1


class BatchOrder:
    """The batches of one rank in one epoch; batch(b) gives their row indices on `device`."""

    def __init__(self, options: OrderOptions, device=None):
        o = options
        for name, value, least in (("batch_size", o.batch_size, 1), ("world_size", o.world_size, 1),
                                   ("window_blocks", o.window_blocks, 1),
                                   ("block_rows", o.block_rows, 0), ("rank", o.rank, 0),
                                   ("seed", o.seed, 0), ("epoch", o.epoch, 0)):
            if value < least:  # the binding's unsigned arguments would refuse it less clearly
                raise Error(f"{name} must be at least {least}, not {value}")
        self.options = o
        self.device = device if device is not None else "cpu"
        self._native = NativeOrder(rows=o.rows, batch_size=o.batch_size, shuffle=o.shuffle,
                                   seed=o.seed, epoch=o.epoch, rank=o.rank,
                                   world_size=o.world_size, drop_last=o.drop_last, pad=False,
                                   block_rows=o.block_rows, window_blocks=o.window_blocks)
        self.rank_rows = self._native.rank_rows

    def __len__(self) -> int:
        return self._native.batches

    def batch_rows(self, batch: int) -> int:
        return self._native.batch_rows(batch)

    def _rows(self, first: int, end: int):
        numpy = _arrays.backend() == "numpy"
        rows = self._native.rows(first, end, numpy=numpy)
        if numpy:
            return rows
        rows = _arrays.torch.utils.dlpack.from_dlpack(rows)
        return rows if str(self.device) == "cpu" else rows.to(self.device)

    def batch(self, batch: int):
        """The int64 row indices of batch `batch`, on this order's device."""
        if not 0 <= batch < len(self):
            raise Error(f"batch {batch} of {len(self)} does not exist")
        return self._rows(batch, batch + 1)

    def epoch_rows(self):
        """Every batch's rows of this rank, back to back, on this order's device (one copy per
        epoch to a GPU)."""
        return self._rows(0, len(self))
