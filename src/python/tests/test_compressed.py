"""Shards packed with --compress zstd load (as owned host arrays on the CPU) and stream, equal to
the uncompressed dataset, and a corrupted compressed chunk is refused like any other."""
import numpy
import pytest
import torch

import gpucache
from conftest import embeddings, pack


@pytest.fixture(scope="module")
def both(tmp_path_factory):
    folder = tmp_path_factory.mktemp("compressed")
    numpy.save(folder / "emb.npy", embeddings(300, 40))
    raw = pack([folder / "emb.npy"], folder / "raw", "--shard-rows", 128)
    zstd = pack([folder / "emb.npy"], folder / "zstd", "--shard-rows", 128, "--compress", "zstd")
    return raw, zstd


def test_compressed_shards_load_like_uncompressed_ones(both):
    raw, zstd = both
    every = ["embedding", "@source", "@source_row"]
    plain = gpucache.load(raw, device="cpu", columns=every)
    packed = gpucache.load(zstd, device="cpu", columns=every)
    for name in plain.tensors:
        assert torch.equal(plain.tensors[name], packed.tensors[name])
    ranked = gpucache.load(zstd, device="cpu", rank=1, world_size=2, columns=["embedding"])
    assert torch.equal(ranked.tensors["embedding"], plain.tensors["embedding"][150:300])


def test_compressed_shards_stream(both):
    raw, zstd = both
    for kwargs in ({}, {"block_rows": 32, "window_blocks": 2}):
        one = list(gpucache.stream(raw, device="cpu", batch_size=32, seed=3,
                                   columns=["embedding", "@source_row"], **kwargs))
        other = list(gpucache.stream(zstd, device="cpu", batch_size=32, seed=3,
                                     columns=["embedding", "@source_row"], **kwargs))
        assert len(one) == len(other) == 10  # the last, short batch too
        for a, b in zip(one, other):
            assert torch.equal(a["embedding"], b["embedding"])
            assert torch.equal(a["@source_row"], b["@source_row"])


def test_a_corrupted_compressed_chunk_is_refused(both, fresh_copy):
    _, zstd = both
    ds_dir = fresh_copy(zstd)
    shard = ds_dir / "shard-00001.gcs"
    data = bytearray(shard.read_bytes())
    # A byte inside the first chunk's zstd frame (the data region starts at 4096 or 8192).
    data[8192 + 40] ^= 0x01
    shard.write_bytes(bytes(data))
    with pytest.raises(gpucache.Error) as caught:
        gpucache.load(ds_dir, device="cpu")
    message = str(caught.value)
    assert str(shard) in message
    assert "chunk 0" in message
    assert ("chunk hash mismatch" in message) or ("zstd frame" in message)
    with pytest.raises(gpucache.Error, match="chunk 0"):
        list(gpucache.stream(ds_dir, device="cpu", batch_size=50))
