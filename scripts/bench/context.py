"""What every case needs: paths, sizes, repetition counts, and which features this build has."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import benchlib
from benchlib import CommandFailed, NotAvailable

HERE = Path(__file__).resolve().parent


@dataclass
class Context:
    root: Path
    out: Path                  # bench-out/
    gpucache: Path             # the CLI
    build_dir: Path
    python: str                # the bench venv's interpreter
    reps: int                  # repetitions of fast cases
    slow_reps: int             # repetitions of the Python-heavy cases
    quick: bool
    files: dict = field(default_factory=dict)     # datagen.file_names
    params: object = None                          # datagen.DataParams
    features: dict = field(default_factory=dict)
    shards: dict = field(default_factory=dict)     # kind -> dataset dir (prepared, untimed)
    shard_sources: dict = field(default_factory=dict)  # kind -> input file it was packed from
    notes: list = field(default_factory=list)
    writer_rows: int = 0                           # the writers section's rows and dim
    writer_dim: int = 0
    remote_rows: int = 0                           # the remote section's rows and dim
    remote_dim: int = 0

    @property
    def data(self) -> Path:
        return self.out / "data"

    @property
    def scratch(self) -> Path:
        path = self.out / "scratch"
        path.mkdir(parents=True, exist_ok=True)
        return path

    def cli(self, *args) -> list:
        return [str(self.gpucache)] + [str(a) for a in args]

    def pack(self, *args, device: str = "cpu") -> list:
        """`gpucache pack ...`; for the CPU figures validation is pinned to the CPU when the
        build can choose (on a GPU machine `--device auto` would use the GPU)."""
        flag = ["--device", device] if self.features.get("pack --device", {}).get("ok") else []
        return self.cli("pack", *args, *flag)

    def child(self, script: str, args: list, timeout: Optional[float] = None) -> dict:
        return benchlib.run_python_child(self.python, HERE / script, args, timeout=timeout)

    def dataset(self, kind: str) -> Path:
        """The prepared gpucache dataset of a kind, or NotAvailable saying why there is none."""
        if kind not in self.shards:
            raise NotAvailable(f"no gpucache dataset for {kind}: "
                               f"{self.shard_sources.get(kind, 'not packed')}")
        return self.shards[kind]

    def native(self, name: str) -> Path:
        path = self.build_dir / "scripts" / "bench" / "native" / name
        if not path.exists():
            raise NotAvailable(f"{name} is not built (scripts/bench.sh builds it: "
                               "scripts/bench/native)")
        return path


def probe_features(ctx: Context) -> dict:
    """What this build can do. Each entry: {"ok": bool, "detail": str}."""
    features = {}
    probe = ctx.out / "probe"
    benchlib.remove(probe)
    probe.mkdir(parents=True)

    def record(name, ok, detail=""):
        features[name] = {"ok": bool(ok), "detail": detail}

    version = subprocess.run([str(ctx.gpucache), "--version"], capture_output=True, text=True)
    record("cli", version.returncode == 0, version.stdout.strip() or version.stderr.strip())
    pack_help = subprocess.run(ctx.cli("pack", "--help"), capture_output=True, text=True).stdout
    for flag in ("--device", "--norm-min", "--norm-max", "--kind", "--field"):
        record(f"pack {flag}", flag in pack_help, "in `gpucache pack --help`" if flag in pack_help
               else "not in `gpucache pack --help`")
    verify_help = subprocess.run(ctx.cli("verify", "--help"), capture_output=True,
                                 text=True).stdout
    record("verify --deep", "--deep" in verify_help, "in `gpucache verify --help`" if "--deep"
           in verify_help else "not in `gpucache verify --help`")

    # Tiny inputs in every format, from the same tensors as the real data's generator would make.
    made = benchlib.run_python_child(ctx.python, HERE / "probe_inputs.py", [probe])
    for fmt, path in made.items():
        out = probe / f"ds-{fmt}"
        try:
            benchlib.run_command(ctx.cli("pack", path, "-o", out, "--force", "-q"))
            record(f"pack {fmt}", True, "packs a tiny file")
        except CommandFailed as error:
            message = _first_line(error.stderr).replace(str(probe) + "/", "")
            record(f"pack {fmt}", False, message.removeprefix("gpucache: error: "))

    script = ("import json, gpucache; print(json.dumps({n: hasattr(gpucache, n) for n in "
              "('load', 'GPUBatches')} | {'version': getattr(gpucache, '__version__', '?'), "
              "'file': gpucache.__file__}))")
    result = subprocess.run([ctx.python, "-c", script], capture_output=True, text=True,
                            cwd=str(ctx.out))
    if result.returncode == 0:
        info = json.loads(result.stdout.strip().splitlines()[-1])
        record("python package", True, f"gpucache {info['version']} at {info['file']}")
        record("gpucache.load", info["load"], "" if info["load"] else "no gpucache.load")
        record("gpucache.GPUBatches", info["GPUBatches"],
               "" if info["GPUBatches"] else "no gpucache.GPUBatches")
    else:
        detail = _first_line(result.stderr)
        for name in ("python package", "gpucache.load", "gpucache.GPUBatches"):
            record(name, False, f"import gpucache failed: {detail}")
    validate_bench = ctx.build_dir / "scripts" / "bench" / "native" / "gpucache_bench_validate"
    record("validation microbenchmark", validate_bench.exists(),
           str(validate_bench) if validate_bench.exists() else
           "gpucache_bench_validate not built (no src/validate/include/gpucache/validate.hpp in this tree)")
    benchlib.remove(probe)
    return features


def require(ctx: Context, *names: str) -> None:
    for name in names:
        feature = ctx.features.get(name)
        if not feature or not feature["ok"]:
            detail = feature["detail"] if feature else "not probed"
            raise NotAvailable(f"{name}: {detail}")


def _first_line(text: str) -> str:
    lines = [line for line in (text or "").strip().splitlines() if line.strip()]
    line = lines[-1] if lines else "(no message)"
    return re.sub(r"\s+", " ", line)[:300]


def python_version_info(python: str) -> dict:
    script = ("import json, sys, platform\n"
              "out = {'python': platform.python_version()}\n"
              "for name in ('torch', 'numpy', 'safetensors', 'matplotlib'):\n"
              "    try:\n"
              "        out[name] = __import__(name).__version__\n"
              "    except Exception as e:\n"
              "        out[name] = 'missing'\n"
              "print(json.dumps(out))")
    result = subprocess.run([python, "-c", script], capture_output=True, text=True)
    try:
        return json.loads(result.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        return {"python": sys.version.split()[0]}
