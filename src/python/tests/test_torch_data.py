"""The Dataset as a map-style torch dataset (DataLoader with workers, DistributedSampler across
two gloo processes), and the placement="auto" rule."""
import json
import os
import subprocess
import sys

import pytest
import torch
from torch.utils.data import DataLoader

import gpucache
from gpucache._dataset import choose_placement, device_bytes_needed, placement_margin


def test_getitem_and_len_make_a_map_style_dataset(shapes_dataset):
    ds = gpucache.load(shapes_dataset, device="cpu")
    row = ds[3]
    assert set(row) == {"image", "dense", "label", "emb", "tokens", "ids", "caption"}
    assert torch.equal(row["image"], ds.tensors["image"][3])
    assert torch.equal(row["tokens"], ds.sequences["tokens"][3])
    assert row["caption"] == ds.texts("caption", [3])[0]
    assert torch.equal(ds[-1]["label"], ds.tensors["label"][len(ds) - 1])
    with pytest.raises(IndexError):
        ds[len(ds)]
    many = ds.__getitems__([5, 0, 5])
    assert [torch.equal(a["emb"], ds[i]["emb"]) for a, i in zip(many, [5, 0, 5])] == [True] * 3
    assert many[1]["caption"] == ds[0]["caption"]


@pytest.mark.parametrize("workers", [0, 2])
def test_dataloader_batches_rows(packed, workers):
    ds = gpucache.load(packed, device="cpu", columns=["embedding", "@source_row"])
    loader = DataLoader(ds, batch_size=16, shuffle=True, num_workers=workers,
                        generator=torch.Generator().manual_seed(0))
    seen = []
    for batch in loader:
        assert batch["embedding"].shape[1:] == (10,)
        assert torch.equal(batch["embedding"][:, 0], (batch["@source_row"].float() + 16) / 128)
        seen += batch["@source_row"].tolist()
    assert sorted(seen) == list(range(103))


_RANK_SCRIPT = r"""
import json, sys
import torch.distributed as dist
from torch.utils.data import DataLoader, DistributedSampler
import gpucache
path, init, rank, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
dist.init_process_group("gloo", init_method=init, rank=rank, world_size=2)
# every rank maps the whole set
ds = gpucache.load(path, device="cpu", rank=0, world_size=1, columns=["embedding", "@source_row"])
sampler = DistributedSampler(ds, shuffle=True, seed=0)
sampler.set_epoch(1)
rows = [r for b in DataLoader(ds, batch_size=8, sampler=sampler) for r in b["@source_row"].tolist()]
dist.barrier()
json.dump(rows, open(out, "w"))
"""


def test_distributed_sampler_across_two_gloo_processes(packed, tmp_path):
    script = tmp_path / "rank.py"
    script.write_text(_RANK_SCRIPT)
    init = f"file://{tmp_path / 'rendezvous'}"
    outs = [tmp_path / f"rank{r}.json" for r in range(2)]
    procs = [subprocess.Popen([sys.executable, str(script), str(packed), init, str(r),
                               str(outs[r])], env=dict(os.environ)) for r in range(2)]
    for proc in procs:
        assert proc.wait(timeout=120) == 0
    rows = [json.loads(out.read_text()) for out in outs]
    assert len(rows[0]) == len(rows[1]) == 52  # 103 rows padded to 104
    assert set(rows[0]) | set(rows[1]) == set(range(103))
    assert len(set(rows[0]) & set(rows[1])) <= 1  # only the padding row repeats


def test_auto_placement_rule():
    gib = 1 << 30
    assert placement_margin(80 * gib) == 8 * gib
    assert placement_margin(4 * gib) == gib
    placement, why = choose_placement(10 * gib, 20 * gib, 80 * gib, "cuda:0")
    assert placement == "device" and "resident in VRAM" in why
    placement, why = choose_placement(13 * gib, 20 * gib, 80 * gib, "cuda:0")
    assert placement == "host_pinned"
    assert "needs 13.00 GiB, 20.00 GiB free on cuda:0, margin 8.00 GiB" in why


def test_device_bytes_needed_bounds_the_allocation(packed, shapes_dataset):
    from gpucache._gpucache import NativeDataset
    native = NativeDataset.open(str(packed))
    # Every tensor column: 103 rows × its row pitch, rounded up to 4096 bytes.
    expected = sum(-(-103 * c["row_pitch_bytes"] // 4096) * 4096 for c in native.columns()
                   if c["kind"] == "tensor")
    assert device_bytes_needed(native) == expected
    shapes = NativeDataset.open(str(shapes_dataset))
    assert device_bytes_needed(shapes) >= sum(
        30 * c["row_pitch_bytes"] for c in shapes.columns() if c["kind"] == "tensor")


def test_placement_is_reported_and_checked(packed):
    ds = gpucache.load(packed, device="cpu")
    assert ds.placement == "cpu" and ds.placement_reason == ""
    with pytest.raises(gpucache.Error, match="is not one of device, host_pinned, auto"):
        gpucache.load(packed, device="cpu", placement="vram")
    if not torch.cuda.is_available():
        with pytest.raises(gpucache.Error, match="no usable CUDA GPU"):
            gpucache.load(packed, device="cuda", placement="auto")
