"""Fixtures: datasets packed by the real `gpucache` CLI (and, for text columns, by the test tool
built next to it). Both come from the C++ build directory: $GPUCACHE_BUILD_DIR or <repo>/build."""
import os
import pathlib
import subprocess

import numpy
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]
BUILD = pathlib.Path(os.environ.get("GPUCACHE_BUILD_DIR", ROOT / "build"))


def _tool(relative: str) -> pathlib.Path:
    path = BUILD / relative
    if not path.exists():
        pytest.fail(f"{path} is missing: build the C++ project first (scripts/build.sh) or set "
                    "GPUCACHE_BUILD_DIR", pytrace=False)
    return path


def pack(inputs, out, *options):
    subprocess.run([str(_tool("src/cli/gpucache")), "pack", *map(str, inputs), "-o", str(out),
                    "--quiet", *map(str, options)], check=True, capture_output=True)
    return out


def embeddings(rows: int, dim: int) -> numpy.ndarray:
    """Element j of row r is (r + 16) / 128 + j / 4096: exact in f32, every value says which row
    it came from, and norms stay inside pack's default validation range [0.1, 100]."""
    return ((numpy.arange(rows, dtype=numpy.float32)[:, None] + 16) / 128
            + numpy.arange(dim, dtype=numpy.float32)[None, :] / 4096)


@pytest.fixture(scope="session")
def packed(tmp_path_factory):
    """103 rows × 10 f32 in 4 shards of at most 30 rows (padded to 16 elements)."""
    folder = tmp_path_factory.mktemp("packed")
    numpy.save(folder / "emb.npy", embeddings(103, 10))
    return pack([folder / "emb.npy"], folder / "ds", "--shard-rows", 30)


@pytest.fixture(scope="session")
def single_shard(tmp_path_factory):
    folder = tmp_path_factory.mktemp("single")
    numpy.save(folder / "emb.npy", embeddings(40, 24))
    return pack([folder / "emb.npy"], folder / "ds")


@pytest.fixture(scope="session")
def text_dataset(tmp_path_factory):
    """12 rows in shards of 5: emb f32 dim 3, label i64, caption text (see make_text_dataset)."""
    out = tmp_path_factory.mktemp("text") / "ds"
    subprocess.run([str(_tool("tests/gpucache_make_text_dataset")), str(out), "12", "5"],
                   check=True)
    return out


def make_shapes_dataset(out, rows: int, shard_rows: int):
    """A format 1.2 dataset (tests/tools/make_shapes_dataset.cpp): image u8 [3, 4, 5], dense f32
    [7], label i64, emb f32 [3] padded to 16, tokens i32 and ids i64 sequences, caption text."""
    subprocess.run([str(_tool("tests/gpucache_make_shapes_dataset")), str(out), str(rows),
                    str(shard_rows)], check=True)
    return out


@pytest.fixture(scope="session")
def shapes_dataset(tmp_path_factory):
    """30 rows of the shapes dataset in shards of 8 rows (which end no page: pieces)."""
    return make_shapes_dataset(tmp_path_factory.mktemp("shapes") / "ds", 30, 8)


@pytest.fixture(scope="session")
def shapes_on_pages(tmp_path_factory):
    """2348 rows of the shapes dataset in shards of 1024 rows: whole pages in every column."""
    return make_shapes_dataset(tmp_path_factory.mktemp("shapes_pages") / "ds", 2348, 1024)


@pytest.fixture
def fresh_copy(tmp_path):
    """A function copying a dataset directory into a fresh place, for tests that damage it."""
    import shutil

    def copy(source):
        target = tmp_path / "copy"
        shutil.copytree(source, target)
        return target
    return copy
