"""Speedup variants applied to a live Assistant from outside rag/, each undoable but int8.

Each variant is a context manager over an Assistant whose Generator is already loaded:
  lookup    settings.generate.prompt_lookup_num_tokens = N (a setting the library reads)
  ctxN      settings.answer.context_tokens = N (e.g. ctx450 against a 700 baseline)
  prefixkv  the fixed chat prefix (system prompt + "Passages:") prefilled once; each call
            gets a copy of its KV cache, so prefill starts after it
  int8      weight-only int8, per-output-channel scales (torchao); irreversible, so last
  a+b       both at once, e.g. lookup+prefixkv
"""

from __future__ import annotations

import copy
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

from rag.assistant import Assistant
from rag.prompt import SYSTEM

ORDER = ("baseline", "lookup", "ctx", "prefixkv", "int8")


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


class PrefixCache:
    """Reuse the KV cache of the chat prefix every prompt starts with.

    Wraps `model.generate` on the instance (the Generator calls it with keyword arguments
    only): when input_ids start with the cached prefix, a deep copy of its DynamicCache is
    passed as past_key_values and generate() prefills only the rest.
    """

    def __init__(self, a: Assistant) -> None:
        import torch

        model, tok = a.generator._load()
        # Two prompts that differ right after "Passages:\n": their common token prefix is
        # what every real prompt shares (one token is held back in case of a BPE merge).
        p1, p2 = (tok(a.generator.format_chat(SYSTEM, f"Passages:\n[1] {x}\n\nQuestion: {y}"),
                      add_special_tokens=False)["input_ids"]
                  for x, y in (("A (000-01): a.", "b?"), ("Zeta (004-19): z.", "Why?")))
        n = next(i for i, (u, v) in enumerate(zip(p1, p2, strict=False)) if u != v) - 1
        self.ids = torch.tensor(p1[:n])
        t = time.perf_counter()
        with torch.inference_mode():
            self.cache = model(self.ids[None], use_cache=True).past_key_values
        self.build_s = time.perf_counter() - t
        self.model, self.hits = model, 0
        self._generate = model.generate

    @property
    def tokens(self) -> int:
        return int(self.ids.numel())

    def generate(self, **kwargs: Any) -> Any:
        ids = kwargs["input_ids"]
        n = self.tokens
        if ids.shape[1] > n and bool((ids[0, :n] == self.ids).all()):
            kwargs["past_key_values"] = copy.deepcopy(self.cache)
            self.hits += 1
        return self._generate(**kwargs)

    def __enter__(self) -> PrefixCache:
        self.model.generate = self.generate  # an instance attribute shadows the method
        return self

    def __exit__(self, *exc: object) -> None:
        del self.model.generate


def quantize_int8(a: Assistant) -> dict[str, Any]:
    """Weight-only int8 with per-channel scales on every nn.Linear (lm_head too), in place."""
    model, _ = a.generator._load()
    from torchao.quantization import Int8WeightOnlyConfig, quantize_

    t = time.perf_counter()
    quantize_(model, Int8WeightOnlyConfig())  # granularity PerRow: one scale per out channel
    return {"quantize_s": round(time.perf_counter() - t, 2), "backend": "torchao",
            "linear_weight_type": type(model.lm_head.weight).__name__}


@contextmanager
def variant(name: str, a: Assistant, lookup_tokens: int) -> Iterator[dict[str, Any]]:
    """Apply variant `name` to `a` for the block; yields notes to store with its results."""
    notes: dict[str, Any] = {}
    if "+" in name:  # a combination: each part applied, notes merged
        with ExitStack() as stack:
            for part in name.split("+"):
                notes.update(stack.enter_context(variant(part, a, lookup_tokens)))
            yield notes
    elif name == "baseline":
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
        with PrefixCache(a) as pc:
            notes.update(prefix_tokens=pc.tokens, prefix_build_s=round(pc.build_s, 3))
            yield notes
            notes["prefix_hits"] = pc.hits
    elif name == "int8":
        notes.update(quantize_int8(a))
        yield notes
    else:
        raise ValueError(f"unknown variant {name!r}; choose from baseline, lookup, "
                         "ctx<N>, prefixkv, int8")
