"""The loop-lag monitor sees a blocked event loop."""

from __future__ import annotations

import asyncio
import time

from kubesched.looplag import LoopLagMonitor


async def test_a_loop_blocked_by_synchronous_work_is_reported_with_how_long() -> None:
    monitor = LoopLagMonitor(interval=0.01)
    task = asyncio.create_task(monitor.run())
    await asyncio.sleep(0.05)
    time.sleep(0.2)  # a handler that forgot to await
    await asyncio.sleep(0.05)
    task.cancel()
    assert monitor.worst >= 0.15


def test_the_worst_lag_is_kept() -> None:
    monitor = LoopLagMonitor()
    for lag in (0.01, 0.3, 0.02):
        monitor.observe(lag)
    assert monitor.worst == 0.3
