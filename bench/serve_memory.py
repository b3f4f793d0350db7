"""Peak memory of the app as a user runs it: a real `rag serve` process, asked through Chromium.

The answer bench (bench.py) measures inside one worker process that also ingests `seeds/` into
a throwaway index, which `rag serve` never does. This starts `rag serve` on the prepared index
(`paths.data`) with the chosen preset and engine, waits for its models, asks its own
questions one after another, then `--concurrent` of them at once from separate browser
sessions, then two in other languages, and reads the server's own peak resident set (VmHWM
in /proc/<pid>/status) after each phase. Chromium runs in its own processes and is not counted.

    nice -n 19 .venv/bin/python bench/serve_memory.py --preset qwen2.5-1.5b --engine llama.cpp
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

from common import BENCH, ROOT, machine_load, table, write_json

sys.path.insert(0, str(ROOT))
from tests.ui_browser import ask, chromium, free_port, page_state  # noqa: E402

QUESTIONS = [  # about named papers, in this script's own words: 5 one at a time, the last 4 at once
    "What kind of reward signal does SSL4RL use?",
    "What does SecFid measure?",
    "How does PRISM defend against backdoor attacks?",
    "What is FedScar's approach to client drift?",
    "What does TaRO optimize?",
    "Which papers use flow policies for reinforcement learning?",
    "What problem does SVOO address in video generation?",
    "How is FIRE-BENCH built?",
]
OTHER_LANGUAGES = [  # then these, one at a time: lingua's second stage (rag/language.py) loads
    "¿Qué tipo de recompensa usa SSL4RL?",  # high-accuracy models for them and unloads them after
    "Wie geht FedScar mit Client-Drift um?",
]


def status_kb(pid: int) -> dict[str, int]:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmHWM", "VmRSS"):
            out[key] = int(rest.split()[0])
    return out


def mb(pid: int) -> dict[str, float]:
    s = status_kb(pid)
    return {"rss_mb": round(s["VmRSS"] / 1024), "peak_rss_mb": round(s["VmHWM"] / 1024)}


def one(browser: Any, url: str, question: str, timeout_s: float) -> dict[str, Any]:
    ctx = browser.new_context()
    try:
        page = ctx.new_page()
        page.goto(url)
        page.wait_for_selector("#question textarea", timeout=120_000)
        t0 = time.monotonic()
        ask(page, question)
        page.wait_for_selector("#status .status-done, #status .status-error",
                               timeout=timeout_s * 1000)
        st = page_state(page)
        return {"question": question, "seconds": round(time.monotonic() - t0, 2),
                "status": st["status"], "cited": st["cited"], "answer": st["answer"][:200]}
    finally:
        ctx.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="qwen2.5-1.5b")
    ap.add_argument("--engine", default="llama.cpp")
    ap.add_argument("--concurrent", type=int, default=4)
    ap.add_argument("--timeout", type=float, default=600, help="seconds per answer")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    out_path = args.out or BENCH / f"results-serve-memory-{args.preset}.json"
    port = free_port()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "RAG_GENERATE__PRESET": args.preset,
           "RAG_GENERATE__ENGINE": args.engine}
    url = f"http://127.0.0.1:{port}/"
    with tempfile.NamedTemporaryFile("w+", suffix=".log", delete=False) as log:
        proc = subprocess.Popen([sys.executable, "-m", "rag.cli", "-v", "serve", "--port", str(port)],
                                env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=log)
    phases: list[dict[str, Any]] = []
    answers: list[dict[str, Any]] = []
    try:
        deadline = time.monotonic() + 300
        while True:
            if proc.poll() is not None:
                sys.exit(f"rag serve exited:\n{Path(log.name).read_text()[-2000:]}")
            try:
                urllib.request.urlopen(url, timeout=2).read(100)
                break
            except OSError:
                if time.monotonic() > deadline:
                    sys.exit("rag serve did not come up in 300 s")
                time.sleep(0.5)
        engine_loaded = re.compile(r"(?:llama\.cpp \(.*\) )?\bloaded \S+ in [\d.]+ s")
        while not engine_loaded.search(Path(log.name).read_text()):  # the engine's load line
            time.sleep(0.5)
        time.sleep(5)  # warm-up: prefix caches
        phases.append({"phase": "served, models loaded", **mb(proc.pid)})
        with chromium() as browser:
            for q in QUESTIONS[:5]:
                answers.append(one(browser, url, q, args.timeout))
            phases.append({"phase": "5 questions, one at a time", **mb(proc.pid)})
            done: list[dict[str, Any]] = []
            threads = [threading.Thread(target=lambda q=q: done.append(
                one_in_own_browser(url, q, args.timeout)))
                for q in QUESTIONS[-args.concurrent:]]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            answers += done
            phases.append({"phase": f"{args.concurrent} questions at once", **mb(proc.pid)})
            for q in OTHER_LANGUAGES:
                answers.append(one(browser, url, q, args.timeout))
            phases.append({"phase": f"{len(OTHER_LANGUAGES)} in other languages, one at a time",
                           **mb(proc.pid)})
    finally:
        proc.terminate()
        proc.wait(60)
    res = {"preset": args.preset, "engine": args.engine, "machine": machine_load(),
           "phases": phases, "peak_rss_mb": max(p["peak_rss_mb"] for p in phases),
           "answers": answers,
           "answered": sum(1 for a in answers if "status-done" in a["status"])}
    write_json(out_path, res)
    print(table(["phase", "RSS MB", "peak RSS MB"],
                [[p["phase"], p["rss_mb"], p["peak_rss_mb"]] for p in phases]))
    print(f"answered {res['answered']}/{len(answers)}; peak RSS {res['peak_rss_mb']} MB "
          f"(target <= 2500 MB for the 1.5B on llama.cpp) -> {out_path}")


def one_in_own_browser(url: str, question: str, timeout_s: float) -> dict[str, Any]:
    """Playwright's sync API is per thread: each concurrent user gets its own browser."""
    with chromium() as browser:
        return one(browser, url, question, timeout_s)


if __name__ == "__main__":
    main()
