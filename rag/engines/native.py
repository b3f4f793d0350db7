"""`make native`: rebuild xllamacpp from its source distribution for this CPU (opt-in).

    python -m rag.engines.native            # build, smoke-test, adopt (~8 min on 2 cores)
    python -m rag.engines.native --check    # only re-run the smoke test of the existing build

The prebuilt wheel is compiled for plain AVX2. This builds the same version with the
instruction sets /proc/cpuinfo reports (AVX-512, VNNI, BF16 ...), never AMX and never
-march=native: on a VM whose CPU reported AMX, a -march=native build died with "Illegal
instruction" at its first inference. It installs into ~/.cache/icml-rag/native (never into
the venv), then runs one inference in a subprocess; only when that exits cleanly is the build
marked usable (native.json, smoke "ok") and taken by `generate.llamacpp_build = "auto"`.
Otherwise the app keeps the prebuilt wheel and native.json says why.

Offline-safe build options: -DLLAMA_BUILD_BORINGSSL=OFF (it would git-clone BoringSSL),
-DLLAMA_LLGUIDANCE=OFF (a Rust download). Needs cmake and g++ (Debian).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rag.engines.llamacpp import NATIVE_DIR, NATIVE_MARKER

VERSION = "2026.10.11549"
# cpuinfo flag -> ggml CMake option; AMX (amx_tile, amx_int8, amx_bf16) is left off on purpose
ISA = {
    "avx": "GGML_AVX", "avx2": "GGML_AVX2", "fma": "GGML_FMA", "f16c": "GGML_F16C",
    "bmi2": "GGML_BMI2", "avx_vnni": "GGML_AVX_VNNI", "avx512f": "GGML_AVX512",
    "avx512vbmi": "GGML_AVX512_VBMI", "avx512_vnni": "GGML_AVX512_VNNI",
    "avx512_bf16": "GGML_AVX512_BF16",
}
OFF = ("GGML_AMX_TILE", "GGML_AMX_INT8", "GGML_AMX_BF16")
SMOKE = """
import sys, os
sys.path.insert(0, sys.argv[1])
import xllamacpp as x
assert os.path.realpath(x.__file__).startswith(os.path.realpath(sys.argv[1])), x.__file__
p = x.CommonParams()
p.model.path = sys.argv[2]; p.n_ctx = 512; p.n_parallel = 1; p.ui = False
p.api_keys = ["smoke"]; p.cpuparams.n_threads = 2; p.cpuparams_batch.n_threads = 2
s = x.Server(p)
r = s.handle_chat_completions({"messages": [{"role": "user", "content": "Say hi."}],
                               "max_tokens": 8, "temperature": 0})
text = r["choices"][0]["message"]["content"]
assert text.strip(), r
print(x.get_system_info().strip())
"""


def cpu_flags() -> set[str]:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def cmake_args(flags: set[str]) -> tuple[str, str]:
    """(CMAKE_ARGS, a short ISA label) for what this CPU reports."""
    on = [opt for flag, opt in ISA.items() if flag in flags]
    args = ["-DLLAMA_BUILD_BORINGSSL=OFF", "-DLLAMA_LLGUIDANCE=OFF", "-DGGML_NATIVE=OFF",
            *(f"-D{o}=ON" for o in on), *(f"-D{o}=OFF" for o in OFF)]
    label = "+".join(f for f in ("avx2", "avx512f", "avx512_vnni", "avx512_bf16") if f in flags)
    return " ".join(args), label or "baseline"


def smoke(target: Path, gguf: Path) -> tuple[bool, str]:
    """One inference with the build in `target`, in a subprocess: a bad instruction kills
    the child (SIGILL), not us."""
    try:
        proc = subprocess.run([sys.executable, "-c", SMOKE, str(target), str(gguf)],
                              capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        return False, "the smoke inference did not finish in 300 s"
    if proc.returncode != 0:
        sig = f" (signal {-proc.returncode})" if proc.returncode < 0 else ""
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or [""]
        return False, f"the smoke inference exited with {proc.returncode}{sig}: {tail[0][:200]}"
    return True, proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""


def write_marker(info: dict[str, object]) -> None:
    NATIVE_DIR.mkdir(parents=True, exist_ok=True)
    (NATIVE_DIR / NATIVE_MARKER).write_text(json.dumps(info, indent=2) + "\n")


def build(gguf: Path) -> int:
    flags = cpu_flags()
    args, label = cmake_args(flags)
    print(f"CPU reports: {label}; CMAKE_ARGS={args}", flush=True)
    staging = Path(tempfile.mkdtemp(prefix="xllamacpp-native-", dir=NATIVE_DIR.parent))
    env = {**os.environ, "CMAKE_ARGS": args, "NPROC": str(os.cpu_count() or 2)}
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-binary", "xllamacpp",
         "--no-cache-dir", "--target", str(staging), f"xllamacpp=={VERSION}"], env=env)
    build_s = round(time.perf_counter() - started, 1)
    info: dict[str, object] = {"version": VERSION, "isa": label, "cmake_args": args,
                               "build_s": build_s, "built": time.strftime("%Y-%m-%d %H:%M UTC",
                                                                         time.gmtime())}
    if proc.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        write_marker({**info, "smoke": f"build failed (pip exited with {proc.returncode})"})
        print(f"native build failed after {build_s} s: the app keeps the prebuilt wheel")
        return 1
    ok, detail = smoke(staging, gguf)
    if not ok:
        shutil.rmtree(staging, ignore_errors=True)
        write_marker({**info, "smoke": f"failed: {detail}"})
        print(f"native build crashed its smoke test ({detail}): the app keeps the prebuilt wheel")
        return 1
    for name in ("xllamacpp", *(p.name for p in staging.glob("xllamacpp-*.dist-info"))):
        shutil.rmtree(NATIVE_DIR / name, ignore_errors=True)
    NATIVE_DIR.mkdir(parents=True, exist_ok=True)
    for item in staging.iterdir():
        shutil.move(str(item), NATIVE_DIR / item.name)
    shutil.rmtree(staging, ignore_errors=True)
    write_marker({**info, "smoke": "ok", "system_info": detail})
    print(f"native build ({label}) ready in {build_s} s and passed its smoke test: "
          f"generate.llamacpp_build = \"auto\" now takes it ({NATIVE_DIR})")
    return 0


def main(argv: list[str] | None = None) -> int:
    from rag.config import load_settings, offline_environment
    from rag.models import prepare_gguf

    offline_environment()
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="re-run the smoke test only")
    args = ap.parse_args(argv)
    settings = load_settings(generate={"preset": "qwen2.5-0.5b"})
    gguf = prepare_gguf(settings, progress=True)
    if args.check:
        ok, detail = smoke(NATIVE_DIR, gguf)
        print("smoke ok: " + detail if ok else f"smoke FAILED: {detail}")
        return 0 if ok else 1
    return build(gguf)


if __name__ == "__main__":
    raise SystemExit(main())
