"""The event loop every `asyncio.run` of the scheduler gets: its own, and the leader election's and
the event recorder's on their threads.

uvloop by default: the scheduling loop spends much of its time in the loop's own machinery (the
TLS reads and writes of binds and watch streams, the callbacks between them), which uvloop runs in
compiled code. Kopf's own `kopf run` makes the same choice when uvloop is installed. "asyncio"
keeps the standard library's loop, for comparison or should uvloop misbehave.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from typing import Final

EVENT_LOOPS: Final = ("uvloop", "asyncio")


@contextlib.contextmanager
def event_loop(name: str) -> Iterator[None]:
    """Within: every loop created (by `asyncio.run`, in any thread) is of this kind. The policy
    before is restored after, so that a caller in the same process (a test) keeps its own."""
    if name == "uvloop":
        import uvloop

        policy: asyncio.AbstractEventLoopPolicy | None = uvloop.EventLoopPolicy()
    elif name == "asyncio":
        policy = None  # the standard library's default
    else:
        raise ValueError(f"unknown event loop {name!r}: one of {', '.join(EVENT_LOOPS)}")
    before = asyncio.get_event_loop_policy()
    asyncio.set_event_loop_policy(policy)
    try:
        yield
    finally:
        asyncio.set_event_loop_policy(before)
