"""The tree stays ruff- and mypy-clean (DESIGN.md habit 10); `rag` never imports gradio."""

from __future__ import annotations

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
    code = ("import sys, rag, rag.assistant, rag.cli; "
            "print(sorted(m for m in ('gradio', 'torch', 'transformers', 'chromadb') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "gradio" not in out.stdout
