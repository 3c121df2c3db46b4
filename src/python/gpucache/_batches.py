"""GPUBatches: shuffled mini-batches gathered where the data lives, without host round trips."""
from __future__ import annotations

from typing import Dict, Iterator, Optional, Sequence

from . import _arrays
from ._gpucache import Error
from ._sequences import pad_sequences


class GPUBatches:
    """Iterates over batches of a loaded Dataset: dicts name → batch of batch_size rows.

    The permutation is made on the data's device (torch.randperm with a torch.Generator on that
    device, seeded with seed + epoch) and rows are gathered with index_select, so a batch costs
    no CPU work and no host synchronisation. Each iteration is one epoch; the epoch advances by
    one per iteration unless set with set_epoch(e), so the order is reproducible: the same seed
    and epoch give the same batches. Works on CPU tensors too, and with numpy arrays when torch
    is absent.

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
                 drop_last: bool = True, columns: Optional[Sequence[str]] = None,
                 padded: bool = False, with_indices: bool = False,
                 max_length: Optional[int] = None, pad_value=0):
        if batch_size < 1:
            raise Error(f"batch_size must be at least 1, not {batch_size}")
        if max_length is not None and max_length < 0:
            raise Error(f"max_length must not be negative, not {max_length}")
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
        self.shuffle = shuffle
        self.seed = int(seed)
        self.drop_last = drop_last
        self.with_indices = with_indices
        self.max_length = max_length
        self.pad_value = pad_value
        self._next_epoch = 0
        self._torch = _arrays.backend() == "torch"
        first = (self._tensors[names[0]] if names[0] in self._tensors
                 else self._sequences[names[0]].values)
        self._device = first.device if self._torch else "cpu"

    def set_epoch(self, epoch: int) -> None:
        """The epoch the next iteration uses (as DistributedSampler.set_epoch)."""
        self._next_epoch = int(epoch)

    @property
    def epoch(self) -> int:
        """The epoch the next iteration will use."""
        return self._next_epoch

    def __len__(self) -> int:
        if self.drop_last:
            return self._rows // self.batch_size
        return (self._rows + self.batch_size - 1) // self.batch_size

    def order(self, epoch: int):
        """The row order of an epoch, on the data's device."""
        if self._torch:
            torch = _arrays.torch
            if not self.shuffle:
                return torch.arange(self._rows, device=self._device)
            generator = torch.Generator(device=self._device)
            generator.manual_seed(self.seed + epoch)
            return torch.randperm(self._rows, generator=generator, device=self._device)
        numpy = _arrays.numpy
        if not self.shuffle:
            return numpy.arange(self._rows)
        return numpy.random.default_rng(self.seed + epoch).permutation(self._rows)

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
        epoch = self._next_epoch
        self._next_epoch = epoch + 1
        order = self.order(epoch)
        for batch in range(len(self)):
            index = order[batch * self.batch_size:(batch + 1) * self.batch_size]
            gathered = self._gather(index)
            yield (index, gathered) if self.with_indices else gathered
