"""The library's own errors. Each message names the input at fault and what to do."""


class RagError(Exception):
    """Base class: the CLI and the UI turn these into one-line messages."""


class ConfigError(RagError):
    pass


class CorpusError(RagError):
    """A seed file that cannot be read; the message names the file and line."""


class StoreError(RagError):
    """The index is missing, stale or broken."""


class ModelError(RagError):
    """A model that is missing, corrupt or cannot be loaded."""


class InputError(RagError):
    """A question or argument that cannot be used as given."""
