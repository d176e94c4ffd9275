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
from kubesched.runtime.scheduler import APPLY_SLICE, FIRST_BATCH, Scheduler, SchedulerSettings
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


def plain_scheduler(
    binder: TurnRecordingBinder, batch_size: int = 32, queue: SchedulingQueue | None = None
) -> Scheduler:
    return Scheduler(
        SchedulerSettings(NAME, seed=1, batch_size=batch_size),
        default_algorithm(),
        cast(Binder, binder),
        cast(Recorder, SilentRecorder()),
        queue=SchedulingQueue(QueueSettings(0.01, 0.02, 60.0)) if queue is None else queue,
    )


async def binds_per_turn(batch_size: int, pods: int) -> Counter[int]:
    turns = Turns()
    binder = TurnRecordingBinder(turns)
    scheduler = plain_scheduler(binder, batch_size)
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
    # The measurement above can tell: with slicing turned off, one turn starts the whole batch
    # (the first batch as large as the others, not ramped up).
    monkeypatch.setattr(scheduler_module, "APPLY_SLICE", 10_000)
    monkeypatch.setattr(scheduler_module, "FIRST_BATCH", 10_000)
    per_turn = await binds_per_turn(batch_size=4 * APPLY_SLICE, pods=4 * APPLY_SLICE)
    assert max(per_turn.values()) == 4 * APPLY_SLICE


class SizeRecordingQueue(SchedulingQueue):
    """Records the size of every batch it hands out."""

    sizes: list[int]

    async def pop_batch(self, limit: int) -> list[Any]:
        batch = await super().pop_batch(limit)
        if batch:
            self.sizes.append(len(batch))
        return batch


async def test_a_term_opens_with_small_batches_that_double_up_to_the_batch_size() -> None:
    # The first binds leave after FIRST_BATCH decisions, not a whole batch's.
    queue = SizeRecordingQueue(QueueSettings(0.01, 0.02, 60.0))
    queue.sizes = []
    scheduler = plain_scheduler(TurnRecordingBinder(Turns()), queue=queue)
    scheduler.on_node("ADDED", make_node("n1", cpu="64", pods="200"))
    for index in range(100):
        scheduler.on_pod("ADDED", make_pod(f"p{index}", scheduler_name=NAME, cpu="10m"))
    loop = asyncio.create_task(scheduler.run())
    try:
        await wait_for(lambda: sum(queue.sizes) == 100, timeout=5)
    finally:
        scheduler.queue.close()
        await asyncio.wait_for(loop, 5)
    assert FIRST_BATCH == 4
    assert queue.sizes == [4, 8, 16, 32, 32, 8], queue.sizes


async def test_the_first_batch_is_out_once_its_binds_have_started() -> None:
    # The start-up holds the pending pods beyond a first slice, and Kopf's import, until then.
    binder = TurnRecordingBinder(Turns())
    scheduler = plain_scheduler(binder)
    scheduler.on_node("ADDED", make_node("n1", cpu="64", pods="200"))
    for index in range(10):
        scheduler.on_pod("ADDED", make_pod(f"p{index}", scheduler_name=NAME, cpu="10m"))
    seen_at_release: list[int] = []

    async def note_release() -> None:
        await scheduler.first_batch_out.wait()
        seen_at_release.append(len(binder.started_on))

    noting = asyncio.create_task(note_release())
    loop = asyncio.create_task(scheduler.run())
    try:
        await asyncio.wait_for(noting, 5)
    finally:
        scheduler.queue.close()
        await asyncio.wait_for(loop, 5)
    assert seen_at_release == [FIRST_BATCH], seen_at_release


async def test_with_nothing_to_place_the_first_batch_is_not_waited_for() -> None:
    # Pending pods gated, or none at all: the start-up must not wait for a batch that never comes.
    scheduler = plain_scheduler(TurnRecordingBinder(Turns()))
    gated = make_pod("gated", scheduler_name=NAME)
    gated["spec"]["schedulingGates"] = [{"name": "example.com/quota"}]
    scheduler.on_pod("ADDED", gated)
    loop = asyncio.create_task(scheduler.run())
    try:
        await asyncio.wait_for(scheduler.first_batch_out.wait(), 5)
        assert not loop.done()
    finally:
        scheduler.queue.close()
        await asyncio.wait_for(loop, 5)


async def test_a_loop_that_crashes_releases_what_waits_for_its_first_batch(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken(*_: object, **__: object) -> None:
        raise RuntimeError("algorithm failed")

    monkeypatch.setattr(scheduler_module, "schedule_batch", broken)
    scheduler = plain_scheduler(TurnRecordingBinder(Turns()))
    scheduler.on_node("ADDED", make_node("n1"))
    scheduler.on_pod("ADDED", make_pod("p", scheduler_name=NAME))
    with pytest.raises(RuntimeError, match="algorithm failed"):
        await asyncio.wait_for(scheduler.run(), 5)
    assert scheduler.first_batch_out.is_set()
