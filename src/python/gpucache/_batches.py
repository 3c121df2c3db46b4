"""GPUBatches: shuffled mini-batches gathered where the data lives, without host round trips."""
from __future__ import annotations

from typing import Callable, Dict, Iterator, Optional, Sequence

from . import _arrays, _ranks
from ._gpucache import Error, resume_batch as _resume_batch
from ._order import BatchOrder, OrderOptions
from ._sequences import pad_sequences

_ORDER_KEYS = ("rows", "shuffle", "seed", "block_rows", "window_blocks", "drop_last")


def resume_batch(state: dict, batch_size: int, world_size: int) -> int:
    """The batch to resume at under (batch_size, world_size) from a state saved under others:
    the runtime's resume_batch (gpucache/batch_order.hpp), the saved global progress rounded down
    to a whole batch of the new ranks."""
    return _resume_batch(int(state["batch"]), int(state["batch_size"]),
                         int(state["world_size"]), int(batch_size), int(world_size))


def check_state(state: dict, current: dict, what: str) -> None:
    for key in _ORDER_KEYS:
        if key in state and state[key] != current[key]:
            raise Error(f"{what}.load_state_dict: the state was saved with {key}={state[key]!r} "
                        f"but this one has {key}={current[key]!r}: the order would differ")


class Resumable:
    """state_dict/load_state_dict for GPUBatches and Stream, which keep the same position
    attributes (_position, _next_epoch, _resume_at) and order options, so either may resume from
    the other's state."""

    _what = "GPUBatches"

    def state_dict(self) -> dict:
        """Where iteration stands: resuming from it (load_state_dict) yields exactly the batches
        an uninterrupted run would have yielded next. Plain ints and bools."""
        if self._position is None:
            epoch, batch = self._next_epoch, self._resume_at
        else:
            epoch, batch = self._position
        return {"epoch": epoch, "batch": batch, "rows": self._rows, "shuffle": self.shuffle,
                "seed": self.seed, "drop_last": self.drop_last, "block_rows": self.block_rows,
                "window_blocks": self.window_blocks, "batch_size": self.batch_size,
                "world_size": self.world_size, "rank": self.rank}

    def load_state_dict(self, state: dict) -> None:
        """Resumes at the saved epoch and batch. Another world size or batch size resumes at the
        same place of the epoch's global order, rounded down to a whole batch (resume_batch)."""
        check_state(state, {"rows": self._rows, "shuffle": self.shuffle, "seed": self.seed,
                            "drop_last": self.drop_last, "block_rows": self.block_rows,
                            "window_blocks": self.window_blocks}, self._what)
        self._next_epoch = int(state["epoch"])
        self._resume_at = resume_batch(state, self.batch_size, self.world_size)
        self._position = None


class GPUBatches(Resumable):
    """Iterates over batches of a loaded Dataset: dicts name → batch of batch_size rows.

    The order is gpucache's stateless batch order (docs/python.md "Batch order"): a keyed
    permutation of seed and epoch, computed on the data's device, the same one gpucache.stream
    uses, so both yield the same batches. Rows are gathered with index_select: no CPU work and no
    host synchronisation per batch. Each iteration is one epoch; the epoch advances by one per
    iteration unless set with set_epoch(e). state_dict()/load_state_dict() resume mid-epoch.
    Works on CPU tensors too, and with numpy arrays when torch is absent.

    shuffle: True by default (a new order every epoch); shuffle=False with the default
        drop_last=False is an evaluation pass: every row once, in row order.
    rank, world_size: the rank rule (docs/python.md "Ranks and workers"): over a rank's share
        made by gpucache.load, the whole share (rank 0 of 1; splitting it again is an error);
        over a whole dataset, rank's part of every epoch's global order (DistributedSampler's
        interleaving), rank and world_size from torch.distributed when it is initialised,
        explicit arguments overriding.
    drop_last: False (default) yields every row exactly once: the last, short batch too, and
        with world_size > 1 ranks hold rows // world_size or one row more. True gives every rank
        rows // world_size rows in full batches only. Ranks that would get different numbers of
        batches raise gpucache.Error (DDP would hang at the last step).
    transform: a callable applied to each batch dict (the columns, where the batch lies) before
        it is yielded, e.g. u8 images to normalised bf16 on the GPU; its result is yielded
        instead. The position state_dict() saves is unchanged by it.
    block_rows, window_blocks: block shuffle: blocks of block_rows consecutive rows in random
        order, rows shuffled within windows of window_blocks blocks.
    columns: names to batch; default every tensor and sequence column (text columns are looked
        up by row index instead: with_indices=True, then ds.texts(name, indices)).
    Tensor columns come as [batch, *row_shape] (logical rows), or the stored rows with
        padded=True.
    Sequence columns come as a PaddedBatch (values [batch, L] filled with pad_value after each
        row's end, lengths [batch] int64). L is max_length when given (longer rows are cut to
        it), else the batch's longest row, which costs one host synchronisation per batch on
        CUDA: give max_length to keep batches free of synchronisation.
    with_indices=True: iterating yields (indices, batch), indices the [batch] int64 row indices
        (rows of the Dataset, on the data's device) the batch was gathered from.
    """

    def __init__(self, dataset, batch_size: int, shuffle: bool = True, seed: int = 0,
                 drop_last: bool = False, columns: Optional[Sequence[str]] = None,
                 padded: bool = False, with_indices: bool = False,
                 max_length: Optional[int] = None, pad_value=0, *, rank: Optional[int] = None,
                 world_size: Optional[int] = None, block_rows: Optional[int] = None,
                 window_blocks: int = 1, transform: Optional[Callable] = None):
        if batch_size < 1:
            raise Error(f"batch_size must be at least 1, not {batch_size}")
        if max_length is not None and max_length < 0:
            raise Error(f"max_length must not be negative, not {max_length}")
        if transform is not None and not callable(transform):
            raise Error(f"transform must be callable, not {type(transform).__name__}")
        rank, world_size = _ranks.for_batches(dataset, rank, world_size, "GPUBatches")
        source = dataset.padded if padded else dataset.tensors
        sequences = dataset.sequences
        names = list(columns) if columns is not None else list(source) + list(sequences)
        missing = [name for name in names if name not in source and name not in sequences]
        if missing:
            known = list(source) + list(sequences)
            raise Error(f"GPUBatches: no tensor or sequence column {', '.join(missing)}; the "
                        f"dataset has {', '.join(known) or 'none'}")
        if not names:
            raise Error("GPUBatches: no tensor or sequence columns to batch")
        self._tensors = {name: source[name] for name in names if name in source}
        self._sequences = {name: sequences[name] for name in names if name not in source}
        self._names = names
        self._rows = len(dataset)
        self.batch_size = int(batch_size)
        self.shuffle = bool(shuffle)
        self.seed = int(seed)
        self.drop_last = bool(drop_last)
        self.rank, self.world_size = rank, world_size
        self.transform = transform
        self.block_rows = 0 if block_rows is None else int(block_rows)
        self.window_blocks = int(window_blocks)
        self.with_indices = with_indices
        self.max_length = max_length
        self.pad_value = pad_value
        self._next_epoch = 0
        self._resume_at = 0      # batch of _next_epoch the next iteration starts at
        # (epoch, next batch) of the latest iteration; None before any, or after set_epoch and
        # load_state_dict, which say where the next one starts.
        self._position = None
        self._torch = _arrays.backend() == "torch"
        first = (self._tensors[names[0]] if names[0] in self._tensors
                 else self._sequences[names[0]].values)
        self._device = first.device if self._torch else "cpu"
        self._batch_order(0)  # checks rank, world_size and the block options now
        if self.world_size > 1:
            _ranks.check_equal_steps(lambda r: len(self._batch_order(0, rank=r)),
                                     self.world_size, self.drop_last, "GPUBatches")
        elif getattr(dataset, "world_size", 1) > 1:  # a share of load: the other ranks' shares
            _ranks.check_equal_steps(
                lambda r: len(BatchOrder(OrderOptions(
                    rows=dataset.share_rows(r), batch_size=self.batch_size,
                    drop_last=self.drop_last))), dataset.world_size, self.drop_last,
                "GPUBatches")

    def _batch_order(self, epoch: int, rank: Optional[int] = None) -> BatchOrder:
        return BatchOrder(OrderOptions(
            rows=self._rows, batch_size=self.batch_size, shuffle=self.shuffle, seed=self.seed,
            epoch=epoch, rank=self.rank if rank is None else rank, world_size=self.world_size,
            drop_last=self.drop_last,
            block_rows=self.block_rows, window_blocks=self.window_blocks), self._device)

    def set_epoch(self, epoch: int) -> None:
        """The epoch the next iteration uses (as DistributedSampler.set_epoch). A position
        restored by load_state_dict is kept when it is in this epoch."""
        epoch = int(epoch)
        if epoch != self._next_epoch:
            self._resume_at = 0
        self._next_epoch = epoch
        self._position = None

    @property
    def epoch(self) -> int:
        """The epoch the next iteration will use."""
        return self._next_epoch

    def __len__(self) -> int:
        return len(self._batch_order(0))

    def order(self, epoch: int):
        """This rank's rows of an epoch in batch order, on the data's device."""
        return self._batch_order(epoch).epoch_rows()

    def batch_indices(self, epoch: int, batch: int):
        """The row indices of batch `batch` of an epoch, from its index alone."""
        return self._batch_order(epoch).batch(batch)

    def _gather(self, index) -> Dict[str, object]:
        batch = {}
        for name in self._names:
            if name in self._tensors:
                tensor = self._tensors[name]
                batch[name] = (tensor.index_select(0, index) if self._torch
                               else tensor.take(index, axis=0))
            else:
                sequence = self._sequences[name]
                batch[name] = pad_sequences(sequence.values, sequence.offsets, index,
                                            self.max_length, self.pad_value)
        return batch

    def __iter__(self) -> Iterator[object]:
        epoch, start = self._next_epoch, self._resume_at
        self._next_epoch, self._resume_at = epoch + 1, 0
        self._position = (epoch, start)
        order = self._batch_order(epoch)
        rows = order.epoch_rows()
        for batch in range(start, len(order)):
            index = rows[batch * self.batch_size:(batch + 1) * self.batch_size]
            gathered = self._gather(index)
            if self.transform is not None:
                gathered = self.transform(gathered)
            self._position = (epoch, batch + 1)
            yield (index, gathered) if self.with_indices else gathered
        self._position = (epoch + 1, 0)
