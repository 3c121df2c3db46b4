"""scripts/examples/cluster: N=3 parts packed by a shell loop, merged, verified, then trained
with torchrun on 2 CPU processes (gloo), each rank mapping only the shards holding its rows."""
import os
import re
import shutil
import subprocess
import sys

import pytest

from conftest import BUILD, ROOT


def test_cluster_example_packs_merges_and_trains(tmp_path):
    environment = dict(os.environ, GPUCACHE=str(BUILD / "src/cli/gpucache"), PYTHON=sys.executable,
                       CUDA_VISIBLE_DEVICES="", OMP_NUM_THREADS="1")
    result = subprocess.run(["bash", str(ROOT / "scripts/examples/cluster/run_local.sh"),
                             str(tmp_path / "work"), "3"],
                            capture_output=True, text=True, env=environment, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    assert re.search(r"ok: .*dataset is intact \(15 shards", result.stdout), result.stdout
    parts = sorted(p.name for p in (tmp_path / "work/parts").iterdir())
    assert parts == ["part-00000", "part-00001", "part-00002"]
    if "torchrun: skipped" in result.stdout:
        pytest.skip(result.stdout.strip().splitlines()[-1])
    ranks = dict(re.findall(r"rank (\d)/2: rows \S+ mapped (\S+)", result.stdout))
    assert set(ranks) == {"0", "1"}, result.stdout
    mapped = {rank: set(names.split(",")) for rank, names in ranks.items()}
    # 3500 rows in 15 shards of at most 256 rows: each rank's 1750 rows lie in 7 or 8 shards, and
    # only the shard holding rows of both ranks is mapped by both.
    assert all(len(names) <= 8 for names in mapped.values()), mapped
    assert len(mapped["0"] & mapped["1"]) <= 1, mapped
    assert re.search(r"mean loss [0-9.]+ after 10 steps", result.stdout), result.stdout


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_pack_parts_script_resumes_an_interrupted_part(tmp_path):
    """The array task's script: a part with pack-state.json and no manifest is resumed."""
    import numpy
    raw = tmp_path / "raw"
    raw.mkdir()
    numpy.save(raw / "a.npy", numpy.ones((10, 8), numpy.float32))
    environment = dict(os.environ, GPUCACHE=str(BUILD / "src/cli/gpucache"),
                       SLURM_ARRAY_TASK_ID="0", SLURM_ARRAY_TASK_COUNT="1")
    script = ROOT / "scripts/examples/cluster/pack_parts.sbatch"
    first = subprocess.run(["bash", str(script), str(raw), str(tmp_path / "parts")],
                           capture_output=True, text=True, env=environment)
    assert first.returncode == 0, first.stderr
    again = subprocess.run(["bash", str(script), str(raw), str(tmp_path / "parts")],
                           capture_output=True, text=True, env=environment)
    assert "already packed" in again.stdout
