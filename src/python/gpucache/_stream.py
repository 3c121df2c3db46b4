"""gpucache.stream: batches of a dataset larger than VRAM (or RAM), read from the shards as they
are needed by the runtime's reader threads, prefetched, and copied to the GPU on their own CUDA
stream."""
from __future__ import annotations

import os
from typing import Iterator, Optional, Sequence

from . import _arrays
from ._batches import Resumable
from ._dataset import _distributed_defaults, _resolve_device
from ._gpucache import Error, NativeDataset, NativeStream, is_provenance_column
from ._sequences import pad_sequences

try:  # an IterableDataset, so torch.utils.data.DataLoader(stream, batch_size=None) takes it
    from torch.utils.data import IterableDataset as _Iterable
except ImportError:
    _Iterable = object


class Stream(Resumable, _Iterable):
    """An iterable of batches (dicts name → batch) read from the shards; see gpucache.stream.

    Each iteration is one epoch; set_epoch(e) chooses the next one, state_dict() and
    load_state_dict() resume mid-epoch exactly, as GPUBatches does. For the same seed, epoch,
    batch_size, rank/world_size and block options it yields the same batches as GPUBatches over
    the whole dataset loaded into memory.

    A torch IterableDataset: DataLoader(stream, batch_size=None) passes its batches through
    (keep num_workers=0: the stream has its own reader threads, and each worker would read
    every batch)."""

    _what = "stream"

    def __init__(self, native_dataset, *, device_name, device_index, batch_size, shuffle, seed,
                 rank, world_size, drop_last, block_rows, window_blocks, prefetch, threads,
                 verify, padded, max_length, pad_value, with_indices, names):
        self._columns = {c["name"]: c for c in native_dataset.columns()}
        self._names = names
        self._rows = native_dataset.rows
        self.device = device_name
        self.batch_size = int(batch_size)
        self.shuffle = bool(shuffle)
        self.seed = int(seed)
        self.rank, self.world_size = int(rank), int(world_size)
        self.drop_last = bool(drop_last)
        self.block_rows = int(block_rows)
        self.window_blocks = int(window_blocks)
        self.padded = padded
        self.max_length = max_length
        self.pad_value = pad_value
        self.with_indices = with_indices
        self._device_index = device_index
        self._native = NativeStream(
            native_dataset, batch_size=self.batch_size, shuffle=self.shuffle, seed=self.seed,
            epoch=0, rank=self.rank, world_size=self.world_size, drop_last=self.drop_last,
            block_rows=self.block_rows, window_blocks=self.window_blocks,
            device=-1 if device_index is None else device_index, prefetch=int(prefetch),
            threads=int(threads), verify=bool(verify))
        self._next_epoch = 0
        self._resume_at = 0
        self._position = None

    def __len__(self) -> int:
        return self._native.batches

    @property
    def epoch(self) -> int:
        """The epoch the next iteration will use."""
        return self._next_epoch

    def set_epoch(self, epoch: int) -> None:
        """The epoch the next iteration uses; a position restored by load_state_dict is kept when
        it is in this epoch."""
        epoch = int(epoch)
        if epoch != self._next_epoch:
            self._resume_at = 0
        self._next_epoch = epoch
        self._position = None

    def stats(self) -> dict:
        """batches handed out, bytes gathered and verified, peak_blocks (the memory bound)."""
        return self._native.stats()

    def _convert(self, native):
        flags = _arrays.wire_flags()
        if self._device_index is not None:
            torch = _arrays.torch
            # The consumer's stream waits for the copy: no host synchronisation.
            native.wait(torch.cuda.current_stream(self._device_index).cuda_stream)
        batch = {}
        for name in self._names:
            column = self._columns[name]
            if column["kind"] == "tensor":
                array = _arrays.from_native(native.tensor(name, **flags), column)
                batch[name] = array if self.padded else _arrays.logical_view(array, column)
            elif column["kind"] == "sequence":
                values, offsets = native.sequence(name, **flags)
                values = _arrays.from_native(values, column)
                offsets = _arrays.from_native(offsets, {"dtype": "i64"})
                rows = (_arrays.torch.arange(native.rows, device=offsets.device)
                        if _arrays.backend() == "torch" else _arrays.numpy.arange(native.rows))
                batch[name] = pad_sequences(values, offsets, rows, self.max_length,
                                            self.pad_value)
            else:
                batch[name] = native.texts(name)
        if not self.with_indices:
            return batch
        indices = native.row_indices(numpy=_arrays.backend() == "numpy")
        if _arrays.backend() == "torch":
            indices = _arrays.torch.utils.dlpack.from_dlpack(indices)
        return indices, batch

    def __iter__(self) -> Iterator[object]:
        epoch, start = self._next_epoch, self._resume_at
        self._next_epoch, self._resume_at = epoch + 1, 0
        self._position = (epoch, start)
        self._native.seek(epoch, start)
        while True:
            native = self._native.next()
            if native is None:
                break
            converted = self._convert(native)
            self._position = (epoch, native.index + 1)
            yield converted
        self._position = (epoch + 1, 0)

    def __repr__(self) -> str:
        return (f"gpucache.Stream(rows={self._rows}, batch_size={self.batch_size}, "
                f"device={self.device!r}, rank={self.rank}/{self.world_size}, "
                f"columns=[{', '.join(self._names)}])")


def stream(path, device: str = "cuda", batch_size: int = 1024, shuffle: bool = True,
           seed: int = 0, columns: Optional[Sequence[str]] = None, rank: Optional[int] = None,
           world_size: Optional[int] = None, prefetch: int = 4, *, drop_last: bool = True,
           block_rows: Optional[int] = None, window_blocks: int = 1, verify: bool = True,
           threads: int = 0, rows: Optional[tuple] = None, padded: bool = False,
           max_length: Optional[int] = None, pad_value=0, with_indices: bool = False) -> Stream:
    """Streams batches of a packed dataset without loading it whole (docs/python.md
    "gpucache.stream").

    device: "cuda", "cuda:N" (batches in VRAM; only the batches in flight use it) or "cpu".
    columns: default every tensor and sequence column but the provenance columns @source and
        @source_row; text and provenance columns when named (text as lists of str).
    rank, world_size: each rank's interleaved part of every epoch's global order (default from
        torch.distributed); every rank reads the whole dataset's shards as its rows need them.
    prefetch: batches gathered ahead by the reader threads (and in flight to the GPU).
    Other options as GPUBatches: drop_last, block_rows, window_blocks, padded, max_length,
    pad_value, with_indices (the indices are on the CPU here).
    """
    path = os.fspath(path)
    rank, world_size = _distributed_defaults(rank, world_size)
    device_name, device_index = _resolve_device(device)
    native = NativeDataset.open(path)
    if rows is not None:
        native = native.select_rows(int(rows[0]), int(rows[1]))
    known = native.columns()
    if columns is None:
        names = [c["name"] for c in known if c["kind"] in ("tensor", "sequence")
                 and not is_provenance_column(c["name"])]
    else:
        names = list(columns)
    if not names:
        raise Error(f"{path}: no tensor or sequence columns to stream (name text columns to "
                    "stream them)")
    native = native.select_columns(names)
    if batch_size < 1:
        raise Error(f"batch_size must be at least 1, not {batch_size}")
    if prefetch < 1:
        raise Error(f"prefetch must be at least 1, not {prefetch}")
    if device_index is not None and _arrays.backend() != "torch":
        raise Error(f"device='{device}' needs PyTorch")
    return Stream(native, device_name=device_name, device_index=device_index,
                  batch_size=batch_size, shuffle=shuffle, seed=seed, rank=rank,
                  world_size=world_size, drop_last=drop_last,
                  block_rows=0 if block_rows is None else block_rows,
                  window_blocks=window_blocks, prefetch=prefetch, threads=threads, verify=verify,
                  padded=padded, max_length=max_length, pad_value=pad_value,
                  with_indices=with_indices, names=names)
