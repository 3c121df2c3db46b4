"""The machine a run came from: CPU, cores, memory, disk, kernel, GPU and tool versions."""
from __future__ import annotations

import os
import platform
import re
import subprocess
from pathlib import Path


def _run(argv, stderr_too: bool = False) -> str:
    try:
        result = subprocess.run(argv, capture_output=True, text=True, timeout=20)
        if result.returncode != 0:
            return ""
        return (result.stdout + (result.stderr if stderr_too else "")).strip()
    except (OSError, subprocess.TimeoutExpired):
        return ""


def _cpu_model() -> str:
    for line in _run(["lscpu"]).splitlines():
        if line.startswith("Model name:"):
            return line.split(":", 1)[1].strip()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _memory() -> str:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return f"{int(line.split()[1]) / 2**20:.1f} GiB"
    except OSError:
        pass
    return "unknown"


def _disk(path: Path) -> str:
    line = _run(["df", "--output=source,fstype,size", str(path)]).splitlines()
    if len(line) < 2:
        return "unknown"
    source, fstype, size = line[1].split()[:3]
    text = f"{source} ({fstype}, {int(size) / 2**20:.0f} GiB)"
    device = re.sub(r"p?\d+$", "", Path(source).name) if source.startswith("/dev/") else ""
    if device:
        model = _run(["lsblk", "-dno", "MODEL,ROTA", f"/dev/{device}"]).strip()
        if model:
            parts = model.rsplit(None, 1)
            rota = parts[-1]
            name = parts[0] if len(parts) > 1 else ""
            kind = {"0": "non-rotational", "1": "rotational (as reported; VMs often say 1)"}.get(
                rota, "")
            text += f", {name + ', ' if name else ''}{kind}"
    return text


def _gpu() -> str:
    out = _run(["nvidia-smi", "--query-gpu=name,memory.total,driver_version",
                "--format=csv,noheader"])
    return out.replace("\n", "; ") if out else "none"


def _load() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "unknown"


def collect(root: Path, out: Path, gpucache: Path, build_dir: Path, python_versions: dict) -> dict:
    cache = {}
    try:
        for line in (build_dir / "CMakeCache.txt").read_text().splitlines():
            for key in ("CMAKE_BUILD_TYPE", "CMAKE_CXX_COMPILER", "GPUCACHE_CUDA"):
                if line.startswith(key + ":"):
                    cache[key] = line.split("=", 1)[1]
    except OSError:
        pass
    compiler = _run([cache["CMAKE_CXX_COMPILER"], "--version"]).splitlines()[:1] if \
        cache.get("CMAKE_CXX_COMPILER") else []
    os_name = ""
    try:
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                os_name = line.split("=", 1)[1].strip('"')
    except OSError:
        pass
    dirty = bool(_run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"]))
    return {
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "memory": _memory(),
        "disk": _disk(out),
        "kernel": platform.release(),
        "os": os_name,
        "gpu": _gpu(),
        "load_average_start": _load(),
        "gpucache": _run([str(gpucache), "--version"]) or "unknown",
        "git_commit": (_run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"]) or "?") +
                      (" (with local changes)" if dirty else ""),
        "build_type": cache.get("CMAKE_BUILD_TYPE", "unknown"),
        "compiler": compiler[0] if compiler else "unknown",
        "xxhsum": _run(["xxhsum", "--version"], stderr_too=True).split(" by ")[0] or "unknown",
        "coreutils": (_run(["cp", "--version"]).splitlines() or ["unknown"])[0],
        **python_versions,
    }


def load_average() -> str:
    return _load()
