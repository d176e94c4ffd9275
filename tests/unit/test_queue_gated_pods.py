"""Pods with `spec.schedulingGates` wait outside the scheduling queue until the last gate goes, as
kube-scheduler 1.32's PreEnqueue keeps them (`pkg/scheduler/framework/plugins/schedulinggates/
scheduling_gates.go`; `pkg/scheduler/backend/queue/scheduling_queue.go`, which parks a pod a
PreEnqueue plugin rejects among the unschedulable pods with `gated` set, never flushed, and moves
it to the active queue on the update that clears its gates).

The pods are shaped as a 1.32 API server sends them: the gates in the spec, and the PodScheduled
condition the API server writes on create. A 1.20 API server drops the field, so these tests feed
the queue, the scheduler and the watch parser directly.
"""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import Callable
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from typing import Any, cast

from kubernetes_asyncio import client

from kubesched.kube.binding import Binder, BindOutcome, BindResult
from kubesched.kube.events import Recorder
from kubesched.kube.informer import Informer
from kubesched.model.objects import Pod, pod_from_dict
from kubesched.plugins.scheduling_gates import GATED_CONDITION_MESSAGE
from kubesched.policy.compile import default_algorithm
from kubesched.runtime.queue import ACTIVE, BACKOFF, GATED, UNSCHEDULABLE, QueueSettings, SchedulingQueue
from kubesched.runtime.scheduler import Scheduler, SchedulerSettings
from kubesched_dev.fixtures import WatchApi, make_node, wait_for

NAME = "kubesched"
GATED_CONDITION = {
    "type": "PodScheduled",
    "status": "False",
    "lastProbeTime": None,
    "lastTransitionTime": "2024-12-04T11:16:41Z",
    "reason": "SchedulingGated",
    "message": "Scheduling is blocked due to non-empty scheduling gates",
}


def pod_132(name: str, gates: tuple[str, ...] = (), *, told: bool = True, version: int = 1) -> dict[str, Any]:
    """A pending pod as kube-apiserver 1.32 serves it; `told`: with the condition it writes on create."""
    spec: dict[str, Any] = {
        "containers": [
            {
                "name": "pause",
                "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
                "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File",
                "imagePullPolicy": "IfNotPresent",
            }
        ],
        "restartPolicy": "Always",
        "terminationGracePeriodSeconds": 30,
        "dnsPolicy": "ClusterFirst",
        "serviceAccountName": "default",
        "securityContext": {},
        "schedulerName": NAME,
        "tolerations": [
            {
                "key": "node.kubernetes.io/not-ready",
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": 300,
            }
        ],
        "priority": 0,
        "enableServiceLinks": True,
        "preemptionPolicy": "PreemptLowerPriority",
    }
    if gates:
        spec["schedulingGates"] = [{"name": gate} for gate in gates]
    status: dict[str, Any] = {"phase": "Pending", "qosClass": "Burstable"}
    if gates and told:
        status["conditions"] = [dict(GATED_CONDITION)]
    return {
        "kind": "Pod",
        "apiVersion": "v1",
        "metadata": {
            "name": name,
            "namespace": "default",
            "uid": f"0b5c7d1e-{name}",
            "resourceVersion": str(1000 + version),
            "creationTimestamp": "2024-12-04T11:16:41Z",
        },
        "spec": spec,
        "status": status,
    }


def ungated(raw: dict[str, Any], version: int = 2) -> dict[str, Any]:
    """The update that removes the last gate (the condition stays until the scheduler rewrites it)."""
    out = copy.deepcopy(raw)
    out["spec"].pop("schedulingGates", None)
    out["metadata"]["resourceVersion"] = str(1000 + version)
    return out


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def make_queue() -> tuple[SchedulingQueue, Clock]:
    clock = Clock()
    return SchedulingQueue(QueueSettings(1.0, 10.0, 60.0), clock=clock), clock


async def pop_now(queue: SchedulingQueue) -> list[str]:
    """What the loop would take now, without waiting for a timer."""
    try:
        batch = await asyncio.wait_for(queue.pop_batch(100), 0.05)
    except TimeoutError:
        return []
    return [entry.pod.name for entry in batch]


# ------------------------------------------------------------------------------------------ queue


async def test_a_gated_pod_is_never_popped_and_counts_as_gated() -> None:
    queue, clock = make_queue()
    assert queue.add(pod_from_dict(pod_132("gated", ("example.com/foo",)))) is True
    queue.add(pod_from_dict(pod_132("plain")))
    (plain,) = await asyncio.wait_for(queue.pop_batch(100), 1)
    assert plain.pod.name == "plain"
    queue.done(plain)
    clock.now += 3600  # no flush, no backoff brings it in
    queue.move_all("NodeAdd")
    queue.requeue_all()
    assert await pop_now(queue) == []
    assert queue.counts() == {ACTIVE: 0, BACKOFF: 0, UNSCHEDULABLE: 0, GATED: 1}
    assert "0b5c7d1e-gated" in queue and queue.is_gated("0b5c7d1e-gated")


async def test_removing_the_last_gate_puts_the_pod_in_the_active_queue_at_once() -> None:
    queue, _ = make_queue()
    raw = pod_132("gated", ("example.com/foo", "example.com/bar"))
    queue.add(pod_from_dict(raw))
    one_left = copy.deepcopy(raw)
    one_left["spec"]["schedulingGates"] = [{"name": "example.com/bar"}]
    assert queue.add(pod_from_dict(one_left)) is False  # still gated, and not newly
    assert await pop_now(queue) == []
    queue.add(pod_from_dict(ungated(raw)))
    assert queue.counts()[GATED] == 0 and queue.counts()[ACTIVE] == 1
    batch = await asyncio.wait_for(queue.pop_batch(10), 1)
    assert [e.pod.name for e in batch] == ["gated"] and batch[0].attempts == 1
    assert batch[0].pod.scheduling_gates == ()


async def test_a_deleted_gated_pod_is_forgotten() -> None:
    queue, _ = make_queue()
    queue.add(pod_from_dict(pod_132("gated", ("foo",))))
    queue.delete("0b5c7d1e-gated")
    assert len(queue) == 0 and queue.counts()[GATED] == 0
    queue.add(pod_from_dict(ungated(pod_132("gated", ("foo",)))))  # seen again later: a new pod
    assert await pop_now(queue) == ["gated"]


async def test_a_pod_that_gains_gates_while_waiting_leaves_every_sub_queue() -> None:
    """The API forbids adding gates after creation; the queue holds such a pod all the same."""
    queue, clock = make_queue()
    raw = pod_132("p")
    queue.add(pod_from_dict(raw))
    (entry,) = await asyncio.wait_for(queue.pop_batch(1), 1)
    queue.unschedulable(entry)
    gained = copy.deepcopy(raw)
    gained["spec"]["schedulingGates"] = [{"name": "late"}]
    assert queue.add(pod_from_dict(gained)) is True
    clock.now += 3600
    assert await pop_now(queue) == []
    assert queue.counts() == {ACTIVE: 0, BACKOFF: 0, UNSCHEDULABLE: 0, GATED: 1}


# -------------------------------------------------------------------------------------- scheduler


class Binds:
    """Binds everything, or answers every bind with `conflict` (a 409 and its message)."""

    def __init__(self, conflict: str = "") -> None:
        self.conflict = conflict
        self.sent: list[str] = []

    async def bind(self, pod: Pod, node_name: str, extender: Any = None, **_: object) -> BindResult:
        self.sent.append(pod.name)
        if self.conflict:
            return BindResult(BindOutcome.CONFLICT, self.conflict, 0.0)
        return BindResult(BindOutcome.BOUND, "", 0.0)

    async def answers(self) -> bool:
        return True


class CountingExecutor(ThreadPoolExecutor):
    """Counts the algorithm's runs: the loop hands every batch to its executor."""

    def __init__(self) -> None:
        super().__init__(max_workers=1)
        self.runs = 0

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        self.runs += 1
        return super().submit(fn, *args, **kwargs)


class Recorded:
    """A recorder whose `gated` calls land in a list (Recorder's own method name)."""

    def __init__(self) -> None:
        self.conditions: list[tuple[str, str]] = []
        self.failed: list[str] = []
        self.scheduled: list[str] = []

    def gated(self, pod: Pod, message: str) -> None:
        self.conditions.append((pod.name, message))

    def unschedulable(self, pod: Pod, message: str) -> None:
        self.failed.append(pod.name)

    def event(self, pod: Pod, type_: str, reason: str, message: str) -> None:
        if reason == "Scheduled":
            self.scheduled.append(pod.name)


def new_scheduler(binder: Binds, recorder: Recorded, executor: Executor | None = None) -> Scheduler:
    scheduler = Scheduler(
        SchedulerSettings(NAME, seed=1),
        default_algorithm(),
        cast(Binder, binder),
        cast(Recorder, recorder),
        queue=SchedulingQueue(QueueSettings(0.01, 0.02, 60.0)),
        executor=executor,
    )
    scheduler.on_node("ADDED", make_node("n1", cpu="8", pods="110"))
    return scheduler


async def no_resync() -> None:
    return None


async def test_the_leader_writes_the_gated_condition_once_and_only_where_it_is_missing() -> None:
    recorder = Recorded()
    scheduler = new_scheduler(Binds(), recorder)
    scheduler.on_pod("ADDED", pod_132("untold", ("foo",), told=False))
    scheduler.on_pod("ADDED", pod_132("told", ("foo",)))
    assert recorder.conditions == []  # a follower writes nothing
    term = asyncio.create_task(scheduler.lead(no_resync))
    try:
        await wait_for(lambda: recorder.conditions, timeout=5, interval=0.01)
        scheduler.on_pod("MODIFIED", pod_132("untold", ("foo",), told=False, version=2))
        scheduler.on_pod("ADDED", pod_132("later", ("bar",), told=False))
        await asyncio.sleep(0.05)
    finally:
        scheduler.queue.close()
        await asyncio.wait_for(term, 5)
    assert recorder.conditions == [("untold", GATED_CONDITION_MESSAGE), ("later", GATED_CONDITION_MESSAGE)]
    assert recorder.scheduled == [] and recorder.failed == []


async def test_ten_thousand_gated_pods_never_reach_the_algorithm_and_one_ungated_is_bound() -> None:
    binder, recorder, executor = Binds(), Recorded(), CountingExecutor()
    scheduler = new_scheduler(binder, recorder, executor)
    raws = [pod_132(f"g{i:05}", ("example.com/wait",)) for i in range(10_000)]
    for raw in raws:
        scheduler.on_pod("ADDED", raw)
    loop = asyncio.create_task(scheduler.run())
    try:
        for _ in range(20):
            await asyncio.sleep(0)
        assert executor.runs == 0 and binder.sent == []
        assert scheduler.queue.counts() == {ACTIVE: 0, BACKOFF: 0, UNSCHEDULABLE: 0, GATED: 10_000}
        scheduler.on_pod("MODIFIED", ungated(raws[1234]))
        await wait_for(lambda: recorder.scheduled, timeout=5, interval=0.01)
    finally:
        scheduler.queue.close()
        await asyncio.wait_for(loop, 5)
        executor.shutdown()
    assert binder.sent == ["g01234"] and executor.runs == 1
    assert scheduler.queue.counts()[GATED] == 9_999


async def test_a_bind_refused_for_scheduling_gates_holds_the_pod_until_they_go() -> None:
    conflict = 'Operation cannot be fulfilled on pods/binding "p": pod p has non-empty .spec.schedulingGates'
    binder, recorder = Binds(conflict), Recorded()
    scheduler = new_scheduler(binder, recorder)
    raw = pod_132("p")  # a view that missed the gates the server holds
    scheduler.on_pod("ADDED", raw)
    loop = asyncio.create_task(scheduler.run())
    try:
        await wait_for(lambda: scheduler.queue.is_gated(raw["metadata"]["uid"]), timeout=5, interval=0.01)
        assert binder.sent == ["p"] and not scheduler.cache.is_assumed(raw["metadata"]["uid"])
        binder.conflict = ""
        scheduler.on_pod("MODIFIED", ungated(raw, version=3))
        await wait_for(lambda: recorder.scheduled, timeout=5, interval=0.01)
    finally:
        scheduler.queue.close()
        await asyncio.wait_for(loop, 5)
    assert binder.sent == ["p", "p"]


async def test_another_conflict_still_means_bound_elsewhere() -> None:
    binder, recorder = Binds('pod p is already assigned to node "n2"'), Recorded()
    scheduler = new_scheduler(binder, recorder)
    raw = pod_132("p")
    scheduler.on_pod("ADDED", raw)
    loop = asyncio.create_task(scheduler.run())
    try:
        await wait_for(lambda: binder.sent, timeout=5, interval=0.01)
        await wait_for(lambda: raw["metadata"]["uid"] not in scheduler.queue, timeout=5, interval=0.01)
    finally:
        scheduler.queue.close()
        await asyncio.wait_for(loop, 5)
    assert not scheduler.queue.is_gated(raw["metadata"]["uid"])


# ------------------------------------------------------------------------------------- the watch


async def test_the_watch_parses_gates_from_a_raw_event_and_their_removal() -> None:
    raw = pod_132("web-0", ("example.com/quota",))
    events = [
        json.dumps({"type": "ADDED", "object": raw}).encode() + b"\n",
        json.dumps({"type": "MODIFIED", "object": ungated(raw)}).encode() + b"\n",
    ]
    seen: list[tuple[bool, bool]] = []
    scheduler = new_scheduler(Binds(), Recorded())
    uid = raw["metadata"]["uid"]

    def handle(kind: str | None, obj: Any) -> None:
        scheduler.on_pod(kind, obj)
        seen.append((scheduler.queue.is_gated(uid), uid in scheduler.queue))

    informer = Informer(cast(client.ApiClient, WatchApi(events[:1])), "/api/v1/pods", handle)
    await informer._watch()
    assert seen == [(True, True)] and informer.resource_version == "1001"
    assert pod_from_dict(raw).scheduling_gates == ("example.com/quota",)
    informer.api = cast(client.ApiClient, WatchApi(events[1:]))
    await informer._watch()
    assert seen[-1] == (False, True) and scheduler.queue.counts()[ACTIVE] == 1
