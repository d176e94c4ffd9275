"""Leader election over a `coordination.k8s.io/v1` Lease, with every deadline on the monotonic clock.

Written here rather than taken from kubernetes-asyncio 36, whose elector sends no request
timeouts, times with the wall clock, writes local time with a `Z`, never increments
`leaseTransitions` and never releases the lease.

The rules are client-go's, which kube-scheduler uses:

- A candidate takes the Lease when it has seen the same version of it (`resourceVersion`) for a
  whole lease duration on its own monotonic clock, or when the holder is empty (released). The
  holder's `renewTime` is another machine's wall clock: it is written for people, never compared.
- The leader may bind until `renew_deadline` after it *sent* its last successful write. The
  others wait `lease_duration` after they *received* that write, so at least
  `lease_duration - renew_deadline` separate the last bind an old leader may send from the first
  bind of the next one, whatever the network and API server delays were.
- Every write carries the `resourceVersion` that was read: of two candidates racing for the
  Lease, the API server lets one through and answers 409 to the other.

Hand edits of the Lease are outside these rules. Named after a stranger: the leader stops at its
next renewal and the others wait a lease duration. Deleted: its leader recreates it at once, the
others give it a lease duration first. Emptied: a follower takes it at once (as after a release)
while the leader only notices at its next renewal, so for up to a retry period both may bind, as
with client-go.

Followers poll every retry period, as client-go's do, and also watch the Lease: a release wakes
them at once rather than at their next poll. The watch only wakes; the round that follows reads
and decides as ever, so a watch that lags, breaks or is refused costs speed, never safety.

`ElectionState` holds those decisions and takes the clock as an argument, so it is tested with
plain numbers; `LeaderElector` does the requests and runs the leader's work while it leads;
`ElectionThread` runs it on a thread of its own.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import enum
import json
import math
import os
import random
import socket
import threading
import time
import uuid
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

import aiohttp
import structlog
from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_attempt, wait_exponential

from kubesched.kube.client import Api, Configuration, api_client, request
from kubesched.kube.retry import backoff_delay
from kubesched.model.selectors import is_dns1123_label, is_dns1123_subdomain
from kubesched.telemetry import metrics

log = structlog.get_logger(__name__)

DEFAULT_NAMESPACE = "kube-system"
# Followers poll every retry period plus up to this fraction of it, so that replicas started
# together drift apart. client-go uses 1.2 (up to 2.2 periods); a small one keeps takeover
# after a release the watch missed close to one retry period.
JITTER = 0.2
# client-go's rule: a leader must get more than one jittered retry within its renew deadline.
CLIENT_GO_JITTER = 1.2
RELEASE_TIMEOUT = 5.0
# The API server ends the Lease's watch after this and the elector opens another (as the informers do).
WATCH_TIMEOUT = 300
TRANSIENT_STATUSES = frozenset({429, 500, 502, 503, 504})


# ------------------------------------------------------------------------------------ configuration


@dataclass(frozen=True, slots=True)
class ElectionConfig:
    namespace: str
    name: str
    identity: str
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0

    @property
    def lease_path(self) -> str:
        return f"{leases_path(self.namespace)}/{self.name}"

    @property
    def lease_key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def problems(self) -> list[str]:
        """What is wrong with these settings, in the words of the command's flags (empty: fine)."""
        found: list[str] = []
        for flag, value in (
            ("--leader-elect-lease-duration", self.lease_duration),
            ("--leader-elect-renew-deadline", self.renew_deadline),
            ("--leader-elect-retry-period", self.retry_period),
        ):
            if not value > 0:
                found.append(f"{flag} must be greater than zero, got {format_duration(value)}")
        if found:
            return found
        if self.lease_duration < 1:
            found.append("--leader-elect-lease-duration must be at least 1s: a Lease counts whole seconds")
        if self.renew_deadline >= self.lease_duration:
            found.append(
                f"--leader-elect-renew-deadline ({format_duration(self.renew_deadline)}) must be less than "
                f"--leader-elect-lease-duration ({format_duration(self.lease_duration)})"
            )
        if self.renew_deadline <= CLIENT_GO_JITTER * self.retry_period:
            renew, retry = format_duration(self.renew_deadline), format_duration(self.retry_period)
            found.append(
                f"--leader-elect-renew-deadline ({renew}) must be greater than "
                f"{CLIENT_GO_JITTER} x --leader-elect-retry-period ({retry})"
            )
        if not is_dns1123_label(self.namespace):
            found.append(
                f"--leader-elect-resource-namespace {self.namespace!r} is not a valid namespace name"
            )
        if not is_dns1123_subdomain(self.name):
            found.append(f"--leader-elect-resource-name {self.name!r} is not a valid object name")
        if not self.identity:
            found.append("the leader election identity must not be empty")
        return found


def default_identity(env: Mapping[str, str] = os.environ) -> str:
    """The pod's name (POD_NAME, from the downward API) or the host name, and a random suffix.

    The suffix makes a restarted process a new candidate: it never mistakes its predecessor's
    Lease for its own.
    """
    base = env.get("POD_NAME") or socket.gethostname() or "kubesched"
    return f"{base}_{uuid.uuid4().hex[:10]}"


def default_namespace(env: Mapping[str, str] = os.environ) -> str:
    """The pod's own namespace (POD_NAMESPACE) when it runs in a cluster, else kube-system.

    In a cluster the Lease then lives beside the Deployment, and a namespaced Role grants it;
    outside one, kube-scheduler's namespace.
    """
    return env.get("POD_NAMESPACE") or DEFAULT_NAMESPACE


def leases_path(namespace: str) -> str:
    return f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"


def format_duration(seconds: float) -> str:
    return f"{seconds:g}s"


# ------------------------------------------------------------------------------------- the record


def format_micro_time(moment: datetime) -> str:
    """A `MicroTime` as the API server writes it: UTC, microseconds, `Z`."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_micro_time(text: Any) -> datetime | None:
    """A `MicroTime` or `Time` from a Lease; None for anything else (a Lease may be edited by hand)."""
    if not isinstance(text, str):
        return None
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class LeaseRecord:
    """The election fields of a Lease's `spec`."""

    holder: str = ""
    lease_duration_seconds: int = 0
    acquire_time: datetime | None = None
    renew_time: datetime | None = None
    transitions: int = 0

    @classmethod
    def from_lease(cls, lease: Mapping[str, Any]) -> LeaseRecord:
        """Read leniently: a field of the wrong type counts as absent rather than failing the election."""
        spec = lease.get("spec")
        if not isinstance(spec, Mapping):
            return cls()
        holder = spec.get("holderIdentity")
        duration = spec.get("leaseDurationSeconds")
        transitions = spec.get("leaseTransitions")
        return cls(
            holder=holder if isinstance(holder, str) else "",
            lease_duration_seconds=duration if isinstance(duration, int) and duration > 0 else 0,
            acquire_time=parse_micro_time(spec.get("acquireTime")),
            renew_time=parse_micro_time(spec.get("renewTime")),
            transitions=transitions if isinstance(transitions, int) and transitions >= 0 else 0,
        )

    def spec(self) -> dict[str, Any]:
        spec: dict[str, Any] = {
            "holderIdentity": self.holder,
            "leaseDurationSeconds": self.lease_duration_seconds,
            "leaseTransitions": self.transitions,
        }
        if self.acquire_time is not None:
            spec["acquireTime"] = format_micro_time(self.acquire_time)
        if self.renew_time is not None:
            spec["renewTime"] = format_micro_time(self.renew_time)
        return spec


# --------------------------------------------------------------------------- decisions (no I/O)


class Action(enum.Enum):
    WAIT = "wait"  # someone else holds a live Lease
    CREATE = "create"  # there is no Lease: create it naming us
    UPDATE = "update"  # write the Lease naming us: renew it, or take it over


class ElectionState:
    """What one candidate knows of the Lease and of its own term; `now` is always monotonic seconds."""

    def __init__(self, config: ElectionConfig) -> None:
        self.config = config
        self.record: LeaseRecord | None = None  # None: no Lease (or none read yet)
        self.resource_version = ""
        self.changed_at = -math.inf  # when this version of the Lease (or its absence) was first seen
        self.leading = False
        self.deadline = -math.inf  # the leader binds before this, never at or after it
        self._last_record: LeaseRecord | None = None  # the last Lease seen, even if it is gone now
        self._vanished_holder = ""  # who held the Lease when it disappeared

    # --- what the candidate saw --------------------------------------------------------------

    def observe(self, record: LeaseRecord | None, resource_version: str, now: float) -> None:
        """A read of the Lease: `record` None when it does not exist."""
        if record is None:
            if self.record is not None or self.changed_at == -math.inf:
                self._vanished_holder = self.record.holder if self.record else ""
                self.changed_at = now
            self.record, self.resource_version = None, ""
            return
        if record != self.record or resource_version != self.resource_version:
            self.changed_at = now
        self.record, self.resource_version = record, resource_version
        self._last_record = record

    def lease_lost(self) -> bool:
        """We lead but the Lease names someone else: edited by hand, or our term lapsed meanwhile."""
        return self.leading and self.record is not None and self.record.holder != self.config.identity

    def decide(self, now: float) -> Action:
        identity = self.config.identity
        if self.record is None:
            # Deleted while someone held it: that holder may be alive and about to recreate it,
            # so give it a lease duration, as if the Lease were still there.
            live = self._vanished_holder not in ("", identity)
            if live and not self.leading and now < self.changed_at + self.config.lease_duration:
                return Action.WAIT
            return Action.CREATE
        holder = self.record.holder
        if not holder or holder == identity:
            return Action.UPDATE
        if now >= self.expires_at():
            return Action.UPDATE
        return Action.WAIT

    def expires_at(self) -> float:
        """When the Lease as seen lapses, on our clock. Honours a holder that asked for a longer one."""
        if self.record is None or not self.record.holder:
            return self.changed_at
        duration = max(self.config.lease_duration, self.record.lease_duration_seconds)
        return self.changed_at + duration

    def proposal(self, wall: datetime) -> LeaseRecord:
        """The record to write: a renewal keeps acquireTime; a takeover counts a transition."""
        previous = self.record if self.record is not None else self._last_record
        identity = self.config.identity
        renewal = self.leading and previous is not None and previous.holder == identity
        if previous is None:
            acquired, transitions = wall, 0
        elif renewal:
            acquired, transitions = previous.acquire_time or wall, previous.transitions
        else:
            acquired = wall
            transitions = previous.transitions + (0 if previous.holder == identity else 1)
        return LeaseRecord(
            holder=identity,
            lease_duration_seconds=max(1, math.ceil(self.config.lease_duration)),
            acquire_time=acquired,
            renew_time=wall,
            transitions=transitions,
        )

    def release_record(self, wall: datetime) -> LeaseRecord | None:
        """What to write on shutdown (client-go's release), or None when the Lease is not ours."""
        if self.record is None or self.record.holder != self.config.identity:
            return None
        return replace(self.record, holder="", lease_duration_seconds=1, acquire_time=wall, renew_time=wall)

    # --- what the candidate did -----------------------------------------------------------------

    def written(self, record: LeaseRecord, resource_version: str, sent_at: float, now: float) -> bool:
        """Our write naming us was accepted; `sent_at` is when it left. True when a term begins."""
        began = not self.leading
        self.observe(record, resource_version, now)
        self.leading = True
        self.deadline = sent_at + self.config.renew_deadline
        return began

    def released(self, record: LeaseRecord, resource_version: str, now: float) -> None:
        self.step_down()
        self.observe(record, resource_version, now)

    def step_down(self) -> None:
        self.leading = False
        self.deadline = -math.inf

    # --- what the rest of the process asks ---------------------------------------------------

    def may_bind(self, now: float) -> bool:
        return self.leading and now < self.deadline

    def lapsed(self, now: float) -> bool:
        """We still think we lead, but the renew deadline passed without a renewal."""
        return self.leading and now >= self.deadline

    def budget(self, now: float) -> float:
        """How long one read-and-write round may take: a leader's ends at its deadline."""
        if self.leading:
            return max(self.deadline - now, 0.0)
        # A follower's round that hangs would delay seeing the last renewal, and so the takeover,
        # by up to its budget: two retry periods, then a fresh request (often a fresh connection).
        return min(self.config.renew_deadline, 2 * self.config.retry_period)

    def next_attempt(self, started: float, now: float, jitter: float) -> float:
        """When to try again: a leader every retry period; a follower also right as the Lease lapses."""
        if self.leading:
            return started + self.config.retry_period
        at = now + self.config.retry_period * (1.0 + JITTER * jitter)
        expiry = self.expires_at()
        if self.record is not None and self.record.holder and now < expiry < at:
            at = expiry
        return at


# ------------------------------------------------------------------------------------ the elector


class TransientError(Exception):
    """The API server could not answer now (connection lost, 5xx, 429): worth another try."""


class LeaseError(Exception):
    """The API server refused the request for good (403, 422, ...)."""


class Conflict(Exception):
    """Someone else wrote the Lease between our read and our write (409)."""


class LeaderElector:
    """Campaigns for the Lease and, while it leads, runs `lead()`; cancels it the moment it lapses."""

    def __init__(
        self,
        api: Api,
        config: ElectionConfig,
        *,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], datetime] = lambda: datetime.now(UTC),
        rng: random.Random | None = None,
        annotations: Mapping[str, str] | None = None,
    ) -> None:
        """`annotations` go on the Lease with every write of ours (a write replaces the Lease whole)."""
        self.config = config
        self.state = ElectionState(config)
        self._annotations = dict(annotations or {})
        self._api = api
        self._clock = clock
        self._wall = wall
        self._rng = rng or random.Random()
        self._term: asyncio.Task[None] | None = None
        self._ending: list[asyncio.Task[None]] = []
        self._runner: asyncio.Task[None] | None = None
        self._leader_seen = ""
        self._stop_reason = "election stopped"
        self._wake = asyncio.Event()  # set by the watch: the Lease was released, try now
        self._log = log.bind(lease=config.lease_key, identity=config.identity)
        metrics.LEADER_STATUS.labels(config.name).set(0)

    def is_leader(self) -> bool:
        """May this process bind now? False from the instant the renew deadline passes."""
        return self.state.may_bind(self._clock())

    @property
    def leader(self) -> str:
        """The holder named in the Lease as last read ('' when none)."""
        return self.state.record.holder if self.state.record is not None else ""

    async def run(self, lead: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Campaign until cancelled. `lead()` starts with each term and is cancelled when it ends.

        `lead()` returning is fine (the process is shutting down; the Lease is still renewed until
        `release`); `lead()` raising ends the election with that error.
        """
        self._runner = asyncio.current_task()
        self._log.info(
            "election_started",
            lease_duration=self.config.lease_duration,
            renew_deadline=self.config.renew_deadline,
            retry_period=self.config.retry_period,
        )
        watch = asyncio.create_task(self._watch(), name="lease-watch")
        try:
            while True:
                started = self._clock()
                self._wake.clear()  # a release seen from here on is read by this round or wakes the next
                await self._attempt()
                now = self._clock()
                if self.state.lapsed(now):
                    self._step_down("renew deadline passed without a renewal")
                # The last term cleans up (its assumptions forgotten) before the next one starts.
                await self._finish_ended_terms()
                if self.state.leading and self._term is None:
                    self._term = asyncio.create_task(lead(), name="leader-term")
                wake = self.state.next_attempt(started, now, self._rng.random())
                if self.state.leading:
                    wake = min(wake, self.state.deadline)
                await self._pause(max(wake - self._clock(), 0.0))
        finally:
            watch.cancel()
            # Nobody renews from now on: stop binding at once rather than at the deadline.
            if self.state.leading:
                self._step_down(self._stop_reason)
            await self._finish_ended_terms()
            await asyncio.gather(watch, return_exceptions=True)
            self._runner = None

    async def release(self) -> None:
        """Stop campaigning and, if the Lease names us, empty it so a follower takes over at once."""
        self._stop_reason = "released"
        runner = self._runner
        if runner is not None and runner is not asyncio.current_task():
            runner.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await runner
        if self.state.leading:
            self._step_down("released")
        await self._finish_ended_terms()
        try:
            async with asyncio.timeout(RELEASE_TIMEOUT):
                # Read first: a renewal cut short above may have landed and changed the version.
                for _ in range(2):
                    await self._read()
                    record = self.state.release_record(self._wall())
                    if record is None:
                        return  # not ours (any more)
                    body = self._lease_body(record, self.state.resource_version)
                    status, reply = await self._request("PUT", self.config.lease_path, body)
                    if status == 409:
                        continue
                    if status >= 300:
                        raise _error(status, reply, "releasing the lease")
                    self.state.released(record, _resource_version(reply), self._clock())
                    self._log.info("lease_released", transitions=record.transitions)
                    return
        except (TimeoutError, TransientError, LeaseError) as exc:
            self._log.warning("lease_release_failed", error=str(exc) or repr(exc))

    # --- one round: read, decide, maybe write ---------------------------------------------------

    async def _attempt(self) -> None:
        budget = self.state.budget(self._clock())
        if budget <= 0:
            return
        try:
            async with asyncio.timeout(budget):
                await self._read()
                if self.state.lease_lost():
                    self._step_down(f"the lease names {self.leader or 'nobody'}")
                action = self.state.decide(self._clock())
                if action is not Action.WAIT:
                    await self._write(action)
        except TimeoutError:
            self._log.info("lease_request_timed_out", budget=round(budget, 3), leading=self.state.leading)
        except Conflict as exc:
            self._log.info("lease_write_conflict", error=str(exc))
        except (TransientError, LeaseError) as exc:
            self._log.warning("lease_request_failed", error=str(exc))

    async def _read(self) -> None:
        async for attempt in self._retrying():
            with attempt:
                status, body = await self._request("GET", self.config.lease_path)
                if status == 404:
                    self.state.observe(None, "", self._clock())
                elif status == 200 and isinstance(body, dict):
                    record = LeaseRecord.from_lease(body)
                    self.state.observe(record, _resource_version(body), self._clock())
                else:
                    raise _error(status, body, "reading the lease")
        if self.leader != self._leader_seen:
            self._leader_seen = self.leader
            self._log.info("leader_observed", leader=self.leader or None)

    async def _write(self, action: Action) -> None:
        record = self.state.proposal(self._wall())
        if action is Action.CREATE:
            method, path = "POST", leases_path(self.config.namespace)
            body = self._lease_body(record, "")
        else:
            method, path = "PUT", self.config.lease_path
            body = self._lease_body(record, self.state.resource_version)
        sent_at = self._clock()
        async for attempt in self._retrying():
            with attempt:
                sent_at = self._clock()
                status, reply = await self._request(method, path, body)
                if status == 409:
                    raise Conflict(f"{method} {path}: {reply}")
                if status >= 300 or not isinstance(reply, dict):
                    raise _error(status, reply, "writing the lease")
        began = self.state.written(record, _resource_version(reply), sent_at, self._clock())
        if began:
            metrics.LEADER_STATUS.labels(self.config.name).set(1)
            self._leader_seen = self.config.identity
            self._log.info(
                "leader_elected",
                since=round(time.time(), 6),
                transitions=record.transitions,
                acquire_time=format_micro_time(record.acquire_time or self._wall()),
            )

    async def _request(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        # Each request gets what is left of the round's budget; asyncio.timeout around the round
        # cancels it at the same moment in any case.
        timeout = max(self.state.budget(self._clock()), 0.001)
        try:
            return await request(self._api, method, path, body, timeout=timeout)
        except (OSError, aiohttp.ClientError) as exc:
            raise TransientError(f"{method} {path}: {exc!r}") from exc

    # --- the watch: a follower's wake-up call --------------------------------------------------

    async def _watch(self) -> None:
        """Wake a follower the moment the Lease is released; reopen after a break, with backoff.

        Polling goes on meanwhile: the watch saves the wait for the next poll, nothing more.
        """
        failures = 0
        while True:
            try:
                await self._watch_once()
                failures = 0
            except Exception as exc:  # the API server may be away or refuse: never end the election
                delay = backoff_delay(failures, 0.2, 10.0, JITTER, self._rng)  # the informers' backoff
                if failures == 0:
                    self._log.warning(
                        "lease_watch_failed", error=str(exc) or repr(exc), retry_in=round(delay, 2)
                    )
                failures += 1
                await asyncio.sleep(delay)

    async def _watch_once(self) -> None:
        # No resourceVersion: the stream opens with the Lease as it is now, so a release made
        # while no watch was open wakes us too, and there is no expired version to handle.
        query = [
            ("watch", "true"),
            ("fieldSelector", f"metadata.name={self.config.name}"),
            ("timeoutSeconds", str(WATCH_TIMEOUT)),
        ]
        response = await self._api.call_api(
            leases_path(self.config.namespace),
            "GET",
            query_params=query,
            header_params={"Accept": "application/json"},
            auth_settings=["BearerToken"],
            _preload_content=False,
            _request_timeout=aiohttp.ClientTimeout(total=WATCH_TIMEOUT + 30, sock_connect=10),
        )
        try:
            if response.status >= 300:
                raise LeaseError(f"watching the lease: {response.status} {await response.text()}")
            async for line in response.content:
                if not line.strip():
                    continue
                event = json.loads(line)
                lease = event.get("object")
                if event.get("type") == "ERROR":
                    raise LeaseError(f"watching the lease: {lease}")
                # Only wake: a round that read the Lease may be writing now, and must write what it read.
                released = event.get("type") != "DELETED" and not LeaseRecord.from_lease(lease or {}).holder
                if released and not self.state.leading:
                    self._wake.set()
        finally:
            response.release()

    def _retrying(self) -> AsyncRetrying:
        # Quick retries inside one round for blips (a dropped connection, a 503 during an API
        # server restart); the round's budget bounds them all.
        return AsyncRetrying(
            retry=retry_if_exception_type(TransientError),
            wait=wait_exponential(multiplier=0.05, max=min(0.5, self.config.retry_period / 2)),
            stop=stop_after_attempt(4),
            reraise=True,
        )

    def _lease_body(self, record: LeaseRecord, resource_version: str) -> dict[str, Any]:
        metadata: dict[str, Any] = {"name": self.config.name, "namespace": self.config.namespace}
        if resource_version:
            metadata["resourceVersion"] = resource_version
        if self._annotations:
            metadata["annotations"] = self._annotations
        return {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": metadata,
            "spec": record.spec(),
        }

    # --- terms ----------------------------------------------------------------------------------

    def _step_down(self, reason: str) -> None:
        """Stop binding now and cancel the leader's work; the loop waits for it to clean up."""
        now = self._clock()
        # If the deadline passed before we noticed, the gate closed then: report that moment.
        until = time.time() - max(now - self.state.deadline, 0.0)
        self.state.step_down()
        metrics.LEADER_STATUS.labels(self.config.name).set(0)
        # A release is the process's own choice (a shutdown), not a loss to warn about.
        level = self._log.info if reason == "released" else self._log.warning
        level("leader_lost", reason=reason, until=round(until, 6))
        if self._term is not None:
            self._term.cancel()
            self._ending.append(self._term)
            self._term = None

    async def _finish_ended_terms(self) -> None:
        ending, self._ending = self._ending, []
        if not ending:
            return
        done, _ = await asyncio.wait(ending, timeout=self.config.retry_period)
        for term in done:
            if not term.cancelled() and term.exception() is not None:
                self._log.error("leader_term_failed", error=repr(term.exception()))

    async def _pause(self, delay: float) -> None:
        """Sleep until the next round, but wake up if the leader's work fails or the Lease is released."""
        term = self._term
        wake = asyncio.create_task(self._wake.wait())
        try:
            await asyncio.wait({wake} if term is None or term.done() else {wake, term}, timeout=delay)
        finally:
            wake.cancel()
        if term is not None and term.done() and not term.cancelled():
            error = term.exception()
            if error is not None:
                raise error


class ElectionThread:
    """A LeaderElector on a thread and event loop of its own; the leader's work runs on the caller's loop.

    On the main loop, thousands of watch events make every await wait its turn: under a burst of
    new pods, renewals queued behind them can miss the renew deadline, again and again. On its own
    loop the elector's few requests are never queued behind them (the GIL is handed over every
    few milliseconds). Safety does not depend on it:
    `is_leader()` reads the monotonic deadline, whichever thread asks.

    A main loop that hangs keeps the lease renewed but binds nothing; `/healthz`, served on that
    loop, stops answering, and a liveness probe restarts the process.
    """

    def __init__(
        self, conf: Configuration, config: ElectionConfig, annotations: Mapping[str, str] | None = None
    ) -> None:
        self.config = config
        self._conf = conf
        self._annotations = annotations
        self._elector: LeaderElector | None = None
        self._lead: Callable[[], Coroutine[Any, Any, None]] | None = None
        self._main_loop: asyncio.AbstractEventLoop | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._stop_requested = threading.Event()
        self._finished: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._thread: threading.Thread | None = None

    def is_leader(self) -> bool:
        """May this process bind now? Safe to call from any thread."""
        return self._elector is not None and self._elector.is_leader()

    async def run(self, lead: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Campaign until `release()` or cancellation; `lead()` runs on this loop during each term."""
        self._lead = lead
        self._main_loop = asyncio.get_running_loop()
        self._thread = threading.Thread(target=self._thread_main, name="leader-election", daemon=True)
        self._thread.start()
        try:
            await asyncio.shield(asyncio.wrap_future(self._finished))
        except asyncio.CancelledError:
            await self.release()
            raise

    async def release(self) -> None:
        """Stop campaigning, release the Lease if it names us, and wait for the thread to end."""
        if self._thread is None:
            return
        self._stop_requested.set()  # seen by a thread that has not set up its loop yet
        loop, stop = self._loop, self._stop
        if loop is not None and stop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the thread's loop just closed
                loop.call_soon_threadsafe(stop.set)
        with contextlib.suppress(Exception):
            await asyncio.wrap_future(self._finished)

    # --- on the election thread ---------------------------------------------------------------------

    def _thread_main(self) -> None:
        try:
            asyncio.run(self._campaign())
        except BaseException as exc:
            self._finished.set_exception(exc)
        else:
            self._finished.set_result(None)

    async def _campaign(self) -> None:
        self._stop = asyncio.Event()
        self._loop = asyncio.get_running_loop()
        if self._stop_requested.is_set():
            return
        async with api_client(self._conf) as api:
            self._elector = LeaderElector(api, self.config, annotations=self._annotations)
            runner = asyncio.create_task(self._elector.run(self._term), name="election")
            stop = asyncio.create_task(self._stop.wait())
            await asyncio.wait({runner, stop}, return_when=asyncio.FIRST_COMPLETED)
            stop.cancel()
            await self._elector.release()  # cancels the runner first
            if runner.done() and not runner.cancelled() and runner.exception() is not None:
                raise runner.exception()  # type: ignore[misc]

    async def _term(self) -> None:
        """The elector's side of a term: the work runs on the main loop; cancelling this cancels it
        there and waits until it has cleaned up (its binds cancelled, their assumptions forgotten)."""
        assert self._main_loop is not None and self._lead is not None
        lead, main_loop = self._lead, self._main_loop
        started: concurrent.futures.Future[asyncio.Task[None]] = concurrent.futures.Future()
        ended: concurrent.futures.Future[None] = concurrent.futures.Future()

        def start() -> None:
            task = main_loop.create_task(lead(), name="leader-term")
            task.add_done_callback(lambda t: _settle(ended, t))
            started.set_result(task)

        main_loop.call_soon_threadsafe(start)
        waiter = asyncio.wrap_future(ended)
        try:
            await asyncio.shield(waiter)
        except asyncio.CancelledError:
            task = await asyncio.wrap_future(started)
            main_loop.call_soon_threadsafe(task.cancel)
            with contextlib.suppress(BaseException):
                await waiter
            raise


def _settle(future: concurrent.futures.Future[None], task: asyncio.Task[None]) -> None:
    if future.done():
        return
    if task.cancelled():
        future.set_result(None)
    elif (error := task.exception()) is not None:
        future.set_exception(error)
    else:
        future.set_result(None)


def _resource_version(body: Any) -> str:
    if not isinstance(body, dict):
        return ""
    meta = body.get("metadata")
    return str(meta.get("resourceVersion") or "") if isinstance(meta, dict) else ""


def _error(status: int, body: Any, doing: str) -> Exception:
    message = f"{doing}: {status} {body}"
    return TransientError(message) if status in TRANSIENT_STATUSES else LeaseError(message)
