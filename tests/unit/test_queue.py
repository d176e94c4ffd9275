from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kubesched.model.objects import Pod, pod_from_dict
from kubesched.runtime.queue import ACTIVE, BACKOFF, GATED, UNSCHEDULABLE, QueueSettings, SchedulingQueue


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def pod(name: str, priority: int = 0, created: str = "2026-01-01T00:00:00Z", **spec: Any) -> Pod:
    return pod_from_dict(
        {
            "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}", "creationTimestamp": created},
            "spec": {"priority": priority, "containers": [{"name": "c"}], **spec},
        }
    )


def make_queue() -> tuple[SchedulingQueue, Clock]:
    clock = Clock()
    return SchedulingQueue(
        QueueSettings(initial_backoff=1.0, max_backoff=10.0, unschedulable_flush=60.0), clock
    ), clock


async def names(queue: SchedulingQueue, limit: int = 100) -> list[str]:
    return [e.pod.name for e in await queue.pop_batch(limit)]


async def test_higher_priority_first_then_older() -> None:
    queue, _ = make_queue()
    queue.add(pod("low-old", 0, "2026-01-01T00:00:00Z"))
    queue.add(pod("high-new", 10, "2026-01-01T00:05:00Z"))
    queue.add(pod("low-new", 0, "2026-01-01T00:01:00Z"))
    queue.add(pod("high-old", 10, "2026-01-01T00:02:00Z"))
    assert await names(queue) == ["high-old", "high-new", "low-old", "low-new"]


async def test_pop_batch_respects_limit_and_in_flight_pods_are_not_popped_twice() -> None:
    queue, _ = make_queue()
    for i in range(5):
        queue.add(pod(f"p{i}"))
    first = await queue.pop_batch(3)
    assert len(first) == 3
    queue.add(first[0].pod)  # an update event while in flight must not re-enqueue it
    assert [e.pod.name for e in await queue.pop_batch(10)] == ["p3", "p4"]


async def test_unschedulable_pod_waits_for_a_cluster_event() -> None:
    queue, clock = make_queue()
    queue.add(pod("a"))
    (entry,) = await queue.pop_batch(1)
    queue.unschedulable(entry)
    assert queue.counts()[UNSCHEDULABLE] == 1
    clock.now += 5  # past its 1 s backoff
    assert queue.move_all("NodeAdd") == 1
    assert await names(queue) == ["a"]


async def test_event_during_attempt_sends_pod_to_backoff_not_unschedulable() -> None:
    queue, clock = make_queue()
    queue.add(pod("a"))
    (entry,) = await queue.pop_batch(1)
    queue.move_all("NodeAdd")  # arrives while the algorithm runs
    queue.unschedulable(entry)
    assert queue.counts() == {ACTIVE: 0, BACKOFF: 1, UNSCHEDULABLE: 0, GATED: 0}
    clock.now += 1.0
    assert await names(queue) == ["a"]


async def test_backoff_doubles_to_the_maximum() -> None:
    queue, clock = make_queue()
    queue.add(pod("a"))
    waits = []
    for _ in range(6):
        (entry,) = await queue.pop_batch(1)
        start = clock.now
        queue.backoff(entry)
        while True:
            queue.flush()
            if queue.counts()[ACTIVE]:
                break
            clock.now += 0.5
        waits.append(clock.now - start)
    assert waits == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]


async def test_unschedulable_pods_are_flushed_after_sixty_seconds() -> None:
    queue, clock = make_queue()
    queue.add(pod("a"))
    (entry,) = await queue.pop_batch(1)
    queue.unschedulable(entry)
    clock.now += 59
    queue.flush()
    assert queue.counts()[UNSCHEDULABLE] == 1
    clock.now += 1
    queue.flush()
    assert queue.counts()[ACTIVE] == 1


async def test_deleted_pod_disappears_even_while_in_flight() -> None:
    queue, _ = make_queue()
    queue.add(pod("a"))
    queue.add(pod("b"))
    queue.delete("uid-b")
    (entry,) = await queue.pop_batch(10)
    assert entry.pod.name == "a"
    queue.delete("uid-a")
    queue.unschedulable(entry)  # the attempt ends after the deletion: it must not come back
    assert len(queue) == 0
    assert queue.counts() == {ACTIVE: 0, BACKOFF: 0, UNSCHEDULABLE: 0, GATED: 0}


async def test_spec_change_moves_unschedulable_pod_but_status_change_does_not() -> None:
    queue, _ = make_queue()
    queue.add(pod("a"))
    (entry,) = await queue.pop_batch(1)
    queue.unschedulable(entry)
    status_only = pod_from_dict(
        {
            "metadata": {
                "name": "a",
                "namespace": "ns",
                "uid": "uid-a",
                "creationTimestamp": "2026-01-01T00:00:00Z",
            },
            "spec": {"priority": 0, "containers": [{"name": "c"}]},
            "status": {"conditions": [{"type": "PodScheduled", "status": "False"}]},
        }
    )
    queue.add(status_only)
    assert queue.counts()[UNSCHEDULABLE] == 1
    queue.add(pod("a", nodeSelector={"zone": "b"}))
    assert queue.counts()[ACTIVE] == 1


async def test_pop_waits_without_spinning_until_a_pod_arrives() -> None:
    queue = SchedulingQueue()
    waiter = asyncio.create_task(queue.pop_batch(1))
    await asyncio.sleep(0.05)
    assert not waiter.done()
    queue.add(pod("late"))
    batch = await asyncio.wait_for(waiter, 1)
    assert [e.pod.name for e in batch] == ["late"]


async def test_close_releases_a_waiting_pop() -> None:
    queue = SchedulingQueue()
    waiter = asyncio.create_task(queue.pop_batch(1))
    await asyncio.sleep(0.01)
    queue.close()
    assert await asyncio.wait_for(waiter, 1) == []


@pytest.mark.parametrize("attempts", [1, 3])
async def test_attempts_are_counted(attempts: int) -> None:
    queue, clock = make_queue()
    queue.add(pod("a"))
    for _ in range(attempts):
        (entry,) = await queue.pop_batch(1)
        queue.backoff(entry)
        clock.now += 20
    queue.flush()
    (entry,) = await queue.pop_batch(1)
    assert entry.attempts == attempts + 1
