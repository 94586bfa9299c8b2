"""The data layer's one error type."""

from __future__ import annotations


class DataError(Exception):
    """A data set, file or cache cannot be used as asked. The message names the file or field,
    what was found and what was expected."""
