"""The queue hands a PodGroup's members over together (runtime/queue.py).

scheduler-plugins' coscheduling sorts a group's members next to each other (its QueueSort,
pkg/coscheduling/coscheduling.go's Less, by group creation time) but still pops them one by one;
here they leave the queue in one batch, which is what lets the batch decide them all or nothing.
"""

from __future__ import annotations

from typing import Any

from kubesched.model.objects import Pod, pod_from_dict
from kubesched.model.podgroup import POD_GROUP_LABEL
from kubesched.runtime.queue import ACTIVE, BACKOFF, UNSCHEDULABLE, QueueSettings, SchedulingQueue


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def pod(name: str, group: str = "", priority: int = 0, created: str = "2026-01-01T00:00:00Z") -> Pod:
    labels: dict[str, Any] = {POD_GROUP_LABEL: group} if group else {}
    return pod_from_dict(
        {
            "metadata": {
                "name": name,
                "namespace": "ns",
                "uid": f"uid-{name}",
                "creationTimestamp": created,
                "labels": labels,
            },
            "spec": {"priority": priority, "containers": [{"name": "c"}]},
        }
    )


def make_queue() -> tuple[SchedulingQueue, Clock]:
    clock = Clock()
    settings = QueueSettings(initial_backoff=1.0, max_backoff=10.0, unschedulable_flush=60.0)
    return SchedulingQueue(settings, clock), clock


async def names(queue: SchedulingQueue, limit: int = 100) -> list[str]:
    return [e.pod.name for e in await queue.pop_batch(limit)]


async def test_a_group_leaves_the_queue_whole_whatever_the_batch_size() -> None:
    queue, _ = make_queue()
    queue.add(pod("plain-1", created="2026-01-01T00:00:00Z"))
    for i in range(5):
        queue.add(pod(f"g-{i}", "g", created=f"2026-01-01T00:01:0{i}Z"))
    queue.add(pod("plain-2", created="2026-01-01T00:02:00Z"))
    assert await names(queue, limit=2) == ["plain-1", "g-0", "g-1", "g-2", "g-3", "g-4"]
    assert await names(queue, limit=2) == ["plain-2"]


async def test_two_groups_are_never_interleaved() -> None:
    queue, _ = make_queue()
    order = [("a", 0), ("b", 0), ("a", 1), ("b", 1), ("a", 2), ("b", 2)]
    for group, i in order:
        queue.add(pod(f"{group}-{i}", group, created=f"2026-01-01T00:0{i}:0{'ab'.index(group)}Z"))
    batch = await names(queue)
    first = batch[0][0]
    assert batch[:3] == [f"{first}-0", f"{first}-1", f"{first}-2"], batch
    assert sorted(batch[3:]) == sorted(f"{'b' if first == 'a' else 'a'}-{i}" for i in range(3)), batch


async def test_a_new_member_brings_back_its_parked_group_mates() -> None:
    queue, _ = make_queue()
    for i in range(3):
        queue.add(pod(f"g-{i}", "g"))
    entries = await queue.pop_batch(10)
    for entry in entries:
        queue.unschedulable(entry)  # "3 of 4 members exist"
    assert queue.counts()[UNSCHEDULABLE] == 3
    queue.add(pod("g-3", "g", created="2026-01-01T00:05:00Z"))
    assert sorted(await names(queue)) == ["g-0", "g-1", "g-2", "g-3"]


async def test_a_member_popped_while_its_group_is_in_flight_waits_for_it_then_goes() -> None:
    queue, _ = make_queue()
    for i in range(2):
        queue.add(pod(f"g-{i}", "g"))
    in_flight = await queue.pop_batch(10)
    queue.add(pod("g-late", "g", created="2026-01-01T00:05:00Z"))
    queue.add(pod("plain"))
    # The late member does not go alone while its group-mates are being decided.
    assert await names(queue) == ["plain"]
    assert queue.counts()[ACTIVE] == 1  # the deferred member still counts as pending
    for entry in in_flight:
        queue.unschedulable(entry)
    # Once they land, it goes, and takes them with it.
    assert sorted(await names(queue)) == ["g-0", "g-1", "g-late"]


async def test_groups_keep_their_place_in_line_by_order_of() -> None:
    queue, _ = make_queue()
    created = {"old": 1.0, "new": 2.0}
    queue.order_of = lambda p: created.get(p.labels.get(POD_GROUP_LABEL, ""), p.created.timestamp())
    queue.add(pod("new-0", "new", created="2025-01-01T00:00:00Z"))  # an old pod of a new group
    queue.add(pod("old-0", "old", created="2026-06-01T00:00:00Z"))
    assert await names(queue, limit=1) == ["old-0"]
    assert await names(queue, limit=1) == ["new-0"]


async def test_priority_still_comes_first() -> None:
    queue, _ = make_queue()
    queue.add(pod("g-0", "g", priority=0))
    queue.add(pod("urgent", priority=100, created="2026-02-01T00:00:00Z"))
    assert await names(queue, limit=1) == ["urgent"]


async def test_a_deleted_member_is_not_handed_over() -> None:
    queue, _ = make_queue()
    for i in range(3):
        queue.add(pod(f"g-{i}", "g"))
    queue.delete("uid-g-1")
    assert await names(queue) == ["g-0", "g-2"]
    assert len(queue) == 2


async def test_a_podgroup_that_appears_wakes_its_members_at_once_backoff_or_not() -> None:
    queue, _ = make_queue()
    for i in range(2):
        queue.add(pod(f"g-{i}", "g"))
    queue.add(pod("other", "h"))
    entries = await queue.pop_batch(10)
    for entry in entries:
        queue.backoff(entry)  # "the PodGroup does not exist"
    assert queue.counts()[BACKOFF] == 3
    assert queue.wake_group("ns/g") == 2
    assert sorted(await names(queue)) == ["g-0", "g-1"]  # not `other`, still backing off
