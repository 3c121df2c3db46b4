#!/usr/bin/env python3
"""Regenerates every committed test fixture under tests/data with real torch, numpy and
safetensors.

Each module in scripts/fixtures/ exposes generate(out_dir) and writes its own subfolders of
tests/data (modules named _*.py are helpers). Fixtures are committed, so CI never needs these
libraries to run the tests. There are two sets, made with two interpreters:

  Debian's set: every module but pypi_*.py, with the system interpreter, which has Debian's
  python3-torch (1.13) and python3-numpy:
      /usr/bin/python3 scripts/make_fixtures.py

  The PyPI set: the pypi_*.py modules (tests/data/shapes_pypi), which need what Debian lacks:
  torch 2.x and huggingface's safetensors. A virtual environment outside the repository holds
  them (about 5 GB); this script makes it when missing and runs this file with --pypi in it:
      bash scripts/fixtures/torch2_fixtures.sh      # venv: $GPUCACHE_TORCH2_VENV, /work/venv-torch2
  Run it after Debian's set when both change: it checks its data against tests/data/shapes.

Each fixture's .expected.json names the library versions that wrote it ("made_by").
"""
import argparse
import importlib
import pathlib
import sys

root = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(root / "scripts"))

parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
parser.add_argument("--pypi", action="store_true",
                    help="run only the pypi_*.py modules (needs torch 2.x and safetensors)")
parser.add_argument("--only", metavar="MODULE", action="append", default=[],
                    help="run only this module (repeatable), e.g. --only shapes_fixtures")
arguments = parser.parse_args()

for module_path in sorted((root / "scripts" / "fixtures").glob("*.py")):
    name = module_path.stem
    if name.startswith("_") or name.startswith("pypi_") != arguments.pypi:
        continue
    if arguments.only and name not in arguments.only:
        continue
    module = importlib.import_module(f"fixtures.{name}")
    module.generate(root / "tests" / "data")
    print(f"fixtures: {name} done")
