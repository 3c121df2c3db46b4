"""`pip install .` installs the whole tool: the `gpucache` command beside the interpreter and the
Python package with pack. Checked for the environment scripts/test.sh installed into, and for a
wheel from `pip wheel .` installed into a fresh virtual environment (the build directory is kept
between runs, so the wheel builds incrementally)."""
import os
import pathlib
import subprocess
import sys
import sysconfig

import pytest

from conftest import ROOT

SMOKE = """
import numpy, gpucache, sys
result = gpucache.pack({"embedding": numpy.ones((4, 8), numpy.float32)}, sys.argv[1])
assert result["rows"] == 4, result
assert gpucache.verify(sys.argv[1])["ok"]
print("ok")
"""


def test_the_command_is_installed_beside_the_interpreter(tmp_path):
    scripts = pathlib.Path(sysconfig.get_path("scripts"))
    command = scripts / "gpucache"
    if not command.exists():
        pytest.skip(f"gpucache is not installed into {scripts} (run scripts/test.sh)")
    help_text = subprocess.run([str(command), "--help"], check=True, capture_output=True,
                               text=True).stdout
    assert "pack" in help_text and "verify" in help_text
    packed = subprocess.run([str(command), "pack", "--help"], check=True, capture_output=True,
                            text=True).stdout
    assert "gpucache pack" in packed


@pytest.mark.skipif(os.environ.get("GPUCACHE_SKIP_WHEEL_TEST") == "1",
                    reason="GPUCACHE_SKIP_WHEEL_TEST=1")
def test_a_wheel_works_in_a_fresh_venv(tmp_path):
    pytest.importorskip("scikit_build_core")
    wheels = tmp_path / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
                    "--no-build-isolation", "--disable-pip-version-check", "-w", str(wheels),
                    str(ROOT)], check=True)
    (wheel,) = wheels.glob("gpucache-*.whl")
    venv = tmp_path / "venv"
    subprocess.run(["/usr/bin/python3", "-m", "venv", "--system-site-packages", str(venv)],
                   check=True)
    subprocess.run([str(venv / "bin/python"), "-m", "pip", "install", "--quiet", "--no-deps",
                    "--disable-pip-version-check", str(wheel)], check=True)
    help_text = subprocess.run([str(venv / "bin/gpucache"), "--help"], check=True,
                               capture_output=True, text=True).stdout
    assert "Run 'gpucache COMMAND --help'" in help_text
    smoke = subprocess.run([str(venv / "bin/python"), "-c", SMOKE, str(tmp_path / "ds")],
                           check=True, capture_output=True, text=True, cwd=tmp_path)
    assert smoke.stdout.strip() == "ok"
