"""The queue as the scheduler drives it from watch events: which events bring unschedulable pods
back, pods that change or vanish while queued, the pending-pods metric, and no busy loop."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any, cast

import pytest
from click.testing import CliRunner
from prometheus_client import REGISTRY

from kubesched.cli import main
from kubesched.kube.binding import Binder
from kubesched.kube.events import Recorder
from kubesched.policy.compile import default_algorithm
from kubesched.runtime.queue import ACTIVE, BACKOFF, GATED, UNSCHEDULABLE, QueueSettings, SchedulingQueue
from kubesched.runtime.scheduler import Scheduler, SchedulerSettings
from kubesched_dev.fixtures import make_node, make_pod

from .test_queue import Clock, pod

NAME = "ks"


def new_scheduler() -> tuple[Scheduler, Clock]:
    clock = Clock()
    queue = SchedulingQueue(QueueSettings(1.0, 10.0, 60.0), clock)
    # Neither binds nor events happen here: the tests drive the queue by hand.
    scheduler = Scheduler(
        SchedulerSettings(NAME), default_algorithm(), cast(Binder, None), cast(Recorder, None), queue=queue
    )
    return scheduler, clock


async def park(scheduler: Scheduler, raw: dict[str, Any]) -> None:
    """Add a pending pod and make it unschedulable, past its backoff."""
    scheduler.on_pod("ADDED", raw)
    batch = await scheduler.queue.pop_batch(100)
    for entry in batch:
        scheduler.queue.unschedulable(entry)


def counts(scheduler: Scheduler) -> dict[str, int]:
    return scheduler.queue.counts()


NODE = make_node("n1", cpu="2")
EVENTS = {
    "node added": lambda s: s.on_node("ADDED", make_node("n2")),
    "node allocatable changed": lambda s: s.on_node("MODIFIED", make_node("n1", cpu="8")),
    "node labels changed": lambda s: s.on_node("MODIFIED", make_node("n1", cpu="2", labels={"zone": "a"})),
    "node taints changed": lambda s: s.on_node(
        "MODIFIED", make_node("n1", cpu="2", taints=[{"key": "k", "value": "v", "effect": "NoSchedule"}])
    ),
    "node uncordoned": lambda s: s.on_node("MODIFIED", make_node("n1", cpu="2", unschedulable=True)),
    "bound pod deleted": lambda s: s.on_pod("DELETED", make_pod("running", NAME, "other", node_name="n1")),
    "bound pod finished": lambda s: s.on_pod(
        "MODIFIED",
        {**make_pod("running", NAME, "other", node_name="n1"), "status": {"phase": "Succeeded"}},
    ),
    "pod terminating": lambda s: s.on_pod(
        "MODIFIED", _terminating(make_pod("running", NAME, "other", node_name="n1"))
    ),
    "policy changed": lambda s: s.set_profiles({"other-profile": default_algorithm()}),
    "PV changed": lambda s: s.on_object("PersistentVolume", "MODIFIED", {"metadata": {"name": "pv"}}),
    "PVC changed": lambda s: s.on_object(
        "PersistentVolumeClaim", "MODIFIED", {"metadata": {"name": "c", "namespace": NAME}}
    ),
}


@pytest.mark.parametrize("event", list(EVENTS))
async def test_cluster_events_that_may_help_bring_unschedulable_pods_back(event: str) -> None:
    scheduler, clock = new_scheduler()
    scheduler.on_node("ADDED", NODE)
    scheduler.on_pod("ADDED", make_pod("running", NAME, "other", cpu="1", node_name="n1"))
    await park(scheduler, make_pod("waiting", NAME, NAME, cpu="4"))
    assert counts(scheduler)[UNSCHEDULABLE] == 1
    clock.now += 5  # past its backoff
    EVENTS[event](scheduler)
    assert counts(scheduler) == {ACTIVE: 1, BACKOFF: 0, UNSCHEDULABLE: 0, GATED: 0}


async def test_events_that_cannot_help_leave_unschedulable_pods_alone() -> None:
    scheduler, _ = new_scheduler()
    scheduler.on_node("ADDED", NODE)
    await park(scheduler, make_pod("waiting", NAME, NAME, cpu="4"))
    heartbeat = make_node("n1", cpu="2")
    heartbeat["status"]["conditions"][0]["lastHeartbeatTime"] = "2030-01-01T00:00:00Z"
    scheduler.on_node("MODIFIED", heartbeat)
    scheduler.on_pod("ADDED", make_pod("new-pending", NAME, "someone-else"))  # not ours
    scheduler.on_object("PodDisruptionBudget", "ADDED", {"metadata": {"name": "b", "namespace": NAME}})
    assert counts(scheduler)[UNSCHEDULABLE] == 1


async def test_pods_bound_or_deleted_by_someone_else_leave_the_queue() -> None:
    scheduler, _ = new_scheduler()
    for name in ("bound", "deleted", "terminating"):
        scheduler.on_pod("ADDED", make_pod(name, NAME, NAME))
    scheduler.on_pod("MODIFIED", make_pod("bound", NAME, NAME, node_name="n1"))
    scheduler.on_pod("DELETED", make_pod("deleted", NAME, NAME))
    terminating = make_pod("terminating", NAME, NAME)
    terminating["metadata"]["deletionTimestamp"] = "2030-01-01T00:00:00Z"
    scheduler.on_pod("MODIFIED", terminating)
    assert len(scheduler.queue) == 0
    assert await asyncio.wait_for(_pop_or_nothing(scheduler.queue), 0.2) == []


async def test_a_pod_updated_while_queued_is_scheduled_in_its_latest_form() -> None:
    scheduler, _ = new_scheduler()
    scheduler.on_pod("ADDED", make_pod("p", NAME, NAME, cpu="1"))
    scheduler.on_pod("MODIFIED", make_pod("p", NAME, NAME, cpu="3", labels={"v": "2"}))
    (entry,) = await scheduler.queue.pop_batch(10)
    assert entry.pod.labels == {"v": "2"} and entry.pod.requests.milli_cpu == 3000


async def test_a_pod_updated_while_being_scheduled_is_tried_again_soon() -> None:
    queue = SchedulingQueue(QueueSettings(1.0, 10.0, 60.0), Clock())
    queue.add(pod("a"))
    (entry,) = await queue.pop_batch(1)
    queue.add(pod("a", nodeSelector={"zone": "b"}))  # arrives while the algorithm ran on the old one
    queue.unschedulable(entry)
    assert queue.counts() == {ACTIVE: 0, BACKOFF: 1, UNSCHEDULABLE: 0, GATED: 0}


async def test_a_changed_nomination_brings_the_pod_back() -> None:
    queue = SchedulingQueue(QueueSettings(1.0, 10.0, 60.0), Clock())
    queue.add(pod("a"))
    (entry,) = await queue.pop_batch(1)
    queue.unschedulable(entry)
    queue.add(replace(pod("a"), nominated_node_name="n1"))
    assert queue.counts()[ACTIVE] == 1


async def test_the_pending_pods_metric_follows_the_queue_even_while_it_sleeps() -> None:
    scheduler, _ = new_scheduler()
    for i in range(3):
        scheduler.on_pod("ADDED", make_pod(f"p{i}", NAME, NAME))
    assert _metric(ACTIVE) == 3
    scheduler.on_pod("DELETED", make_pod("p0", NAME, NAME))
    assert _metric(ACTIVE) == 2
    batch = await scheduler.queue.pop_batch(1)
    scheduler.queue.unschedulable(batch[0])
    assert (_metric(ACTIVE), _metric(UNSCHEDULABLE), _metric(BACKOFF)) == (1, 1, 0)


class CountingQueue(SchedulingQueue):
    """Counts how often the idle loop looks at its timers."""

    looks = 0

    def _next_timer(self) -> float:
        self.looks += 1
        return super()._next_timer()


async def test_a_queue_of_unschedulable_pods_sleeps_until_the_flush() -> None:
    # A real clock: the loop must wait on a timer, not poll.
    queue = CountingQueue(QueueSettings(1.0, 10.0, 60.0))
    for i in range(1000):
        queue.add(pod(f"p{i}"))
    for entry in await queue.pop_batch(1000):
        queue.unschedulable(entry)
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(queue.pop_batch(10), 0.5)
    assert queue.looks == 1  # one look, then asleep until the flush is due
    assert queue._next_timer() > 59


async def _pop_or_nothing(queue: SchedulingQueue) -> list[Any]:
    try:
        return await asyncio.wait_for(queue.pop_batch(10), 0.1)
    except TimeoutError:
        return []


def _metric(queue: str) -> float:
    value = REGISTRY.get_sample_value("scheduler_pending_pods", {"queue": queue})
    assert value is not None
    return value


def test_backoff_timings_are_flags_and_must_make_sense() -> None:
    result = CliRunner().invoke(main, ["run", "--pod-initial-backoff", "20s", "--pod-max-backoff", "10s"])
    assert result.exit_code == 2
    assert "--pod-initial-backoff" in result.output


@pytest.mark.parametrize("bound_to", ["n1", "n2"])
async def test_our_bind_coming_back_confirms_the_assumption_and_another_node_wins(bound_to: str) -> None:
    scheduler, _ = new_scheduler()
    for node in ("n1", "n2"):
        scheduler.on_node("ADDED", make_node(node))
    raw = make_pod("p", NAME, NAME, cpu="1")
    scheduler.on_pod("ADDED", raw)
    (entry,) = await scheduler.queue.pop_batch(10)
    scheduler.cache.assume(entry.pod, "n1")
    scheduler.on_pod("MODIFIED", make_pod("p", NAME, NAME, cpu="1", node_name=bound_to))
    assert not scheduler.cache.is_assumed(entry.pod.uid)
    assert scheduler.cache.pod_node(entry.pod.uid) == bound_to
    requested = {n: scheduler.cache.node_info(n).requested.milli_cpu for n in ("n1", "n2")}  # type: ignore[union-attr]
    assert requested == {"n1": 1000 if bound_to == "n1" else 0, "n2": 1000 if bound_to == "n2" else 0}
    assert len(scheduler.queue) == 0


def _terminating(raw: dict[str, Any]) -> dict[str, Any]:
    raw["metadata"]["deletionTimestamp"] = "2030-01-01T00:00:00Z"
    return raw
