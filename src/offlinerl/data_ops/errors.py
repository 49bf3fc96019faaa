"""The one error of data operations."""

from __future__ import annotations

__all__ = ["DataOpError"]


class DataOpError(ValueError):
    """A data operation refused its input or its options; one line naming the file, row or option and the problem.
    Nothing was written."""
