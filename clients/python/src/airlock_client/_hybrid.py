"""`ClassOrInstance`: one method name with a meaning on the class and another on an instance
(`Sandbox.resume(client, id)` and `sandbox.resume()`), each typed."""
from __future__ import annotations

from typing import Any, Generic, Optional, TypeVar, Union, cast, overload

S = TypeVar("S")
OnClass = TypeVar("OnClass")
OnInstance = TypeVar("OnInstance")


class ClassOrInstance(Generic[S, OnClass, OnInstance]):
    """Looked up on the class, the class's attribute `on_class`; on an instance, the instance's
    attribute `on_instance` (both real methods, so `inspect` sees their signatures)."""

    def __init__(self, on_class: str, on_instance: str) -> None:
        self._on_class, self._on_instance = on_class, on_instance

    @overload
    def __get__(self, obj: None, owner: Any) -> OnClass: ...

    @overload
    def __get__(self, obj: S, owner: Any = None) -> OnInstance: ...

    def __get__(self, obj: Optional[S], owner: Any = None) -> Union[OnClass, OnInstance]:
        if obj is None:
            return cast(OnClass, getattr(owner, self._on_class))
        return cast(OnInstance, getattr(obj, self._on_instance))
