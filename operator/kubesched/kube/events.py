"""What the user sees on a pod: events (`Scheduled`, `FailedScheduling`) and the PodScheduled condition.

Events are written as client-go's recorder writes them (`tools/record/event.go`): each is
correlated first (`event_correlator.py`), so that a repeat raises the `count` and `lastTimestamp`
of the Event already written (a PATCH; a POST again if that Event is gone), many similar ones
are combined into one, and a flood about one pod is cut by a spam filter. A repeat also carries
`series` (its count and last observation), as the events.k8s.io recorder kube-scheduler uses
writes it (`tools/events`): `kubectl describe` reads `count`, newer readers `series`. A first
occurrence has none, as there.

Off the hot path: the scheduling loop only appends to a bounded hand-off queue (no await, no
lock, no system call) and never waits for an event. A thread with an event loop, API client and
rate limiter of its own (as kube-scheduler's separate event client) correlates and writes, many
requests at a time, one pod's writes in order. When the queue is full, new events are dropped
and counted. While the API server cannot be reached, events are kept (up to the queue's size)
and retried with backoff: the `Scheduled` events of pods bound just before an API server restart
arrive once it is back. A refusal (4xx) is logged and counted, as are 429 and 5xx replies after a
few tries.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import math
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from typing import Any, NamedTuple

import aiohttp
import msgspec
import structlog

from kubesched.kube.client import STRATEGIC_MERGE_PATCH, Api, TokenBucket, api_client, request
from kubesched.kube.event_correlator import (
    Action,
    Correlation,
    Event,
    EventCorrelator,
    ObjectReference,
    spam_key_by_reason,
)
from kubesched.kube.pod_conditions import condition_patch
from kubesched.kube.reasons import (
    FAILED_SCHEDULING,
    POD_SCHEDULED,
    SCHEDULING_GATED,
    UNSCHEDULABLE,
    WARNING,
)
from kubesched.kube.retry import backoff_delay
from kubesched.model.objects import Pod
from kubesched.telemetry import metrics

log = structlog.get_logger(__name__)

JSON = "application/json"
# Requests in flight. Each spends most of its time waiting for the API server (and, on a busy
# process, for the GIL), so it takes many at once to keep up with the binds.
IN_FLIGHT = 16
MESSAGE_LIMIT = 1024
# How often the recorder thread looks for new work while idle: a wake-up per event would cost the
# scheduling loop a system call (and a wait for the GIL) per bind.
POLL_INTERVAL = 0.05
# Backoff while the API server cannot be reached, and on 429 / 5xx replies.
RETRY_DELAYS = (0.2, 5.0)
SERVER_RETRIES = 3  # tries after the first for 429 and 5xx; then the write is given up
RETRIABLE_STATUSES = frozenset({429, 500, 502, 503, 504})
REQUEST_TIMEOUT = 15.0
DROP_LOG_INTERVAL = 10.0  # at most one log line per this many seconds while events are dropped
# A pod gone is forgotten by the correlator this many seconds later: an eviction's Preempted event
# can still be on its way once the victim is deleted.
FORGET_DELAY = 30.0
_EVENT, _CONDITION, _FORGET = "event", "condition", "forget"

# (method, path, body, content type) -> (status, parsed body or error message), as `client.request`.
Send = Callable[[str, str, Any, str], Awaitable[tuple[int, Any]]]


def now_rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def rfc3339(seconds: float) -> str:
    """A `Time` as core/v1 Events carry it: UTC, whole seconds."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def scheduled_message(pod: Pod, node: str) -> str:
    return f"Successfully assigned {pod.namespace}/{pod.name} to {node}"


class _Item(NamedTuple):
    kind: str  # _EVENT, _CONDITION or _FORGET
    pod: Pod | ObjectReference  # what the event is about: a pod, or another object (events only)
    type: str  # the event's type ("" for a condition)
    reason: str
    message: str
    at: float  # wall-clock seconds when it happened


class Recorder:
    """Writes events and PodScheduled conditions from a thread of its own, for one scheduler name.

    `event()` and `unschedulable()` are called from the scheduler's event loop and return at once.
    """

    def __init__(
        self,
        api: Api,
        component: str,
        limiter: TokenBucket,
        *,
        workers: int = IN_FLIGHT,
        size: int = 10_000,
        send: Send | None = None,
        correlator: EventCorrelator | None = None,
        poll_interval: float = POLL_INTERVAL,
        retry_delays: tuple[float, float] = RETRY_DELAYS,
        forget_delay: float = FORGET_DELAY,
    ) -> None:
        """`api`'s configuration makes the thread's own client (`send` replaces it in tests);
        `limiter` gives the rate limit (its own bucket); `workers` requests at most in flight."""
        self._api = api
        self._component = component
        self._qps, self._burst = limiter.qps, limiter.burst
        self._workers = workers
        self._size = size
        self._send_override = send
        # A bucket per reason: a flood of FailedScheduling must not silence the pod's Scheduled event.
        self._correlator = correlator or EventCorrelator(time.monotonic, spam_key=spam_key_by_reason)
        self._poll_interval = poll_interval
        self._retry_delays = retry_delays
        self._forget_delay = forget_delay
        # The hand-off. deque.append and popleft are atomic; each counter has a single writer
        # thread, so their difference (the backlog) needs no lock.
        self._pending: deque[_Item] = deque()
        self._accepted = 0  # written by the caller's thread
        self._finished = 0  # written by the recorder thread
        self._dropped = 0
        self._handoff_seconds = 0.0  # written by the caller's thread
        self._dropped_logged = 0
        self._next_drop_log = -math.inf
        # Pod uid -> the condition patch still queued for it: an identical one is not queued again.
        self._conditions_queued: dict[str, tuple[str, str]] = {}
        self._closed = False
        self._closing = threading.Event()
        self._close_deadline = math.inf
        self._thread: threading.Thread | None = None
        self._finished_thread: concurrent.futures.Future[None] = concurrent.futures.Future()
        # Owned by the recorder thread.
        self._busy: dict[str, deque[_Item]] = {}  # pod uid -> its writes waiting behind the one in flight
        self._tasks: set[asyncio.Task[None]] = set()
        self._unreachable_since: float | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._drained: asyncio.Event | None = None

    # --- the caller's side (the scheduler's event loop) ---------------------------------------------

    @property
    def dropped(self) -> int:
        """Events and condition patches dropped because the queue was full (or the recorder closed)."""
        return self._dropped

    @property
    def backlog(self) -> int:
        """Writes queued or in flight."""
        return self._accepted - self._finished

    def event(self, pod: Pod, type_: str, reason: str, message: str) -> None:
        self._put(_Item(_EVENT, pod, type_, reason, message, time.time()))

    def event_on(self, involved: ObjectReference, type_: str, reason: str, message: str) -> None:
        """An event about an object other than a pod (an ElasticQuota), from the scheduler's own name."""
        self._put(_Item(_EVENT, involved, type_, reason, message, time.time()))

    def unschedulable(self, pod: Pod, message: str) -> None:
        """FailedScheduling event plus PodScheduled=False, reason Unschedulable."""
        at = time.time()
        self._put(_Item(_EVENT, pod, WARNING, FAILED_SCHEDULING, message, at))
        self._put(_Item(_CONDITION, pod, "", UNSCHEDULABLE, message, at))

    def gated(self, pod: Pod, message: str) -> None:
        """PodScheduled=False, reason SchedulingGated (no event, as kube-scheduler writes none)."""
        self._put(_Item(_CONDITION, pod, "", SCHEDULING_GATED, message, time.time()))

    def forget(self, pod: Pod) -> None:
        """The pod is gone: a while after its writes queued before are out, what the correlator keeps
        about it goes."""
        if self._thread is not None:  # none started: nothing written, nothing kept
            self._put(_Item(_FORGET, pod, "", "", "", 0.0))

    async def close(self, grace: float = 5.0) -> None:
        """Give queued events `grace` seconds to go out, then stop the thread."""
        self._closed = True
        self._close_deadline = time.monotonic() + grace
        self._closing.set()  # seen by a thread whose loop is not running yet
        loop, stop = self._loop, self._stop
        if loop is not None and stop is not None:
            with contextlib.suppress(RuntimeError):  # its loop just closed
                loop.call_soon_threadsafe(stop.set)
        if self._thread is not None:
            with contextlib.suppress(Exception):
                await asyncio.wrap_future(self._finished_thread)

    @property
    def component(self) -> str:
        """The scheduler name events are reported from when the pod names none."""
        return self._component

    @property
    def handoff_seconds(self) -> float:
        """Time the caller's loop has spent in `event()`, `unschedulable()` and `gated()`."""
        return self._handoff_seconds

    def _put(self, item: _Item) -> None:
        started = time.perf_counter()
        try:
            self._hand_over(item)
        finally:
            self._handoff_seconds += time.perf_counter() - started

    def _hand_over(self, item: _Item) -> None:
        if self._closed or self.backlog >= self._size:
            self._drop(item)
            return
        if item.kind == _CONDITION:
            key, patch = item.pod.uid or item.pod.key, (item.reason, item.message)
            if self._conditions_queued.get(key) == patch:
                metrics.POD_CONDITION_PATCHES.labels("collapsed").inc()
                return
            self._conditions_queued[key] = patch
        self._pending.append(item)
        self._accepted += 1
        if self._thread is None:
            self._thread = threading.Thread(target=self._thread_main, name="event-recorder", daemon=True)
            self._thread.start()

    def _drop(self, item: _Item) -> None:
        if item.kind == _FORGET:
            return  # the correlator's LRUs forget it in time anyway
        self._dropped += 1
        if item.kind == _EVENT:
            metrics.EVENTS.labels("dropped").inc()
        else:
            metrics.POD_CONDITION_PATCHES.labels("dropped").inc()
        now = time.monotonic()
        if now >= self._next_drop_log:  # one line per interval, not one per drop
            log.warning(
                "events_dropped",
                dropped=self._dropped - self._dropped_logged,
                dropped_total=self._dropped,
                queue_size=self._size,
                closed=self._closed,
                pod=item.pod.key,
                reason=item.reason,
            )
            self._dropped_logged = self._dropped
            self._next_drop_log = now + DROP_LOG_INTERVAL

    # --- the recorder thread -------------------------------------------------------------------------

    def _thread_main(self) -> None:
        try:
            asyncio.run(self._run())
        except BaseException as exc:  # nothing to re-raise to: say so, and let close() return
            log.error("event_recorder_failed", error=repr(exc))
        finally:
            self._finished_thread.set_result(None)

    async def _run(self) -> None:
        self._stop, self._drained = asyncio.Event(), asyncio.Event()
        self._loop = asyncio.get_running_loop()
        if self._closing.is_set():  # close() came before this loop existed
            self._stop.set()
        async with self._connection() as send:
            limiter = TokenBucket(self._qps, self._burst)
            slots = asyncio.Semaphore(self._workers)
            dispatcher = asyncio.create_task(self._dispatch(send, limiter, slots), name="event-dispatch")
            await self._stop.wait()
            if self.backlog > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._drained.wait(), self._close_deadline - time.monotonic())
            dispatcher.cancel()
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(dispatcher, *self._tasks, return_exceptions=True)
            if self.backlog > 0:
                log.warning("events_abandoned", count=self.backlog)

    @contextlib.asynccontextmanager
    async def _connection(self) -> AsyncIterator[Send]:
        if self._send_override is not None:
            yield self._send_override
            return
        async with api_client(self._api.configuration) as api:

            async def send(method: str, path: str, body: Any, content_type: str) -> tuple[int, Any]:
                timeout = REQUEST_TIMEOUT
                return await request(
                    api, method, path, body, content_type=content_type, timeout=timeout, decode=written_count
                )

            yield send

    async def _dispatch(self, send: Send, limiter: TokenBucket, slots: asyncio.Semaphore) -> None:
        """Hand each queued write to a task; a pod's writes wait for the one in flight before them."""
        while True:
            if not self._pending:
                await asyncio.sleep(self._poll_interval)
                continue
            item = self._pending.popleft()
            key = item.pod.uid or item.pod.key
            waiting = self._busy.get(key)
            if waiting is not None:
                waiting.append(item)
                continue
            self._busy[key] = deque()
            await slots.acquire()
            task = asyncio.create_task(self._serve(key, item, send, limiter, slots))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _serve(
        self, key: str, item: _Item, send: Send, limiter: TokenBucket, slots: asyncio.Semaphore
    ) -> None:
        try:
            while True:
                try:
                    if item.kind == _EVENT:
                        await self._record(item, send, limiter)
                    elif item.kind == _FORGET:
                        loop = asyncio.get_running_loop()
                        loop.call_later(self._forget_delay, self._correlator.forget, item.pod.uid)
                    else:
                        await self._patch_condition(key, item, send, limiter)
                except Exception as exc:  # one bad write must not stop the pod's later ones
                    log.warning("event_failed", pod=item.pod.key, kind=item.kind, error=repr(exc))
                self._finished += 1
                if self._closed and self.backlog == 0 and self._drained is not None:
                    self._drained.set()
                waiting = self._busy[key]
                if not waiting:
                    break
                item = waiting.popleft()
        finally:
            self._busy.pop(key, None)
            slots.release()

    async def _record(self, item: _Item, send: Send, limiter: TokenBucket) -> None:
        pod = item.pod
        if isinstance(pod, Pod):
            component = pod.scheduler_name or self._component  # the profile, as kube-scheduler reports it
            involved = ObjectReference(
                "Pod", pod.namespace, pod.name, pod.uid, "v1", "", pod.resource_version
            )
        else:
            component, involved = self._component, pod
        message = item.message[:MESSAGE_LIMIT]
        event = Event(involved, item.type, item.reason, message, component, "", component, component, item.at)
        correlation = self._correlator.correlate(event)
        if correlation.action is Action.SKIP:
            metrics.EVENTS.labels("spam_filtered").inc()
            log.debug("event_spam_filtered", pod=pod.key, reason=item.reason, count=correlation.count)
            return
        path = f"/api/v1/namespaces/{pod.namespace}/events"
        if correlation.action is Action.UPDATE:
            patch = {
                "count": correlation.count,
                "lastTimestamp": rfc3339(event.timestamp),
                "message": correlation.event.message[:MESSAGE_LIMIT],
                "series": series(correlation.count, event.timestamp),
            }
            name_path = f"{path}/{correlation.name}"
            status, reply = await self._send(send, limiter, "PATCH", name_path, patch, STRATEGIC_MERGE_PATCH)
            if status < 300:
                self._written(correlation, reply)
                metrics.EVENTS.labels("aggregated").inc()
                return
            if status != 404:  # 404: the Event expired or was deleted; create it again, as client-go does
                self._failed(item, status, reply)
                return
        status, reply = await self._send(send, limiter, "POST", path, event_body(correlation))
        # 409: a try whose reply was lost had created it (the name is ours alone).
        if status < 300 or status == 409:
            self._written(correlation, reply)
            metrics.EVENTS.labels("posted").inc()
        else:
            self._failed(item, status, reply)

    def _written(self, correlation: Correlation, reply: Any) -> None:
        count = reply.get("count") if isinstance(reply, dict) else None
        count = count if isinstance(count, int) and count > 0 else correlation.count
        self._correlator.written(
            correlation.key,
            correlation.name,
            count,
            correlation.first_timestamp,
            correlation.event.involved.uid,
        )

    def _failed(self, item: _Item, status: int, reply: Any) -> None:
        metrics.EVENTS.labels("failed").inc()
        log.warning("event_failed", pod=item.pod.key, reason=item.reason, status=status, error=reply)

    async def _patch_condition(self, key: str, item: _Item, send: Send, limiter: TokenBucket) -> None:
        # From here on a new patch for this pod is queued again, even an identical one.
        self._conditions_queued.pop(key, None)
        pod = item.pod
        assert isinstance(pod, Pod)  # conditions are the pods' alone
        body = condition_patch(POD_SCHEDULED, "False", item.reason, item.message, at=now_rfc3339())
        path = f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}/status"
        status, reply = await self._send(send, limiter, "PATCH", path, body, STRATEGIC_MERGE_PATCH)
        if status < 300:
            metrics.POD_CONDITION_PATCHES.labels("patched").inc()
        elif status != 404:  # 404: the pod is gone, nothing to tell
            metrics.POD_CONDITION_PATCHES.labels("failed").inc()
            log.warning("pod_condition_failed", pod=pod.key, status=status, error=reply)

    async def _send(
        self, send: Send, limiter: TokenBucket, method: str, path: str, body: Any, content_type: str = JSON
    ) -> tuple[int, Any]:
        """One write: tried again and again while the API server cannot be reached, and a few times
        more on 429 and 5xx; whatever else it answers is the caller's to judge."""
        low, high = self._retry_delays
        failures, server_errors = 0, 0
        while True:
            await limiter.acquire()
            try:
                status, reply = await send(method, path, body, content_type)
            except (OSError, aiohttp.ClientError, TimeoutError) as exc:
                self._unreachable(exc)
            else:
                self._reachable()
                if status not in RETRIABLE_STATUSES or server_errors >= SERVER_RETRIES:
                    return status, reply
                server_errors += 1
            await asyncio.sleep(backoff_delay(failures, low, high, jitter=-0.5))
            failures += 1

    def _unreachable(self, exc: BaseException) -> None:
        if self._unreachable_since is None:
            self._unreachable_since = time.monotonic()
            log.warning("events_api_unreachable", error=repr(exc), backlog=self.backlog)

    def _reachable(self) -> None:
        if self._unreachable_since is not None:
            outage = time.monotonic() - self._unreachable_since
            self._unreachable_since = None
            log.info("events_api_reachable", after_seconds=round(outage, 3), backlog=self.backlog)


class _Written(msgspec.Struct):
    count: int | None = None


def written_count(reply: str) -> dict[str, Any]:
    """Of a successful write's reply, what the recorder reads: the Event's count (an Event is about
    a kilobyte of JSON, a pod's status several: parsed whole, they cost ten times as much)."""
    return {"count": msgspec.json.decode(reply, type=_Written).count}


def event_body(correlation: Correlation) -> dict[str, Any]:
    """The core/v1 Event to create for a correlated event."""
    event, ref = correlation.event, correlation.event.involved
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": correlation.name, "namespace": ref.namespace},
        "involvedObject": {
            "apiVersion": ref.api_version,
            "kind": ref.kind,
            "name": ref.name,
            "namespace": ref.namespace,
            "uid": ref.uid,
            "resourceVersion": ref.resource_version,
        },
        "type": event.type,
        "reason": event.reason,
        "message": event.message[:MESSAGE_LIMIT],
        "source": {"component": event.component},
        "reportingComponent": event.reporting_controller,
        "reportingInstance": event.reporting_instance,
        "action": "Scheduling",
        "firstTimestamp": rfc3339(correlation.first_timestamp),
        "lastTimestamp": rfc3339(event.timestamp),
        "count": correlation.count,
    }
    if correlation.count > 1:  # created again after the one written expired: still a series
        body["series"] = series(correlation.count, event.timestamp)
    return body


def series(count: int, seconds: float) -> dict[str, Any]:
    """An EventSeries: how many times the event was seen, and when last (a MicroTime)."""
    at = datetime.fromtimestamp(seconds, UTC)
    return {"count": count, "lastObservedTime": at.strftime("%Y-%m-%dT%H:%M:%S.%fZ")}
