"""gpucache.load on the CPU: values, views, zero-copy, lifetime, rank slicing, errors, texts, meta."""
import gc
import os
import subprocess
import sys

import numpy
import pytest
import torch

import gpucache
from conftest import embeddings, pack


def mapped(path) -> bool:
    with open("/proc/self/maps") as maps:
        return any(str(path) in line for line in maps)


def inside_mapping(pointer, ranges) -> bool:
    return any(start <= pointer < start + size for start, size, _ in ranges)


def test_values_logical_and_padded_views(packed):
    # The packer's provenance columns only when named; they are signed, so torch computes with them.
    assert [c["name"] for c in gpucache.load(packed, device="cpu").columns] == ["embedding"]
    ds = gpucache.load(packed, device="cpu", columns=["embedding", "@source", "@source_row"])
    assert len(ds) == 103
    assert ds.device == "cpu"
    assert [c["name"] for c in ds.columns] == ["embedding", "@source", "@source_row"]
    emb = ds.tensors["embedding"]
    assert emb.shape == (103, 10) and emb.dtype == torch.float32
    assert emb.stride() == (16, 1)  # a strided view of the padded storage
    assert torch.equal(emb, torch.from_numpy(embeddings(103, 10)))
    padded = ds.padded["embedding"]
    assert padded.shape == (103, 16)
    assert torch.count_nonzero(padded[:, 10:]) == 0
    assert emb.data_ptr() == padded.data_ptr()
    assert torch.equal(ds.tensors["@source_row"], torch.arange(103))
    assert ds.tensors["@source_row"].dtype == torch.int64
    assert ds.tensors["@source"].dtype == torch.int32 and ds.tensors["@source"].shape == (103,)
    assert ds.tensors["@source_row"].sum().item() == sum(range(103))
    assert ds.nbytes == 0


def test_zero_copy_views_point_into_the_mapping(single_shard, packed):
    ds = gpucache.load(single_shard, device="cpu")
    ranges = ds.mapped_ranges()
    assert len(ranges) == 1
    for tensor in list(ds.tensors.values()) + list(ds.padded.values()):
        assert inside_mapping(tensor.data_ptr(), ranges)
    assert ds.tensors["embedding"].data_ptr() % 4096 == 0
    # Several shards: each per-shard view is inside its own shard's mapping.
    multi = gpucache.load(packed, device="cpu")
    views = multi.shard_views["embedding"]
    assert len(views) == 4
    for view, (start, size, path) in zip(views, multi.mapped_ranges()):
        assert start <= view.data_ptr() < start + size
        assert view.data_ptr() % 4096 == 0


def test_shards_cut_on_pages_load_as_one_zero_copy_tensor(tmp_path):
    """Without --shard-rows, pack cuts full shards at multiples of 1024 rows here, so each column's
    part of a shard is whole pages and the shards are mapped side by side: no copy."""
    numpy.save(tmp_path / "emb.npy", embeddings(5000, 10))
    ds_dir = pack([tmp_path / "emb.npy"], tmp_path / "ds", "--shard-size", "200K",
                  "--norm-max", "1000")
    ds = gpucache.load(ds_dir, device="cpu", columns=["embedding", "@source", "@source_row"])
    assert [len(v) for v in ds.shard_views.values()] == [3, 3, 3]
    assert [v.shape[0] for v in ds.shard_views["embedding"]] == [2048, 2048, 904]
    emb = ds.tensors["embedding"]
    assert torch.equal(emb, torch.from_numpy(embeddings(5000, 10)))
    assert torch.equal(ds.tensors["@source_row"], torch.arange(5000))
    joined = {path: (start, size) for start, size, path in ds.mapped_ranges()
              if path.startswith("joined view")}
    start, size = joined["joined view of column 'embedding'"]
    assert start == emb.data_ptr() and size == 5000 * 64
    for name in ("@source", "@source_row"):
        assert joined[f"joined view of column '{name}'"][0] == ds.tensors[name].data_ptr()
    # A slice starting inside a page and spanning shards is zero-copy as well.
    part = gpucache.load(ds_dir, device="cpu", rows=(1000, 4500), verify=False)
    assert torch.equal(part.tensors["embedding"], torch.from_numpy(embeddings(5000, 10)[1000:4500]))
    assert any(start == part.tensors["embedding"].data_ptr()
               for start, _, _ in part.mapped_ranges())
    # The tensor outlives the Dataset; the mapping lives as long as the tensor.
    del ds, part
    gc.collect()
    assert float(emb[4999, 9]) == float(embeddings(5000, 10)[4999, 9])


def test_views_keep_the_mapping_alive(single_shard):
    shard = single_shard / "shard-00000.gcs"
    ds = gpucache.load(single_shard, device="cpu")
    emb = ds.tensors["embedding"]
    del ds
    gc.collect()
    assert mapped(shard)
    assert torch.equal(emb, torch.from_numpy(embeddings(40, 24)))
    del emb
    gc.collect()
    assert not mapped(shard)


def test_writing_a_cpu_view_changes_neither_file_nor_other_loads(single_shard):
    before = (single_shard / "shard-00000.gcs").read_bytes()
    ds = gpucache.load(single_shard, device="cpu")
    ds.tensors["embedding"][0, 0] = -1.0  # copy-on-write: no crash, no change on disk
    assert ds.tensors["embedding"][0, 0] == -1.0
    assert gpucache.load(single_shard, device="cpu").tensors["embedding"][0, 0] == 0.125
    assert (single_shard / "shard-00000.gcs").read_bytes() == before


@pytest.mark.parametrize("world_size", [1, 2, 3, 4, 5, 7])
def test_rank_shares_cover_every_row_once(packed, world_size):
    seen = []
    for rank in range(world_size):
        # The first 103 % world_size ranks get one row more: no row is dropped.
        rows = 103 // world_size + (rank < 103 % world_size)
        ds = gpucache.load(packed, device="cpu", rank=rank, world_size=world_size,
                           columns=["embedding", "@source", "@source_row"])
        assert len(ds) == rows and ds.share_rows(rank) == rows
        assert ds.row_begin == len(seen)
        assert ds.total_rows == 103
        seen.extend(ds.tensors["@source_row"].tolist())
        # Only the shards holding the share's rows are mapped (30 rows per shard).
        first, last = ds.row_begin, ds.row_begin + rows - 1
        expected = {f"shard-{k:05d}.gcs" for k in range(first // 30, last // 30 + 1)}
        assert {os.path.basename(p) for _, _, p in ds.mapped_ranges()} == expected
    assert seen == list(range(103))


def test_rows_and_columns_selection(packed):
    ds = gpucache.load(packed, device="cpu", columns=["@source_row"], rows=(25, 65), rank=1,
                       world_size=2)
    assert list(ds.tensors) == ["@source_row"]
    assert ds.tensors["@source_row"].tolist() == list(range(45, 65))


def test_rank_defaults_to_the_whole_dataset_without_torch_distributed(packed):
    assert not torch.distributed.is_initialized()
    ds = gpucache.load(packed, device="cpu")
    assert (ds.rank, ds.world_size, len(ds)) == (0, 1, 103)
    with pytest.raises(gpucache.Error, match="rank and world_size go together"):
        gpucache.load(packed, device="cpu", rank=1)


def test_rank_defaults_come_from_torch_distributed(packed, tmp_path):
    torch.distributed.init_process_group("gloo", init_method=f"file://{tmp_path}/rendezvous",
                                         rank=0, world_size=1)
    try:
        ds = gpucache.load(packed, device="cpu")
        assert (ds.rank, ds.world_size) == (0, 1)
    finally:
        torch.distributed.destroy_process_group()


def test_corrupted_shard_raises_a_clear_error(packed, fresh_copy):
    ds_dir = fresh_copy(packed)
    shard = ds_dir / "shard-00002.gcs"
    data = bytearray(shard.read_bytes())
    data[4096 + 5 * 64 + 4] ^= 0x10  # row 65's second element (row 5 of shard 2)
    shard.write_bytes(bytes(data))
    with pytest.raises(gpucache.Error) as caught:
        gpucache.load(ds_dir, device="cpu")
    message = str(caught.value)
    assert isinstance(caught.value, RuntimeError)
    assert str(shard) in message
    assert "chunk 0, bytes 4096-" in message
    assert "column 'embedding' rows 0-29" in message
    assert "chunk hash mismatch" in message
    # Ranks that do not read shard 2 load; verify=False loads the damaged value.
    assert len(gpucache.load(ds_dir, device="cpu", rank=0, world_size=2)) == 52
    damaged = gpucache.load(ds_dir, device="cpu", verify=False)
    assert damaged.tensors["embedding"][65, 1] != float(embeddings(103, 10)[65, 1])


def test_a_shard_swapped_after_packing_is_caught(packed, fresh_copy, tmp_path):
    ds_dir = fresh_copy(packed)
    other = tmp_path / "other"
    other.mkdir()
    numpy.save(other / "emb.npy", embeddings(103, 10) * 2)
    pack([other / "emb.npy"], other / "ds", "--shard-rows", 30)
    (ds_dir / "shard-00001.gcs").write_bytes((other / "ds" / "shard-00001.gcs").read_bytes())
    # The shard headers name their dataset (format 1.1), so the runtime refuses the mix at open.
    with pytest.raises(gpucache.Error, match="shard-00001.gcs: .*belongs to another dataset"):
        gpucache.load(ds_dir, device="cpu")


def test_texts_and_meta(text_dataset):
    ds = gpucache.load(text_dataset, device="cpu")
    expected = ["" if r % 5 == 3 else f"row {r} ✓" for r in range(12)]
    assert ds.texts("caption") == expected
    assert "caption" not in ds.tensors
    assert ds.tensors["label"].tolist() == [7 * r - 3 for r in range(12)]
    assert ds.meta["format"] == "gpucache-dataset"
    assert len(ds.meta["shards"]) == 3
    rank = gpucache.load(text_dataset, device="cpu", rank=1, world_size=3,
                         columns=["caption"])
    assert rank.texts("caption") == expected[4:8]
    with pytest.raises(gpucache.Error, match="not a text column"):
        ds.texts("emb")


def test_meta_of_a_packed_dataset(packed):
    meta = gpucache.load(packed, device="cpu", columns=["@source"]).meta
    assert meta["rows"] == 103
    assert [s["file"] for s in meta["shards"]] == [f"shard-{k:05d}.gcs" for k in range(4)]


def test_bf16_columns_come_back_as_bfloat16(tmp_path):
    numpy.save(tmp_path / "emb.npy", embeddings(20, 8))
    pack([tmp_path / "emb.npy"], tmp_path / "ds", "--dtype", "bf16")
    ds = gpucache.load(tmp_path / "ds", device="cpu")
    emb = ds.tensors["embedding"]
    assert emb.dtype == torch.bfloat16 and emb.shape == (20, 8)
    reference = torch.from_numpy(embeddings(20, 8)).to(torch.bfloat16)
    assert torch.equal(emb, reference)


def test_bad_arguments_and_missing_gpu_raise_gpucache_error(packed, tmp_path):
    with pytest.raises(gpucache.Error, match="column 'nope': no such column"):
        gpucache.load(packed, device="cpu", columns=["nope"])
    with pytest.raises(gpucache.Error, match="is not cpu, cuda or cuda:N"):
        gpucache.load(packed, device="tpu")
    with pytest.raises(gpucache.Error, match="no such dataset directory"):
        gpucache.load(tmp_path / "absent", device="cpu")
    with pytest.raises(gpucache.Error, match="rank=4 must be below world_size=4"):
        gpucache.load(packed, device="cpu", rank=4, world_size=4)
    if not gpucache.cuda_available():
        with pytest.raises(gpucache.Error, match="cuda:0"):
            gpucache.load(packed, device="cuda")


def test_numpy_arrays_when_torch_is_absent(packed, text_dataset):
    script = f"""
import sys
sys.modules["torch"] = None  # import torch now fails
import numpy, gpucache
ds = gpucache.load({str(packed)!r}, device="cpu", rank=1, world_size=2,
                   columns=["embedding", "@source", "@source_row"])
emb = ds.tensors["embedding"]
assert isinstance(emb, numpy.ndarray) and emb.shape == (51, 10), (type(emb), emb.shape)
assert ds.tensors["@source_row"].dtype == numpy.int64
assert (ds.tensors["@source_row"] == numpy.arange(52, 103)).all()
batches = list(gpucache.GPUBatches(ds, batch_size=10, seed=3))
assert len(batches) == 6 and batches[0]["embedding"].shape == (10, 10)
rows = numpy.concatenate([b["@source_row"] for b in batches])
assert sorted(rows.tolist()) == list(range(52, 103))
assert gpucache.load({str(text_dataset)!r}, device="cpu").texts("caption")[1] == "row 1 ✓"
try:
    gpucache.load({str(packed)!r}, device="cuda")
except gpucache.Error as error:
    assert "needs PyTorch" in str(error)
else:
    raise AssertionError("device='cuda' without torch must fail")
print("numpy ok")
"""
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "numpy ok" in result.stdout
