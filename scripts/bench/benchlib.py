"""Timing, statistics and result records shared by every benchmark case.

Every figure is a set of wall-clock samples (time.perf_counter) summarised as median, min and max.
A comparison pairs a gpucache measurement with a peer measured in the same run on the same bytes;
its ratio is always peer median / gpucache median, so a ratio above 1 means gpucache took less time
(or reached more bandwidth) than the peer.
"""
from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional


class NotAvailable(Exception):
    """The feature a case needs is not in this build (the message says which and why)."""


class NotMeasured(Exception):
    """The case cannot run on this machine (e.g. no GPU); the message says why."""


class CommandFailed(Exception):
    def __init__(self, argv, returncode, stderr):
        self.argv, self.returncode, self.stderr = argv, returncode, stderr
        first = (stderr or "").strip().splitlines()
        super().__init__(f"{' '.join(map(str, argv))} exited {returncode}: "
                         f"{first[-1] if first else '(no message)'}")


@dataclass
class Stats:
    samples: list  # seconds
    unit: str = "s"

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    def to_json(self, bytes_processed: Optional[int] = None) -> dict:
        out = {"unit": self.unit, "n": len(self.samples), "median": self.median,
               "min": min(self.samples), "max": max(self.samples), "samples": self.samples}
        if bytes_processed and self.unit == "s" and self.median > 0:
            out["gb_per_s"] = bytes_processed / self.median / 1e9
        return out


@dataclass
class Measure:
    label: str                      # what ran, e.g. "gpucache verify --threads 1"
    stats: Optional[Stats] = None
    command: Optional[str] = None   # the exact command or call, for the report
    bytes: Optional[int] = None
    rate: bool = True  # whether bytes / time is a meaningful throughput for this measure

    def to_json(self) -> dict:
        out = {"label": self.label, "command": self.command, "bytes": self.bytes}
        if self.stats is not None:
            out["stats"] = self.stats.to_json(self.bytes if self.rate else None)
        return out


@dataclass
class Comparison:
    id: str
    group: str          # "cpu" or "gpu"
    section: str        # "load", "tools", "pipeline", "gpu"
    title: str
    subject: Optional[Measure] = None  # gpucache
    peer: Optional[Measure] = None
    status: str = "measured"           # measured | not_available | not_measured | failed
    reason: str = ""
    notes: str = ""
    extra: dict = field(default_factory=dict)

    @property
    def ratio(self) -> Optional[float]:
        if self.status != "measured" or not (self.subject and self.peer):
            return None
        if not (self.subject.stats and self.peer.stats):
            return None
        s, p = self.subject.stats.median, self.peer.stats.median
        return p / s if s > 0 else None

    def to_json(self) -> dict:
        return {"id": self.id, "group": self.group, "section": self.section, "title": self.title,
                "status": self.status, "reason": self.reason, "notes": self.notes,
                "ratio": self.ratio,
                "subject": self.subject.to_json() if self.subject else None,
                "peer": self.peer.to_json() if self.peer else None, "extra": self.extra}


def log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def run_command(argv, *, capture: bool = False, env=None, cwd=None) -> subprocess.CompletedProcess:
    result = subprocess.run([str(a) for a in argv], stdout=subprocess.PIPE if capture else
                            subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env, cwd=cwd)
    if result.returncode != 0:
        raise CommandFailed(argv, result.returncode, result.stderr)
    return result


def time_command(argv, *, before: Optional[Callable[[], None]] = None, env=None) -> float:
    """One timed run of a command; `before` (untimed) prepares it, e.g. removes old output."""
    if before:
        before()
    start = time.perf_counter()
    run_command(argv, env=env)
    return time.perf_counter() - start


def interleaved(runs: dict, reps: int, warmup: int = 1) -> dict:
    """Runs each named zero-argument timing function `reps` times, alternating between them
    (A B C A B C ...) so that drift on a busy machine hits every contender alike. Each function
    returns the seconds of one run. `warmup` untimed rounds come first."""
    for _ in range(warmup):
        for fn in runs.values():
            fn()
    samples = {name: [] for name in runs}
    for _ in range(reps):
        for name, fn in runs.items():
            samples[name].append(fn())
    return {name: Stats(values) for name, values in samples.items()}


def warm_read(*paths) -> None:
    """Reads files once so that the page cache is warm for what follows (we never drop it)."""
    for path in paths:
        path = Path(path)
        files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
        for file in files:
            with open(file, "rb", buffering=0) as handle:
                while handle.read(16 << 20):
                    pass


def tree_bytes(path) -> int:
    path = Path(path)
    if path.is_dir():
        return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
    return path.stat().st_size


def remove(path) -> None:
    path = Path(path)
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()


def run_python_child(python: str, script: Path, args: list, *, timeout: Optional[float] = None,
                     env=None) -> dict:
    """Runs a measuring child process that prints one JSON object on its last stdout line."""
    argv = [python, str(script)] + [str(a) for a in args]
    result = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            timeout=timeout, env=env)
    lines = [line for line in result.stdout.strip().splitlines() if line.strip()]
    if result.returncode != 0 or not lines:
        raise CommandFailed(argv, result.returncode, result.stderr or result.stdout)
    return json.loads(lines[-1])


def human_bytes(n: Optional[float]) -> str:
    if n is None:
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def human_seconds(s: Optional[float]) -> str:
    if s is None:
        return "-"
    if s < 1e-3:
        return f"{s * 1e6:.0f} µs"
    if s < 1:
        return f"{s * 1e3:.1f} ms"
    return f"{s:.2f} s"


def parse_size(text: str) -> int:
    text = str(text).strip().upper().removesuffix("IB").removesuffix("B")
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    if text and text[-1] in scale:
        return int(float(text[:-1]) * scale[text[-1]])
    return int(float(text))

