"""The runtime reader's half of the corruption matrix (tests/test_corruption_matrix.cpp has verify's):
gpucache.load with verify=True must refuse every damaged dataset, whether the damage is in a
shard's header, tables, data, padding or footer, in its size, in which listed shards are there,
or in the manifest that vouches for them."""
import json
import pathlib
import random
import shutil
import struct

import numpy
import pytest

import gpucache
from conftest import embeddings, pack

HEADER, COLUMN_ENTRY, FOOTER = 256, 128, 32


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    """60 rows × 10 f32 in 3 shards of 20 (rows padded to 16 elements)."""
    folder = tmp_path_factory.mktemp("matrix")
    numpy.save(folder / "emb.npy", embeddings(60, 10))
    return pack([folder / "emb.npy"], folder / "ds", "--shard-rows", 20)


@pytest.fixture
def damaged(pristine, tmp_path):
    target = tmp_path / "ds"
    shutil.copytree(pristine, target)
    return target


def refuses(path):
    with pytest.raises(gpucache.Error):
        gpucache.load(path, device="cpu", verify=True)


def regions(shard: bytes):
    """Byte ranges of every region of an uncompressed shard, read from its header and tables."""
    (columns,) = struct.unpack_from("<I", shard, 44)
    data_offset, data_size = struct.unpack_from("<QQ", shard, 56)
    chunk_count, chunk_table = struct.unpack_from("<QQ", shard, 88)
    table_end = HEADER + columns * COLUMN_ENTRY
    found = {"header": (0, HEADER), "column table": (HEADER, table_end),
             "gap before the data": (table_end, data_offset)}
    cursor = data_offset
    for c in range(columns):
        entry = HEADER + c * COLUMN_ENTRY
        name = shard[entry:entry + 64].rstrip(b"\0").decode()
        dtype_size = {1: 4, 2: 2, 3: 2, 4: 8, 5: 8, 6: 4, 7: 2, 8: 1, 9: 1, 10: 1, 13: 2, 14: 4,
                      15: 8}[shard[entry + 65]]
        dim, padded, pitch, offset, size = struct.unpack_from("<QQQQQ", shard, entry + 72)
        if offset > cursor:
            found[f"alignment padding before {name}"] = (cursor, offset)
        found[f"column {name} row 0 values"] = (offset, offset + dim * dtype_size)
        if padded > dim:
            found[f"column {name} row 0 padding"] = (offset + dim * dtype_size, offset + pitch)
        last = offset + size - pitch
        found[f"column {name} last row"] = (last, last + dim * dtype_size)
        cursor = offset + size
    if data_offset + data_size > cursor:
        found["alignment padding at the end"] = (cursor, data_offset + data_size)
    found["chunk table"] = (chunk_table, chunk_table + 24 * chunk_count)
    found["footer"] = (len(shard) - FOOTER, len(shard))
    return found


def test_the_pristine_dataset_loads(pristine):
    assert len(gpucache.load(pristine, device="cpu", verify=True)) == 60


@pytest.mark.parametrize("shard_index", [0, 1, 2])
def test_a_flipped_byte_in_any_region_of_any_shard_is_refused(pristine, tmp_path, shard_index):
    name = f"shard-{shard_index:05d}.gcs"
    original = (pristine / name).read_bytes()
    rng = random.Random(shard_index)
    flips = 0
    for region, (begin, end) in regions(original).items():
        if end <= begin:
            continue
        for position in sorted({begin, end - 1, rng.randrange(begin, end)}):
            target = tmp_path / f"flip-{flips}"
            shutil.copytree(pristine, target)
            data = bytearray(original)
            data[position] ^= 1 << rng.randrange(8)
            (target / name).write_bytes(bytes(data))
            with pytest.raises(gpucache.Error) as caught:
                gpucache.load(target, device="cpu", verify=True)
            assert name in str(caught.value), (region, position, str(caught.value))
            shutil.rmtree(target)
            flips += 1
    assert flips >= 30


@pytest.mark.parametrize("keep", [0, 100, 300, -33, -1])
def test_a_truncated_shard_is_refused(damaged, keep):
    shard = damaged / "shard-00001.gcs"
    data = shard.read_bytes()
    shard.write_bytes(data[:keep] if keep >= 0 else data[:len(data) + keep])
    refuses(damaged)


@pytest.mark.parametrize("extra", [1, 32, 4096])
def test_an_extended_shard_is_refused(damaged, extra):
    shard = damaged / "shard-00002.gcs"
    shard.write_bytes(shard.read_bytes() + b"\0" * extra)
    refuses(damaged)


def test_swapped_shards_are_refused(damaged):
    first, second = damaged / "shard-00000.gcs", damaged / "shard-00001.gcs"
    first.rename(damaged / "swap")
    second.rename(first)
    (damaged / "swap").rename(second)
    refuses(damaged)


@pytest.mark.parametrize("shard_index", [0, 1, 2])
def test_a_deleted_shard_is_refused(damaged, shard_index):
    (damaged / f"shard-{shard_index:05d}.gcs").unlink()
    refuses(damaged)


def test_an_extra_unlisted_shard_is_no_part_of_the_dataset(damaged):
    # The manifest defines the dataset (as while an append is linking its shards in): a file it
    # does not list is never read; gpucache verify reports it as extra.
    shutil.copy(damaged / "shard-00000.gcs", damaged / "shard-00003.gcs")
    assert len(gpucache.load(damaged, device="cpu", verify=True)) == 60


def test_a_shard_from_another_dataset_of_the_same_shape_is_refused(damaged, tmp_path):
    numpy.save(tmp_path / "other.npy", embeddings(60, 10)[::-1].copy())
    other = pack([tmp_path / "other.npy"], tmp_path / "other", "--shard-rows", 20)
    shutil.copy(other / "shard-00001.gcs", damaged / "shard-00001.gcs")
    refuses(damaged)


def test_a_missing_or_unreadable_manifest_is_refused(damaged):
    manifest = damaged / "manifest.json"
    manifest.write_text(manifest.read_text()[:100])
    refuses(damaged)
    manifest.unlink()
    refuses(damaged)


@pytest.mark.parametrize("edit", ["header_hash", "shard_dropped", "shard_added"])
def test_a_manifest_that_disagrees_with_the_shards_is_refused(damaged, edit):
    manifest = damaged / "manifest.json"
    content = json.loads(manifest.read_text())
    if edit == "header_hash":
        content["shards"][1]["header_hash"] = "0123456789abcdef"
    elif edit == "shard_dropped":
        content["shards"].pop()
    else:
        content["shards"].append(dict(content["shards"][-1], file="shard-00003.gcs"))
    manifest.write_text(json.dumps(content, indent=2))
    refuses(damaged)


@pytest.mark.parametrize("text", ["[]", '{"shards": 3}', '{"shards": [7]}', "null"])
def test_a_manifest_of_the_wrong_shape_is_refused_with_gpucache_error(damaged, text):
    (damaged / "manifest.json").write_text(text)
    refuses(damaged)
