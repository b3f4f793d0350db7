"""The first answers of a fresh `rag serve` while it titles the papers in the background.

Copies the index (`data/`) without its title cache, starts `rag serve` from the code folder
given (this checkout, or a `git worktree` of an older commit, to compare), waits until the
background titling has begun, then asks each question from a new browser page and prints the
seconds from send to the finished answer:

    .venv/bin/python bench/first_answer.py . "How does FedScar deal with client drift?"
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tests.ui_browser import ask, chromium_page, free_port, page_state  # noqa: E402


def main() -> None:
    code = Path(sys.argv[1]).resolve()
    work = Path(tempfile.mkdtemp(prefix="rag-first-"))
    data = work / "data"
    shutil.copytree(ROOT / "data", data)
    (data / "titles.json").unlink(missing_ok=True)  # every paper needs a title from the model
    port, log = free_port(), work / "serve.log"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "RAG_PATHS__DATA": str(data),
           "PYTHONPATH": str(code)}
    proc = subprocess.Popen([sys.executable, "-m", "rag.cli", "-v", "serve", "--port", str(port)],
                            cwd=code, env=env, stdout=subprocess.DEVNULL, stderr=log.open("w"))
    try:
        while "writing titles for" not in log.read_text():
            if proc.poll() is not None:
                sys.exit(log.read_text()[-1500:])
            time.sleep(0.5)
        time.sleep(3)  # the first wave of title calls is decoding
        for q in sys.argv[2:]:
            with chromium_page() as page:
                page.goto(f"http://127.0.0.1:{port}/")
                page.wait_for_selector("#question textarea", timeout=60_000)
                t0 = time.monotonic()
                ask(page, q)
                page.wait_for_selector("#status .status-done, #status .status-error",
                                       timeout=300_000)
                print(f"{time.monotonic() - t0:.1f} s  {q} | {page_state(page)['answer'][:120]}",
                      flush=True)
    finally:
        proc.terminate()
        proc.wait(60)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
