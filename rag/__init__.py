"""Offline, cited question answering over ICML 2026 abstracts. Importing this is cheap:
models, chromadb and transformers load on first use, and gradio never."""

__version__ = "0.1.0"
