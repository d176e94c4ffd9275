"""Keeping SchedulerPolicies in force: watch events -> PolicyStore -> scheduler profiles, and status.

Every replica lists and watches the policies, compiles them and swaps the profiles into its
scheduler, so that a replica taking over has them in force already. Only the leader writes
`status`, through PolicyStatusWriter's `is_leader`; a replica that becomes leader calls
`sync_statuses()` to catch up.

Without the CRD installed (or without permission to list it) the operator logs one warning at
start-up, does not watch SchedulerPolicies, and schedules with its base algorithm; installing the
CRD later takes effect at the next restart.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any, Final

import structlog

from kubesched.kube.client import MERGE_PATCH, Api, request
from kubesched.kube.events import now_rfc3339
from kubesched.kube.listing import list_all
from kubesched.policy.shadow import ShadowRunner
from kubesched.policy.store import API_GROUP, API_VERSION, KIND, PLURAL, AcceptedGeneration, PolicyStore
from kubesched.runtime.scheduler import Scheduler
from kubesched.telemetry import metrics

log = structlog.get_logger(__name__)

POLICIES_PATH: Final = f"/apis/{API_GROUP}/{API_VERSION}/{PLURAL}"
STATUS_RETRY_SECONDS: Final = 5.0
STATUS_RETRY_MAX_SECONDS: Final = 300.0


def _always_leader() -> bool:
    return True


class PolicyStatusWriter:
    """Writes a SchedulerPolicy's status with a merge patch on the status subresource, leader only."""

    def __init__(self, api: Api, is_leader: Callable[[], bool] = _always_leader) -> None:
        self._api = api
        self.is_leader = is_leader

    async def write(self, name: str, patch: Mapping[str, Any]) -> Mapping[str, Any] | None:
        """The status stored after the patch; None if not leader or the policy is gone; raises on failure."""
        if not self.is_leader():
            return None
        path = f"{POLICIES_PATH}/{name}/status"
        status, body = await request(self._api, "PATCH", path, {"status": patch}, content_type=MERGE_PATCH)
        if status == 404:
            return None  # deleted meanwhile: its DELETED event is on its way
        if status >= 300 or not isinstance(body, Mapping):
            raise RuntimeError(f"status of {KIND} {name}: {status} {body}")
        stored = body.get("status")
        return stored if isinstance(stored, Mapping) else {}


class PolicyController:
    """Feeds SchedulerPolicy events to the store, swaps profiles into the scheduler, writes status."""

    def __init__(
        self,
        store: PolicyStore,
        scheduler: Scheduler,
        writer: PolicyStatusWriter,
        clock: Callable[[], str] = now_rfc3339,
        shadows: ShadowRunner | None = None,
    ) -> None:
        self.store = store
        self.shadows = shadows  # told which Shadow policies to run beside which algorithms
        self._scheduler = scheduler
        self.writer = writer
        self._clock = clock
        self._active: dict[str, AcceptedGeneration] = {}
        self._status_lock = asyncio.Lock()
        self._retry: asyncio.TimerHandle | None = None
        self._retry_delay = STATUS_RETRY_SECONDS
        self._tasks: set[asyncio.Task[None]] = set()

    async def load(self, api: Api, path: str = POLICIES_PATH) -> bool:
        """The initial listing, before the first scheduling cycle; False (one warning) without the CRD."""
        status, body = await request(api, "GET", path, query=[("limit", 1)])
        if status in (403, 404):
            reason = "not installed (apply crds/)" if status == 404 else f"not readable: {body}"
            log.warning(
                "scheduler_policies_unavailable",
                api=f"{API_GROUP}/{API_VERSION}",
                kind=KIND,
                reason=reason,
                effect="SchedulerPolicies are not watched; restart after installing the CRD",
            )
            return False
        if status >= 300:
            raise RuntimeError(f"listing {path} failed: {status} {body}")
        for raw in await list_all(api, path):
            await self._upsert(raw)
        self.apply()
        await self.sync_statuses()
        log.info("scheduler_policies_loaded", policies=self.store.names())
        return True

    async def on_event(self, event_type: str | None, raw: Mapping[str, Any]) -> None:
        """A watch event (Kopf): update the store, swap the profiles, write the statuses that changed."""
        if event_type == "DELETED":
            if self.store.delete(raw):
                log.info("policy_deleted", policy=(raw.get("metadata") or {}).get("name"))
        else:
            await self._upsert(raw)
        self.apply()
        await self.sync_statuses()

    def apply(self) -> None:
        """Hand the store's profiles to the scheduler; log what changed."""
        active = self.store.active()
        for name in sorted(active.keys() | self._active.keys()):
            now, before = active.get(name), self._active.get(name)
            if now is before:
                continue
            if now is None:
                fallback = "base algorithm" if name == self._scheduler.settings.name else "none: not served"
                log.info("profile_policy_removed", profile=name, now=fallback)
            else:
                log.info(
                    "profile_policy_applied",
                    profile=name,
                    policy=now.policy,
                    generation=now.generation,
                    algorithm=now.algorithm.describe(),
                )
        self._active = active
        self._scheduler.set_profiles({name: accepted.algorithm for name, accepted in active.items()})
        if self.shadows is not None:
            self.shadows.update(self.store.shadows(), active, self._scheduler.profiles)

    async def sync_statuses(self) -> None:
        """Write every status that differs from what it should be (leader only); retried on failure."""
        async with self._status_lock:
            failed = False
            for name, patch in list(self.store.status_patches(self._clock())):
                try:
                    stored = await self.writer.write(name, patch)
                except Exception as exc:  # the API server may be away for a moment; try again later
                    log.warning("policy_status_failed", policy=name, error=str(exc))
                    failed = True
                    continue
                if stored is not None:
                    self.store.record_status(name, stored)
            if failed:
                self._schedule_retry()
            else:
                self._retry_delay = STATUS_RETRY_SECONDS

    async def close(self) -> None:
        if self._retry is not None:
            self._retry.cancel()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _upsert(self, raw: Mapping[str, Any]) -> None:
        known = self.store.is_current(raw)
        # In a thread: a large policy compiles for a while, and the event loop must keep the
        # lease renewed and the watches read.
        error = self.store.upsert(raw, await asyncio.to_thread(self.store.compile, raw))
        if not known:
            metrics.POLICY_RELOADS.labels("accepted" if error is None else "invalid").inc()
        if error is not None and not known:
            meta = raw.get("metadata") or {}
            log.warning(
                "policy_rejected",
                policy=meta.get("name"),
                generation=meta.get("generation"),
                error=str(error),
            )

    def _schedule_retry(self) -> None:
        """Try again later, twice as late each time: a write the API server refuses for good (an
        object it cannot store) costs it a decode and an encode of the whole object every time."""
        if self._retry is not None:
            return
        delay, self._retry_delay = self._retry_delay, min(self._retry_delay * 2, STATUS_RETRY_MAX_SECONDS)

        def fire() -> None:
            self._retry = None
            task = asyncio.create_task(self.sync_statuses(), name="policy-status-retry")
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

        self._retry = asyncio.get_running_loop().call_later(delay, fire)
