"""The scheduling loop hands the event loop back while it applies a batch of decisions."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any, cast

import pytest

from kubesched.kube.binding import Binder, BindOutcome
from kubesched.kube.events import Recorder
from kubesched.model.objects import Pod
from kubesched.policy.compile import default_algorithm
from kubesched.runtime import scheduler as scheduler_module
from kubesched.runtime.queue import QueueSettings, SchedulingQueue
from kubesched.runtime.scheduler import APPLY_SLICE, Scheduler, SchedulerSettings
from kubesched_dev.fixtures import make_node, make_pod, wait_for

NAME = "ks"


class Turns:
    """Counts turns of the event loop: a task that only yields."""

    def __init__(self) -> None:
        self.count = 0

    async def run(self) -> None:
        while True:
            self.count += 1
            await asyncio.sleep(0)


class TurnRecordingBinder:
    def __init__(self, turns: Turns) -> None:
        self.turns = turns
        self.started_on: list[int] = []

    async def bind(
        self, pod: Pod, node_name: str, extender: Any = None, **_: object
    ) -> tuple[BindOutcome, str, float]:
        self.started_on.append(self.turns.count)
        return BindOutcome.BOUND, "", 0.0


class SilentRecorder:
    def unschedulable(self, pod: Pod, message: str) -> None:
        pass

    def event(self, pod: Pod, type_: str, reason: str, message: str) -> None:
        pass


async def binds_per_turn(batch_size: int, pods: int) -> Counter[int]:
    turns = Turns()
    binder = TurnRecordingBinder(turns)
    scheduler = Scheduler(
        SchedulerSettings(NAME, seed=1, batch_size=batch_size),
        default_algorithm(),
        cast(Binder, binder),
        cast(Recorder, SilentRecorder()),
        queue=SchedulingQueue(QueueSettings(0.01, 0.02, 60.0)),
    )
    scheduler.on_node("ADDED", make_node("n1", cpu="64", pods=str(pods + 10)))
    for index in range(pods):
        scheduler.on_pod("ADDED", make_pod(f"p{index}", scheduler_name=NAME, cpu="10m"))
    ticker = asyncio.create_task(turns.run())
    loop = asyncio.create_task(scheduler.run())
    try:
        await wait_for(lambda: len(binder.started_on) == pods, timeout=5)
    finally:
        scheduler.queue.close()
        await asyncio.wait_for(loop, 5)
        ticker.cancel()
    return Counter(binder.started_on)


async def test_a_batch_starts_its_binds_a_slice_per_loop_turn() -> None:
    per_turn = await binds_per_turn(batch_size=4 * APPLY_SLICE, pods=4 * APPLY_SLICE)
    assert sum(per_turn.values()) == 4 * APPLY_SLICE
    assert max(per_turn.values()) <= APPLY_SLICE


async def test_unsliced_a_batch_starts_every_bind_in_one_turn(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The measurement above can tell: with slicing turned off, one turn starts the whole batch.
    monkeypatch.setattr(scheduler_module, "APPLY_SLICE", 10_000)
    per_turn = await binds_per_turn(batch_size=4 * APPLY_SLICE, pods=4 * APPLY_SLICE)
    assert max(per_turn.values()) == 4 * APPLY_SLICE
