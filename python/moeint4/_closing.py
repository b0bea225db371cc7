"""Context-manager and finalizer behaviour shared by the handle classes."""
from __future__ import annotations

from typing import Any, TypeVar

T = TypeVar("T", bound="Closing")


class Closing:
    """Subclasses define close() (idempotent); `with` and garbage collection call it."""

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
