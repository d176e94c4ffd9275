"""The loop-lag monitor sees a blocked event loop."""

from __future__ import annotations

import asyncio
import gc
import time
from collections import Counter

import pytest
import structlog

from kubesched.telemetry.looplag import MAX_STALL_SITES, LoopLagMonitor, watchdog_wait


async def test_a_loop_blocked_by_synchronous_work_is_reported_with_how_long() -> None:
    monitor = LoopLagMonitor(interval=0.01)
    task = asyncio.create_task(monitor.run())
    await asyncio.sleep(0.05)
    _handler_that_forgot_to_await(0.2)
    await asyncio.sleep(0.05)
    task.cancel()
    assert monitor.worst >= 0.15


def test_the_worst_lag_is_kept() -> None:
    monitor = LoopLagMonitor()
    for lag in (0.01, 0.3, 0.02):
        monitor.observe(lag)
    assert monitor.worst == 0.3


def _handler_that_forgot_to_await(seconds: float) -> None:
    time.sleep(seconds)


def test_a_long_garbage_collection_is_logged() -> None:
    monitor = LoopLagMonitor(warn_after=0.0)
    monitor.watch_gc()
    try:
        with structlog.testing.capture_logs() as logs:
            gc.collect()
    finally:
        monitor.unwatch_gc()
    assert any(e["event"] == "gc_pause" and e["generation"] == 2 for e in logs)
    assert not any(getattr(cb, "__qualname__", "").startswith("LoopLagMonitor") for cb in gc.callbacks)


async def test_a_stall_is_traced_to_the_code_that_blocked_the_loop() -> None:
    monitor = LoopLagMonitor(interval=0.01, warn_after=0.02)
    task = asyncio.create_task(monitor.run())
    await asyncio.sleep(0.05)
    with structlog.testing.capture_logs() as logs:
        _handler_that_forgot_to_await(0.2)
        await asyncio.sleep(0.05)
    task.cancel()
    sites = [site for site, _ in monitor.top_stall_sites()]
    assert sites and "_handler_that_forgot_to_await" in sites[0], sites
    blocked = [e for e in logs if e["event"] == "event_loop_blocked"]
    assert blocked and "_handler_that_forgot_to_await" in blocked[0]["where"][0]


async def test_an_idle_loop_samples_nothing() -> None:
    monitor = LoopLagMonitor(interval=0.01, warn_after=0.25)
    task = asyncio.create_task(monitor.run())
    await asyncio.sleep(0.3)
    task.cancel()
    assert monitor.top_stall_sites() == []


async def test_a_lag_the_loop_spent_waiting_is_not_counted_as_its_own_work() -> None:
    monitor = LoopLagMonitor(interval=0.01)
    task = asyncio.create_task(monitor.run())
    await asyncio.sleep(0.05)
    _handler_that_forgot_to_await(0.2)  # sleeps: late, but using no CPU
    await asyncio.sleep(0.05)
    assert monitor.worst >= 0.15 and monitor.worst_busy < 0.05
    _spin(0.2)  # late and busy
    await asyncio.sleep(0.05)
    task.cancel()
    assert 0.15 <= monitor.worst_busy <= monitor.worst


def _spin(seconds: float) -> None:
    # Counted in this thread's CPU time, not wall time: on a loaded machine a wall-clock spin of
    # 0.2 s may get only a fraction of a core, and the test would measure the machine, not the monitor.
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def test_the_stall_sites_kept_are_bounded_and_the_most_sampled_stay() -> None:
    monitor = LoopLagMonitor()
    for n in range(3 * MAX_STALL_SITES):
        monitor._stalled = Counter({f"site-{n}": 1, "the usual culprit": 2})
        monitor.observe(1.0)
    assert len(monitor.stall_sites) <= MAX_STALL_SITES
    assert monitor.top_stall_sites(1)[0][0] == "the usual culprit"


def test_the_watchdog_sleeps_until_the_loop_would_be_late_then_samples_often() -> None:
    # The loop is due to tick at 10.025 and warns past 50 ms: nothing to sample before 10.05.
    assert watchdog_wait(now=10.0, beat=10.025, warn_after=0.05) == pytest.approx(0.05)
    # Late by more than half warn_after: a sample every fifth of it.
    assert watchdog_wait(now=10.06, beat=10.025, warn_after=0.05) == pytest.approx(0.01)
    # Never more often than every 5 ms.
    assert watchdog_wait(now=10.0, beat=9.9, warn_after=0.01) == pytest.approx(0.005)


def test_the_default_interval_tells_every_stall_half_again_as_long_as_warn_after() -> None:
    monitor = LoopLagMonitor()
    # A stall that began just after a tick is seen `interval` short.
    assert 1.5 * monitor.warn_after - monitor.interval >= monitor.warn_after
