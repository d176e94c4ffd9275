"""The recorder against the real API server: repeats become one Event with a count, similar ones one
combined Event, an Event deleted meanwhile is created again, and the PodScheduled condition is set."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest_asyncio
from kubernetes_asyncio.client import ApiClient

from kubesched.kube.client import TokenBucket, request
from kubesched.kube.event_correlator import COMBINED_PREFIX
from kubesched.kube.events import Recorder, scheduled_message
from kubesched.kube.reasons import FAILED_SCHEDULING, NORMAL, SCHEDULED, WARNING
from kubesched.model.objects import Pod, pod_from_dict
from kubesched_dev.fixtures import create_pods, make_pod, wait_for

from .kubeapi import events_for

NOBODY = "no-scheduler-runs-this"  # the pods stay pending: only the recorder writes about them


@pytest_asyncio.fixture
async def recorder(api: ApiClient) -> AsyncIterator[Recorder]:
    made = Recorder(api, "kubesched", TokenBucket(50, 100))
    yield made
    await made.close()


async def pending_pod(api: ApiClient, namespace: str, name: str) -> Pod:
    await create_pods(api, [make_pod(name, namespace, NOBODY)])
    status, raw = await request(api, "GET", f"/api/v1/namespaces/{namespace}/pods/{name}")
    assert status == 200, raw
    return pod_from_dict(raw)


async def events_about(api: ApiClient, namespace: str, pod: str, reason: str) -> list[dict[str, Any]]:
    return [e for e in await events_for(api, namespace, pod) if e["reason"] == reason]


async def test_the_same_failure_five_times_is_one_event_with_a_count_of_five(
    api: ApiClient, namespace: str, recorder: Recorder
) -> None:
    pod = await pending_pod(api, namespace, "p")
    message = "0/3 nodes are available: 3 Insufficient cpu."
    for _ in range(5):
        recorder.event(pod, WARNING, FAILED_SCHEDULING, message)

    async def counted() -> list[dict[str, Any]] | None:
        found = await events_about(api, namespace, "p", FAILED_SCHEDULING)
        return found if found and found[0]["count"] == 5 else None

    (event,) = await wait_for(counted, timeout=20, interval=0.2, message="one FailedScheduling with count 5")
    assert event["message"] == message
    assert event["type"] == WARNING and event["source"] == {"component": NOBODY}
    assert event["involvedObject"]["uid"] == pod.uid
    assert event["firstTimestamp"] <= event["lastTimestamp"]
    # The API server keeps the series the repeats carry (core/v1 validates it loosely: this checks
    # that it is stored as written, not dropped).
    assert event["series"]["count"] == 5 and event["series"]["lastObservedTime"].endswith("Z")


async def test_twelve_similar_failures_end_in_one_combined_event(
    api: ApiClient, namespace: str, recorder: Recorder
) -> None:
    pod = await pending_pod(api, namespace, "p")
    for i in range(12):
        recorder.event(
            pod, WARNING, FAILED_SCHEDULING, f"0/{i + 1} nodes are available: {i + 1} Insufficient cpu."
        )
    await wait_for(lambda: recorder.backlog == 0, timeout=20, interval=0.1)
    events = await events_about(api, namespace, "p", FAILED_SCHEDULING)
    combined = [e for e in events if e["message"].startswith(COMBINED_PREFIX)]
    assert len(events) == 10 and len(combined) == 1
    assert combined[0]["message"] == f"{COMBINED_PREFIX}0/12 nodes are available: 12 Insufficient cpu."
    assert combined[0]["count"] == 3  # the 10th, 11th and 12th distinct messages
    assert sorted(e["count"] for e in events if e not in combined) == [1] * 9


async def test_a_repeat_of_an_event_deleted_meanwhile_creates_it_again_with_the_count(
    api: ApiClient, namespace: str, recorder: Recorder
) -> None:
    pod = await pending_pod(api, namespace, "p")
    message = scheduled_message(pod, "n1")
    recorder.event(pod, NORMAL, SCHEDULED, message)
    (first,) = await wait_for(
        lambda: events_about(api, namespace, "p", SCHEDULED), timeout=20, interval=0.2, message="the event"
    )
    name = first["metadata"]["name"]
    status, reply = await request(api, "DELETE", f"/api/v1/namespaces/{namespace}/events/{name}")
    assert status == 200, reply
    recorder.event(pod, NORMAL, SCHEDULED, message)  # the PATCH meets 404: POSTed again, as client-go does

    async def again() -> list[dict[str, Any]]:
        return [e for e in await events_about(api, namespace, "p", SCHEDULED) if e["count"] == 2]

    (second,) = await wait_for(again, timeout=20, interval=0.2, message="the event created again")
    assert second["metadata"]["name"] == name
    assert second["firstTimestamp"] == first["firstTimestamp"]
    assert "series" not in first and second["series"]["count"] == 2


async def test_unschedulable_sets_the_pod_scheduled_condition(
    api: ApiClient, namespace: str, recorder: Recorder
) -> None:
    pod = await pending_pod(api, namespace, "p")
    recorder.unschedulable(pod, "0/1 nodes are available: 1 node(s) didn't match node selector.")

    async def condition() -> dict[str, Any] | None:
        _, raw = await request(api, "GET", f"/api/v1/namespaces/{namespace}/pods/p")
        found = [c for c in raw["status"].get("conditions", []) if c["type"] == "PodScheduled"]
        return found[0] if found else None

    found = await wait_for(condition, timeout=20, interval=0.2, message="PodScheduled condition")
    assert (found["status"], found["reason"]) == ("False", "Unschedulable")
    assert found["message"] == "0/1 nodes are available: 1 node(s) didn't match node selector."
    assert await events_about(api, namespace, "p", FAILED_SCHEDULING)
