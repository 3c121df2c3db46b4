"""gpucache.stream: batches of a dataset larger than VRAM (or RAM), read from the shards as they
are needed by the runtime's reader threads, prefetched, and copied to the GPU on their own CUDA
stream."""
from __future__ import annotations

import os
from typing import Callable, Iterator, Optional, Sequence

from . import _arrays, _ranks
from ._batches import Resumable
from ._dataset import _resolve_device
from ._gpucache import Error, NativeDataset, NativeStream, is_provenance_column
from ._order import BatchOrder, OrderOptions
from ._sequences import pad_sequences

try:  # an IterableDataset, so torch.utils.data.DataLoader(stream, batch_size=None) takes it
    from torch.utils.data import IterableDataset as _Iterable
except ImportError:
    _Iterable = object

# Readers inherited through fork, kept so that their destructors (which join threads that exist
# only in the parent) never run in the child.
_INHERITED: list = []


class Stream(Resumable, _Iterable):
    """An iterable of batches (dicts name → batch) read from the shards; see gpucache.stream.

    Each iteration is one epoch; set_epoch(e) chooses the next one, state_dict() and
    load_state_dict() resume mid-epoch exactly, as GPUBatches does. For the same seed, epoch,
    batch_size, rank/world_size and block options it yields the same batches as GPUBatches over
    the whole dataset loaded into memory.

    A torch IterableDataset: DataLoader(stream, batch_size=None) passes its batches through, and
    with num_workers=N the workers share each epoch: worker w reads batches w, w + N, ... (the
    DataLoader hands them on in order), whatever the start method (fork or spawn) and with
    persistent_workers. The reader is opened in the process that iterates: a worker never uses
    the parent's reader threads, which do not survive fork."""

    _what = "stream"

    def __init__(self, native_dataset, *, path, rows_selected, device_name, device_index,
                 batch_size, shuffle, seed, rank, world_size, drop_last, block_rows,
                 window_blocks, prefetch, threads, verify, padded, max_length, pad_value,
                 with_indices, names, transform, cache_dir="", order_rank=None,
                 batch_limit=None, prefetch_shards=None):
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
        self.transform = transform
        self._device_index = device_index
        # What reopens the reader in another process (a DataLoader worker).
        self._path, self._rows_selected, self._cache_dir = path, rows_selected, cache_dir
        # partition="shards": the reader orders this rank's shards alone (rank 0 of 1), and every
        # rank yields batch_limit batches (the fewest any rank's shards give).
        self._order_rank = (self.rank, self.world_size) if order_rank is None else order_rank
        self._batch_limit = batch_limit
        self._prefetch, self._threads, self._verify = int(prefetch), int(threads), bool(verify)
        # None: the native stream's default (StreamOptions::prefetch_shards).
        self._prefetch_shards = prefetch_shards
        self._native = None
        self._owner = None    # (pid, stride) the reader was opened for
        self._open(native_dataset, 1)
        self._batches = (self._native.batches if batch_limit is None
                         else min(batch_limit, self._native.batches))
        self._next_epoch = 0
        self._resume_at = 0
        self._position = None
        self._worker = (0, 1)  # (id, workers) of the latest iteration

    def _open(self, native_dataset, stride: int) -> None:
        more = ({} if getattr(self, "_prefetch_shards", None) is None
                else {"prefetch_shards": int(self._prefetch_shards)})
        if native_dataset is None:
            native_dataset = NativeDataset.open(self._path, self._cache_dir)
            if self._rows_selected is not None:
                native_dataset = native_dataset.select_rows(*self._rows_selected)
            native_dataset = native_dataset.select_columns(self._names)
        self._native = NativeStream(
            native_dataset, batch_size=self.batch_size, shuffle=self.shuffle, seed=self.seed,
            epoch=0, rank=self._order_rank[0], world_size=self._order_rank[1],
            drop_last=self.drop_last,
            block_rows=self.block_rows, window_blocks=self.window_blocks,
            device=-1 if self._device_index is None else self._device_index,
            prefetch=self._prefetch, threads=self._threads, verify=self._verify, pad=False,
            stride=stride, **more)
        self._owner = (os.getpid(), stride)

    def _reader(self, stride: int):
        """The reader of this process for `stride` workers, opened here when it is not."""
        if self._owner != (os.getpid(), stride):
            if self._owner is not None and self._owner[0] != os.getpid():
                # Inherited through fork: its threads stayed in the parent, so it must never be
                # used or destroyed here (its destructor would wait for them forever).
                _INHERITED.append(self._native)
            self._native = None
            self._open(None, stride)
        return self._native

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_native"], state["_owner"] = None, None  # reopened where it is iterated
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)

    def __len__(self) -> int:
        return self._batches

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
        return self._reader(self._owner[1] if self._owner else 1).stats()

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
        if self.transform is not None:
            batch = self.transform(batch)
        if not self.with_indices:
            return batch
        indices = native.row_indices(numpy=_arrays.backend() == "numpy")
        if _arrays.backend() == "torch":
            indices = _arrays.torch.utils.dlpack.from_dlpack(indices)
        return indices, batch

    def state_dict(self) -> dict:
        """As GPUBatches'; inside DataLoader worker w of N (torchdata's StatefulDataLoader asks
        each worker) also "worker" and "workers", and "batch" is that worker's next batch."""
        state = super().state_dict()
        if self._worker[1] > 1:
            state["worker"], state["workers"] = self._worker
        return state

    def load_state_dict(self, state: dict) -> None:
        """As GPUBatches'. A worker's state resumes the same worker of as many workers."""
        workers = int(state.get("workers", 1))
        if workers > 1:
            here = _ranks.worker()
            if here != (int(state["worker"]), workers):
                raise Error(f"stream.load_state_dict: the state is DataLoader worker "
                            f"{state['worker']}'s of {workers}; restore it in that worker of a "
                            f"DataLoader with num_workers={workers} (torchdata's "
                            "StatefulDataLoader does), not here (worker "
                            f"{here[0]} of {here[1]})")
        if self._batch_limit is not None and (
                int(state.get("world_size", 1)) != self.world_size
                or int(state.get("batch_size", self.batch_size)) != self.batch_size):
            # A rank's order covers its own shards only: another world size or batch size has no
            # common place to resume from.
            raise Error(f"stream.load_state_dict: a partition='shards' stream resumes only with "
                        f"the world_size and batch_size it was saved with (saved: "
                        f"{state.get('world_size')} and {state.get('batch_size')}, here: "
                        f"{self.world_size} and {self.batch_size})")
        super().load_state_dict(state)
        self._resume_worker = workers > 1

    def __iter__(self) -> Iterator[object]:
        worker, workers = _ranks.worker()
        if workers > 1 and self._device_index is not None:
            raise Error(f"gpucache.stream to {self.device} in a DataLoader worker: CUDA does not "
                        "survive fork, and the stream already reads ahead on its own threads "
                        "and copies to the GPU on its own CUDA stream; use num_workers=0")
        self._worker = (worker, workers)
        native = self._reader(workers)
        epoch, start = self._next_epoch, self._resume_at
        self._next_epoch, self._resume_at = epoch + 1, 0
        # Worker w of N takes batches start + w, start + w + N, ...: the DataLoader's round robin
        # over its workers hands them on in the epoch's order. A worker's own saved state
        # (load_state_dict) already names its next batch.
        first = start if getattr(self, "_resume_worker", False) else start + worker
        self._resume_worker = False
        self._position = (epoch, first)
        native.seek(epoch, min(first, self._batches))
        while True:
            batch = native.next()
            if batch is None:
                break
            if batch.index >= self._batches:  # partition="shards": past the ranks' common count
                native.seek(epoch + 1, 0)
                break
            converted = self._convert(batch)
            self._position = (epoch, batch.index + workers)
            yield converted
        self._position = (epoch + 1, 0)

    def __repr__(self) -> str:
        return (f"gpucache.Stream(rows={self._rows}, batch_size={self.batch_size}, "
                f"device={self.device!r}, rank={self.rank}/{self.world_size}, "
                f"columns=[{', '.join(self._names)}])")


def stream(path, device: str = "cuda", batch_size: int = 1024, shuffle: bool = True,
           seed: int = 0, columns: Optional[Sequence[str]] = None, rank: Optional[int] = None,
           world_size: Optional[int] = None, prefetch: int = 4, *, drop_last: bool = False,
           block_rows: Optional[int] = None, window_blocks: int = 1, verify: bool = True,
           threads: int = 0, rows: Optional[tuple] = None, padded: bool = False,
           max_length: Optional[int] = None, pad_value=0, with_indices: bool = False,
           transform: Optional[Callable] = None, cache_dir=None,
           partition: str = "rows", prefetch_shards: Optional[int] = None) -> Stream:
    """Streams batches of a packed dataset without loading it whole (docs/python.md
    "gpucache.stream").

    device: "cuda", "cuda:N" (batches in VRAM; only the batches in flight use it) or "cpu".
    columns: default every tensor and sequence column but the provenance columns @source and
        @source_row; text and provenance columns when named (text as lists of str).
    rank, world_size: the rank rule (docs/python.md "Ranks and workers"): rank's interleaved
        part of every epoch's global order, from torch.distributed when it is initialised,
        explicit arguments overriding; every rank reads the whole dataset's shards as its rows
        need them.
    prefetch: batches gathered ahead by the reader threads (and in flight to the GPU).
    transform: a callable applied to each batch dict where it lies (see GPUBatches).
    Other options as GPUBatches (shuffle=True and drop_last=False by default): drop_last,
    block_rows, window_blocks, padded, max_length, pad_value, with_indices (the indices are on
    the CPU here).
    cache_dir: for a remote dataset (s3://, http(s)://), where its shards are fetched to, as for
        gpucache.load (DataLoader workers reopen the dataset: give them a cache to share).
    partition: "rows" (default): every rank takes its interleaved part of the global order, so
        every rank reads every shard. "shards": each rank gets whole shards (a contiguous run of
        them, balanced by rows) and orders only their rows, so a rank reads (and, for a remote
        dataset, fetches) only its own shards (docs/remote.md "Streaming").
    prefetch_shards: for a remote dataset, how many shards past the furthest one the batches have
        reached are fetched in the background, in the order the epoch's batches first need them
        (0: each shard is fetched when a batch first needs it). Default (None): the runtime's,
        StreamOptions::prefetch_shards (2). A remote stream fetches no shard when it is created.
    """
    path = os.fspath(path)
    rank, world_size = _ranks.resolve(rank, world_size)
    device_name, device_index = _resolve_device(device)
    cache_dir = "" if cache_dir is None else os.fspath(cache_dir)
    native = NativeDataset.open(path, cache_dir)
    rows_selected = None
    if rows is not None:
        rows_selected = (int(rows[0]), int(rows[1]))
        native = native.select_rows(*rows_selected)
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
    if prefetch_shards is not None and (isinstance(prefetch_shards, bool)
                                        or not isinstance(prefetch_shards, int)
                                        or prefetch_shards < 0):
        raise Error(f"prefetch_shards must be a whole number of shards, 0 or more, not "
                    f"{prefetch_shards!r}")
    if transform is not None and not callable(transform):
        raise Error(f"transform must be callable, not {type(transform).__name__}")
    if device_index is not None and _arrays.backend() != "torch":
        raise Error(f"device='{device}' needs PyTorch")
    block_rows = 0 if block_rows is None else int(block_rows)
    if partition == "shards":
        return _shard_partition_stream(
            native, path=path, rows_selected=rows_selected, rank=rank, world_size=world_size,
            cache_dir=cache_dir, device_name=device_name, device_index=device_index,
            batch_size=batch_size, shuffle=shuffle, seed=seed, drop_last=drop_last,
            block_rows=block_rows, window_blocks=window_blocks, prefetch=prefetch,
            threads=threads, verify=verify, padded=padded, max_length=max_length,
            pad_value=pad_value, with_indices=with_indices, names=names, transform=transform,
            prefetch_shards=prefetch_shards)
    if partition != "rows":
        raise Error(f"partition must be 'rows' or 'shards', not {partition!r}")
    _ranks.check_equal_steps(
        lambda r: len(BatchOrder(OrderOptions(
            rows=native.rows, batch_size=int(batch_size), rank=r, world_size=world_size,
            drop_last=bool(drop_last), block_rows=block_rows,
            window_blocks=int(window_blocks)))), world_size, bool(drop_last), "gpucache.stream")
    return Stream(native, path=path, rows_selected=rows_selected, device_name=device_name,
                  device_index=device_index, batch_size=batch_size, shuffle=shuffle, seed=seed,
                  rank=rank, world_size=world_size, drop_last=drop_last, block_rows=block_rows,
                  window_blocks=window_blocks, prefetch=prefetch, threads=threads, verify=verify,
                  padded=padded, max_length=max_length, pad_value=pad_value,
                  with_indices=with_indices, names=names, transform=transform,
                  cache_dir=cache_dir, prefetch_shards=prefetch_shards)


def shard_slices(shards, row_begin: int, row_end: int, world_size: int):
    """partition="shards": each rank's (begin, end) rows, a contiguous run of whole shards (clipped
    to the selection [row_begin, row_end)). A shard goes to the rank whose even share of the
    selection's rows holds the shard's first selected row, so the runs are balanced by rows and
    every shard belongs to exactly one rank."""
    total = row_end - row_begin
    slices = [None] * world_size
    for shard in shards:
        lo = max(shard["first_row"], row_begin)
        hi = min(shard["first_row"] + shard["rows"], row_end)
        if lo >= hi:
            continue
        owner = (lo - row_begin) * world_size // total
        begin, _ = slices[owner] or (lo, hi)
        slices[owner] = (begin, hi)
    return slices


def _shard_partition_stream(native, *, path, rows_selected, rank, world_size, cache_dir,
                            batch_size, drop_last, block_rows, window_blocks, **options):
    begin, end = rows_selected if rows_selected is not None else (0, native.rows)
    slices = shard_slices(native.shards(), begin, end, world_size)
    if any(s is None for s in slices):
        held = sum(s is not None for s in slices)
        raise Error(f"{path}: partition='shards' over world_size {world_size} needs a shard for "
                    f"every rank, and only {held} rank(s) get one (the selection's rows lie in "
                    f"{held} shard(s) or fewer); repack with a smaller --shard-size, or use "
                    "partition='rows'")

    def batches(r):
        rows = slices[r][1] - slices[r][0]
        return len(BatchOrder(OrderOptions(rows=rows, batch_size=int(batch_size), rank=0,
                                           world_size=1, drop_last=bool(drop_last),
                                           block_rows=block_rows,
                                           window_blocks=int(window_blocks))))

    counts = [batches(r) for r in range(world_size)]
    if len(set(counts)) > 1 and not drop_last:
        raise Error(f"gpucache.stream(partition='shards'): the ranks' shards give "
                    f"{min(counts)} to {max(counts)} batches (shards of different sizes): under "
                    "DDP the others would wait forever at the last step. Pass drop_last=True "
                    "(every rank yields the fewest, the rest of each epoch's order not yielded "
                    "and not counted by len()), or partition='rows'")
    mine = slices[rank]
    native = native.select_rows(mine[0] - begin, mine[1] - begin)  # relative to the selection
    return Stream(native, path=path, rows_selected=mine, rank=rank, world_size=world_size,
                  cache_dir=cache_dir, batch_size=batch_size, drop_last=drop_last,
                  block_rows=block_rows, window_blocks=window_blocks, order_rank=(0, 1),
                  batch_limit=min(counts), **options)
