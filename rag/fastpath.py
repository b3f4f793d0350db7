"""Speedups applied to a loaded transformers model, in place; neither changes greedy output.

- `split_small_matmuls`: a decode step multiplies one token's activations by every weight
  matrix (a matrix-vector product). MKL runs those on one core here: 19 GB/s of weights
  read with 1 or 2 threads, against 45 GB/s that 2 cores can read. Each `nn.Linear` of
  the model instead splits its output rows across `threads` workers when at most
  `MAX_ROWS` tokens come in: 1.5x the matrix-vector throughput (`bench/` measures the
  end-to-end effect). Prefill and prompt-lookup verification (more rows) keep MKL's own
  threaded matrix-matrix path. Each output row is still the same dot product over the same
  row of weights: bitwise-equal logits on the Qwen models (tested), float rounding apart
  on odd shapes.
- `prefill_only_uncached`: a fix for prompt-lookup decoding with a reused KV cache.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

MAX_ROWS = 4  # measured: split wins 1.5-1.6x at 1-4 rows, 1.05x at 11, 0.94x at 32


def split_small_matmuls(model: Any, threads: int, enabled: Callable[[], bool] = lambda: True) -> int:
    """Make every nn.Linear of `model` split few-row products over `threads` threads
    while `enabled()` is true (checked on every call, so a setting can switch it).

    Returns the number of layers changed (0 when threads < 2). The weight parts are views,
    so no memory is added; one executor (threads - 1 workers) is shared by all layers.
    """
    import torch
    import torch.nn.functional as F

    if threads < 2:
        return 0
    pool = ThreadPoolExecutor(threads - 1, thread_name_prefix="rag-matmul")
    changed = 0
    for module in model.modules():
        if not isinstance(module, torch.nn.Linear) or module.out_features < 2 * threads:
            continue
        bounds = [module.out_features * i // threads for i in range(threads + 1)]
        weights = [module.weight[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]
        biases = (
            [module.bias[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]
            if module.bias is not None
            else [None] * threads
        )
        original = module.forward

        def forward(
            x: Any,
            original: Any = original,
            weights: list[Any] = weights,
            biases: list[Any] = biases,
            in_features: int = module.in_features,
        ) -> Any:
            if x.numel() > MAX_ROWS * in_features or torch.is_grad_enabled() or not enabled():
                return original(x)
            mode = torch.is_inference_mode_enabled()  # grad modes are per thread: pass it on
            parts = zip(weights[1:], biases[1:], strict=True)
            others = [pool.submit(_linear, mode, x, w, b) for w, b in parts]
            first = F.linear(x, weights[0], biases[0])
            return torch.cat([first, *(f.result() for f in others)], dim=-1)

        module.forward = forward  # type: ignore[method-assign,assignment]
        changed += 1
    return changed


def _linear(inference: bool, x: Any, weight: Any, bias: Any) -> Any:
    import torch
    import torch.nn.functional as F

    with torch.inference_mode(inference), torch.no_grad():
        return F.linear(x, weight, bias)


def prefill_only_uncached(model: Any) -> None:
    """Make assisted decoding (prompt lookup) prefill only the tokens a passed-in KV cache
    does not cover.

    In transformers 5.23 plain decoding slices the prompt by the cache length, but the
    first step of assisted decoding feeds the whole prompt again: the prefix is appended to
    the cache twice, positions shift, the text changes and no time is saved (measured: 4/5
    answers the same as without the cache, first token 1.55 s instead of 1.15 s). This
    wraps the model's `prepare_inputs_for_generation` on this instance to apply the same
    slice; it changes nothing when no cache is passed.
    """
    original = model.prepare_inputs_for_generation

    @functools.wraps(original)  # generate() validates kwargs against this signature
    def prepare(input_ids: Any, *args: Any, **kwargs: Any) -> Any:
        cache = kwargs.get("past_key_values")
        if (
            not args
            and kwargs.get("next_sequence_length") is None
            and kwargs.get("is_first_iteration")
            and cache is not None
            and kwargs.get("inputs_embeds") is None
        ):
            past = cache.get_seq_length()
            if 0 < past < input_ids.shape[1]:
                kwargs["next_sequence_length"] = input_ids.shape[1] - past
        return original(input_ids, *args, **kwargs)

    model.prepare_inputs_for_generation = prepare
