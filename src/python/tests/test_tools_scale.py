"""The options of the general-tensor and cluster work from Python: per-column checks, partitioned
packs joined by gpucache.merge, and appends, each giving the rows the CLI gives."""
import numpy
import pytest

import gpucache
from conftest import embeddings


def test_checks_per_column_and_no_checks(tmp_path):
    weights = numpy.array([0.01, 0.5, 2.0, 0.0], dtype=numpy.float32)
    vectors = embeddings(4, 16)
    # Default: the weight column (a tensor) is only checked for NaN/Inf; the norm check on it
    # drops the rows whose weight is outside [0.1, 100].
    kept = gpucache.pack({"embedding": vectors, "weight": weights}, tmp_path / "default",
                         device="cpu")
    assert kept["rows"] == 4
    checked = gpucache.pack({"embedding": vectors, "weight": weights}, tmp_path / "norm",
                            device="cpu", checks={"weight": ["finite", "norm"]})
    assert checked["rows"] == 2 and checked["dropped"]["norm_low"] == 2
    zero = numpy.zeros((3, 16), dtype=numpy.float32)
    with pytest.raises(gpucache.Error):
        gpucache.pack({"embedding": zero}, tmp_path / "none-kept", device="cpu")
    assert not (tmp_path / "none-kept").exists()
    assert gpucache.pack({"embedding": zero}, tmp_path / "unchecked", device="cpu",
                         no_checks=True)["rows"] == 3


def test_parts_merge_and_append(tmp_path):
    files = []
    for i in range(3):
        numpy.save(tmp_path / f"in{i}.npy", embeddings(20, 16) + i)
        files.append(tmp_path / f"in{i}.npy")
    whole = gpucache.pack(files, tmp_path / "whole", device="cpu")
    for k in range(2):
        gpucache.pack(files, tmp_path / f"part{k}", device="cpu", part=(k, 2))
    merged = gpucache.merge([tmp_path / "part1", tmp_path / "part0"], tmp_path / "merged")
    assert merged["rows"] == whole["rows"] == 60
    # no_fsync reaches the same library (its fsyncs are counted in tests/test_cluster.cpp).
    unsynced = gpucache.merge([tmp_path / "part0", tmp_path / "part1"], tmp_path / "unsynced",
                              no_fsync=True)
    assert unsynced["rows"] == 60 and gpucache.verify(tmp_path / "unsynced")["ok"]
    for name in ("shard-00000.gcs", "shard-00001.gcs"):
        assert (tmp_path / "unsynced" / name).read_bytes() == \
            (tmp_path / "merged" / name).read_bytes()
    assert gpucache.verify(tmp_path / "merged")["ok"]
    a = gpucache.load(tmp_path / "whole", device="cpu").tensors["embedding"]
    b = gpucache.load(tmp_path / "merged", device="cpu").tensors["embedding"]
    assert numpy.array_equal(numpy.asarray(a), numpy.asarray(b))

    numpy.save(tmp_path / "more.npy", embeddings(5, 16) + 9)
    gpucache.pack(tmp_path / "more.npy", append=tmp_path / "merged", device="cpu")
    assert gpucache.inspect(tmp_path / "merged")["rows"] == 65
    with pytest.raises(gpucache.Error, match="out=.*append="):
        gpucache.pack(tmp_path / "more.npy", tmp_path / "x", append=tmp_path / "merged")
