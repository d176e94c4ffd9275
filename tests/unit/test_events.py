"""The recorder against a fake API server: what it writes, in what order, what it keeps, drops, retries."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import aiohttp
import pytest
from prometheus_client import REGISTRY
from structlog.testing import capture_logs

from kubesched.kube.client import STRATEGIC_MERGE_PATCH, TokenBucket
from kubesched.kube.events import SERVER_RETRIES, Recorder, scheduled_message, written_count
from kubesched.kube.reasons import FAILED_SCHEDULING, NORMAL, SCHEDULED
from kubesched.model.objects import Pod, pod_from_dict
from kubesched.telemetry import metrics
from kubesched_dev.fixtures import make_pod, wait_for


class FakeServer:
    """Answers the recorder's requests from its thread; `gate` closed: requests wait; `down`: refused."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, Any, str]] = []
        self.attempts = 0
        self.gate = threading.Event()
        self.gate.set()
        self.down = threading.Event()
        self.status: dict[str, int] = {}  # method -> status to answer instead of success
        self.events: dict[str, dict[str, Any]] = {}  # name -> the Event as stored

    async def send(self, method: str, path: str, body: Any, content_type: str) -> tuple[int, Any]:
        self.attempts += 1
        while not self.gate.is_set():  # noqa: ASYNC110  # set from the test's thread, not this loop
            await asyncio.sleep(0.002)
        if self.down.is_set():
            raise aiohttp.ClientConnectorError(None, OSError(111, "Connection refused"))  # type: ignore[arg-type]
        if method in self.status:
            return self.status[method], "refused"
        self.requests.append((method, path, body, content_type))
        if path.endswith("/events") and method == "POST":
            self.events[body["metadata"]["name"]] = dict(body)
            return 201, body
        if "/events/" in path and method == "PATCH":
            stored = self.events.get(path.rsplit("/", 1)[1])
            if stored is None:
                return 404, "not found"
            stored.update(body)
            return 200, stored
        return 200, {}

    def posts(self) -> list[dict[str, Any]]:
        return [body for method, path, body, _ in self.requests if method == "POST"]

    def patches(self, kind: str) -> list[tuple[str, Any]]:
        marker = "/events/" if kind == "event" else "/status"
        return [
            (path, body) for method, path, body, _ in self.requests if method == "PATCH" and marker in path
        ]


def pod(name: str = "p") -> Pod:
    return pod_from_dict(make_pod(name, "ns", "kubesched"))


def counted(metric: str, result: str) -> float:
    return REGISTRY.get_sample_value(metric, {"result": result}) or 0.0


def recorder(server: FakeServer, **options: Any) -> Recorder:
    options.setdefault("poll_interval", 0.002)
    options.setdefault("retry_delays", (0.005, 0.02))
    return Recorder(None, "kubesched", TokenBucket(0, 1), send=server.send, **options)  # type: ignore[arg-type]


async def test_a_new_event_is_posted_with_a_count_of_one() -> None:
    server, p = FakeServer(), pod()
    events = recorder(server)
    events.event(p, NORMAL, SCHEDULED, scheduled_message(p, "n1"))
    await wait_for(lambda: server.posts(), timeout=5, interval=0.005)
    await events.close()
    (body,) = server.posts()
    assert body["metadata"]["name"].startswith("p.")
    assert body["involvedObject"] == {
        "apiVersion": "v1",
        "kind": "Pod",
        "name": "p",
        "namespace": "ns",
        "uid": p.uid,
        "resourceVersion": p.resource_version,
    }
    assert (body["type"], body["reason"], body["message"]) == (
        NORMAL,
        SCHEDULED,
        "Successfully assigned ns/p to n1",
    )
    assert body["count"] == 1 and body["firstTimestamp"] == body["lastTimestamp"]
    assert body["source"] == {"component": "kubesched"}
    assert "series" not in body


async def test_a_repeated_event_patches_the_count_of_the_one_written() -> None:
    server, p = FakeServer(), pod()
    events = recorder(server)
    before = counted("kubesched_events_total", "aggregated")
    for _ in range(5):
        events.event(p, "Warning", FAILED_SCHEDULING, "0/3 nodes are available: 3 Insufficient cpu.")
    await wait_for(lambda: len(server.requests) == 5, timeout=5, interval=0.005)
    await events.close()
    (posted,) = server.posts()
    patches = server.patches("event")
    assert [path for path, _ in patches] == [f"/api/v1/namespaces/ns/events/{posted['metadata']['name']}"] * 4
    assert [body["count"] for _, body in patches] == [2, 3, 4, 5]
    assert set(patches[0][1]) == {"count", "lastTimestamp", "message", "series"}
    assert [body["series"]["count"] for _, body in patches] == [2, 3, 4, 5]
    observed = patches[-1][1]["series"]["lastObservedTime"]
    assert observed.startswith(patches[-1][1]["lastTimestamp"][:-1]) and observed.endswith("Z"), observed
    assert {content_type for _, _, _, content_type in server.requests[1:]} == {STRATEGIC_MERGE_PATCH}
    assert counted("kubesched_events_total", "aggregated") - before == 4


async def test_a_patch_of_an_event_gone_from_the_server_posts_it_again_with_the_count() -> None:
    server, p = FakeServer(), pod()
    events = recorder(server)
    events.event(p, "Warning", FAILED_SCHEDULING, "no")
    await wait_for(lambda: server.posts(), timeout=5, interval=0.005)
    server.events.clear()  # expired (the API server keeps events an hour)
    events.event(p, "Warning", FAILED_SCHEDULING, "no")
    await wait_for(lambda: len(server.posts()) == 2, timeout=5, interval=0.005)
    await events.close()
    first, again = server.posts()
    assert again["metadata"]["name"] == first["metadata"]["name"]
    assert (again["count"], again["firstTimestamp"]) == (2, first["firstTimestamp"])
    assert "series" not in first and again["series"]["count"] == 2


async def test_many_similar_events_are_combined_into_one() -> None:
    server, p = FakeServer(), pod()
    events = recorder(server)
    for i in range(12):
        events.event(p, "Warning", FAILED_SCHEDULING, f"0/{i} nodes are available")
    await wait_for(lambda: len(server.requests) == 12, timeout=5, interval=0.005)
    await events.close()
    posts = server.posts()
    assert len(posts) == 10
    assert posts[-1]["message"] == "(combined from similar events): 0/9 nodes are available"
    assert [body["message"] for _, body in server.patches("event")] == [
        "(combined from similar events): 0/10 nodes are available",
        "(combined from similar events): 0/11 nodes are available",
    ]


async def test_a_flood_about_one_pod_is_filtered_but_its_scheduled_event_is_not() -> None:
    server, p = FakeServer(), pod()
    events = recorder(server)
    before = counted("kubesched_events_total", "spam_filtered")
    for _ in range(30):
        events.event(p, "Warning", FAILED_SCHEDULING, "0/3 nodes are available")
    events.event(p, NORMAL, SCHEDULED, scheduled_message(p, "n1"))
    await wait_for(lambda: any(b["reason"] == SCHEDULED for b in server.posts()), timeout=5, interval=0.005)
    await events.close()
    assert len(server.requests) == 26  # 25 failures (the burst), then the Scheduled event
    assert counted("kubesched_events_total", "spam_filtered") - before == 5


async def test_a_full_queue_drops_and_counts_without_blocking_and_logs_once() -> None:
    server = FakeServer()
    server.gate.clear()  # the API server takes its time
    events = recorder(server, size=3)
    before = counted("kubesched_events_total", "dropped")
    pods = [pod(f"p{i}") for i in range(1000)]
    with capture_logs() as logs:
        started = time.perf_counter()
        for p in pods:
            events.event(p, NORMAL, SCHEDULED, "m")
        took = time.perf_counter() - started
    assert took < 0.5  # returns at once: nothing waits for the API server
    assert events.backlog == 3 and events.dropped == 997
    assert counted("kubesched_events_total", "dropped") - before == 997
    assert [entry["dropped"] for entry in logs if entry["event"] == "events_dropped"] == [1]
    server.gate.set()
    await wait_for(lambda: events.backlog == 0, timeout=5, interval=0.005)
    await events.close()
    assert sorted(body["involvedObject"]["name"] for body in server.posts()) == ["p0", "p1", "p2"]


async def test_events_are_kept_while_the_api_server_is_unreachable_and_sent_once_it_is_back() -> None:
    server = FakeServer()
    server.down.set()
    events = recorder(server)
    pods = [pod(f"p{i}") for i in range(20)]
    with capture_logs() as logs:
        for p in pods:
            events.event(p, NORMAL, SCHEDULED, scheduled_message(p, "n1"))
        await wait_for(lambda: server.attempts > 30, timeout=5, interval=0.005)  # retried meanwhile
        assert server.requests == [] and events.backlog == 20
        server.down.clear()
        await wait_for(lambda: len(server.posts()) == 20, timeout=10, interval=0.005)
    await events.close()
    assert sorted(body["involvedObject"]["name"] for body in server.posts()) == sorted(p.name for p in pods)
    assert events.dropped == 0
    names = [entry["event"] for entry in logs]
    assert names.count("events_api_unreachable") == 1 and names.count("events_api_reachable") == 1


async def test_a_server_error_is_retried_a_few_times_then_counted_as_failed() -> None:
    server = FakeServer()
    server.status["POST"] = 503
    events = recorder(server)
    before = counted("kubesched_events_total", "failed")
    events.event(pod(), NORMAL, SCHEDULED, "m")
    await wait_for(lambda: counted("kubesched_events_total", "failed") > before, timeout=5, interval=0.005)
    assert server.attempts == 1 + SERVER_RETRIES
    del server.status["POST"]
    events.event(pod("next"), NORMAL, SCHEDULED, "m")  # the recorder carries on
    await wait_for(lambda: server.posts(), timeout=5, interval=0.005)
    await events.close()


@pytest.mark.parametrize(("status", "result"), [(409, "posted"), (403, "failed"), (422, "failed")])
async def test_a_refused_post_is_not_retried(status: int, result: str) -> None:
    server = FakeServer()
    server.status["POST"] = status  # 409: a try whose reply was lost had created it
    events = recorder(server)
    before = counted("kubesched_events_total", result)
    events.event(pod(), NORMAL, SCHEDULED, "m")
    await wait_for(lambda: counted("kubesched_events_total", result) > before, timeout=5, interval=0.005)
    await events.close()
    assert server.attempts == 1


async def test_an_identical_condition_patch_still_queued_is_not_queued_again() -> None:
    server, p = FakeServer(), pod()
    server.gate.clear()
    events = recorder(server)
    before = counted("kubesched_pod_condition_patches_total", "collapsed")
    events.unschedulable(p, "0/3 nodes are available")
    await wait_for(lambda: server.attempts == 1, timeout=5, interval=0.005)  # the event is in flight
    events.unschedulable(p, "0/3 nodes are available")
    events.unschedulable(p, "0/4 nodes are available")  # a different one is queued
    server.gate.set()
    await wait_for(lambda: events.backlog == 0, timeout=5, interval=0.005)
    await events.close()
    conditions = [body["status"]["conditions"][0] for _, body in server.patches("condition")]
    assert [(c["type"], c["status"], c["reason"]) for c in conditions] == [
        ("PodScheduled", "False", "Unschedulable")
    ] * 2
    assert [c["message"] for c in conditions] == ["0/3 nodes are available", "0/4 nodes are available"]
    assert counted("kubesched_pod_condition_patches_total", "collapsed") - before == 1
    # The pod's writes went out in the order they were made.
    kinds = [
        (method, "condition" if path.endswith("/status") else "event")
        for method, path, _, _ in server.requests
    ]
    assert kinds == [
        ("POST", "event"),
        ("PATCH", "condition"),
        ("PATCH", "event"),  # the same FailedScheduling again: counted
        ("POST", "event"),
        ("PATCH", "condition"),
    ]


async def test_close_sends_what_is_queued_within_its_grace() -> None:
    server = FakeServer()
    events = recorder(server, poll_interval=0.05)
    for i in range(50):
        events.event(pod(f"p{i}"), NORMAL, SCHEDULED, "m")
    await events.close(grace=5)
    assert len(server.posts()) == 50
    events.event(pod("late"), NORMAL, SCHEDULED, "m")  # after close: dropped, not queued
    assert events.dropped == 1


async def test_close_gives_up_after_its_grace_while_the_api_server_is_unreachable() -> None:
    server = FakeServer()
    server.down.set()
    events = recorder(server)
    events.event(pod(), NORMAL, SCHEDULED, "m")
    await wait_for(lambda: server.attempts > 0, timeout=5, interval=0.005)
    started = time.monotonic()
    with capture_logs() as logs:
        await events.close(grace=0.2)
    assert 0.15 < time.monotonic() - started < 2
    assert [entry["count"] for entry in logs if entry["event"] == "events_abandoned"] == [1]


async def test_a_recorder_that_never_recorded_closes_at_once() -> None:
    events = Recorder(None, "kubesched", TokenBucket(0, 1))  # type: ignore[arg-type]
    await events.close(grace=0)
    assert events.backlog == 0 and events.dropped == 0


async def test_the_hand_off_time_is_counted_and_exported_by_scheduler_name() -> None:
    """The bench's figure for the recorder's share of the loop reads this (bench/kubebench/runner.py)."""
    server = FakeServer()
    events = recorder(server)
    assert events.handoff_seconds == 0.0
    events.event(pod("a"), NORMAL, SCHEDULED, "m")
    events.unschedulable(pod("b"), "0/1 nodes are available")
    first = events.handoff_seconds
    assert first > 0.0
    events.event(pod("c"), NORMAL, SCHEDULED, "m")
    assert events.handoff_seconds > first
    metrics.EVENT_HANDOFF.track(lambda: {events.component: events.handoff_seconds})
    exported = REGISTRY.get_sample_value("kubesched_event_handoff_seconds", {"scheduler": "kubesched"})
    assert exported == events.handoff_seconds
    await wait_for(lambda: events.backlog == 0, timeout=5, interval=0.005)
    await events.close()


def test_thread_cpu_is_exported_by_role_with_the_main_thread_as_the_event_loop() -> None:
    done = threading.Event()

    def spin() -> None:
        while not done.is_set():
            sum(range(1000))

    workers = [threading.Thread(target=spin, name=f"algorithm_{i}") for i in range(2)]
    for worker in workers:
        worker.start()
    try:
        roles = metrics.thread_cpu_seconds()
    finally:
        done.set()
        for worker in workers:
            worker.join()
    assert {"event-loop", "algorithm"} <= set(roles), roles
    assert all(seconds >= 0 for seconds in roles.values())
    assert REGISTRY.get_sample_value("kubesched_thread_cpu_seconds", {"thread": "event-loop"}) is not None


@pytest.mark.parametrize(
    ("reply", "count"),
    [
        ('{"kind": "Event", "metadata": {"name": "p.1", "managedFields": [{"f:count": {}}]}, "count": 3}', 3),
        ('{"kind": "Pod", "metadata": {"name": "p"}, "status": {"conditions": []}}', None),  # a status patch
    ],
)
def test_of_a_write_s_reply_only_the_count_is_read(reply: str, count: int | None) -> None:
    assert written_count(reply) == {"count": count}


def test_a_reply_with_a_count_of_another_type_is_refused_as_the_request_refuses_bad_json() -> None:
    with pytest.raises(ValueError):  # request() then hands the text on, and the count written is kept
        written_count('{"count": "three"}')
