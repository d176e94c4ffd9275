"""What the user sees on a pod: events (`Scheduled`, `FailedScheduling`) and the PodScheduled condition.

Events are best effort, as in kube-scheduler: they go through a bounded queue with a few
workers, and are dropped (with a log line) when the API server cannot keep up, so they never
slow down binding.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from datetime import UTC, datetime
from typing import Any

import structlog
from kubernetes_asyncio import client

from kubesched.kube.client import TokenBucket, request
from kubesched.model.objects import Pod

log = structlog.get_logger(__name__)

NORMAL = "Normal"
WARNING = "Warning"
SCHEDULED = "Scheduled"
FAILED_SCHEDULING = "FailedScheduling"
UNSCHEDULABLE = "Unschedulable"
STRATEGIC_MERGE = "application/strategic-merge-patch+json"


def now_rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def scheduled_message(pod: Pod, node: str) -> str:
    return f"Successfully assigned {pod.namespace}/{pod.name} to {node}"


class Recorder:
    """Posts events and condition patches in the background for one scheduler name."""

    def __init__(
        self,
        api: client.ApiClient,
        component: str,
        limiter: TokenBucket,
        *,
        workers: int = 4,
        size: int = 10_000,
    ) -> None:
        self._api = api
        self._component = component
        self._limiter = limiter
        self._queue: asyncio.Queue[tuple[str, Pod, tuple[Any, ...]]] = asyncio.Queue(maxsize=size)
        self._workers = [asyncio.create_task(self._work(), name=f"recorder-{i}") for i in range(workers)]
        self.dropped = 0

    def event(self, pod: Pod, type_: str, reason: str, message: str) -> None:
        self._put("event", pod, (type_, reason, message))

    def unschedulable(self, pod: Pod, message: str) -> None:
        """FailedScheduling event plus PodScheduled=False, reason Unschedulable."""
        self._put("event", pod, (WARNING, FAILED_SCHEDULING, message))
        self._put("condition", pod, (UNSCHEDULABLE, message))

    async def close(self, grace: float = 5.0) -> None:
        """Give queued events a moment to go out, then stop the workers."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._queue.join(), grace)
        for task in self._workers:
            task.cancel()
        await asyncio.gather(*self._workers, return_exceptions=True)

    def _put(self, kind: str, pod: Pod, args: tuple[Any, ...]) -> None:
        try:
            self._queue.put_nowait((kind, pod, args))
        except asyncio.QueueFull:
            self.dropped += 1
            log.warning(
                "event_dropped", pod=pod.key, kind=kind, reason=args[1] if kind == "event" else args[0]
            )

    async def _work(self) -> None:
        while True:
            kind, pod, args = await self._queue.get()
            try:
                await self._limiter.acquire()
                if kind == "event":
                    status, message = await self._post_event(pod, *args)
                else:
                    status, message = await self._patch_condition(pod, *args)
                if status >= 300 and status != 404:  # 404: the pod is gone, nothing to tell
                    log.warning("event_failed", pod=pod.key, kind=kind, status=status, error=message)
            except Exception as exc:  # never let a worker die: the next event may get through
                log.warning("event_failed", pod=pod.key, kind=kind, error=repr(exc))
            finally:
                self._queue.task_done()

    async def _post_event(self, pod: Pod, type_: str, reason: str, message: str) -> tuple[int, Any]:
        stamp = now_rfc3339()
        component = pod.scheduler_name or self._component  # the profile, as kube-scheduler reports it
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"{pod.name}.{uuid.uuid4().hex[:16]}", "namespace": pod.namespace},
            "involvedObject": {
                "apiVersion": "v1",
                "kind": "Pod",
                "name": pod.name,
                "namespace": pod.namespace,
                "uid": pod.uid,
                "resourceVersion": pod.resource_version,
            },
            "type": type_,
            "reason": reason,
            "message": message[:1024],
            "source": {"component": component},
            "reportingComponent": component,
            "reportingInstance": component,
            "action": "Scheduling",
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
        }
        return await request(self._api, "POST", f"/api/v1/namespaces/{pod.namespace}/events", body)

    async def _patch_condition(self, pod: Pod, reason: str, message: str) -> tuple[int, Any]:
        # Strategic merge keyed on `type`: the kubelet's other conditions stay as they are.
        body = {
            "status": {
                "conditions": [
                    {
                        "type": "PodScheduled",
                        "status": "False",
                        "reason": reason,
                        "message": message,
                        "lastProbeTime": None,
                        "lastTransitionTime": now_rfc3339(),
                    }
                ]
            }
        }
        path = f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}/status"
        return await request(self._api, "PATCH", path, body, content_type=STRATEGIC_MERGE)
