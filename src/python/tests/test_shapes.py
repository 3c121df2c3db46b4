"""Shard format 1.2 in Python: tensor columns of any row shape, sequence columns, padded batches,
GPUBatches over them, and the device path (against the fake CUDA runtime of the C++ tests)."""
import os
import subprocess
import sys
import textwrap

import numpy
import pytest
import torch

import gpucache
from conftest import BUILD


# The values tests/tools/make_shapes_dataset.cpp writes for dataset row r.
def image(rows):
    r = numpy.asarray(rows, dtype=numpy.int64)[:, None]
    return ((7 * r + numpy.arange(60)[None, :]) % 251).astype(numpy.uint8).reshape(-1, 3, 4, 5)


def floats(rows, dim):
    r = numpy.asarray(rows, dtype=numpy.float32)[:, None]
    return 1000 * r + numpy.arange(dim, dtype=numpy.float32)[None, :]


def tokens(r):
    return [100 * r + k for k in range(r % 5)]


def ids(r):
    return [r * 2**33 + k for k in range(3 * r % 7)]


def caption(r):
    return "" if r % 5 == 3 else f"row {r} ✓"


def check_tensors(ds, rows):
    assert torch.equal(ds.tensors["image"], torch.from_numpy(image(rows)))
    assert torch.equal(ds.tensors["dense"], torch.from_numpy(floats(rows, 7)))
    assert ds.tensors["label"].tolist() == [7 * r - 3 for r in rows]
    assert torch.equal(ds.tensors["emb"], torch.from_numpy(floats(rows, 3)))


def check_sequences(ds, rows):
    for name, expected, dtype in (("tokens", tokens, torch.int32), ("ids", ids, torch.int64)):
        sequence = ds.sequences[name]
        assert len(sequence) == len(rows)
        assert sequence.values.dtype == dtype and sequence.offsets.dtype == torch.int64
        assert sequence.offsets[0] == 0
        assert sequence.values.tolist() == [v for r in rows for v in expected(r)]
        assert sequence.lengths.tolist() == [len(expected(r)) for r in rows]
        for i, r in enumerate(rows):
            assert sequence[i].tolist() == expected(r)


def test_columns_describe_their_row_shapes(shapes_dataset):
    ds = gpucache.load(shapes_dataset, device="cpu")
    described = {c["name"]: c for c in ds.columns}
    assert described["image"]["row_shape"] == [3, 4, 5] and described["image"]["rank"] == 4
    assert described["dense"]["row_pitch_bytes"] == 28
    assert described["label"]["row_shape"] == []
    assert described["emb"]["padded_dim"] == 16
    assert described["tokens"]["kind"] == "sequence" and described["tokens"]["dtype"] == "i32"
    assert list(ds.tensors) == ["image", "dense", "label", "emb"]
    assert list(ds.sequences) == ["tokens", "ids"]


def test_tensors_of_every_shape_and_sequences_across_shards(shapes_dataset):
    ds = gpucache.load(shapes_dataset, device="cpu")
    rows = list(range(30))
    assert ds.tensors["image"].shape == (30, 3, 4, 5) and ds.tensors["image"].dtype == torch.uint8
    assert ds.tensors["dense"].shape == (30, 7) and ds.padded["dense"].shape == (30, 7)
    assert ds.tensors["label"].shape == (30,)
    assert ds.tensors["emb"].shape == (30, 3) and ds.padded["emb"].shape == (30, 16)
    assert torch.count_nonzero(ds.padded["emb"][:, 3:]) == 0
    check_tensors(ds, rows)
    check_sequences(ds, rows)
    assert [v.shape for v in ds.shard_views["image"]] == [(8, 3, 4, 5)] * 3 + [(6, 3, 4, 5)]
    assert ds.texts("caption") == [caption(r) for r in rows]
    # A rank's slice starts and ends inside shards; its offsets are rebased to it.
    part = gpucache.load(shapes_dataset, device="cpu", rank=1, world_size=3)
    check_tensors(part, list(range(10, 20)))
    check_sequences(part, list(range(10, 20)))
    assert part.texts("caption", [0, 3]) == [caption(10), caption(13)]


def test_columns_of_any_pitch_on_pages_are_zero_copy(shapes_on_pages):
    ds = gpucache.load(shapes_on_pages, device="cpu")
    joined = {path: start for start, _, path in ds.mapped_ranges() if path.startswith("joined")}
    for name in ("image", "dense", "label", "emb"):
        assert joined[f"joined view of column '{name}'"] == ds.padded[name].data_ptr()
    rows = list(range(2348))
    check_tensors(ds, rows)
    check_sequences(ds, rows)
    # Values of one shard are a view of its mapping.
    first = gpucache.load(shapes_on_pages, device="cpu", rows=(5, 1000))
    values = first.sequences["ids"].values.data_ptr()
    assert any(start <= values < start + size for start, size, _ in first.mapped_ranges())
    check_sequences(first, list(range(5, 1000)))


def test_padded_batches_of_sequences(shapes_dataset):
    ds = gpucache.load(shapes_dataset, device="cpu")
    tokens_column = ds.sequences["tokens"]
    batch = tokens_column.batch([4, 0, 9, 5, 3])
    assert isinstance(batch, gpucache.PaddedBatch)
    assert batch.lengths.tolist() == [4, 0, 4, 0, 3]
    assert batch.lengths.dtype == torch.int64
    assert batch.values.dtype == torch.int32
    assert batch.values.tolist() == [[400, 401, 402, 403], [0] * 4, [900, 901, 902, 903],
                                     [0] * 4, [300, 301, 302, 0]]
    cut = gpucache.pad_sequences(tokens_column.values, tokens_column.offsets,
                                 torch.tensor([4, 3, 10]), max_length=2, pad_value=-1)
    assert cut.values.tolist() == [[400, 401], [300, 301], [-1, -1]]
    assert cut.lengths.tolist() == [2, 2, 0]
    wide = ds.sequences["ids"].batch([1, 7], max_length=5, pad_value=-7)
    assert wide.values.tolist() == [ids(1) + [-7] * 2, [-7] * 5]
    assert ds.sequences["tokens"].batch([]).values.shape == (0, 0)
    assert ds.sequences["tokens"].batch([0, 5]).values.shape == (2, 0)
    with pytest.raises(gpucache.Error, match="max_length must not be negative"):
        tokens_column.batch([1], max_length=-1)
    with pytest.raises(IndexError):
        tokens_column[30]


def test_gpu_batches_of_every_shape_with_indices(shapes_dataset):
    ds = gpucache.load(shapes_dataset, device="cpu")
    batches = gpucache.GPUBatches(ds, batch_size=8, seed=3, with_indices=True, drop_last=True)
    assert len(batches) == 3
    seen = []
    for index, batch in batches:
        assert index.dtype == torch.int64 and index.shape == (8,)
        rows = index.tolist()
        seen += rows
        assert list(batch) == ["image", "dense", "label", "emb", "tokens", "ids"]
        assert batch["image"].shape == (8, 3, 4, 5)
        assert torch.equal(batch["image"], torch.from_numpy(image(rows)))
        assert torch.equal(batch["dense"], torch.from_numpy(floats(rows, 7)))
        assert batch["label"].tolist() == [7 * r - 3 for r in rows]
        assert batch["emb"].shape == (8, 3)
        padded = batch["tokens"]
        assert isinstance(padded, gpucache.PaddedBatch)
        assert padded.values.shape == (8, max(len(tokens(r)) for r in rows))
        for row, values, length in zip(rows, padded.values.tolist(), padded.lengths.tolist()):
            assert values[:length] == tokens(row) and length == len(tokens(row))
        # The indices look up the text column, which batches do not carry.
        assert ds.texts("caption", index) == [caption(r) for r in rows]
    assert len(set(seen)) == 24
    fixed = gpucache.GPUBatches(ds, batch_size=5, shuffle=False, columns=["ids", "label"],
                                max_length=3, pad_value=-1)
    first = next(iter(fixed))
    assert list(first) == ["ids", "label"]
    # ids rows 0-4 have 0, 3, 6, 2 and 5 values.
    assert first["ids"].values.tolist() == [[-1] * 3, ids(1), ids(2)[:3], ids(3) + [-1],
                                            ids(4)[:3]]
    assert first["ids"].lengths.tolist() == [0, 3, 3, 2, 3]
    padded = next(iter(gpucache.GPUBatches(ds, batch_size=2, padded=True, columns=["emb"])))
    assert padded["emb"].shape == (2, 16)
    with pytest.raises(gpucache.Error, match="no tensor or sequence column caption"):
        gpucache.GPUBatches(ds, batch_size=2, columns=["caption"])


def test_numpy_arrays_of_every_shape_and_sequences_without_torch(shapes_dataset):
    script = f"""
import sys
sys.modules["torch"] = None  # import torch now fails
import numpy, gpucache
ds = gpucache.load({str(shapes_dataset)!r}, device="cpu")
image = ds.tensors["image"]
assert isinstance(image, numpy.ndarray) and image.shape == (30, 3, 4, 5), image.shape
assert int(image[29, 2, 3, 4]) == (7 * 29 + 59) % 251
assert ds.tensors["dense"].shape == (30, 7) and ds.tensors["emb"].shape == (30, 3)
assert ds.padded["emb"].shape == (30, 16)
tokens = ds.sequences["tokens"]
assert tokens.offsets.dtype == numpy.int64 and tokens.values.dtype == numpy.int32
assert tokens[9].tolist() == [900, 901, 902, 903]
batch = tokens.batch([4, 5, 3], max_length=3, pad_value=-1)
assert batch.values.tolist() == [[400, 401, 402], [-1, -1, -1], [300, 301, 302]], batch
assert batch.lengths.tolist() == [3, 0, 3]
assert tokens.batch([1, 2]).values.tolist() == [[100, 0], [200, 201]]
for index, b in gpucache.GPUBatches(ds, batch_size=7, seed=1, with_indices=True,
                                    drop_last=True):
    assert b["image"].shape == (7, 3, 4, 5)
    assert b["label"].tolist() == [7 * int(r) - 3 for r in index]
    assert b["ids"].values.shape[0] == 7
print("numpy ok")
"""
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "numpy ok" in result.stdout


# The device path end to end with the fake CUDA runtime (tests/fake_cudart), whose device memory
# is host memory: torch without a GPU cannot import CUDA arrays, so the test reads each array the
# native layer hands over through its DLPack capsule instead of torch.utils.dlpack.
DEVICE_SCRIPT = """
import ctypes, sys
import numpy, torch
import gpucache
from gpucache import _arrays

class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int), ("device_id", ctypes.c_int)]

class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]

class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int),
                ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]

capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
capsule_pointer.restype = ctypes.c_void_p
capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
NUMPY = {(0, 8): numpy.int8, (0, 16): numpy.int16, (0, 32): numpy.int32, (0, 64): numpy.int64,
         (1, 8): numpy.uint8, (2, 16): numpy.float16, (2, 32): numpy.float32,
         (2, 64): numpy.float64}
devices = set()

def fake_device_array(array, column):
    capsule = array.__dlpack__() if hasattr(array, "__dlpack__") else array
    tensor = DLTensor.from_address(capsule_pointer(capsule, b"dltensor"))
    devices.add((tensor.device.device_type, tensor.device.device_id))
    shape = tuple(tensor.shape[d] for d in range(tensor.ndim))
    if tensor.strides:  # in elements; the native layer hands out compact row-major arrays
        strides = tuple(tensor.strides[d] for d in range(tensor.ndim))
        assert strides == tuple(int(numpy.prod(shape[d + 1:])) for d in range(len(shape))), strides
    dtype = numpy.dtype(NUMPY[(tensor.dtype.code, tensor.dtype.bits)])
    size = int(numpy.prod(shape)) * dtype.itemsize
    data = numpy.frombuffer(ctypes.string_at(tensor.data + tensor.byte_offset, size), dtype)
    out = torch.from_numpy(data.reshape(shape).copy())
    wanted = _arrays._torch_dtype(column["dtype"])
    return out if out.dtype == wanted else out.view(wanted)

_arrays.from_native = fake_device_array
path, placement = sys.argv[1], sys.argv[2]
ds = gpucache.load(path, device="cuda", placement=placement, rank=1, world_size=3)
print("DEVICE", ds.device, sorted(devices), ds.nbytes, ds.load_stats["bytes_verified"] > 0)
ds.tensors.update({k: v.tolist() for k, v in ds.tensors.items()})
print("IMAGE", ds.tensors["image"][0][2][3][4], len(ds.tensors["image"]))
print("DENSE", ds.tensors["dense"][9])
print("LABEL", ds.tensors["label"])
print("EMB", ds.tensors["emb"][0], len(ds.padded["emb"][0]))
for name in ("tokens", "ids"):
    s = ds.sequences[name]
    print(name.upper(), s.offsets.tolist(), s.values.tolist())
print("TEXT", ds.texts("caption", [0, 3]))
"""


@pytest.mark.parametrize("placement", ["device", "host_pinned"])
def test_device_load_places_every_shape_and_sequence_in_one_allocation(shapes_dataset, tmp_path,
                                                                        placement):
    fake = BUILD / "tests" / "libgpucache_fake_cudart.so"
    if not fake.exists():
        pytest.fail(f"{fake} is missing: build the C++ project first", pytrace=False)
    script = tmp_path / "device.py"
    script.write_text(DEVICE_SCRIPT)
    environment = dict(os.environ, GPUCACHE_CUDART=str(fake))
    result = subprocess.run([sys.executable, str(script), str(shapes_dataset), placement],
                            capture_output=True, text=True, env=environment)
    assert result.returncode == 0, result.stderr
    lines = dict(line.split(" ", 1) for line in result.stdout.splitlines())
    # Every array is on cuda:0 (DLPack device type 2); one allocation holds them all.
    assert lines["DEVICE"].split(" [")[0] == "cuda:0"
    assert "[(2, 0)]" in lines["DEVICE"] and lines["DEVICE"].endswith("True")
    rows = list(range(10, 20))
    assert lines["IMAGE"] == f"{(7 * 10 + 59) % 251} 10"
    assert lines["DENSE"] == str([float(1000 * 19 + j) for j in range(7)])
    assert lines["LABEL"] == str([7 * r - 3 for r in rows])
    assert lines["EMB"] == "[10000.0, 10001.0, 10002.0] 16"
    for name, expected in (("TOKENS", tokens), ("IDS", ids)):
        offsets = [0]
        for r in rows:
            offsets.append(offsets[-1] + len(expected(r)))
        assert lines[name] == f"{offsets} {[v for r in rows for v in expected(r)]}"
    assert lines["TEXT"] == str([caption(10), caption(13)])


def test_corrupt_sequence_offsets_are_refused_even_without_verify(shapes_dataset, fresh_copy):
    ds_dir = fresh_copy(shapes_dataset)
    shard = ds_dir / "shard-00001.gcs"
    data = bytearray(shard.read_bytes())
    entry = 256 + 128 * 4  # the column table entry of 'tokens', the fifth column
    assert data[entry:entry + 6] == b"tokens"
    offsets = int.from_bytes(data[entry + 96:entry + 104], "little")
    data[offsets + 2 * 8:offsets + 3 * 8] = (1 << 40).to_bytes(8, "little")
    shard.write_bytes(bytes(data))
    with pytest.raises(gpucache.Error, match=r"shard-00001.gcs: column 'tokens' row 2, bytes "
                                             r"\d+-\d+: sequence offsets are not monotonic"):
        gpucache.load(ds_dir, device="cpu", verify=False)
    with pytest.raises(gpucache.Error, match="chunk hash mismatch"):
        gpucache.load(ds_dir, device="cpu")
    # Columns and rows that do not need those offsets still load.
    assert len(gpucache.load(ds_dir, device="cpu", verify=False, columns=["image", "ids"])) == 30
    assert len(gpucache.load(ds_dir, device="cpu", verify=False, rows=(0, 8))) == 8
