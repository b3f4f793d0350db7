"""`rag serve` as a service manager runs it: SIGTERM gives a clean exit (code 0, no traceback),
soon, both before the models are up and after the server has answered and is titling papers
or filling the paper cache in the background."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from rag.config import ROOT
from tests.ui_browser import ask, chromium_page, free_port, page_state

EXIT_S = 20  # a service manager waits ~90 s before SIGKILL; a clean stop should take seconds


def _serve(data: Path, port: int, log: Path, **env_vars: str) -> subprocess.Popen:
    env = {**os.environ, "RAG_PATHS__DATA": str(data), **env_vars}
    proc = subprocess.Popen([sys.executable, "-m", "rag.cli", "-v", "serve", "--port", str(port)],
                            env=env, cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=log.open("w"), text=True)
    deadline = time.monotonic() + 180
    while True:
        assert proc.poll() is None, log.read_text()[-2000:]
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2).read(100)
            return proc
        except OSError:
            assert time.monotonic() < deadline, "rag serve did not come up"
            time.sleep(0.5)


def _terminate(proc: subprocess.Popen, port: int, log: Path) -> float:
    """SIGTERM; the seconds until the process exited. Checks the exit was clean."""
    t0 = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=EXIT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise AssertionError(f"rag serve still ran {EXIT_S} s after SIGTERM:\n"
                             + log.read_text()[-2000:]) from None
    took = time.monotonic() - t0
    err = log.read_text()
    assert proc.returncode == 0, err[-2000:]
    assert "Traceback" not in err and "server closed" in err, err[-2000:]
    try:
        urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2)
        raise AssertionError("the port still answers after the exit")
    except OSError:
        pass
    return took


def test_sigterm_while_serving_is_a_clean_exit(settings: Any, tmp_path: Path) -> None:
    port = free_port()
    proc = _serve(settings.paths.data, port, tmp_path / "serve.log")
    try:
        _terminate(proc, port, tmp_path / "serve.log")  # while the models may still be warming up
    finally:
        if proc.poll() is None:
            proc.kill()


def test_sigterm_after_answering_ends_the_background_titles_too(settings: Any,
                                                                tmp_path: Path) -> None:
    """After the first answer the server titles the untitled papers with the model, in
    worker threads. SIGTERM must end those model calls rather than wait for all of them,
    and a title cut short must not be cached as if it were whole."""
    data = tmp_path / "data"
    shutil.copytree(settings.paths.data, data)
    (data / "titles.json").unlink(missing_ok=True)  # every paper needs a title from the model
    log = tmp_path / "serve.log"
    port = free_port()
    proc = _serve(data, port, log)
    try:
        with chromium_page() as page:
            page.goto(f"http://127.0.0.1:{port}/")
            ask(page, "What kind of reward signal does SSL4RL use?")
            page.wait_for_selector("#status .status-done", timeout=240_000)
            assert "SSL4RL" in page_state(page)["answer"] or page_state(page)["cited"]
        deadline = time.monotonic() + 120
        while not (data / "titles.json").is_file():  # the background titling has begun
            assert time.monotonic() < deadline, log.read_text()[-2000:]
            time.sleep(0.5)
        _terminate(proc, port, log)
    finally:
        if proc.poll() is None:
            proc.kill()
    from rag.titles import TitleCache

    cached = TitleCache(data / "titles.json")
    assert len(cached.entries) < 57, "all titles were written before SIGTERM: nothing was cut short"


def test_serve_fills_the_paper_cache_in_the_background_and_sigterm_ends_it(
        settings: Any, tmp_path: Path) -> None:
    """With the titles written, `rag serve` prefills the papers' prompts into llama.cpp's host
    cache (rag/paper_cache.py) while the chat is open; SIGTERM stops it after the prompt in
    flight, not after all of them."""
    data = tmp_path / "data"
    shutil.copytree(settings.paths.data, data)
    log = tmp_path / "serve.log"
    port = free_port()
    proc = _serve(data, port, log, RAG_GENERATE__ENGINE="llama.cpp")
    try:
        deadline = time.monotonic() + 600  # the models load, then any missing titles
        while "paper cache: prefilling" not in log.read_text():
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()[-2000:]
            time.sleep(0.5)
        time.sleep(3)  # a few prompts in
        took = _terminate(proc, port, log)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert took < EXIT_S
    done = [line for line in log.read_text().splitlines() if "prompts prefilled" in line]
    assert done, log.read_text()[-2000:]
    sent = int(done[-1].split("paper cache: ")[1].split(" of ")[0])
    assert 0 < sent < 57, done[-1]  # some were prefilled, and the rest were not waited for
