"""Training data: token files, the batch-id to sequence mapping, and the providers (local files,
HTTP byte ranges, the TCP data server) that all return the same tokens for the same batch."""

from .provider import DataError, DataProvider
from .sequences import SequenceIndex, shuffled_index

__all__ = ["DataError", "DataProvider", "SequenceIndex", "shuffled_index"]
