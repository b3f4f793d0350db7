"""Give freed heap memory back to the system after a big one-off load (glibc only).

glibc keeps memory that Python, torch and Rust extensions free in its arenas for reuse, so a
load that allocates and frees a lot (embedding a batch of abstracts, building lingua's
detector, llama.cpp's loader) leaves the process that much larger until exit. `malloc_trim`
returns the free pages; it moves no live object and changes no result.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
from typing import Any

log = logging.getLogger(__name__)

_libc: Any = None


def trim_heap() -> None:
    """Return free heap pages to the OS (a no-op where libc has no malloc_trim)."""
    global _libc
    if _libc is None:
        try:
            _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
            _libc.malloc_trim.argtypes = [ctypes.c_size_t]
        except (OSError, AttributeError):
            _libc = False
    if _libc:
        _libc.malloc_trim(0)
