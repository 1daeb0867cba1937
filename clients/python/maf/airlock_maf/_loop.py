"""The connection's own event loop, on a private thread.

A backend is built synchronously (the router reads its rung at construction), and then awaited
from whatever loop the host runs — maf-sandbox's `SyncRunner` among them. So the connection to
`airlock serve` lives on a loop of its own and every call crosses to it: `run` awaits a
coroutine there from any loop, and cancelling the awaiting task cancels the coroutine there
(for a run, the SDK then cancels the run on the broker).
"""
from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class LoopThread:
    """An event loop running on a daemon thread."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="airlock-maf", daemon=True)
        self._thread.start()

    def blocking(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run `coro` on the private loop and wait for it here (never from that loop)."""
        fut = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return fut.result()
        except BaseException:
            fut.cancel()
            raise

    async def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Await `coro` on the private loop from the caller's loop."""
        if asyncio.get_running_loop() is self.loop:
            return await coro
        fut = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return await asyncio.wrap_future(fut)
        except asyncio.CancelledError:
            fut.cancel()
            raise

    def stop(self) -> None:
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)
        if not self._thread.is_alive():
            self.loop.close()
