"""`rag serve` as a service manager runs it: SIGTERM gives a clean exit (code 0, no traceback)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from typing import Any

from rag.config import ROOT
from tests.ui_browser import free_port


def test_sigterm_while_serving_is_a_clean_exit(settings: Any) -> None:
    port = free_port()
    env = {**os.environ, "RAG_PATHS__DATA": str(settings.paths.data)}
    proc = subprocess.Popen([sys.executable, "-m", "rag.cli", "-v", "serve", "--port", str(port)],
                            env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        deadline = time.monotonic() + 180
        while True:
            assert proc.poll() is None, proc.communicate()[1]
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2).read(100)
                break
            except OSError:
                assert time.monotonic() < deadline, "rag serve did not come up"
                time.sleep(0.5)
        proc.send_signal(signal.SIGTERM)  # while the models may still be warming up
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err[-2000:]
    assert "Traceback" not in err and "server closed" in err, err[-2000:]
    try:
        urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2)
        raise AssertionError("the port still answers after the exit")
    except OSError:
        pass
