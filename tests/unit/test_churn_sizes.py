"""Pods come and go: every map and set that held them returns to its size (what `make soak` checks
of a running scheduler through `/debug/sizes`, here one structure at a time)."""

from __future__ import annotations

import ctypes
import tracemalloc
from typing import Any, cast

import pytest

from kubesched.kube.binding import Binder
from kubesched.kube.event_correlator import LRU, Event, EventCorrelator, ObjectReference
from kubesched.kube.events import Recorder
from kubesched.kube.reasons import FAILED_SCHEDULING, WARNING
from kubesched.kube.retry import TokenBucket
from kubesched.model.objects import Pod, node_from_dict, pod_from_dict
from kubesched.policy.compile import default_algorithm
from kubesched.runtime.cache import SchedulerCache
from kubesched.runtime.queue import COMPACT_SLACK, SchedulingQueue
from kubesched.runtime.scheduler import Scheduler, SchedulerSettings
from kubesched.telemetry.sizes import MemoryDiff, container_sizes, process_sizes
from kubesched_dev.fixtures import make_node, make_pod, wait_for


def held(**roots: object) -> dict[str, int]:
    """The non-empty maps, sets and lists of `roots` and of the objects of ours they hold, by path."""
    return {path: size for path, size in container_sizes(roots).items() if size}


def batch(index: int, node: str | None = "n0", count: int = 3) -> list[dict[str, Any]]:
    """Pods with a label set of their own, as a ReplicaSet's pod-template-hash or a Job's uid gives them."""
    return [
        make_pod(
            f"b{index}-{i}", "ns", cpu="100m", labels={"app": "web", "batch": str(index)}, node_name=node
        )
        for i in range(count)
    ]


def test_a_label_set_leaves_the_usage_table_with_its_last_pod() -> None:
    cache = SchedulerCache()
    cache.set_node(node_from_dict(make_node("n0")))
    cache.set_pod(pod_from_dict(make_pod("stays", "ns", cpu="100m", labels={"app": "web"}, node_name="n0")))
    cache.snapshot()  # the usage table is built for the first snapshot, then kept up to date
    start = held(cache=cache)
    assert start["cache._usage.groups"] == 1
    for index in range(5):
        pods = [pod_from_dict(raw) for raw in batch(index)]
        for pod in pods:
            cache.set_pod(pod)
        cache.snapshot()
        for pod in pods:
            cache.remove_pod(pod.uid)
        cache.snapshot()
    assert held(cache=cache) == start


def event(uid: str, reason: str = FAILED_SCHEDULING, message: str = "0/1 nodes are available") -> Event:
    involved = ObjectReference("Pod", "ns", f"pod-{uid}", uid)
    return Event(involved, WARNING, reason, message, "kubesched", timestamp=1.0)


def test_the_correlator_forgets_a_pod_and_keeps_the_others() -> None:
    correlator = EventCorrelator(lambda: 0.0)
    start = held(correlator=correlator)
    for uid in ("gone", "stays"):
        for n in range(3):
            result = correlator.correlate(event(uid, message=f"attempt {n}"))
            correlator.written(result.key, result.name, result.count, result.first_timestamp, uid)
    stays = held(correlator=correlator)
    correlator.forget("gone")
    correlator.forget("stays")
    assert held(correlator=correlator) == start
    assert stays != start
    # What a pod still present keeps is untouched by another's going: its next event counts on.
    correlator = EventCorrelator(lambda: 0.0)
    first = correlator.correlate(event("stays"))
    correlator.correlate(event("gone"))
    correlator.forget("gone")
    again = correlator.correlate(event("stays"))
    assert (again.name, again.count) == (first.name, 2)


def test_an_lru_evicting_an_owned_key_forgets_its_owner_too() -> None:
    cache: LRU[int] = LRU(2)
    for n in range(5):
        cache.add(f"k{n}", n, owner=f"pod-{n}")
    cache.add("k4", 4, owner="pod-x")  # the same key, now another owner's
    assert held(lru=cache) == {"lru._items": 2, "lru._owned": 2, "lru._owned[*]": 2}
    cache.forget("pod-x")
    cache.forget("pod-3")
    assert held(lru=cache) == {}


class Server:
    async def send(self, method: str, path: str, body: Any, content_type: str) -> tuple[int, Any]:
        return (201, body) if method == "POST" else (200, {})


async def test_the_recorder_forgets_a_pod_once_its_events_are_written() -> None:
    events = Recorder(
        None,  # type: ignore[arg-type]
        "kubesched",
        TokenBucket(0, 1),
        send=Server().send,
        poll_interval=0.002,
        forget_delay=0.01,
    )
    pods = [pod_from_dict(raw) for raw in batch(0, node=None)]
    try:
        for pod in pods:
            events.unschedulable(pod, "0/1 nodes are available")
        await wait_for(lambda: events.backlog == 0, timeout=5, interval=0.005)
        assert held(recorder=events)["recorder._correlator._observed._items"] == len(pods)
        for pod in pods:
            events.forget(pod)
        await wait_for(
            lambda: not any("_correlator" in path for path in held(recorder=events)),
            timeout=5,
            interval=0.005,
        )
    finally:
        await events.close()


class Quiet:
    def event(self, *_: object) -> None:
        pass

    def unschedulable(self, *_: object) -> None:
        pass


def test_the_scheduler_tells_of_every_pod_it_drops() -> None:
    scheduler = Scheduler(
        SchedulerSettings("kubesched"), default_algorithm(), cast(Binder, None), cast(Recorder, Quiet())
    )
    gone: list[Pod] = []
    scheduler.pod_gone = gone.append
    scheduler.on_node("ADDED", make_node("n0"))
    start = held(scheduler=scheduler)
    bound, pending = batch(0), batch(1, node=None)
    for raw in bound + pending:
        scheduler.on_pod("ADDED", raw)
    for raw in bound + pending:
        scheduler.on_pod("DELETED", raw)
    assert sorted(p.name for p in gone) == sorted(raw["metadata"]["name"] for raw in bound + pending)
    assert held(scheduler=scheduler) == start


def test_a_queue_never_popped_keeps_no_heap_entry_for_every_pod_gone() -> None:
    # A follower queues every pending pod and never pops: the leader binds them, and each leaves.
    queue = SchedulingQueue()
    queue.add(pod_from_dict(make_pod("stays", "ns")))
    for index in range(100):
        for raw in batch(index, node=None):
            pod = pod_from_dict(raw)
            queue.add(pod)
            queue.delete(pod.uid)
    assert held(queue=queue)["queue._active"] <= 2 + COMPACT_SLACK
    queue.delete(pod_from_dict(make_pod("stays", "ns")).uid)
    assert held(queue=queue) == {}


def test_the_memory_diff_counts_from_its_last_rebase() -> None:
    tracemalloc.start()
    try:
        memory = MemoryDiff()
        kept = [bytearray(300_000)]  # grown before the rebase: not reported after it
        memory.top(rebase=True)
        kept.append(bytearray(500_000))
        top = memory.top(group="lineno")
        assert top is not None
        assert [entry["size_diff"] // 100_000 for entry in top if entry["size_diff"] >= 100_000] == [5]
    finally:
        tracemalloc.stop()


def test_sizes_are_read_while_another_thread_changes_a_map_of_sets() -> None:
    class Owner:
        def __init__(self) -> None:
            self.owned: dict[str, set[str]] = {"a": Changing({"x"}), "b": {"y"}}

    class Changing(set[str]):
        def __len__(self) -> int:  # what the recorder's thread may do between two reads
            owner.owned[f"k{len(owner.owned)}"] = {"z"}
            return super().__len__()

    owner = Owner()
    assert held(owner=owner)["owner.owned[*]"] == 2


async def test_python_s_arenas_are_counted_as_they_are_mapped_and_unmapped() -> None:
    def figures() -> tuple[int, int]:
        sizes = process_sizes()
        return sizes["python.arenas"], sizes["python.blocks_kib"]

    arenas, blocks_kib = figures()
    # Tuples of 48 bytes: enough to fill the free room of the arenas mapped already (earlier tests
    # leave plenty), and 16 MiB more, which needs new arenas.
    room_kib = arenas * 1024 - blocks_kib
    kept = [(i,) for i in range((room_kib + 16 * 1024) * 1024 // 48)]
    grown = figures()
    del kept
    shrunk = figures()
    assert grown[0] >= arenas + 12 and grown[1] >= blocks_kib + 16 * 1024, (arenas, blocks_kib, grown)
    assert shrunk[0] <= grown[0] - 12 and shrunk[1] <= grown[1] - 16 * 1024, (grown, shrunk)


@pytest.mark.skipif(not hasattr(ctypes.CDLL(None), "mallinfo2"), reason="glibc's mallinfo2")
async def test_a_large_block_counts_as_mapped_while_it_is_held() -> None:
    libc = ctypes.CDLL(None)
    libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    before = process_sizes()["malloc.mapped_kib"]
    # Larger than glibc's mmap threshold can rise to (32 MiB): always a mapping of its own.
    block = libc.malloc(40 << 20)
    try:
        held_kib = process_sizes()["malloc.mapped_kib"]
    finally:
        libc.free(block)
    after = process_sizes()["malloc.mapped_kib"]
    assert held_kib >= before + (40 << 10) and after <= held_kib - (40 << 10), (before, held_kib, after)


def test_a_pod_group_deleted_leaves_no_parsed_copy_behind() -> None:
    scheduler = Scheduler(
        SchedulerSettings("kubesched"), default_algorithm(), cast(Binder, None), cast(Recorder, Quiet())
    )
    start = held(scheduler=scheduler)
    group = {"metadata": {"namespace": "ns", "name": "g", "resourceVersion": "1"}, "spec": {"minMember": 2}}
    member = make_pod("m", "ns", scheduler_name="kubesched", labels={"scheduling.x-k8s.io/pod-group": "g"})
    scheduler.on_object("PodGroup", "ADDED", group)
    scheduler.on_pod("ADDED", member)  # queued in its group's place in line: the group is parsed
    assert held(scheduler=scheduler).get("scheduler._pod_group._parsed") == 1
    scheduler.on_pod("DELETED", member)
    scheduler.on_object("PodGroup", "DELETED", group)
    assert held(scheduler=scheduler) == start


async def test_the_queue_keeps_no_empty_lane_once_its_last_pod_is_taken() -> None:
    queue = SchedulingQueue()
    pod = pod_from_dict(make_pod("only", "ns"))
    queue.add(pod)
    [entry] = await queue.pop_batch(10)
    queue.done(entry)
    queue.delete(pod.uid)
    assert held(queue=queue) == {}
