"""The batch order comes from the runtime (gpucache/batch_order.hpp through NativeOrder) and is
the one the Python package computed before, bit for bit (order_reference.py); GPUBatches with
ranks, block mode, and resuming from state_dict."""
import pytest
import torch

import gpucache
import order_reference
from gpucache import _gpucache
from gpucache._order import BatchOrder, OrderOptions


def native_rows(options: OrderOptions, batch: int):
    """One batch through the runtime's own entry point (padding ranks when drop_last is False)."""
    return _gpucache.batch_order_rows(options.rows, options.batch_size, options.shuffle,
                                      options.seed, options.epoch, options.rank,
                                      options.world_size, options.drop_last, options.block_rows,
                                      options.window_blocks, batch)


CASES = [
    dict(rows=103, batch_size=10, drop_last=True),
    dict(rows=103, batch_size=10),
    dict(rows=1, batch_size=1),
    dict(rows=4097, batch_size=256, seed=12345678901234, epoch=7),
    dict(rows=1000, batch_size=33, world_size=3, rank=2, epoch=2),
    dict(rows=1000, batch_size=33, world_size=3, rank=0, epoch=2),
    dict(rows=1000, batch_size=50, block_rows=64, window_blocks=4, seed=3, drop_last=True),
    dict(rows=1000, batch_size=50, block_rows=64, window_blocks=4, world_size=2, rank=1),
    dict(rows=77, batch_size=8, shuffle=False, world_size=2, rank=1, drop_last=True),
    dict(rows=2, batch_size=4, world_size=3, rank=2),  # a rank past the rows gets none
]


@pytest.mark.parametrize("case", CASES)
def test_the_order_is_the_one_python_computed_before(case):
    order = BatchOrder(OrderOptions(**case))
    reference = order_reference.BatchOrder(order_reference.OrderOptions(**case))
    assert len(order) == len(reference) and order.rank_rows == reference.rank_rows
    assert order.epoch_rows().tolist() == reference.epoch_rows().tolist()
    for batch in range(len(order)):
        assert order.batch(batch).tolist() == reference.batch(batch).tolist()


@pytest.mark.parametrize("case", [c for c in CASES if c.get("drop_last")] + [
    dict(rows=1000, batch_size=33, world_size=3, rank=2, epoch=2, drop_last=False)])
def test_the_reference_equals_the_runtime_with_padding(case):
    """With the runtime's padding (pad=True, what batch_order_rows uses) the reference is the
    runtime bit for bit: the reference is the same function, not a copy of the new code."""
    options = order_reference.OrderOptions(**case, pad=True)
    reference = order_reference.BatchOrder(options)
    assert len(reference) > 0
    for batch in range(len(reference)):
        assert reference.batch(batch).tolist() == native_rows(options, batch)


def test_without_padding_ranks_take_every_row_once():
    rows = []
    for rank in range(3):
        order = BatchOrder(OrderOptions(rows=100, batch_size=7, seed=2, rank=rank, world_size=3))
        assert order.rank_rows == (34 if rank == 0 else 33)
        rows += order.epoch_rows().tolist()
    assert sorted(rows) == list(range(100))


def test_numpy_and_torch_get_the_same_order(monkeypatch):
    options = OrderOptions(rows=999, batch_size=999, seed=4, epoch=1)
    with_torch = BatchOrder(options).batch(0).tolist()
    monkeypatch.setattr(gpucache._arrays, "torch", None)
    assert BatchOrder(options).batch(0).tolist() == with_torch
    assert sorted(with_torch) == list(range(999))


def test_resume_arithmetic_comes_from_the_runtime():
    # 4 batches of 5 rows on 2 ranks: 40 positions; as batches of 3 rows on 1 rank: 13.
    assert _gpucache.resume_batch(4, 5, 2, 3, 1) == 13
    assert _gpucache.resume_batch(0, 5, 2, 3, 1) == 0
    with pytest.raises(gpucache.Error, match="batch_size and world_size must be at least 1"):
        _gpucache.resume_batch(1, 1, 1, 0, 1)


@pytest.fixture(scope="module")
def ds(packed):
    return gpucache.load(packed, device="cpu", columns=["embedding", "@source_row"])


def rows_of(batches):
    return [row for batch in batches for row in batch["@source_row"].tolist()]


def test_ranks_reshuffle_globally_and_partition_each_epoch(ds):
    for epoch in range(2):
        seen = []
        counts = set()
        for rank in range(3):
            batches = gpucache.GPUBatches(ds, batch_size=5, seed=1, rank=rank, world_size=3)
            batches.set_epoch(epoch)
            counts.add(len(batches))
            seen += rows_of(batches)
        assert counts == {7}                      # 35, 34 and 34 rows, batches of 5
        assert sorted(seen) == list(range(103))   # disjoint, every row once
    ranks0 = [rows_of(gpucache.GPUBatches(ds, batch_size=5, seed=1, rank=0, world_size=3))]
    batches = gpucache.GPUBatches(ds, batch_size=5, seed=1, rank=0, world_size=3)
    batches.set_epoch(1)
    assert rows_of(batches) != ranks0[0]          # rank 0 sees other rows next epoch
    full = gpucache.GPUBatches(ds, batch_size=5, seed=1, rank=2, world_size=3, drop_last=True)
    assert len(full) == 6 and len(rows_of(full)) == 30


def test_block_mode_reads_few_blocks_per_window(ds):
    batches = gpucache.GPUBatches(ds, batch_size=20, seed=3, block_rows=10, window_blocks=2,
                                  drop_last=False)
    rows = rows_of(batches)
    assert sorted(rows) == list(range(103))
    for start in range(0, 80, 20):
        assert len({row // 10 for row in rows[start:start + 20]}) == 2


@pytest.mark.parametrize("kwargs", [{}, {"rank": 1, "world_size": 2}, {"block_rows": 8}])
def test_resume_after_k_batches_yields_the_rest(ds, kwargs):
    reference = gpucache.GPUBatches(ds, batch_size=7, seed=11, **kwargs)
    epoch0, epoch1 = rows_of(reference), rows_of(reference)
    for k in (0, 3, len(reference)):
        first = gpucache.GPUBatches(ds, batch_size=7, seed=11, **kwargs)
        iterator = iter(first)
        head = [next(iterator) for _ in range(k)]
        state = first.state_dict()
        assert state["epoch"] == 0 and state["batch"] == k
        resumed = gpucache.GPUBatches(ds, batch_size=7, seed=11, **kwargs)
        resumed.load_state_dict(state)
        resumed.set_epoch(0)  # a training loop's set_epoch keeps the restored position
        assert rows_of(head) + rows_of(resumed) == epoch0
        assert rows_of(resumed) == epoch1
        assert resumed.state_dict()["epoch"] == 2


def test_resume_with_another_world_size_continues_the_global_order(ds):
    two = [gpucache.GPUBatches(ds, batch_size=5, seed=2, rank=r, world_size=2) for r in range(2)]
    iterators = [iter(b) for b in two]
    for _ in range(4):
        for iterator in iterators:
            next(iterator)
    state = two[0].state_dict()  # 4 batches × 5 rows × 2 ranks = 40 positions consumed
    one = gpucache.GPUBatches(ds, batch_size=5, seed=2)
    one.load_state_dict(state)
    assert one.state_dict()["batch"] == 8
    whole = rows_of(gpucache.GPUBatches(ds, batch_size=5, seed=2))
    assert rows_of(one) == whole[40:]
    with pytest.raises(gpucache.Error, match="seed=2 but this one has seed=3"):
        gpucache.GPUBatches(ds, batch_size=5, seed=3).load_state_dict(state)


def test_batch_indices_come_from_the_index_alone(ds):
    batches = gpucache.GPUBatches(ds, batch_size=9, seed=5)
    batches.set_epoch(4)
    epoch = list(batches)
    assert batches.batch_indices(4, 6).tolist() == epoch[6]["@source_row"].tolist()
