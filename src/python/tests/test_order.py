"""The batch order in Python (gpucache/_order.py) is the runtime's, bit for bit; GPUBatches with
ranks, block mode, and resuming from state_dict."""
import pytest
import torch

import gpucache
from gpucache import _gpucache
from gpucache._order import BatchOrder, OrderOptions


def native_rows(options: OrderOptions, batch: int):
    return _gpucache.batch_order_rows(options.rows, options.batch_size, options.shuffle,
                                      options.seed, options.epoch, options.rank,
                                      options.world_size, options.drop_last, options.block_rows,
                                      options.window_blocks, batch)


@pytest.mark.parametrize("options", [
    OrderOptions(rows=103, batch_size=10),
    OrderOptions(rows=1, batch_size=1),
    OrderOptions(rows=4097, batch_size=256, seed=12345678901234, epoch=7),
    OrderOptions(rows=1000, batch_size=33, world_size=3, rank=2, drop_last=False, epoch=2),
    OrderOptions(rows=1000, batch_size=50, block_rows=64, window_blocks=4, seed=3),
    OrderOptions(rows=1000, batch_size=50, block_rows=64, window_blocks=4, world_size=2, rank=1),
    OrderOptions(rows=77, batch_size=8, shuffle=False, world_size=2, rank=1),
])
def test_python_order_equals_the_runtime(options):
    order = BatchOrder(options)
    every = order.epoch_rows().tolist()
    assert len(order) > 0
    for batch in range(len(order)):
        expected = native_rows(options, batch)
        assert order.batch(batch).tolist() == expected
        assert every[batch * options.batch_size:][:len(expected)] == expected


def test_numpy_and_torch_compute_the_same_order(monkeypatch):
    options = OrderOptions(rows=999, batch_size=999, seed=4, epoch=1, drop_last=False)
    with_torch = BatchOrder(options).batch(0).tolist()
    monkeypatch.setattr(gpucache._arrays, "torch", None)
    assert BatchOrder(options).batch(0).tolist() == with_torch
    assert sorted(with_torch) == list(range(999))


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
        assert counts == {6}                      # 103 // 3 = 34 rows each, batches of 5
        assert len(seen) == len(set(seen)) == 90  # disjoint
    ranks0 = [rows_of(gpucache.GPUBatches(ds, batch_size=5, seed=1, rank=0, world_size=3))]
    batches = gpucache.GPUBatches(ds, batch_size=5, seed=1, rank=0, world_size=3)
    batches.set_epoch(1)
    assert rows_of(batches) != ranks0[0]          # rank 0 sees other rows next epoch
    padded = gpucache.GPUBatches(ds, batch_size=5, seed=1, rank=2, world_size=3,
                                 drop_last=False)
    assert len(padded) == 7 and len(rows_of(padded)) == 35


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
