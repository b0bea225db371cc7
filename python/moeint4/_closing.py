"""Context-manager and finalizer behaviour shared by the handle classes."""
from __future__ import annotations

from typing import Any, Optional, TypeVar

T = TypeVar("T", bound="Closing")


class Closing:
    """Subclasses keep their library handle in `_handle` (None once closed)
    and define close() (idempotent); `with` and garbage collection call it."""

    _handle: Optional[int] = None
    _closed_message = "this moeint4 object is closed"

    @property
    def closed(self) -> bool:
        return self._handle is None

    @property
    def handle(self) -> int:
        """The library handle (ValueError once closed)."""
        if self._handle is None:
            raise ValueError(self._closed_message)
        return self._handle

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self: T) -> T:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # interpreter shutdown: the library may be gone
            pass
