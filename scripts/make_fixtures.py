#!/usr/bin/env python3
"""Regenerates every committed test fixture under tests/data with real torch and numpy.

Run with Debian's system interpreter, which has python3-torch and python3-numpy:
    /usr/bin/python3 scripts/make_fixtures.py
Each module in scripts/fixtures/ exposes generate(out_dir) and writes one subfolder of tests/data.
Fixtures are committed, so CI never needs torch to run the C++ tests.
"""
import importlib
import pathlib
import sys

root = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(root / "scripts"))

for module_path in sorted((root / "scripts" / "fixtures").glob("*.py")):
    if module_path.stem.startswith("_"):
        continue
    module = importlib.import_module(f"fixtures.{module_path.stem}")
    module.generate(root / "tests" / "data")
    print(f"fixtures: {module_path.stem} done")
