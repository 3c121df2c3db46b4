"""GPUBatches on CPU tensors: coverage, determinism, epochs, options."""
import pytest
import torch

import gpucache


@pytest.fixture(scope="module")
def ds(packed):
    return gpucache.load(packed, device="cpu", columns=["embedding", "@source_row"])


def rows_of(batches):
    return [row for batch in batches for row in batch["@source_row"].tolist()]


def test_each_epoch_is_a_permutation_of_the_rows(ds):
    batches = gpucache.GPUBatches(ds, batch_size=10, seed=1, drop_last=True)
    assert len(batches) == 10  # 103 rows, drop_last
    epoch = list(batches)
    assert len(epoch) == 10
    rows = rows_of(epoch)
    assert len(rows) == 100 and len(set(rows)) == 100
    assert rows != sorted(rows)
    # Every column of a batch comes from the same rows.
    for batch in epoch:
        assert torch.equal(batch["embedding"][:, 0], (batch["@source_row"].float() + 16) / 128)
        assert batch["embedding"].shape == (10, 10)


def test_by_default_the_last_partial_batch_covers_every_row(ds):
    batches = gpucache.GPUBatches(ds, batch_size=10, seed=5)
    epoch = list(batches)
    assert len(batches) == len(epoch) == 11
    assert len(epoch[-1]["@source_row"]) == 3
    assert sorted(rows_of(epoch)) == list(range(103))


def test_same_seed_and_epoch_give_the_same_order(ds):
    first = gpucache.GPUBatches(ds, batch_size=16, seed=7)
    second = gpucache.GPUBatches(ds, batch_size=16, seed=7)
    assert rows_of(first) == rows_of(second)            # epoch 0 both
    assert rows_of(first) == rows_of(second)            # epoch 1 both
    epoch_two = rows_of(first)
    assert first.epoch == 3
    second.set_epoch(2)
    assert rows_of(second) == epoch_two
    assert rows_of(gpucache.GPUBatches(ds, batch_size=16, seed=8)) != rows_of(
        gpucache.GPUBatches(ds, batch_size=16, seed=7))


def test_epochs_reshuffle(ds):
    batches = gpucache.GPUBatches(ds, batch_size=16, seed=0)
    epoch0, epoch1 = rows_of(batches), rows_of(batches)
    assert epoch0 != epoch1
    batches.set_epoch(0)
    assert rows_of(batches) == epoch0


def test_no_shuffle_keeps_row_order_and_columns_selects(ds):
    batches = gpucache.GPUBatches(ds, batch_size=25, shuffle=False, columns=["@source_row"],
                                  drop_last=True)
    epoch = list(batches)
    assert [list(batch) for batch in epoch] == [["@source_row"]] * 4
    assert rows_of(epoch) == list(range(100))


def test_padded_batches_and_errors(ds):
    batch = next(iter(gpucache.GPUBatches(ds, batch_size=4, padded=True, columns=["embedding"])))
    assert batch["embedding"].shape == (4, 16)
    with pytest.raises(gpucache.Error, match="no tensor or sequence column nope"):
        gpucache.GPUBatches(ds, batch_size=4, columns=["nope"])
    with pytest.raises(gpucache.Error, match="batch_size must be at least 1"):
        gpucache.GPUBatches(ds, batch_size=0)


def test_batches_stay_on_the_data_device_without_host_syncs(ds):
    batches = gpucache.GPUBatches(ds, batch_size=8, seed=2, drop_last=False)
    order = batches.order(0)
    assert order.device == ds.tensors["embedding"].device
    assert sorted(order.tolist()) == list(range(103))
