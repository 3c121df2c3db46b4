"""gpucache.stream on the CPU: the same batches as GPUBatches over the loaded dataset (every
column kind, ranks, block mode), epochs, resuming (also across the two), hash checks and the
memory bound."""
import pytest
import torch

import gpucache

# The embedding and the packer's row provenance, which batches hold only when named.
WITH_ROWS = ["embedding", "@source_row"]


def same_batches(streamed, resident):
    assert len(streamed) == len(resident)
    for one, other in zip(streamed, resident):
        assert one.keys() == other.keys()
        for name in one:
            a, b = one[name], other[name]
            if isinstance(a, gpucache.PaddedBatch):
                assert torch.equal(a.values, b.values) and torch.equal(a.lengths, b.lengths)
            else:
                assert a.dtype == b.dtype and torch.equal(a, b), name


@pytest.mark.parametrize("kwargs", [
    {},
    {"rank": 1, "world_size": 3},
    {"rank": 0, "world_size": 2, "drop_last": False},
    {"block_rows": 16, "window_blocks": 2},
    {"shuffle": False},
])
def test_stream_equals_gpubatches_over_the_loaded_dataset(packed, kwargs):
    ds = gpucache.load(packed, device="cpu")
    assert [c["name"] for c in ds.columns] == ["embedding"]  # provenance only when asked
    options = dict(kwargs)
    rank = options.pop("rank", 0)
    world = options.pop("world_size", 1)
    resident = gpucache.GPUBatches(ds, batch_size=8, seed=3, rank=rank, world_size=world,
                                   **options)
    streamed = gpucache.stream(packed, device="cpu", batch_size=8, seed=3, rank=rank,
                               world_size=world, prefetch=3, **options)
    for epoch in range(2):
        assert streamed.epoch == resident.epoch == epoch
        same_batches(list(streamed), list(resident))


def test_every_column_kind_streams(shapes_dataset):
    ds = gpucache.load(shapes_dataset, device="cpu")
    resident = gpucache.GPUBatches(ds, batch_size=7, seed=1, max_length=4, with_indices=True)
    streamed = gpucache.stream(shapes_dataset, device="cpu", batch_size=7, seed=1, max_length=4,
                               with_indices=True)
    got, want = list(streamed), list(resident)
    assert [i.tolist() for i, _ in got] == [i.tolist() for i, _ in want]
    same_batches([b for _, b in got], [b for _, b in want])
    assert set(got[0][1]) == {"image", "dense", "label", "emb", "tokens", "ids"}
    assert got[0][1]["image"].shape == (7, 3, 4, 5)
    # Without max_length a sequence batch is as wide as its longest row, as GPUBatches'.
    same_batches(list(gpucache.stream(shapes_dataset, device="cpu", batch_size=5, seed=2)),
                 list(gpucache.GPUBatches(ds, batch_size=5, seed=2)))
    texts = gpucache.stream(shapes_dataset, device="cpu", batch_size=6, seed=4,
                            columns=["caption", "label"], with_indices=True)
    for indices, batch in texts:
        assert batch["caption"] == ds.texts("caption", indices)
        assert torch.equal(batch["label"], ds.tensors["label"][indices])


def test_set_epoch_and_resume_after_k_batches(packed):
    reference = gpucache.stream(packed, device="cpu", batch_size=10, seed=5, columns=WITH_ROWS)
    epochs = [list(reference), list(reference)]
    rows = [[b["@source_row"].tolist() for b in epoch] for epoch in epochs]
    for k in (0, 4, 10):
        first = gpucache.stream(packed, device="cpu", batch_size=10, seed=5, columns=WITH_ROWS)
        iterator = iter(first)
        head = [next(iterator)["@source_row"].tolist() for _ in range(k)]
        state = first.state_dict()
        assert (state["epoch"], state["batch"]) == (0, k)
        resumed = gpucache.stream(packed, device="cpu", batch_size=10, seed=5, columns=WITH_ROWS)
        resumed.load_state_dict(state)
        resumed.set_epoch(0)
        assert head + [b["@source_row"].tolist() for b in resumed] == rows[0]
        assert [b["@source_row"].tolist() for b in resumed] == rows[1]
    # A GPUBatches state resumes a stream and back: both follow the same order.
    ds = gpucache.load(packed, device="cpu", columns=WITH_ROWS)
    resident = gpucache.GPUBatches(ds, batch_size=10, seed=5)
    iterator = iter(resident)
    for _ in range(3):
        next(iterator)
    streamed = gpucache.stream(packed, device="cpu", batch_size=10, seed=5, columns=WITH_ROWS)
    streamed.load_state_dict(resident.state_dict())
    assert [b["@source_row"].tolist() for b in streamed] == rows[0][3:]
    again = gpucache.stream(packed, device="cpu", batch_size=10, seed=5, columns=WITH_ROWS)
    again.set_epoch(1)
    assert [b["@source_row"].tolist() for b in again] == rows[1]


def test_a_corrupted_chunk_is_refused_once_its_rows_are_needed(packed, fresh_copy):
    ds_dir = fresh_copy(packed)
    shard = ds_dir / "shard-00002.gcs"
    data = bytearray(shard.read_bytes())
    data[4096 + 5 * 64 + 4] ^= 0x10  # row 65's second element
    shard.write_bytes(bytes(data))
    with pytest.raises(gpucache.Error, match="chunk hash mismatch") as caught:
        list(gpucache.stream(ds_dir, device="cpu", batch_size=10, drop_last=False))
    assert str(shard) in str(caught.value)
    unchecked = list(gpucache.stream(ds_dir, device="cpu", batch_size=10, drop_last=False,
                                     verify=False, shuffle=False))
    assert unchecked[6]["embedding"][5, 1] != (65 + 16) / 128 + 1 / 4096


def test_memory_stays_within_the_prefetch_bound(shapes_on_pages):
    streamed = gpucache.stream(shapes_on_pages, device="cpu", batch_size=64, prefetch=3)
    for _ in streamed:
        pass
    stats = streamed.stats()
    assert stats["batches"] == len(streamed) == -(-2348 // 64)  # the last, short batch too
    # prefetch in flight, the one being handed out, and the one the loop variable still holds.
    assert stats["peak_blocks"] <= 3 + 1 + 1
    assert stats["bytes_verified"] > 0


def test_stream_errors(packed):
    with pytest.raises(gpucache.Error, match="batch_size must be at least 1"):
        gpucache.stream(packed, device="cpu", batch_size=0)
    with pytest.raises(gpucache.Error, match="rank=2 must be below world_size=2"):
        gpucache.stream(packed, device="cpu", rank=2, world_size=2)
    with pytest.raises(gpucache.Error, match="nope"):
        gpucache.stream(packed, device="cpu", columns=["nope"])
    streamed = gpucache.stream(packed, device="cpu", batch_size=4, seed=1)
    with pytest.raises(gpucache.Error, match="seed=1 but this one has seed=2"):
        gpucache.stream(packed, device="cpu", batch_size=4, seed=2).load_state_dict(
            streamed.state_dict())


def test_a_stream_is_an_iterable_dataset_for_dataloader(packed):
    from torch.utils.data import DataLoader
    streamed = gpucache.stream(packed, device="cpu", batch_size=10, seed=6, columns=WITH_ROWS)
    direct = [b["@source_row"].tolist() for b in streamed]
    streamed.set_epoch(0)
    loader = DataLoader(streamed, batch_size=None)
    assert len(loader) == 11  # 103 rows: 10 batches of 10 and one of 3
    assert [b["@source_row"].tolist() for b in loader] == direct
