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
    # Every example runs from another directory, the venv's bin off PATH: it finds the command
    # through the package (scripts/test.sh does the same in CI).
    environment = {k: v for k, v in os.environ.items() if k != "GPUCACHE_CLI"}
    environment.update(PATH="/usr/bin:/bin", CUDA_VISIBLE_DEVICES="")
    for example in sorted((ROOT / "examples").glob("*.py")):
        run = subprocess.run([str(venv / "bin/python"), str(example)], capture_output=True,
                             text=True, cwd=tmp_path, env=environment, timeout=300)
        assert run.returncode == 0, f"{example.name}: {run.stderr}"


def test_the_command_is_found_through_the_package(tmp_path):
    from conftest import BUILD
    import gpucache
    cli = str(BUILD / "src/cli/gpucache")
    environment = dict(os.environ, GPUCACHE_CLI=cli)
    shown = subprocess.run([sys.executable, "-m", "gpucache", "--help"], capture_output=True,
                           text=True, env=environment, cwd=tmp_path, timeout=60)
    assert shown.returncode == 0 and "pack" in shown.stdout, shown.stderr
    environment["GPUCACHE_CLI"] = str(tmp_path / "absent")
    failed = subprocess.run([sys.executable, "-m", "gpucache", "--help"], capture_output=True,
                            text=True, env=environment, cwd=tmp_path, timeout=60)
    assert failed.returncode != 0 and "not an executable file" in failed.stderr
    installed = pathlib.Path(sysconfig.get_path("scripts")) / "gpucache"
    if not installed.exists():
        pytest.skip(f"gpucache is not installed into {installed.parent} (run scripts/test.sh)")
    previous = os.environ.pop("GPUCACHE_CLI", None)
    try:
        assert gpucache.cli_path() == str(installed)
    finally:
        if previous is not None:
            os.environ["GPUCACHE_CLI"] = previous
