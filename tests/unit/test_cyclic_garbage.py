"""Scheduling leaves no reference cycles among the scheduler's objects.

The collector runs its full collections rarely here (app/tuning.py), so whatever a cycle holds (an
outcome's traceback holding frames, frames holding snapshots) stays for hours of churn: the soak
saw thousands of NodeInfos held that way. Plain pods, a pod that fits nowhere, a preemption and a
gang that cannot be placed must each leave nothing for the collector to find.
"""

from __future__ import annotations

import asyncio
import gc
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from kubesched_dev.fixtures import make_node, make_pod, wait_for

from .test_preemption_scheduler import NAME, Harness, bound

GROUP_LABEL = "scheduling.x-k8s.io/pod-group"


@contextmanager
def garbage_of_ours() -> Iterator[Counter[str]]:
    """What a full collection at the end finds unreachable, by type, among kubesched's own objects
    and frames of its code."""
    found: Counter[str] = Counter()
    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        yield found
        gc.collect()
        for obj in gc.garbage:
            if type(obj).__module__.startswith("kubesched."):
                found[type(obj).__qualname__] += 1
            elif type(obj).__name__ == "frame" and "/kubesched/" in obj.f_code.co_filename:
                found[f"frame of {obj.f_code.co_name}"] += 1
    finally:
        gc.set_debug(0)
        gc.garbage.clear()


async def churn(harness: Harness) -> None:
    s = harness.scheduler
    done: list[dict[str, Any]] = []

    def add(pod: dict[str, Any]) -> None:
        s.on_pod("ADDED", pod)
        done.append(pod)

    async def until(condition: Callable[[], object]) -> None:
        await wait_for(condition, timeout=5)

    for i in range(2):
        s.on_node("ADDED", make_node(f"n{i}", cpu="4"))
    for i in range(4):
        add(make_pod(f"plain-{i}", NAME, NAME, cpu="1"))
    await until(lambda: len(harness.binder.bound) == 4)
    add(make_pod("nowhere", NAME, NAME, cpu="100"))
    await until(lambda: harness.failures_of("nowhere"))
    add(bound("low", 0, cpu="2", node="n1"))
    add(make_pod("high", NAME, NAME, cpu="3", priority=100))
    await until(lambda: harness.evictor.evicted)
    labels = {GROUP_LABEL: "g"}
    s.on_object("PodGroup", "ADDED", {"metadata": {"namespace": NAME, "name": "g"}, "spec": {"minMember": 3}})
    for i in range(3):
        add(make_pod(f"member-{i}", NAME, NAME, cpu="3", labels=labels))
    await until(lambda: harness.failures_of("member-0"))
    for pod in done:
        s.on_pod("DELETED", pod)


async def test_scheduling_leaves_no_cycles_among_our_objects() -> None:
    harness = Harness()  # alive through the collection: a scheduler lives as long as its process
    loop = asyncio.create_task(harness.scheduler.run())
    with garbage_of_ours() as found:
        await churn(harness)
        harness.scheduler.queue.close()
        await asyncio.wait_for(loop, 5)
    assert not found, f"left for the collector: {dict(found)}"
