"""Writing the Shadow policies' figures into their `status.shadow`, every few seconds, leader only.

A status write per scheduled pod would load the API server as much as the binds do; figures
taken in memory are folded in every `interval` seconds instead, one merge patch per Shadow policy
whose figures changed. While it leads, this replica's last written figures are the truth (a
status read back from a watch event may be older than our own last write); a replica that becomes
leader starts from what the status says, so figures survive a failover, less the last interval.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any, Final

import structlog

from kubesched.kube.events import now_rfc3339
from kubesched.policy.controller import PolicyStatusWriter
from kubesched.policy.shadow import Comparison, ShadowRunner, fold_figures
from kubesched.policy.store import SHADOW_FIELD, PolicyStore, merge_patch

log = structlog.get_logger(__name__)

DEFAULT_INTERVAL: Final = 10.0


class ShadowReporter:
    def __init__(
        self,
        runner: ShadowRunner,
        store: PolicyStore,
        writer: PolicyStatusWriter,
        *,
        interval: float = DEFAULT_INTERVAL,
        clock: Callable[[], str] = now_rfc3339,
    ) -> None:
        self.runner = runner
        self.interval = interval
        self._store = store
        self._writer = writer
        self._clock = clock
        # policy -> (its uid, the status.shadow we last wrote)
        self._written: dict[str, tuple[str, Mapping[str, Any]]] = {}

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            try:
                await self.flush()
            except Exception as exc:  # the API server may be away; the figures wait in memory
                log.warning("shadow_status_failed", error=repr(exc))

    async def flush(self) -> int:
        """Fold the figures taken since the last flush into status; returns how many were written."""
        tallies = self.runner.take()
        if not self._writer.is_leader():
            self._written.clear()  # another replica writes meanwhile: start from its figures next term
            return 0
        now = self._clock()
        written = 0
        for scheduler_name, generations in self._store.shadows().items():
            compared_with = self.runner.compared_with(scheduler_name)
            for accepted in generations:
                key = Comparison(accepted.policy, accepted.generation, compared_with)
                obj = self._store.get(accepted.policy)
                if obj is None:
                    continue
                uid, previous = self._written.get(accepted.policy, (None, None))
                if uid != obj.uid:  # never written by this term, or deleted and created again
                    found = obj.status.get(SHADOW_FIELD)
                    previous = found if isinstance(found, Mapping) else None
                tally = tallies.pop(key, None)
                figures = fold_figures(previous, key, tally, accepted.mode.sample_rate, now)
                if figures is previous:
                    continue
                patch = merge_patch(previous or {}, figures) if previous else dict(figures)
                stored = await self._writer.write(accepted.policy, {SHADOW_FIELD: patch})
                if stored is None:
                    continue
                self._written[accepted.policy] = (obj.uid, figures)
                self._store.record_status(accepted.policy, stored)
                written += 1
        for key in tallies:  # a generation replaced or a policy deleted within the interval
            log.debug("shadow_figures_dropped", policy=key.policy, generation=key.generation)
        return written
