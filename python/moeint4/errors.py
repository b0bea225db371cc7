"""MoeInt4Error: every non-success moeint4_status, with the library's own words."""
from __future__ import annotations

from typing import Optional

from ._abi import STATUS_NAMES


class MoeInt4Error(RuntimeError):
    """A libmoeint4 call failed.

    Attributes:
        status: the numeric moeint4_status (1 = MOEINT4_INVALID_ARGUMENT, ...).
        status_name: its name, e.g. "MOEINT4_INVALID_ARGUMENT".
        message: what moeint4_last_error() said, e.g. "topk_ids[3][1] = 130 is
            outside [0, 128)".
        function: the ABI function that failed.
    """

    def __init__(self, status: int, message: str, function: Optional[str] = None,
                 status_name: Optional[str] = None) -> None:
        self.status = int(status)
        self.status_name = status_name or STATUS_NAMES.get(self.status, "MOEINT4_UNKNOWN_STATUS")
        self.message = message
        self.function = function
        where = f"{function}: " if function else ""
        super().__init__(f"{where}{self.status_name}: {message or '(no message)'}")


class LibraryNotFoundError(ImportError):
    """libmoeint4.so could not be loaded; the message lists every place tried."""


class VersionMismatchError(ImportError):
    """The loaded libmoeint4.so's version does not fit this package."""
