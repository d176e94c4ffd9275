"""Custom resource statuses the scheduler owns (PodGroups' and ElasticQuotas'), written off the hot path.

The leader's scheduler states the status each object should show with `set()`, which returns at
once; `run()` writes, every `interval` seconds, those that differ from the one last written for
their object, as a JSON merge patch of the status subresource (custom resources accept no strategic
merge patch). An object whose status changes ten times between two rounds is written once.

What was written is known from what was *sent*, never read back: under scheduler-plugins' own
PodGroup CRD, whose schema lacks `scheduled` and `conditions`, the API server drops those two fields
silently, and comparing with the stored object would rewrite every status forever.

A 404 means the object (or its CRD) is gone: it is forgotten. Any other refusal is logged
and tried again after a delay (RETRY_DELAYS), with the same status or a newer one. While the API
server cannot be reached, one line says so and each round sends a single probe until it answers.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import aiohttp
import structlog
from prometheus_client import Counter

from kubesched.kube.client import MERGE_PATCH, Api, request
from kubesched.kube.events import Send
from kubesched.kube.retry import backoff_delay
from kubesched.model.kinds import POD_GROUPS, WatchedKind
from kubesched.telemetry import metrics

log = structlog.get_logger(__name__)

INTERVAL: Final = 0.5
# After a refusal: the first delay, doubled per refusal in a row up to the second. A refusal that
# a retry will not cure (a 422) must not become a warning per round.
RETRY_DELAYS: Final = (5.0, 60.0)
IN_FLIGHT: Final = 8  # patches at once in a round
REQUEST_TIMEOUT: Final = 10.0
CLOSE_GRACE: Final = 2.0


def status_path(kind: WatchedKind, key: str) -> str:
    """The status subresource of the `kind` object `namespace/name`."""
    namespace, _, name = key.partition("/")
    return f"/apis/{kind.api_version}/namespaces/{namespace}/{kind.plural}/{name}/status"


@dataclass(slots=True)
class _Entry:
    desired: dict[str, Any]  # replaced by set(), never changed in place: a patch in flight keeps its own
    written: dict[str, Any] | None = None  # the status the last successful patch sent
    retry_at: float = 0.0  # monotonic; not written again before, after a refusal
    refusals: int = 0  # in a row


class StatusWriter:
    """Writes each `kind` object's latest desired status when it differs from the one last written.

    Leader only: the scheduler feeds it while it leads. `set()` and `forget()` belong to the event
    loop that runs `run()`. `writes` counts the patches by result, when given.
    """

    def __init__(
        self,
        api: Api,
        kind: WatchedKind,
        *,
        writes: Counter | None = None,
        interval: float = INTERVAL,
        send: Send | None = None,
        retry_delays: tuple[float, float] = RETRY_DELAYS,
    ) -> None:
        """`send` replaces the API requests (tests): (method, path, body, content type) -> (status, reply)."""
        self._api = api
        self._kind = kind
        self._writes = writes
        self._event = kind.kind.lower()  # log events: podgroup_status_failed, elasticquota_status_...
        self._interval = interval
        self._retry_delays = retry_delays
        self._send: Send = send or self._request
        self._entries: dict[str, _Entry] = {}
        self._dirty: set[str] = set()  # keys whose desired status may differ from the one written
        self._unreachable_since: float | None = None
        self._closed = False
        self._wake = asyncio.Event()
        self._round_lock = asyncio.Lock()

    @property
    def pending(self) -> list[str]:
        """The objects whose desired status has not been written yet, sorted."""
        return sorted(
            key for key in self._dirty if (entry := self._entries.get(key)) and entry.desired != entry.written
        )

    def set(self, key: str, status: Mapping[str, Any]) -> None:
        """The full status the object `namespace/name` should show; written on a later round if it
        differs from the one last written."""
        if self._closed:
            return
        desired: dict[str, Any] = _plain(status)
        entry = self._entries.get(key)
        if entry is None:
            self._entries[key] = _Entry(desired)
        elif desired == entry.desired:
            return
        else:
            entry.desired = desired
        self._dirty.add(key)

    def forget(self, key: str) -> None:
        """The object is deleted: nothing more to write for it (a patch in flight finishes unheeded)."""
        self._entries.pop(key, None)
        self._dirty.discard(key)

    async def run(self) -> None:
        """Write what changed every `interval` seconds, until closed or cancelled."""
        while not self._closed:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self._interval)
            if self._closed:
                return
            await self.flush()

    async def flush(self) -> None:
        """One round: write every changed status not waiting for its retry."""
        async with self._round_lock:
            await self._round()

    async def close(self, grace: float = CLOSE_GRACE) -> None:
        """Stop `run()` and `set()`; what is still to write gets one last round of at most `grace` s."""
        self._closed = True
        self._wake.set()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(grace):
                await self.flush()

    async def _round(self) -> None:
        now = time.monotonic()
        due: list[tuple[str, _Entry]] = []
        for key in sorted(self._dirty):
            entry = self._entries.get(key)
            if entry is None or entry.desired == entry.written:
                self._dirty.discard(key)
            elif entry.retry_at <= now:
                due.append((key, entry))
        if not due:
            return
        if self._unreachable_since is not None:
            # A single probe while the API server does not answer; the rest follow once it does.
            await self._write(*due[0])
            if self._unreachable_since is not None:
                return
            due = due[1:]
        slots = asyncio.Semaphore(IN_FLIGHT)

        async def write(key: str, entry: _Entry) -> None:
            async with slots:
                if self._unreachable_since is None:  # another patch of this round found it unreachable
                    await self._write(key, entry)

        async with asyncio.TaskGroup() as tasks:
            for key, entry in due:
                tasks.create_task(write(key, entry))

    async def _write(self, key: str, entry: _Entry) -> None:
        sent = entry.desired
        patch = dict(sent)
        if entry.written:
            # A merge patch keeps the fields it does not name: a field the status lost is removed by null.
            patch.update({name: None for name in entry.written if name not in sent})
        try:
            status, reply = await self._send(
                "PATCH", status_path(self._kind, key), {"status": patch}, MERGE_PATCH
            )
        except (OSError, aiohttp.ClientError, TimeoutError) as exc:
            self._count("failed")
            self._unreachable(exc)
            return
        self._reachable()
        if status < 300:
            self._count("written")
            entry.written, entry.retry_at, entry.refusals = sent, 0.0, 0
        elif status == 404:
            self._count("gone")
            log.debug(f"{self._event}_status_gone", key=key)
            if self._entries.get(key) is entry:  # not forgotten and set again meanwhile
                self.forget(key)
        else:
            self._count("failed")
            first, most = self._retry_delays
            delay = backoff_delay(entry.refusals, first, most)
            entry.refusals += 1
            entry.retry_at = time.monotonic() + delay
            log.warning(
                f"{self._event}_status_failed",
                key=key,
                status=status,
                error=reply,
                patch=patch,
                retry_in=delay,
            )

    def _count(self, result: str) -> None:
        if self._writes is not None:
            self._writes.labels(result).inc()

    async def _request(self, method: str, path: str, body: Any, content_type: str) -> tuple[int, Any]:
        return await request(
            self._api, method, path, body, content_type=content_type, timeout=REQUEST_TIMEOUT
        )

    def _unreachable(self, exc: BaseException) -> None:
        if self._unreachable_since is None:
            self._unreachable_since = time.monotonic()
            log.info(f"{self._event}_status_api_unreachable", error=repr(exc), pending=len(self._dirty))

    def _reachable(self) -> None:
        if self._unreachable_since is not None:
            outage = time.monotonic() - self._unreachable_since
            self._unreachable_since = None
            log.info(f"{self._event}_status_api_reachable", after_seconds=round(outage, 3))


def pod_group_status_writer(api: Api, **options: Any) -> StatusWriter:
    """The writer of PodGroup statuses (runtime/gangs.py says what they are)."""
    return StatusWriter(api, POD_GROUPS, writes=metrics.POD_GROUP_STATUS_WRITES, **options)


def _plain(value: Any) -> Any:
    """A JSON-ready copy: mappings as dicts, tuples as lists, so that equal statuses compare equal."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value
