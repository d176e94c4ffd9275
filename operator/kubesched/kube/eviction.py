"""Carrying out a preemption: nominate the node on the preemptor, delete the victims, tell them why.

As kube-scheduler 1.20's PrepareCandidate and recordSchedulingFailure do: each victim is deleted
with its default grace period and gets a `Preempted` event ("Preempted by ns/pod on node n");
the preemptor's `status.nominatedNodeName` is set (cleared when preemption cannot help it).
Before its deletion a victim is marked with the condition DisruptionTarget=True, reason
PreemptionByScheduler, as 1.32's prepareCandidate does (PodDisruptionConditions, GA in 1.31), so
that Job pod failure policies and `kubectl describe` tell a preemption from a crash. A victim whose
mark fails is not deleted; one already gone counts as evicted (later releases treat a 404 on the
mark so, and kubesched a 404 on the delete).
Requests go out in the background, through the client's rate limiter; failures are logged,
and the next scheduling cycle sees whatever the watches then report.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Coroutine
from dataclasses import replace
from typing import Any

import structlog

from kubesched.kube.client import MERGE_PATCH, STRATEGIC_MERGE_PATCH, Api, TokenBucket, request
from kubesched.kube.events import Recorder, now_rfc3339
from kubesched.kube.pod_conditions import condition_patch
from kubesched.kube.reasons import DISRUPTION_TARGET, NORMAL, PREEMPTED, PREEMPTION_BY_SCHEDULER
from kubesched.model.objects import Pod
from kubesched.telemetry import metrics

log = structlog.get_logger(__name__)


def preempted_message(preemptor: Pod, node_name: str, why: str = "") -> str:
    message = f"Preempted by {preemptor.namespace}/{preemptor.name} on node {node_name}"
    return f"{message}: {why}" if why else message


def disruption_message(preemptor: Pod) -> str:
    """The DisruptionTarget condition's message: the preemptor's profile, as 1.32 writes it."""
    return f"{preemptor.scheduler_name}: preempting to accommodate a higher priority pod"


class Evictor:
    def __init__(
        self,
        api: Api,
        limiter: TokenBucket,
        recorder: Recorder,
        *,
        may_act: Callable[[], bool] | None = None,
    ) -> None:
        """`may_act` (the elector's is_leader): nothing is deleted or patched while it says False."""
        self._api = api
        self._may_act = may_act
        self._limiter = limiter
        self._recorder = recorder
        self._tasks: set[asyncio.Task[None]] = set()
        self._evictions: set[asyncio.Task[None]] = set()

    def evict(self, victim: Pod, preemptor: Pod, node_name: str, rule: str = "", why: str = "") -> None:
        """Delete `victim` (that very pod: its uid is a precondition) and record why on it: with
        ElasticQuotas, the `rule` it was chosen by (algorithm/quota_reclaim.py) and `why` in words."""
        task = self._spawn(self._evict(victim, preemptor, node_name, rule, why))
        if task is not None:
            self._evictions.add(task)
            task.add_done_callback(self._evictions.discard)

    def nominate(self, pod: Pod, node_name: str) -> None:
        """Set (or with "", clear) the pod's `status.nominatedNodeName`."""
        self._spawn(self._nominate(pod, node_name))

    async def close(self, grace: float = 5.0) -> None:
        """Let the requests in flight finish (a shutdown mid-preemption leaves no half-done work
        that the next leader could not redo), then cancel what is left."""
        if self._tasks:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait(list(self._tasks), timeout=grace)
        for task in list(self._tasks):
            task.cancel()

    def _acting(self) -> bool:
        return self._may_act is None or self._may_act()

    def _spawn(self, work: Coroutine[Any, Any, None]) -> asyncio.Task[None] | None:
        if not self._acting():
            work.close()  # a term that just ended: the next leader decides again
            return None
        task = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _evict(self, victim: Pod, preemptor: Pod, node_name: str, rule: str, why: str) -> None:
        if not await self._mark_disruption_target(victim, preemptor):
            return
        if not self._acting():  # the term ended while the mark was written: the next leader decides
            log.info("preemption_abandoned", pod=victim.key, preemptor=preemptor.key, reason="not leader")
            return
        body = {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": victim.uid}}
        path = f"/api/v1/namespaces/{victim.namespace}/pods/{victim.name}"
        # 404: already gone; 409: a new pod of the same name (the uid precondition).
        status = await self._send(
            "preemption_delete_failed", victim, preemptor, "DELETE", path, body, {404, 409}
        )
        if status is None or status >= 300:
            return
        log.info("pod_preempted", pod=victim.key, preemptor=preemptor.key, node=node_name, rule=rule or None)
        if rule:
            metrics.QUOTA_RECLAIM_EVICTIONS.labels(rule).inc()
        # Reported by the preemptor's profile, whatever scheduler placed the victim.
        reporter = replace(victim, scheduler_name=preemptor.scheduler_name)
        self._recorder.event(reporter, NORMAL, PREEMPTED, preempted_message(preemptor, node_name, why))

    async def _mark_disruption_target(self, victim: Pod, preemptor: Pod) -> bool:
        """Whether the victim is to be deleted now: marked, or else (gone, failed) not.

        As 1.32's prepareCandidate, a mark that fails leaves the victim undeleted, with an error
        logged; unlike 1.32 the preemptor's nomination is still written, as after a failed delete.
        """
        message = disruption_message(preemptor)
        body = condition_patch(
            DISRUPTION_TARGET, "True", PREEMPTION_BY_SCHEDULER, message, at=now_rfc3339(), uid=victim.uid
        )
        path = f"/api/v1/namespaces/{victim.namespace}/pods/{victim.name}/status"
        # 404: already gone, so evicted; any refusal (a 422 too, for a new pod of the same name)
        # leaves it undeleted: not ours to delete.
        status = await self._send(
            "preemption_condition_failed",
            victim,
            preemptor,
            "PATCH",
            path,
            body,
            {404},
            STRATEGIC_MERGE_PATCH,
        )
        return status is not None and status < 300

    async def _send(
        self,
        failed: str,
        victim: Pod,
        preemptor: Pod,
        method: str,
        path: str,
        body: Any,
        quiet: set[int],
        content_type: str = "application/json",
    ) -> int | None:
        """One request about `victim`, through the rate limiter: its status, or None when it got no
        reply. No reply, and a status of 300 or more but those in `quiet`, are logged as `failed`."""
        try:
            await self._limiter.acquire()
            status, reply = await request(self._api, method, path, body, content_type=content_type)
        except Exception as exc:
            log.warning(failed, pod=victim.key, preemptor=preemptor.key, error=repr(exc))
            return None
        if status >= 300 and status not in quiet:
            log.warning(failed, pod=victim.key, preemptor=preemptor.key, status=status, error=reply)
        return status

    async def _nominate(self, pod: Pod, node_name: str) -> None:
        if node_name and self._evictions:
            # As PrepareCandidate, the victims are deleted before the nomination is written: its
            # watch event makes the preemptor (a gang: its whole group) try again, and that attempt
            # must see them terminating or gone, or it plans anew around them and may evict others.
            # This runs once the decisions applied with this one have spawned their evictions too.
            await asyncio.wait(list(self._evictions))
        body = {"status": {"nominatedNodeName": node_name or None}}
        path = f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}/status"
        try:
            await self._limiter.acquire()
            status, reply = await request(self._api, "PATCH", path, body, content_type=MERGE_PATCH)
        except Exception as exc:
            log.warning("nomination_failed", pod=pod.key, node=node_name, error=repr(exc))
            return
        if status >= 300 and status != 404:
            log.warning("nomination_failed", pod=pod.key, node=node_name, status=status, error=reply)
