"""GPUBatches: shuffled mini-batches gathered where the data lives, without host round trips."""
from __future__ import annotations

from typing import Dict, Iterator, Optional, Sequence

from . import _arrays
from ._gpucache import Error


class GPUBatches:
    """Iterates over batches of a loaded Dataset: dicts name → tensor of batch_size rows.

    The permutation is made on the data's device (torch.randperm with a torch.Generator on that
    device, seeded with seed + epoch) and rows are gathered with index_select, so a batch costs
    no CPU work and no host synchronisation. Each iteration is one epoch; the epoch advances by
    one per iteration unless set with set_epoch(e), so the order is reproducible: the same seed
    and epoch give the same batches. Works on CPU tensors too, and with numpy arrays when torch
    is absent.

    Batches hold the LOGICAL [batch, dim] rows by default; padded=True gathers the padded rows.
    """

    def __init__(self, dataset, batch_size: int, shuffle: bool = True, seed: int = 0,
                 drop_last: bool = True, columns: Optional[Sequence[str]] = None,
                 padded: bool = False):
        if batch_size < 1:
            raise Error(f"batch_size must be at least 1, not {batch_size}")
        source = dataset.padded if padded else dataset.tensors
        names = list(columns) if columns is not None else list(source)
        missing = [name for name in names if name not in source]
        if missing:
            raise Error(f"GPUBatches: no tensor column {', '.join(missing)}; the dataset has "
                        f"{', '.join(source) or 'no tensor columns'}")
        if not names:
            raise Error("GPUBatches: no tensor columns to batch")
        self._tensors = {name: source[name] for name in names}
        self._rows = len(dataset)
        self.batch_size = int(batch_size)
        self.shuffle = shuffle
        self.seed = int(seed)
        self.drop_last = drop_last
        self._next_epoch = 0
        self._torch = _arrays.backend() == "torch"
        self._device = next(iter(self._tensors.values())).device if self._torch else "cpu"

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

    def __iter__(self) -> Iterator[Dict[str, object]]:
        epoch = self._next_epoch
        self._next_epoch = epoch + 1
        order = self.order(epoch)
        for batch in range(len(self)):
            index = order[batch * self.batch_size:(batch + 1) * self.batch_size]
            if self._torch:
                yield {name: t.index_select(0, index) for name, t in self._tensors.items()}
            else:
                yield {name: t.take(index, axis=0) for name, t in self._tensors.items()}
