"""The check that every bound pod tells its user so: a `Scheduled` event naming the node it was bound to."""

from __future__ import annotations

import time
from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime

from kubernetes_asyncio.client import ApiClient

from kubesched.kube.client import request
from kubesched.kube.reasons import SCHEDULED
from kubesched_dev.fixtures import wait_for

from .replicas import Bind

# A SIGKILLed leader's binds sent this long before the kill may miss their Scheduled event: it
# was still queued in the process, and the recorder runs a few seconds behind the binds when
# three replicas and a burst of pod creations load the API server.
KILLED_EVENTS_WINDOW = 5.0


def sent_before_kill(binds: Collection[Bind], killed_at: float) -> set[str]:
    """The pods (names) of `binds` sent in the last KILLED_EVENTS_WINDOW seconds before `killed_at`."""
    return {
        b.pod.split("/", 1)[1] for b in binds if killed_at - KILLED_EVENTS_WINDOW <= b.sent_at <= killed_at
    }


@dataclass(frozen=True)
class ScheduledEvents:
    waited: float  # seconds the check waited for the last required event
    created: dict[str, float]  # pod name -> when the API server stored its Scheduled event (whole seconds)
    missed: set[str]  # pods allowed to miss one that did

    def worst_delay(self, binds: Collection[Bind]) -> float:
        """The longest time from a bind leaving to its event being stored (at a second's precision)."""
        delays = (
            self.created[name] - b.sent_at for b in binds if (name := b.pod.split("/", 1)[1]) in self.created
        )
        return max(delays, default=0.0)


async def wait_scheduled_events(
    api: ApiClient,
    namespace: str,
    binds: Collection[Bind],
    timeout: float = 120.0,
    may_miss: Collection[str] = (),
) -> ScheduledEvents:
    """Wait until each pod of `binds` but those in `may_miss` (pod names) has a `Scheduled` event naming
    the node of its bind; fail with the pods still missing one after `timeout` seconds."""
    started = time.monotonic()
    bound = {b.pod.split("/", 1)[1]: b.node for b in binds}
    required = set(bound) - set(may_miss)
    seen: dict[str, tuple[str, float]] = {}  # pod name -> its event's message and creation time

    async def complete() -> bool:
        status, body = await request(
            api,
            "GET",
            f"/api/v1/namespaces/{namespace}/events",
            query=[("fieldSelector", f"reason={SCHEDULED}")],
        )
        if status == 200:
            for event in body["items"]:
                created = datetime.fromisoformat(
                    event["metadata"]["creationTimestamp"].replace("Z", "+00:00")
                )
                seen[event["involvedObject"]["name"]] = (event["message"], created.timestamp())
        return required <= set(seen)

    try:
        await wait_for(complete, timeout=timeout, interval=0.5)
    except TimeoutError:
        missing = sorted(required - set(seen))
        raise AssertionError(
            f"{len(missing)} of {len(required)} bound pods have no Scheduled event after {timeout:g} s: "
            f"{missing[:20]}"
        ) from None
    wrong = {
        pod: message
        for pod, (message, _) in seen.items()
        if pod in bound and message != f"Successfully assigned {namespace}/{pod} to {bound[pod]}"
    }
    assert not wrong, f"Scheduled events naming another node than the bind: {dict(list(wrong.items())[:5])}"
    created = {pod: at for pod, (_, at) in seen.items()}
    return ScheduledEvents(time.monotonic() - started, created, set(may_miss) - set(seen))
