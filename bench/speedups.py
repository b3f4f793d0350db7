"""Speedup variants applied to a live Assistant from outside rag/, each undoable but int8.

Every variant but `default` starts from plain transformers decoding (no prompt lookup, no
prefix-cache reuse) and switches on only its own parts, so each is measured alone and in
combination against the same reference:
  baseline  plain greedy decoding: the reference for the bounds and for llama.cpp
  default   the shipped settings (config/default.toml), whatever they switch on
  lookup    settings.generate.prompt_lookup_num_tokens = N
  prefixkv  settings.generate.reuse_prefix_cache = True: each system prompt is prefilled
            once and later prompts start after it (rag/generate.py)
  split     settings.generate.split_small_matmuls = True: one-token matmuls split over
            the cores (rag/fastpath.py)
  ctxN      settings.answer.context_tokens = N (e.g. ctx700 against the 450 default)
  int8      weight-only int8, per-output-channel scales (torchao); irreversible, so last
  a+b       both at once, e.g. lookup+prefixkv
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

from rag import models
from rag.assistant import Assistant

ORDER = ("baseline", "default", "lookup", "ctx", "prefixkv", "split", "int8")


def order_key(name: str) -> float:
    """Run order: baseline first, combinations ("lookup+prefixkv") after their parts, int8
    (irreversible) last."""
    if "+" in name:
        return max(order_key(p) for p in name.split("+")) + 0.5
    return 100.0 if name == "int8" else ORDER.index("ctx" if name.startswith("ctx") else name)


@contextmanager
def setting(obj: Any, name: str, value: Any) -> Iterator[None]:
    """Set a field of a (mutable) pydantic settings section for the block, then restore it."""
    old = getattr(obj, name)
    setattr(obj, name, value)
    try:
        yield
    finally:
        setattr(obj, name, old)


def quantize_int8(a: Assistant) -> dict[str, Any]:
    """Weight-only int8 with per-channel scales on every nn.Linear (lm_head too), in place."""
    model, _ = a.generator.engine._load()  # type: ignore[attr-defined]
    from torchao.quantization import Int8WeightOnlyConfig, quantize_

    t = time.perf_counter()
    quantize_(model, Int8WeightOnlyConfig())  # granularity PerRow: one scale per out channel
    return {"quantize_s": round(time.perf_counter() - t, 2), "backend": "torchao",
            "linear_weight_type": type(model.lm_head.weight).__name__}


@contextmanager
def variant(name: str, a: Assistant, lookup_tokens: int) -> Iterator[dict[str, Any]]:
    """Apply variant `name` to `a` for the block; yields notes to store with its results."""
    gen = a.settings.generate
    notes: dict[str, Any] = {}
    if name == "default":
        notes.update(prompt_lookup_num_tokens=a.generator.prompt_lookup_num_tokens,
                     reuse_prefix_cache=gen.reuse_prefix_cache,
                     split_small_matmuls=gen.split_small_matmuls,
                     context_tokens=models.context_tokens(a.settings))
        yield notes
        return
    with ExitStack() as stack:
        stack.enter_context(setting(gen, "prompt_lookup_num_tokens", 0))
        stack.enter_context(setting(gen, "reuse_prefix_cache", False))
        stack.enter_context(setting(gen, "split_small_matmuls", False))
        for part in name.split("+"):
            notes.update(stack.enter_context(_part(part, a, lookup_tokens)))
        yield notes


@contextmanager
def _part(name: str, a: Assistant, lookup_tokens: int) -> Iterator[dict[str, Any]]:
    notes: dict[str, Any] = {}
    if name == "baseline":
        yield notes
    elif name == "lookup":
        notes["prompt_lookup_num_tokens"] = lookup_tokens
        with setting(a.settings.generate, "prompt_lookup_num_tokens", lookup_tokens):
            yield notes
    elif name.startswith("ctx") and name[3:].isdigit():
        notes["context_tokens"] = int(name[3:])
        with setting(a.settings.answer, "context_tokens", int(name[3:])):
            yield notes
    elif name == "prefixkv":
        with setting(a.settings.generate, "reuse_prefix_cache", True):
            yield notes
    elif name == "split":
        with setting(a.settings.generate, "split_small_matmuls", True):
            yield notes
    elif name == "int8":
        notes.update(quantize_int8(a))
        yield notes
    else:
        raise ValueError(f"unknown variant {name!r}; choose from baseline, default, lookup, "
                         "ctx<N>, prefixkv, split, int8")
