"""gpucache.pack from CUDA tensors (only with a GPU): the tensor is copied to the host once for
writing, its rows are validated in its own GPU memory when the CUDA backend runs on that GPU, and
the dataset is byte-identical to packing the same tensors from the CPU."""
import filecmp

import numpy
import pytest
import torch

import gpucache
from gpucache._memory import memory_columns
from conftest import embeddings

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def columns(device):
    vectors = torch.from_numpy(embeddings(6000, 48))
    vectors[7, 3] = float("nan")
    vectors[11] = 0
    vectors[13, 0] = 70000.0  # overflows f16 (and the norm bound)
    answers = (vectors * 0.5 + 0.01).to(torch.bfloat16)
    return {
        "question": vectors.to(device),
        "answer": answers.to(device),
        "labels": torch.arange(6000, dtype=torch.int64).to(device),
        # strided on the GPU: made contiguous there, then copied to the host
        "extra": torch.from_numpy(embeddings(48, 6000)).to(device).t(),
    }


def same_dataset(a, b):
    names = sorted(p.name for p in a.iterdir())
    assert names == sorted(p.name for p in b.iterdir())
    match, mismatch, errors = filecmp.cmpfiles(a, b, names, shallow=False)
    assert mismatch == [] and errors == []


def test_a_cuda_tensor_carries_a_view_of_its_gpu_memory():
    tensor = torch.ones(4, 3, device="cuda")
    (name, kind, host, offsets, view), = memory_columns({"x": tensor})
    assert view[0] == tensor.data_ptr() and view[1] == tensor.device.index
    assert isinstance(host, numpy.ndarray) and (host == 1).all()
    cpu_entry, = memory_columns({"x": tensor.cpu()})
    assert len(cpu_entry) == 4  # no device view for a CPU tensor


@pytest.mark.parametrize("device", ["auto", "cpu"])
def test_cuda_tensors_pack_like_cpu_tensors(tmp_path, device):
    options = dict(dtype="f16", on_overflow="drop", shuffle=True, shard_rows=1000,
                   pair_cos_min=0.0,
                   checks={"question": "finite,nonzero,norm,dedup,pair_cos",
                           "answer": "finite,norm,pair_cos"})
    on_cpu = gpucache.pack(columns("cpu"), tmp_path / "cpu", device="cpu", **options)
    on_gpu = gpucache.pack(columns("cuda"), tmp_path / "gpu", device=device, **options)
    assert on_gpu["rows"] == on_cpu["rows"] < 6000
    assert on_gpu["dropped"] == on_cpu["dropped"]
    same_dataset(tmp_path / "cpu", tmp_path / "gpu")
