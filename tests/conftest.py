"""Shared fixtures: real models, real Chroma. Each heavy object is built once per session."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from rag.config import ROOT, Settings, load_settings, offline_environment

offline_environment()  # offline, no telemetry, OMP_WAIT_POLICY: before any test loads torch, as the app does

DATA = Path(__file__).parent / "data"
SEEDS = ROOT / "seeds"


def make_settings(data: Path, seeds: Path = SEEDS, **sections: dict) -> Settings:
    base = load_settings()
    paths = {"seeds": seeds, "data": data, "models": base.paths.models}
    return load_settings(paths=paths, **sections)


@pytest.fixture(scope="session")
def embedder():
    from rag.embed import Embedder

    e = Embedder(load_settings().embed)
    e.warm_up()
    return e


@pytest.fixture(scope="session")
def index_dir(tmp_path_factory, embedder) -> Path:
    """The whole seed corpus ingested once into a private embedded Chroma."""
    from rag.ingest import ingest
    from rag.store import Store

    data = tmp_path_factory.mktemp("index")
    s = make_settings(data)
    ingest(s, Store(s.store, s.paths.data), embedder)
    return data


@pytest.fixture(scope="session")
def settings(index_dir) -> Settings:
    return make_settings(index_dir)


@pytest.fixture(scope="session")
def retriever(settings, embedder):
    from rag.retrieve import Retriever
    from rag.store import Store

    return Retriever(settings.retrieve, Store(settings.store, settings.paths.data), embedder)


@pytest.fixture(scope="session")
def assistant(settings, embedder, retriever):
    """The real assistant with the real default generator and translation model (each
    loaded on first use), as `Assistant.from_settings` builds it."""
    from rag.assistant import Assistant
    from rag.generate import Generator
    from rag.translate import translation_settings

    translation = translation_settings(settings)
    return Assistant(settings, retriever.store, embedder, retriever, Generator(settings),
                     Generator(translation) if translation else None)


@pytest.fixture()
def mini_seeds(tmp_path) -> Path:
    d = tmp_path / "seeds"
    shutil.copytree(DATA / "mini", d)
    return d
