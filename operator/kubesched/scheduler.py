"""The scheduling loop: NextPod -> algorithm in the executor -> assume -> bind asynchronously.

Watch handlers feed `on_pod`, `on_node` and `on_object`; they only touch the cache and the
queue, both of which live on the event loop. The algorithm sees an immutable snapshot in an
executor thread, a small batch of pods at a time, so the loop never stalls on it.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import structlog

from kubesched import metrics
from kubesched.algorithm.generic import Algorithm, FitError, ScheduleResult
from kubesched.binder import Binder, BindOutcome
from kubesched.cache import OBJECT_KINDS, SchedulerCache
from kubesched.events import NORMAL, SCHEDULED, Recorder, scheduled_message
from kubesched.model.nodeinfo import Snapshot
from kubesched.model.objects import Node, Pod, node_from_dict, pod_from_dict
from kubesched.queue import QueuedPod, SchedulingQueue

log = structlog.get_logger(__name__)

Outcome = ScheduleResult | FitError | Exception
TERMINAL_PHASES = ("Succeeded", "Failed")


@dataclass(frozen=True, slots=True)
class SchedulerSettings:
    name: str = "kubesched"
    batch_size: int = 32
    bind_concurrency: int = 64
    seed: int | None = None


def schedule_batch(
    algorithm: Algorithm, pods: Sequence[Pod], snapshot: Snapshot, rng: random.Random, start: int
) -> tuple[list[Outcome], int]:
    """Schedule pods one after another, each decision applied to the snapshot the next one sees.

    Runs in the executor. A bug hit by one pod is returned as its outcome, not raised, so the
    other pods of the batch and the loop carry on.
    """
    outcomes: list[Outcome] = []
    for pod in pods:
        try:
            result = algorithm.schedule(pod, snapshot, rng, start)
        except FitError as exc:
            outcomes.append(exc)
            continue
        except Exception as exc:
            outcomes.append(exc)
            continue
        start = result.next_start_index
        snapshot = snapshot.with_pod_on(pod, result.node_name)
        outcomes.append(result)
    return outcomes, start


class Scheduler:
    def __init__(
        self,
        settings: SchedulerSettings,
        algorithm: Algorithm,
        binder: Binder,
        recorder: Recorder,
        *,
        cache: SchedulerCache | None = None,
        queue: SchedulingQueue | None = None,
        executor: Executor | None = None,
    ) -> None:
        self.settings = settings
        self.algorithm = algorithm
        self.cache = cache or SchedulerCache()
        self.queue = queue or SchedulingQueue()
        self._binder = binder
        self._recorder = recorder
        self._executor = executor or ThreadPoolExecutor(max_workers=1, thread_name_prefix="algorithm")
        self._rng = random.Random(settings.seed)
        self._start_index = 0
        self._bind_slots = asyncio.Semaphore(settings.bind_concurrency)
        self._binds: set[asyncio.Task[None]] = set()
        self._log = log.bind(profile=settings.name)

    # --- cluster events (called by the watch handlers) -------------------------------------------

    def on_pod(self, event_type: str | None, raw: Mapping[str, Any]) -> None:
        pod = pod_from_dict(raw)
        if not pod.uid:
            return
        if event_type == "DELETED" or pod.phase in TERMINAL_PHASES:
            self.queue.delete(pod.uid)
            if self.cache.has_pod(pod.uid):
                self.cache.remove_pod(pod.uid)
                self.queue.move_all("AssignedPodDelete")
            return
        if pod.node_name:
            self.queue.delete(pod.uid)
            self.cache.set_pod(pod)
            return
        if pod.scheduler_name != self.settings.name:
            return
        if pod.deleting:
            self.queue.delete(pod.uid)
        elif not self.cache.is_assumed(pod.uid):
            # An assumed pod is bound or being bound; its watch event just has not caught up.
            self.queue.add(pod)

    def on_node(self, event_type: str | None, raw: Mapping[str, Any]) -> None:
        node = node_from_dict(raw)
        if event_type == "DELETED":
            self.cache.remove_node(node.name)
            return
        old = self.cache.node_info(node.name)
        self.cache.set_node(node)
        if old is None:
            self.queue.move_all("NodeAdd")
        elif _scheduling_properties_changed(old.node, node):
            self.queue.move_all("NodeUpdate")

    def on_object(self, kind: str, event_type: str | None, raw: Mapping[str, Any]) -> None:
        meta = raw.get("metadata") or {}
        key = f"{meta['namespace']}/{meta['name']}" if meta.get("namespace") else meta.get("name", "")
        self.cache.set_object(kind, key, None if event_type == "DELETED" else raw)
        if event_type != "DELETED" and kind in ("PersistentVolume", "PersistentVolumeClaim", "Service"):
            self.queue.move_all(f"{kind}Change")

    # --- the loop ----------------------------------------------------------------------------------

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        self._log.info("scheduler_started", algorithm=self.algorithm.describe())
        while True:
            batch = await self.queue.pop_batch(self.settings.batch_size)
            if not batch:
                break
            started = time.perf_counter()
            snapshot = self.cache.snapshot()
            algorithm = self.algorithm  # a policy reload swaps it between batches, never within one
            outcomes, self._start_index = await loop.run_in_executor(
                self._executor,
                schedule_batch,
                algorithm,
                [entry.pod for entry in batch],
                snapshot,
                self._rng,
                self._start_index,
            )
            per_pod = (time.perf_counter() - started) / len(batch)
            for entry, outcome in zip(batch, outcomes, strict=True):
                self._apply(entry, outcome, per_pod)
            self._update_gauges()

    async def drain(self, grace: float = 10.0) -> None:
        """Stop taking pods and let the binds in flight finish."""
        self.queue.close()
        if self._binds:
            await asyncio.wait(list(self._binds), timeout=grace)

    def _apply(self, entry: QueuedPod, outcome: Outcome, duration: float) -> None:
        pod = entry.pod
        profile = self.settings.name
        if entry.gone:
            return  # deleted or bound by someone else while the algorithm ran
        if isinstance(outcome, ScheduleResult):
            if self.cache.node_info(outcome.node_name) is None:
                self._log.info("node_vanished", pod=pod.key, node=outcome.node_name)
                self.queue.backoff(entry)
                return
            self.cache.assume(pod, outcome.node_name)
            metrics.SCHEDULE_ATTEMPTS.labels("scheduled", profile).inc()
            metrics.ATTEMPT_DURATION.labels("scheduled", profile).observe(duration)
            task = asyncio.create_task(self._bind(entry, outcome.node_name))
            self._binds.add(task)
            task.add_done_callback(self._binds.discard)
            return
        if isinstance(outcome, FitError):
            message = outcome.summary()
            metrics.SCHEDULE_ATTEMPTS.labels("unschedulable", profile).inc()
            metrics.ATTEMPT_DURATION.labels("unschedulable", profile).observe(duration)
            self._log.info("pod_unschedulable", pod=pod.key, attempts=entry.attempts, reason=message)
        else:
            message = f"internal error while scheduling: {outcome!r}"
            metrics.SCHEDULE_ATTEMPTS.labels("error", profile).inc()
            self._log.error("schedule_error", pod=pod.key, error=repr(outcome))
        self._recorder.unschedulable(pod, message)
        self.queue.unschedulable(entry)

    async def _bind(self, entry: QueuedPod, node_name: str) -> None:
        pod = entry.pod
        async with self._bind_slots:
            outcome, reason = await self._binder.bind(pod, node_name)
        metrics.BINDS.labels(outcome.value).inc()
        if outcome is BindOutcome.BOUND:
            self.queue.done(entry)
            if entry.initial_attempt is not None:
                metrics.POD_SCHEDULING_DURATION.labels(str(min(entry.attempts, 15))).observe(
                    self.queue.clock() - entry.initial_attempt
                )
            self._log.info("pod_bound", pod=pod.key, node=node_name, attempts=entry.attempts)
            self._recorder.event(pod, NORMAL, SCHEDULED, scheduled_message(pod, node_name))
            return
        self.cache.forget(pod.uid)
        if outcome is BindOutcome.FAILED:
            self._log.warning("bind_failed", pod=pod.key, node=node_name, error=reason)
            self._recorder.unschedulable(pod, f"Binding rejected: {reason}")
            self.queue.backoff(entry)
        else:
            # 409: someone bound it (the watch will tell where); 404: it is gone. Either way, not ours now.
            self._log.info("bind_dropped", pod=pod.key, node=node_name, outcome=outcome.value, reason=reason)
            self.queue.done(entry)

    def _update_gauges(self) -> None:
        for name, count in self.queue.counts().items():
            metrics.PENDING_PODS.labels(name).set(count)


def _scheduling_properties_changed(old: Node, new: Node) -> bool:
    return (
        old.allocatable != new.allocatable
        or old.labels != new.labels
        or old.taints != new.taints
        or old.unschedulable != new.unschedulable
        or old.parse_error != new.parse_error
    )


__all__ = ["OBJECT_KINDS", "Scheduler", "SchedulerSettings", "schedule_batch"]
