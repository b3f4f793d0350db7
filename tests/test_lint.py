"""The tree stays ruff- and mypy-clean (DESIGN.md habit 10); `rag` never imports gradio."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def test_ruff_clean():
    out = subprocess.run([str(BIN / "ruff"), "check", "rag", "ui", "tests"], cwd=ROOT,
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stdout


def test_mypy_clean():
    out = subprocess.run([str(BIN / "mypy"), "rag", "ui"], cwd=ROOT, capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stdout


def test_importing_rag_is_cheap_and_never_loads_gradio():
    """Models load on first use (DESIGN.md habit 2): importing the library or the CLI pulls in
    none of the heavy libraries, and the library never imports the UI's gradio."""
    heavy = ("gradio", "torch", "transformers", "sentence_transformers", "chromadb")
    code = ("import json, sys, rag, rag.assistant, rag.cli; "
            f"print(json.dumps(sorted(m for m in {heavy!r} if m in sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []
