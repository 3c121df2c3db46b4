"""The batch order as the Python package computed it itself before the runtime's NativeOrder
replaced it (torch or numpy, on any device): kept here as an independent reference, so the tests
show the order is unchanged (and that drop_last=False without padding only changes how many rows
each rank takes, not which row a position holds). Every product stays below 2**63."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from gpucache import _arrays
from gpucache._gpucache import Error

ROUNDS = 6
_M64 = (1 << 64) - 1
_M32 = (1 << 32) - 1
_MAX_ROWS = 1 << 62


def _mix(x: int) -> int:
    """splitmix64's finaliser, on Python ints (keys are made on the host)."""
    x = (x + 0x9E3779B97F4A7C15) & _M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _M64
    return x ^ (x >> 31)


def order_key(seed: int, epoch: int, tag: int) -> int:
    """The key of permutation `tag` of an epoch (0 rows, 1 blocks, 2 + w window w)."""
    return _mix((_mix(_mix(seed & _M64) ^ _mix(epoch & _M64)) + tag) & _M64)


def _round(half, key: int):
    x = (half ^ key) & _M32
    x = (x * 0x6C8E9CF5) & _M32
    x = x ^ (x >> 15)
    x = (x * 0x4F6CDD1D) & _M32
    return x ^ (x >> 13)


class Permutation:
    """A bijection of [0, size) chosen by key; apply() maps an int64 array of indices."""

    def __init__(self, size: int, key: int):
        if size >= _MAX_ROWS:
            raise Error(f"{size} rows: at most 2^62 can be shuffled")
        self.size = int(size)
        if self.size <= 1:
            self.half_bits = 0
            return
        self.half_bits = ((self.size - 1).bit_length() + 1) // 2
        self.half_mask = (1 << self.half_bits) - 1
        self.keys = [_mix((key + i + 1) & _M64) & _M32 for i in range(ROUNDS)]

    def _encrypt(self, value):
        left, right = value >> self.half_bits, value & self.half_mask
        for key in self.keys:
            left, right = right, left ^ (_round(right, key) & self.half_mask)
        return (left << self.half_bits) | right

    def apply(self, index):
        if self.size <= 1:
            return index
        value = self._encrypt(index)
        # Cycle walking: a few passes over a shrinking set (one host sync each on CUDA).
        outside = value >= self.size
        while bool(outside.any()):
            value[outside] = self._encrypt(value[outside])
            outside = value >= self.size
        return value

    def __call__(self, index: int) -> int:
        return int(self.apply(_arange(index, index + 1, "cpu"))[0])


def _arange(begin: int, end: int, device):
    if _arrays.backend() == "torch":
        return _arrays.torch.arange(begin, end, dtype=_arrays.torch.int64, device=device)
    return _arrays.numpy.arange(begin, end, dtype=_arrays.numpy.int64)


@dataclass(frozen=True)
class OrderOptions:
    """As gpucache::runtime::OrderOptions (docs/python.md "Batch order")."""
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
    pad: bool = False


class BatchOrder:
    """The batches of one rank in one epoch; batch(b) gives their row indices on `device`."""

    def __init__(self, options: OrderOptions, device=None):
        o = options
        if o.batch_size < 1:
            raise Error(f"batch_size must be at least 1, not {o.batch_size}")
        if o.world_size < 1:
            raise Error(f"world_size must be at least 1, not {o.world_size}")
        if not 0 <= o.rank < o.world_size:
            raise Error(f"rank {o.rank} is not below world_size {o.world_size}")
        if o.window_blocks < 1:
            raise Error(f"window_blocks must be at least 1, not {o.window_blocks}")
        if o.block_rows < 0:
            raise Error(f"block_rows must not be negative, not {o.block_rows}")
        self.options = o
        self.device = device if device is not None else "cpu"
        world = o.world_size
        if o.drop_last:
            self.rank_rows = o.rows // world
        elif o.pad:
            self.rank_rows = -(-o.rows // world)
        else:  # positions rank, rank + world, ... below rows
            self.rank_rows = -(-(o.rows - o.rank) // world) if o.rank < o.rows else 0
        self._rows = Permutation(o.rows if o.shuffle and not o.block_rows else 0,
                                 order_key(o.seed, o.epoch, 0))
        if o.block_rows:
            self._full = o.rows // o.block_rows
            self._blocks = Permutation(self._full if o.shuffle else 0,
                                       order_key(o.seed, o.epoch, 1))
            self._window_rows = o.block_rows * o.window_blocks
            self._windows = 1 if self._full == 0 else -(-self._full // o.window_blocks)

    def __len__(self) -> int:
        size = self.options.batch_size
        return self.rank_rows // size if self.options.drop_last else -(-self.rank_rows // size)

    def batch_rows(self, batch: int) -> int:
        begin = batch * self.options.batch_size
        return max(0, min(self.options.batch_size, self.rank_rows - begin))

    def rows_at(self, positions):
        """Rows at the epoch's global positions (int64 array, each < rows)."""
        o = self.options
        if not o.shuffle:
            return positions
        if not o.block_rows:
            return self._rows.apply(positions)
        window = (positions // self._window_rows).clamp(max=self._windows - 1) if hasattr(
            positions, "clamp") else _arrays.numpy.minimum(positions // self._window_rows,
                                                           self._windows - 1)
        out = positions.copy() if not hasattr(positions, "clone") else positions.clone()
        for w in sorted({int(v) for v in window.tolist()}):
            chosen = window == w
            start = w * self._window_rows
            size = o.rows - start if w == self._windows - 1 else self._window_rows
            local = Permutation(size, order_key(o.seed, o.epoch, 2 + w)).apply(
                positions[chosen] - start)
            slot = w * o.window_blocks + local // o.block_rows
            within = local % o.block_rows
            inside = slot < self._full
            block = slot.clone() if hasattr(slot, "clone") else slot.copy()
            block[~inside] = self._full
            if bool(inside.any()):
                block[inside] = self._blocks.apply(slot[inside])
            out[chosen] = block * o.block_rows + within
        return out

    def positions(self, batch: int):
        """The epoch's global positions that batch `batch` of this rank takes."""
        o = self.options
        if not 0 <= batch < len(self):
            raise Error(f"batch {batch} of {len(self)} does not exist")
        local = _arange(batch * o.batch_size, batch * o.batch_size + self.batch_rows(batch),
                        self.device)
        return (local * o.world_size + o.rank) % o.rows

    def batch(self, batch: int):
        """The int64 row indices of batch `batch`, on this order's device."""
        return self.rows_at(self.positions(batch))

    def epoch_rows(self):
        """Every batch's rows of this rank, back to back (one pass, computed on the device)."""
        o = self.options
        count = len(self) * o.batch_size if o.drop_last else self.rank_rows
        local = _arange(0, count, self.device)
        return self.rows_at((local * o.world_size + o.rank) % max(o.rows, 1))

