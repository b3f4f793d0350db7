"""Helpers shared by the benchmark scripts: offline env, percentiles, load checks, tables."""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

# Before anything imports huggingface_hub: nothing may come from a model hub.
for _k, _v in {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_HUB_DISABLE_TELEMETRY": "1",
               "ANONYMIZED_TELEMETRY": "False", "TOKENIZERS_PARALLELISM": "false"}.items():
    os.environ[_k] = _v

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
LOAD_LIMIT = 1.3  # 1-minute load average above which numbers are marked as contended
BUSY = 0.3  # cores used by other processes during a measurement that mark it as contended


def pct(xs: list[float], q: float) -> float | None:
    """The q-th percentile (0-100), linear interpolation; None for no samples."""
    if not xs:
        return None
    s = sorted(xs)
    pos = (len(s) - 1) * q / 100
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def median(xs: list[float]) -> float | None:
    return statistics.median(xs) if xs else None


def peak_rss_mb() -> float:
    """Peak resident set of this process so far (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def other_cpu_percent(seconds: float = 1.0) -> float:
    """CPU% used by processes outside this one's tree, sampled over `seconds` (100 = one core)."""
    import psutil

    me = psutil.Process()
    mine = {me.pid, *(c.pid for c in me.children(recursive=True))}
    procs = [p for p in psutil.process_iter() if p.pid not in mine]
    for p in procs:
        try:
            p.cpu_percent(None)
        except psutil.Error:
            pass
    time.sleep(seconds)
    total = 0.0
    for p in procs:
        try:
            total += p.cpu_percent(None)
        except psutil.Error:
            pass
    return round(total, 1)


class CpuWatch:
    """Cores' worth of CPU that other processes used since construction (Linux /proc/stat)."""

    def __init__(self) -> None:
        self.t, self.busy, self.mine = time.perf_counter(), _busy_s(), _own_cpu_s()

    def other_cores(self) -> float:
        wall = time.perf_counter() - self.t
        others = (_busy_s() - self.busy) - (_own_cpu_s() - self.mine)
        return round(max(0.0, others / wall), 2) if wall > 0 else 0.0


def quiet(max_wait_s: float, sample_s: float = 1.0) -> tuple[float, bool]:
    """Wait until other processes use < BUSY cores (sampled over `sample_s`), at most
    `max_wait_s` seconds; returns (seconds waited, whether it is quiet now)."""
    t = time.perf_counter()
    while True:
        w = CpuWatch()
        time.sleep(sample_s)
        if w.other_cores() < BUSY:
            return time.perf_counter() - t, True
        if time.perf_counter() - t >= max_wait_s:
            return time.perf_counter() - t, False


def _busy_s() -> float:
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return (sum(v[:8]) - v[3] - v[4]) / os.sysconf("SC_CLK_TCK")  # all but idle and iowait


def _own_cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def machine_load() -> dict[str, Any]:
    """The load average and what other processes use now: the contention note in each result.
    The load average counts this benchmark too, so only the other processes' share decides."""
    load1, load5, _ = os.getloadavg()
    other = other_cpu_percent()
    return {"load1": round(load1, 2), "load5": round(load5, 2), "other_cpu_percent": other,
            "contended": other >= 100 * BUSY}


def wait_for_idle(max_wait_s: float) -> dict[str, Any]:
    """Wait (up to `max_wait_s`) until the machine is quiet; returns the last load sample."""
    deadline = time.monotonic() + max_wait_s
    while True:
        load = machine_load()
        if (load["load1"] < LOAD_LIMIT and not load["contended"]) or time.monotonic() >= deadline:
            return load
        print(f"  waiting for a quiet machine: load {load['load1']}, other processes "
              f"{load['other_cpu_percent']}% CPU", flush=True)
        time.sleep(min(30.0, max(1.0, deadline - time.monotonic())))


def fmt(v: Any, digits: int = 2) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:.{digits}f}"
    return str(v)


def table(headers: list[str], rows: list[list[Any]]) -> str:
    cells = [[fmt(c) for c in r] for r in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h)
              for i, h in enumerate(headers)]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))
    out = [line, "-" * len(line)]
    out += ["  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in
                      enumerate(zip(r, widths, strict=True))) for r in cells]
    return "\n".join(out)


def write_json(path: Path, data: Any) -> None:
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def run_child(args: list[str], timeout: float | None = None) -> dict[str, Any]:
    """Run `python <args> --out <tmp>` in a fresh process and return the JSON it wrote."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="rag-bench-") as tmp:
        out = Path(tmp) / "out.json"
        proc = subprocess.run([sys.executable, *args, "--out", str(out)], timeout=timeout,
                              cwd=ROOT)
        if proc.returncode != 0 or not out.is_file():
            return {"error": f"{' '.join(args[:3])} exited with {proc.returncode}"}
        return json.loads(out.read_text())
