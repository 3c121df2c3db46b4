"""examples/train_loop.py runs end to end on the CPU and learns."""
import os
import pathlib
import re
import subprocess
import sys

import pytest

from conftest import BUILD, ROOT

# The examples train a torch model; a venv without torch (the numpy 2 one in scripts/test.sh)
# runs the rest of the suite.
pytest.importorskip("torch")


def test_train_loop_example_learns(tmp_path):
    environment = dict(os.environ, GPUCACHE_CLI=str(BUILD / "src/cli/gpucache"),
                       CUDA_VISIBLE_DEVICES="")
    result = subprocess.run([sys.executable, str(ROOT / "examples/train_loop.py"), "--epochs", "4"],
                            capture_output=True, text=True, env=environment, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    losses = [float(x) for x in re.findall(r"mean loss ([0-9.]+)", result.stdout)]
    assert len(losses) == 4
    assert losses[-1] < losses[0] * 0.8, result.stdout


def test_unified_embeddings_example_packs_the_mixed_project_and_learns(tmp_path):
    """examples/unified_embeddings.py: five inputs of four layouts (torch 2.x .pt files) in one
    dataset, no field left out, the CLI's --input-map giving the same rows, and @source learnt."""
    environment = dict(os.environ, GPUCACHE_CLI=str(BUILD / "src/cli/gpucache"),
                       CUDA_VISIBLE_DEVICES="")
    result = subprocess.run([sys.executable, str(ROOT / "examples/unified_embeddings.py"),
                             "--epochs", "10"], capture_output=True, text=True, env=environment,
                            cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "rows per input: [120, 120, 160, 80, 90]" in result.stdout
    losses = [float(x) for x in re.findall(r"mean loss ([0-9.]+)", result.stdout)]
    assert len(losses) == 2 and losses[-1] < losses[0], result.stdout
