"""The one rank rule of load, stream, GPUBatches and Dataset (docs/python.md "Ranks and
workers"), and the DataLoader worker split of stream.

- rank and world_size come from torch.distributed when it is initialised, else 0 and 1; explicit
  arguments override (both or neither).
- Rows are split once: gpucache.load gives each rank its share (every row kept, ranks differ by at
  most one row), and GPUBatches over such a share batches all of it; a whole dataset (loaded with
  rank=0, world_size=1, or by a single process) is split by GPUBatches and stream instead. Splitting
  a share again would give every rank only part of its rows: that is an error.
- Ranks step together under DDP, so a split that gives ranks different numbers of batches is an
  error naming what to pass (drop_last=True, or another batch_size), instead of a hang at the last
  step.
"""
from __future__ import annotations

from typing import Optional, Tuple

from . import _arrays
from ._gpucache import Error


def distributed() -> Optional[Tuple[int, int]]:
    """(rank, world_size) of an initialised torch.distributed, else None."""
    torch = _arrays.torch
    if (torch is not None and torch.distributed.is_available()
            and torch.distributed.is_initialized()):
        return torch.distributed.get_rank(), torch.distributed.get_world_size()
    return None


def resolve(rank, world_size) -> Tuple[int, int]:
    """The rule: explicit rank and world_size, else torch.distributed's, else (0, 1)."""
    if rank is not None and world_size is not None:
        rank, world_size = int(rank), int(world_size)
        if world_size < 1 or not 0 <= rank < world_size:
            raise Error(f"rank={rank} must be below world_size={world_size} (and world_size at "
                        "least 1)")
        return rank, world_size
    if rank is not None or world_size is not None:
        raise Error("rank and world_size go together: pass both or neither")
    return distributed() or (0, 1)


def for_batches(dataset, rank, world_size, what: str) -> Tuple[int, int]:
    """GPUBatches' (rank, world_size) over `dataset`: (0, 1) over a rank's share that load made,
    the rule otherwise; an error when a share would be split again."""
    share_world = getattr(dataset, "world_size", 1)
    if share_world <= 1:
        return resolve(rank, world_size)
    if world_size is not None and int(world_size) > 1:
        raise Error(
            f"{what}: this dataset is already rank {dataset.rank}'s share of world_size "
            f"{share_world} (gpucache.load split it); world_size={world_size} here would give "
            f"each rank only 1/{world_size} of its rows. Omit rank and world_size here, or load "
            "the whole dataset on every rank with gpucache.load(..., rank=0, world_size=1) and "
            "keep them here (then the ranks reshuffle globally every epoch)")
    if rank is not None and int(rank) != 0:
        raise Error(f"{what}: rank={rank} with world_size={world_size} over rank "
                    f"{dataset.rank}'s share: pass neither")
    return 0, 1


def check_equal_steps(batches_of_rank, world_size: int, drop_last: bool, what: str) -> None:
    """Ranks that step together must have as many batches each. batches_of_rank(r) counts rank
    r's batches; the first and the last rank hold the most and the fewest rows."""
    if world_size <= 1:
        return
    most, fewest = batches_of_rank(0), batches_of_rank(world_size - 1)
    if most != fewest:
        fix = ("drop_last=True (every rank the same number of full batches, the few rows left "
               "over not yielded and counted by len()), or " if not drop_last else "")
        raise Error(
            f"{what}: ranks would get {most} and {fewest} batches (the rows do not divide evenly "
            f"among world_size {world_size}, and the ranks with one row more need one batch "
            "more): under DDP the others would wait forever at the last step. Pass "
            f"{fix}a batch_size that gives every rank as many batches")


def worker() -> Tuple[int, int]:
    """(worker id, workers) inside a torch DataLoader worker, else (0, 1)."""
    torch = _arrays.torch
    if torch is None:
        return 0, 1
    info = torch.utils.data.get_worker_info()
    return (0, 1) if info is None else (info.id, info.num_workers)
