"""The scheduling loop: NextPod -> algorithm in the executor -> assume -> bind asynchronously.

Watch handlers feed `on_pod`, `on_node` and `on_object`; they only touch the cache and the
queue, both of which live on the event loop. The algorithm sees an immutable snapshot in an
executor thread, a small batch of pods at a time (kubesched.algorithm.batch), so the loop never
stalls on it.

One scheduler serves several profiles: a scheduler name -> Algorithm mapping. Its own name
(`SchedulerSettings.name`) always exists and runs the base algorithm (built-in default or
--policy-config-file) unless a SchedulerPolicy drives it; SchedulerPolicies add other names. A
pod is ours when its `spec.schedulerName` is a profile we serve, and each pod runs its own
profile's algorithm, in a batch that may mix profiles. When a profile goes away, its pending pods
leave the queue and stay pending, untouched: no scheduler of ours serves them any more.

PodGroups: the queue hands a group's members over together and the batch decides them all or
nothing (kubesched.algorithm.gang); `gangs` (runtime/gangs.py) counts every member the watch
shows and, while this replica leads, the status each group should show, which `status_writer`
writes.
"""

from __future__ import annotations

import asyncio
import functools
import random
import time
from collections.abc import Awaitable, Callable, Mapping
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol

import structlog

from kubesched.algorithm.admission import OVER_MAX
from kubesched.algorithm.batch import Observer, Outcome, schedule_batch
from kubesched.algorithm.gang import GangFitError
from kubesched.algorithm.generic import Algorithm, FitError, ScheduleResult
from kubesched.algorithm.preemption import Preemption, PreemptionOutcome
from kubesched.algorithm.quota_reclaim import victim_rule
from kubesched.algorithm.volume_reserve import PodVolumes, ScheduledWithVolumes
from kubesched.kube.binding import Binder, BindOutcome, BindResult
from kubesched.kube.event_correlator import ObjectReference
from kubesched.kube.events import Recorder, scheduled_message
from kubesched.kube.eviction import Evictor
from kubesched.kube.listing import Listing, object_key, stale
from kubesched.kube.reasons import IGNORED_QUOTA, NORMAL, POD_SCHEDULED, SCHEDULED, SCHEDULING_GATED, WARNING
from kubesched.model.kinds import ELASTIC_QUOTAS
from kubesched.model.objects import Node, Pod, node_from_dict, pod_from_dict
from kubesched.model.podgroup import group_key
from kubesched.model.quota import EMPTY as EMPTY_QUOTAS
from kubesched.model.quota import KIND as QUOTA_KIND
from kubesched.model.quota import ElasticQuota, QuotaState, in_one_unit
from kubesched.model.resources import CPU
from kubesched.plugins.registry import REQUEUE_KINDS
from kubesched.plugins.scheduling_gates import GATED_BIND_CONFLICT, GATED_CONDITION_MESSAGE
from kubesched.runtime.bind_gate import BindGate
from kubesched.runtime.cache import SchedulerCache
from kubesched.runtime.gangs import GangTracker, GroupLookup
from kubesched.runtime.nominator import Nominator
from kubesched.runtime.queue import ACTIVE, QueuedPod, SchedulingQueue
from kubesched.runtime.volumes import assume_in_cache, forget_in_cache
from kubesched.telemetry import metrics

log = structlog.get_logger(__name__)

TERMINAL_PHASES = ("Succeeded", "Failed")
FIRST_BATCH = 4  # pods in a term's first batch (then twice as many each time, up to batch_size)
APPLY_SLICE = 8  # decisions applied (assumed, binds started) per turn of the loop
GROUP_STATUS_INTERVAL = 0.5  # seconds between two looks at the PodGroups whose status changed
GROUP_COUNTS_INTERVAL = 5.0
QUOTA_STATUS_INTERVAL = 0.5  # seconds between two looks at what the ElasticQuotas use
POD_GROUP = "PodGroup"


@dataclass(frozen=True, slots=True)
class SchedulerSettings:
    name: str = "kubesched"
    batch_size: int = 32
    bind_concurrency: int = 64
    seed: int | None = None


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
        evictor: Evictor | None = None,
        gate: BindGate | None = None,
        status_writer: GroupStatusSink | None = None,
        quota_writer: GroupStatusSink | None = None,
    ) -> None:
        self.settings = settings
        self.base_algorithm = algorithm
        self._profiles: dict[str, Algorithm] = {settings.name: algorithm}
        # Every pending, unbound pod whatever its scheduler name, so that a profile that appears
        # picks up its pods at once (their watch events came while they were not ours).
        self._unbound: dict[str, Pod] = {}
        self.cache = cache or SchedulerCache()
        self.queue = queue if queue is not None else SchedulingQueue()  # an empty queue is falsy
        self._binder = binder
        self._recorder = recorder
        self._executor = executor or ThreadPoolExecutor(max_workers=1, thread_name_prefix="algorithm")
        self._rng = random.Random(settings.seed)
        self._start_index = 0
        self._bind_slots = asyncio.Semaphore(settings.bind_concurrency)
        self._binds: set[asyncio.Task[None]] = set()
        # Closed while the API server is unreachable (binds wait, their pods still assumed). The
        # probe is looked up when first needed: the binders of some tests have none.
        self._gate = gate or BindGate(lambda: self._binder.answers())
        self._term_lock = asyncio.Lock()
        # Set once the first batch's binds are out, or the loop found nothing to place: the start-up
        # holds the rest of its work back until then (app/run.py).
        self.first_batch_out = asyncio.Event()
        self._stopping = False  # shutdown: binds not yet sent are not sent
        self._log = log.bind(profile=settings.name)
        self.observe: Observer | None = None  # shadow policies, fed every decision (leader only)
        self.pod_gone: Callable[[Pod], None] | None = None  # told of each pod dropped (run.py: the recorder)
        self.nominator = Nominator()  # pods nominated to a node by preemption
        self._evictor = evictor  # None: preemption decides, but nothing is deleted or patched
        self._node_versions: dict[str, str] = {}  # node name -> resourceVersion last seen (reconcile)
        # kind -> key -> resourceVersion last seen, for the other kinds (reconcile_objects)
        self._object_versions: dict[str, dict[str, str]] = {}
        self._in_flight: set[str] = set()  # uids of pods whose bind is under way: never reconciled away
        # Gated pods whose PodScheduled condition does not say so yet; only a leader writes it.
        self._gated_untold: dict[str, Pod] = {}
        self._leading = False
        self._pod_group = GroupLookup(lambda key: self.cache.get_object(POD_GROUP, key))
        self.gangs = GangTracker(self._pod_group, assumed_on=self._assumed_on)
        self.queue.order_of = self._place_in_line
        self._order_quotas()
        self._status_writer = status_writer
        self._quota_writer = quota_writer  # ElasticQuota statuses (status.used), while leading
        self._ignored_told: set[str] = set()  # uids of ElasticQuotas given their IgnoredQuota event
        # uid -> (namespace, rule: max or mins) of the pending pods their quota refused last
        self._quota_refused: dict[str, tuple[str, str]] = {}
        metrics.PENDING_PODS.track(self.queue.counts)

    # --- cluster events (called by the watch handlers) -------------------------------------------

    def on_pod(self, event_type: str | None, raw: Mapping[str, Any]) -> None:
        if event_type != "DELETED" and self._confirms_assumption(raw):
            return
        pod = pod_from_dict(raw)
        if not pod.uid:
            return
        if self.gangs.tracks(pod.uid) or group_key(pod):
            self.gangs.observe(pod, deleted=event_type == "DELETED" or pod.phase in TERMINAL_PHASES)
        if event_type == "DELETED" or pod.phase in TERMINAL_PHASES:
            self._drop_pod(pod.uid)
            return
        if pod.node_name or pod.deleting:
            self.nominator.remove(pod.uid)
        if pod.node_name:
            self._unbound.pop(pod.uid, None)
            self.queue.delete(pod.uid)
            before = self.cache.cached_pod(pod.uid)
            self.cache.set_pod(pod)
            if pod.deleting and before is not None and not before.deleting:
                # A victim starting to terminate: a preemptor that tried again before the cache knew
                # preempted once more and now waits; it may look again and wait for the victim.
                self.queue.move_all("AssignedPodTerminating")
            return
        if pod.deleting:
            self._unbound.pop(pod.uid, None)
            self.queue.delete(pod.uid)
            return
        self._unbound[pod.uid] = pod
        if pod.scheduler_name in self._profiles and not self.cache.is_assumed(pod.uid):
            # An assumed pod is bound or being bound; its watch event just has not caught up.
            self._enqueue(pod, told=bool(pod.scheduling_gates) and _shows_gated(raw))
            self.nominator.update(pod)

    def on_finished_member(self, event_type: str | None, raw: Mapping[str, Any]) -> None:
        """A PodGroup member that finished, from its own watch (model/kinds.py FINISHED_MEMBERS):
        it counts in its group's status until that watch sees it deleted. The pod watch tells the
        cache."""
        pod = pod_from_dict(raw)
        if not pod.uid:
            return
        if event_type == "DELETED":  # deleted, or relabelled out of the watch's selection
            self.gangs.drop(pod.uid, finished=True)
        else:
            self.gangs.observe(pod)

    def reconcile_finished(self, label: str, listing: Listing) -> list[str]:
        """Forget the finished members, of groups named by `label`, deleted before this listing
        (a watch gap hid their DELETED events). Returns their uids."""
        gone = stale(self.gangs.finished_versions(label), listing)
        for uid in gone:
            self.gangs.drop(uid, finished=True)
        if gone:
            self._log.info("finished_members_reconciled", label=label, removed=len(gone))
        return gone

    def _enqueue(self, pod: Pod, *, told: bool = False) -> None:
        """Queue a pending pod of ours. One its scheduling gates hold back gets PodScheduled=False,
        reason SchedulingGated, once, unless it carries it already (`told`: 1.26+ API servers write it)."""
        newly_gated = self.queue.add(pod)
        if told or not self.queue.is_gated(pod.uid):
            self._gated_untold.pop(pod.uid, None)
        elif newly_gated:
            self._gated_untold[pod.uid] = pod
        if self._leading and self._gated_untold:
            self._tell_gated()

    def _tell_gated(self) -> None:
        for uid, pod in self._gated_untold.items():
            if self.queue.is_gated(uid):  # not deleted, ungated or left to another scheduler meanwhile
                self._recorder.gated(pod, GATED_CONDITION_MESSAGE)
        self._gated_untold.clear()

    def _confirms_assumption(self, raw: Mapping[str, Any]) -> bool:
        """Our own bind coming back: the pod as assumed is the pod as bound, so it is not parsed
        again (parsing is most of what handling a pod event costs). Its later events are, labels and all."""
        meta = raw.get("metadata") or {}
        uid = str(meta.get("uid") or "")
        node = (raw.get("spec") or {}).get("nodeName")
        if not node or not self.cache.is_assumed(uid) or self.cache.pod_node(uid) != node:
            return False
        if meta.get("deletionTimestamp") or (raw.get("status") or {}).get("phase") in TERMINAL_PHASES:
            return False
        self.cache.confirm(uid)
        if self.gangs.tracks(uid):
            self.gangs.bound(uid, node)
        self.nominator.remove(uid)
        self._unbound.pop(uid, None)
        self.queue.delete(uid)
        return True

    def on_node(self, event_type: str | None, raw: Mapping[str, Any]) -> None:
        node = node_from_dict(raw)
        if event_type == "DELETED":
            self._node_versions.pop(node.name, None)
            self.cache.remove_node(node.name)
            return
        self._node_versions[node.name] = str((raw.get("metadata") or {}).get("resourceVersion") or "")
        old = self.cache.node_info(node.name)
        self.cache.set_node(node)
        if old is None:
            self.queue.move_all("NodeAdd")
        elif _scheduling_properties_changed(old.node, node):
            self.queue.move_all("NodeUpdate")

    def on_object(self, kind: str, event_type: str | None, raw: Mapping[str, Any]) -> None:
        key = object_key(raw)
        versions = self._object_versions.setdefault(kind, {})
        if event_type == "DELETED":
            versions.pop(key, None)
            if not versions:
                del self._object_versions[kind]
        else:
            versions[key] = str((raw.get("metadata") or {}).get("resourceVersion") or "")
        if kind == "PodDisruptionBudget":
            self.cache.set_budget(key, None if event_type == "DELETED" else raw)
            return
        if kind == POD_GROUP:
            self._on_pod_group(key, event_type, raw)
            return
        if kind == QUOTA_KIND:
            self._on_elastic_quota(key, event_type, raw)
            return
        self.cache.set_object(kind, key, None if event_type == "DELETED" else raw)
        if event_type != "DELETED" and kind in REQUEUE_KINDS:
            self.queue.move_all(f"{kind}Change")

    def _on_pod_group(self, key: str, event_type: str | None, raw: Mapping[str, Any]) -> None:
        """A PodGroup appeared, changed or went: its members may be tried again. Our own status
        writes come back as updates too, with the same generation: those change nothing here."""
        old = self.cache.get_object(POD_GROUP, key)
        if event_type == "DELETED":
            self.cache.set_object(POD_GROUP, key, None)
            self._pod_group.forget(key)
            self.gangs.forget(key)
            if self._status_writer is not None:
                self._status_writer.forget(key)
        elif old is None or _generation(old) != _generation(raw) or not _generation(raw):
            self.cache.set_object(POD_GROUP, key, raw)
            self.gangs.group_changed(key)
        else:
            return
        self._log.info("pod_group_changed", group=key, change=event_type or "listed")
        self.queue.wake_group(key)

    def _on_elastic_quota(self, key: str, event_type: str | None, raw: Mapping[str, Any]) -> None:
        """An ElasticQuota appeared, changed or went: the pods it (or another it hid) refused may fit.
        Our own `status.used` writes come back with the same generation: those change nothing."""
        old = self.cache.get_object(QUOTA_KIND, key)
        if event_type == "DELETED":
            self.cache.set_object(QUOTA_KIND, key, None)
            if self._quota_writer is not None:
                self._quota_writer.forget(key)
        elif old is None or _generation(old) != _generation(raw) or not _generation(raw):
            self.cache.set_object(QUOTA_KIND, key, raw)
        else:
            return
        self._log.info("elastic_quota_changed", quota=key, change=event_type or "listed")
        self._order_quotas()  # a namespace may have gained or lost its quota
        self.queue.move_all("ElasticQuotaChange")

    def _assumed_on(self, uid: str) -> str | None:
        return self.cache.pod_node(uid) if self.cache.is_assumed(uid) else None

    def reconcile_objects(self, kind: str, listing: Listing) -> list[str]:
        """Drop the objects of `kind` (Services, PDBs, PodGroups, ...) that vanished before this
        listing (a watch gap hid their DELETED events). Returns their keys."""
        gone = stale(self._object_versions.get(kind, {}), listing)
        for key in gone:
            namespace, _, name = key.rpartition("/")
            self.on_object(kind, "DELETED", {"metadata": {"namespace": namespace, "name": name}})
        if gone:
            self._log.info("objects_reconciled", kind=kind, removed=len(gone), keys=gone[:10])
        return gone

    def _place_in_line(self, pod: Pod) -> float:
        """A pod's place among those of its priority: its group's creation time, or its own."""
        key = group_key(pod)
        group = self._pod_group(key) if key else None
        return (group or pod).created.timestamp()

    def reconcile(self, nodes: Listing | None, pods: Listing | None) -> tuple[list[str], list[str]]:
        """Drop the nodes and pods that vanished before these listings (a watch gap hid their
        DELETED events); a kind without a listing is left alone. Returns the node names and pod
        uids dropped."""
        gone_nodes = stale(self._node_versions, nodes) if nodes is not None else []
        for name in gone_nodes:
            self._node_versions.pop(name, None)
            self.cache.remove_node(name)
        gone_pods: list[str] = []
        if pods is not None:
            versions = {pod.uid: pod.resource_version for pod in self.cache.pods()}
            versions.update({uid: pod.resource_version for uid, pod in self._unbound.items()})
            gone_pods = stale(versions, pods, keep=self._in_flight)
        for uid in gone_pods:
            self.cache.forget(uid)  # an assumption whose pod is gone, its bind long over
            self.gangs.drop(uid)  # deleted, or finished: then the watch of finished members has it
            self._drop_pod(uid)
        if gone_nodes or gone_pods:
            self._log.info("cache_reconciled", nodes_removed=len(gone_nodes), pods_removed=len(gone_pods))
        return gone_nodes, gone_pods

    def _drop_pod(self, uid: str) -> None:
        known = self._unbound.pop(uid, None) or self.cache.cached_pod(uid)
        self._gated_untold.pop(uid, None)
        self.queue.delete(uid)
        self.nominator.remove(uid)
        if self.cache.has_pod(uid):
            self.cache.remove_pod(uid)
            self.queue.move_all("AssignedPodDelete")
        if known is not None and self.pod_gone is not None:
            self.pod_gone(known)

    # --- profiles (set by the SchedulerPolicy handler) ---------------------------------------------

    @property
    def profiles(self) -> Mapping[str, Algorithm]:
        """scheduler name -> the algorithm its pods run now."""
        return self._profiles

    def set_profiles(self, policies: Mapping[str, Algorithm]) -> bool:
        """Serve these policy-driven profiles from the next batch on; our own name falls back to
        the base algorithm when no policy drives it. Returns False when nothing changed.

        Pods of a profile that appears are queued; those of one that goes away leave the queue
        (stay pending, untouched); unschedulable pods get another try under the new algorithms.
        """
        profiles = {self.settings.name: self.base_algorithm, **policies}
        names = profiles.keys() | self._profiles.keys()
        if all(profiles.get(name) is self._profiles.get(name) for name in names):
            return False
        added = profiles.keys() - self._profiles.keys()
        removed = self._profiles.keys() - profiles.keys()
        self._profiles = profiles
        self._order_quotas()
        for pod in list(self._unbound.values()):
            if pod.scheduler_name in removed:
                self.queue.delete(pod.uid)  # an entry in the executor now comes back `gone`
            elif pod.scheduler_name in added and not self.cache.is_assumed(pod.uid):
                self._enqueue(pod)
        self.queue.move_all("PolicyChange")
        return True

    def _order_quotas(self) -> None:
        """Borrowing quotas' pods in order of share while a profile asks for it (quotas.fairShare)."""
        fair = any(algorithm.quota_fair_share for algorithm in self._profiles.values())
        self.queue.set_fair_share(self.cache.quotas if fair else None, self._fair_share)

    def _fair_share(self, pod: Pod) -> bool:
        algorithm = self._profiles.get(pod.scheduler_name)
        return algorithm is not None and algorithm.quota_fair_share and self.cache.has_quota(pod.namespace)

    # --- the loop ----------------------------------------------------------------------------------

    async def run(self) -> None:
        self._log.info(
            "scheduler_started", profiles={name: a.describe() for name, a in self._profiles.items()}
        )
        statuses = asyncio.create_task(self._write_group_statuses(), name="podgroup-status")
        quotas = asyncio.create_task(self._write_quota_statuses(), name="elasticquota-status")
        try:
            await self._schedule()
        finally:
            self.first_batch_out.set()
            statuses.cancel()
            quotas.cancel()

    async def _schedule(self) -> None:
        loop = asyncio.get_running_loop()
        # A term's first batches are small and double up to the batch size: the first binds leave
        # after a few pods' decisions rather than a whole batch's (a term opens on a full queue).
        limit = FIRST_BATCH
        while True:
            if not self.first_batch_out.is_set() and not self.queue.counts()[ACTIVE]:
                self.first_batch_out.set()  # nothing to place yet: nothing to wait for
            batch = await self.queue.pop_batch(min(limit, self.settings.batch_size))
            limit = min(2 * limit, self.settings.batch_size)
            if not batch:
                break
            started = time.perf_counter()
            snapshot = self.cache.snapshot()
            profiles = self._profiles  # a policy reload swaps them between batches, never within one
            pods = [entry.pod for entry in batch]
            outcomes, self._start_index = await loop.run_in_executor(
                self._executor,
                functools.partial(
                    schedule_batch,
                    nominated=self.nominator.entries() if self.nominator else None,
                    budgets=self.cache.budgets(),
                    gangs=self.gangs.states(pods),
                ),
                profiles,
                pods,
                snapshot,
                self._rng,
                self._start_index,
                self.observe,
            )
            self.gangs.attempted(pods, outcomes)
            per_pod = (time.perf_counter() - started) / len(batch)
            for done, (entry, outcome) in enumerate(zip(batch, outcomes, strict=True), 1):
                self._apply(entry, outcome, per_pod)
                if done % APPLY_SLICE == 0 and done < len(batch):
                    # The binds created so far send their requests before the next ones are made:
                    # a whole batch at once holds the loop for as long as all its binds take to start.
                    await asyncio.sleep(0)
            self.first_batch_out.set()

    async def drain(self, grace: float = 10.0) -> None:
        """Stop taking pods and let the binds in flight finish."""
        self.queue.close()
        self._stopping = True
        self._gate.reset()  # binds held at the gate give up now rather than when the grace runs out
        loop = asyncio.get_running_loop()
        deadline = loop.time() + grace
        # Again while new ones appear: a batch still in the executor when the queue closed adds some.
        while self._binds and (remaining := deadline - loop.time()) > 0:
            await asyncio.wait(list(self._binds), timeout=remaining)

    async def lead(self, resync: Callable[[], Awaitable[object]]) -> None:
        """One leadership term: catch up with the cluster, give every waiting pod a try, and
        schedule until the term ends (cancelled) or the queue closes (shutdown)."""
        async with self._term_lock:  # a term starts once the last one has cleaned up
            try:
                while True:  # no scheduling on a cache that may miss the last leader's binds
                    try:
                        await resync()
                        break
                    except Exception as exc:
                        self._log.warning("leader_resync_failed", error=repr(exc))
                        await asyncio.sleep(1.0)
                self.queue.requeue_all()
                self._leading = True
                self._tell_gated()
                await self.run()
            except asyncio.CancelledError:
                await self.stand_down()
                for writer in (self._status_writer, self._quota_writer):
                    if writer is not None:  # the term ended: statuses are the next leader's
                        for key in writer.pending:
                            writer.forget(key)
                raise
            finally:
                self._leading = False

    async def _write_group_statuses(self) -> None:
        """While scheduling: hand the writer each PodGroup status that changed (all of them at first)."""
        if self._status_writer is None:
            return
        self.gangs.mark_all_dirty()
        loop = asyncio.get_running_loop()
        due: set[str] = set()
        sent: dict[str, tuple[tuple[str, str], float]] = {}  # key -> (phase, reason) written, when
        while True:
            due.update(self.gangs.take_dirty())
            now = loop.time()
            for key in sorted(due):
                status = self.gangs.status(key)
                if status is None:
                    self._status_writer.forget(key)
                    sent.pop(key, None)
                    due.discard(key)
                    continue
                head = (str(status["phase"]), str(status["conditions"][0]["reason"]))
                last = sent.get(key)
                if last is not None and last[0] == head and now - last[1] < GROUP_COUNTS_INTERVAL:
                    continue  # only counters moved: a group being bound is not rewritten per bind
                self._status_writer.set(key, status)
                sent[key] = (head, now)
                due.discard(key)
            await asyncio.sleep(GROUP_STATUS_INTERVAL)

    async def _write_quota_statuses(self) -> None:
        """While scheduling: each ElasticQuota in force shows in `status.used` what the scheduler
        counts against it (the writer sends only what changed); each one ignored gets an event."""
        if self._quota_writer is None:
            return
        shown: dict[str, set[str]] = {}  # quota key -> the resources its status has named
        try:
            while True:
                state = self.cache.quotas()
                for quota in self.cache.elastic_quotas():
                    in_force = state.of(quota.namespace)
                    if in_force is None or in_force.key != quota.key:
                        self._tell_ignored(quota, in_force)
                        continue
                    used = state.used_by(quota.namespace)
                    # A resource no longer used shows 0: a merge patch would keep a key it leaves out.
                    names = shown.setdefault(quota.key, set())
                    names.update(used, quota.min, quota.max)
                    status = {
                        "used": {name: in_one_unit(name, used.get(name, 0))[0] for name in sorted(names)}
                    }
                    self._quota_writer.set(quota.key, status)
                self._show_quota_metrics(state)
                await asyncio.sleep(QUOTA_STATUS_INTERVAL)
        finally:
            self._show_quota_metrics(EMPTY_QUOTAS)  # a follower shows none: they are the leader's

    def _show_quota_metrics(self, state: QuotaState) -> None:
        """The kubesched_quota_* gauges: a series per namespace in force and resource it names or uses."""
        used: dict[tuple[str, ...], float] = {}
        low: dict[tuple[str, ...], float] = {}
        high: dict[tuple[str, ...], float] = {}
        for namespace, quota in state.quotas.items():
            using = state.used_by(namespace)
            for name in {*using, *quota.min, *quota.max}:
                scale = 1000 if name == CPU else 1  # millicores to cores
                used[namespace, name] = using.get(name, 0) / scale
                low[namespace, name] = quota.min.get(name, 0) / scale
                if name in quota.max:
                    high[namespace, name] = quota.max[name] / scale
        for uid in [uid for uid in self._quota_refused if uid not in self._unbound]:
            del self._quota_refused[uid]
        waiting: dict[tuple[str, ...], float] = {
            (ns, rule): 0.0 for ns in state.quotas for rule in ("max", "mins")
        }
        for labels in self._quota_refused.values():
            if labels in waiting:
                waiting[labels] += 1
        metrics.QUOTA_USED.show(used)
        metrics.QUOTA_MIN.show(low)
        metrics.QUOTA_MAX.show(high)
        metrics.QUOTA_WAITING.show(waiting)

    def _tell_ignored(self, quota: ElasticQuota, in_force: ElasticQuota | None) -> None:
        """One Warning event on an ElasticQuota that is not in force, and why."""
        if quota.uid in self._ignored_told:
            return
        self._ignored_told.add(quota.uid)
        if quota.error:
            why = f"its spec is invalid: {quota.error}"
        elif in_force is not None:
            why = f"ElasticQuota {in_force.name}, older, is in force in namespace {quota.namespace}"
        else:
            return
        self._log.warning("elastic_quota_ignored", quota=quota.key, reason=why)
        ref = ObjectReference(QUOTA_KIND, quota.namespace, quota.name, quota.uid, ELASTIC_QUOTAS.api_version)
        self._recorder.event_on(ref, WARNING, IGNORED_QUOTA, f"Ignored: {why}; one quota per namespace")

    async def stand_down(self) -> None:
        """Cancel the binds in flight; each forgets its assumption and puts its pod back."""
        binds = list(self._binds)
        for task in binds:
            task.cancel()
        self._gate.reset()  # after the cancels, so that no bind held there sends anything
        if binds:
            await asyncio.wait(binds)

    def _apply(self, entry: QueuedPod, outcome: Outcome, duration: float) -> None:
        pod = entry.pod
        profile = pod.scheduler_name
        if entry.gone:
            return  # deleted or bound by someone else while the algorithm ran
        self._quota_refused.pop(pod.uid, None)
        if isinstance(outcome, ScheduleResult):
            if self.cache.node_info(outcome.node_name) is None:
                self._log.info("node_vanished", pod=pod.key, node=outcome.node_name)
                self.queue.backoff(entry)
                return
            self.cache.assume(pod, outcome.node_name)
            volumes = outcome.volumes if isinstance(outcome, ScheduledWithVolumes) else None
            if volumes is not None:
                assume_in_cache(self.cache, volumes)
            self.nominator.remove(pod.uid)
            metrics.SCHEDULE_ATTEMPTS.labels("scheduled", profile).inc()
            metrics.ATTEMPT_DURATION.labels("scheduled", profile).observe(duration)
            task = asyncio.create_task(self._bind(entry, outcome.node_name, volumes))
            self._binds.add(task)
            task.add_done_callback(self._binds.discard)
            return
        if isinstance(outcome, FitError):
            message = outcome.summary()
            quota = self.cache.quotas().of(pod.namespace)
            if quota is not None and f"ElasticQuota {quota.key}" in message:  # a pod's, or its group's
                self._quota_refused[pod.uid] = (pod.namespace, "max" if f"{OVER_MAX}:" in message else "mins")
            metrics.SCHEDULE_ATTEMPTS.labels("unschedulable", profile).inc()
            metrics.ATTEMPT_DURATION.labels("unschedulable", profile).observe(duration)
            self._log.info(
                "pod_unschedulable", pod=pod.key, profile=profile, attempts=entry.attempts, reason=message
            )
            if isinstance(outcome, PreemptionOutcome):
                held = isinstance(outcome.error, GangFitError) and not outcome.preemption.victims
                self._carry_out(pod, outcome.preemption, counted=not held)
        else:
            message = f"internal error while scheduling: {outcome!r}"
            metrics.SCHEDULE_ATTEMPTS.labels("error", profile).inc()
            self._log.error("schedule_error", pod=pod.key, error=repr(outcome))
        self._recorder.unschedulable(pod, message)
        self.queue.unschedulable(entry)

    async def _bind(self, entry: QueuedPod, node_name: str, volumes: PodVolumes | None = None) -> None:
        pod = entry.pod
        self._in_flight.add(pod.uid)
        unanswered: float | None = None  # when a request got no reply: it may have landed all the same
        try:
            async with self._bind_slots:
                while True:
                    # Closed while the API server is unreachable: the bind waits, its pod assumed (one
                    # task per decision, so never more than the pods pending anyway).
                    await self._gate.wait_open()
                    if self._stopping:  # waited for a slot while the loop ran ahead: the next leader's
                        if unanswered is not None:
                            self._log.info("bind_cancelled", pod=pod.key, node=node_name, unanswered=True)
                        self._forget(pod, volumes)
                        self.queue.backoff(entry)
                        return
                    if unanswered is not None and entry.gone:  # the watch told what became of it meanwhile
                        self._settle_unanswered(entry, node_name, unanswered)
                        return
                    if self.cache.node_info(node_name) is None:  # deleted since the decision: look again
                        self._log.info("bind_node_gone", pod=pod.key, node=node_name)
                        self._forget(pod, volumes)
                        self.queue.backoff(entry)
                        return
                    if volumes is not None:  # PreBind: the volumes first, as VolumeBinding does
                        if not await self._bind_volumes(entry, node_name, volumes):
                            return
                        volumes = None  # written: nothing left to forget
                    outcome, reason, sent_at = await self._send_bind(pod, node_name)
                    if outcome is BindOutcome.WITHDRAWN:
                        continue  # the gate closed or the node went meanwhile: the checks above say which
                    if outcome is not BindOutcome.UNREACHABLE:
                        break
                    # Not a failure of this pod's: no event, no backoff. Held with its slot, it is sent
                    # again once the server answers (409 if this request landed after all).
                    metrics.BINDS.labels(outcome.value).inc()
                    self._log.info("bind_unreachable", pod=pod.key, node=node_name, error=reason)
                    unanswered = sent_at if unanswered is None else unanswered
                    self._gate.close(reason)
        except asyncio.CancelledError:
            # The term ended: a request already sent may still land (the watch will say); until
            # then the pod is not assumed anywhere, and waits for the next term.
            self._log.info("bind_cancelled", pod=pod.key, node=node_name)
            self._forget(pod, volumes)
            self.queue.backoff(entry)
            raise
        finally:
            self._in_flight.discard(pod.uid)
        metrics.BINDS.labels(outcome.value).inc()
        if outcome is BindOutcome.BOUND:
            self._bound(entry, node_name, sent_at)
            return
        self.cache.forget(pod.uid)
        if outcome is BindOutcome.NOT_LEADER:
            self.queue.backoff(entry)  # the next term requeues it
            return
        if outcome is BindOutcome.FAILED:
            self._log.warning("bind_failed", pod=pod.key, node=node_name, error=reason)
            self._recorder.unschedulable(pod, f"Binding rejected: {reason}")
            self.queue.backoff(entry)
        elif outcome is BindOutcome.CONFLICT and GATED_BIND_CONFLICT in reason:
            # Not bound elsewhere: the API server refuses gated pods, which PreEnqueue should have held.
            self._log.warning("bind_gated", pod=pod.key, node=node_name, reason=reason)
            self.queue.hold(entry)
        else:
            # 409: someone bound it (the watch will tell where); 404: it is gone. Either way, not ours now.
            self._log.info("bind_dropped", pod=pod.key, node=node_name, outcome=outcome.value, reason=reason)
            self.queue.done(entry)

    async def _bind_volumes(self, entry: QueuedPod, node_name: str, volumes: PodVolumes) -> bool:
        """PreBind: write the volume bindings; when that fails the pod is forgotten, told and backs off."""
        pod = entry.pod
        failure = await self._binder.bind_volumes(pod, volumes, lambda: entry.gone)
        if failure is None:
            return True
        self._log.warning("volume_binding_failed", pod=pod.key, node=node_name, error=failure)
        self._forget(pod, volumes)
        self._recorder.unschedulable(pod, f'running PreBind plugin "VolumeBinding": {failure}')
        self.queue.backoff(entry)
        return False

    async def _send_bind(self, pod: Pod, node_name: str) -> BindResult:
        profile = self._profiles.get(pod.scheduler_name)
        extender = profile.binder_for(pod) if profile is not None else None  # one with a bindVerb binds it

        def still_valid() -> bool:
            # Asked once the rate limiter lets the request go, with nothing awaited after it.
            return self._gate.is_open and self.cache.node_info(node_name) is not None

        return await self._binder.bind(pod, node_name, extender, still_valid=still_valid)

    def _bound(self, entry: QueuedPod, node_name: str, sent_at: float | None, **context: object) -> None:
        pod = entry.pod
        self.queue.done(entry)
        if entry.initial_attempt is not None:
            metrics.POD_SCHEDULING_DURATION.labels(str(min(entry.attempts, 15))).observe(
                self.queue.clock() - entry.initial_attempt
            )
        self._log.info(
            "pod_bound",
            pod=pod.key,
            profile=pod.scheduler_name,
            node=node_name,
            attempts=entry.attempts,
            sent_at=sent_at,
            **context,
        )
        self._recorder.event(pod, NORMAL, SCHEDULED, scheduled_message(pod, node_name))

    def _settle_unanswered(self, entry: QueuedPod, node_name: str, sent_at: float) -> None:
        """A held bind whose pod the watch showed bound, deleted or no longer ours: nothing to send."""
        pod = entry.pod
        if not self.cache.is_assumed(pod.uid) and self.cache.pod_node(pod.uid) == node_name:
            # Bound where we sent it: the request landed and only its reply was lost.
            self._bound(entry, node_name, sent_at, reply_lost=True)
            return
        self._log.info("bind_dropped", pod=pod.key, node=node_name, outcome="gone", reason="gone while held")
        self._forget(pod, None)
        self.queue.done(entry)

    def _forget(self, pod: Pod, volumes: PodVolumes | None) -> None:
        self.cache.forget(pod.uid)
        if volumes is not None:
            forget_in_cache(self.cache, volumes)

    def _carry_out(self, pod: Pod, result: Preemption, *, counted: bool = True) -> None:
        """Nominate the node and evict the victims (PrepareCandidate), or drop a nomination that
        no longer helps. A gang member held on a node for its group is not a preemption attempt
        (`counted` False)."""
        if counted:
            metrics.PREEMPTION_ATTEMPTS.inc()
        node = result.node_name
        if not node:
            dropped = result.clear_nomination and (self.nominator.remove(pod.uid) or pod.nominated_node_name)
            if dropped and self._evictor is not None:
                self._evictor.nominate(pod, "")
            return
        if counted:
            metrics.PREEMPTION_VICTIMS.observe(len(result.victims))
            self._log.info("pod_preempting", pod=pod.key, node=node, victims=[v.key for v in result.victims])
        else:
            self._log.info("pod_held_for_group", pod=pod.key, node=node, reason=result.message)
        # Lower-priority pods nominated there may no longer fit: they look again.
        lower = [p for p in self.nominator.pods_on(node) if p.priority < pod.priority and p.uid != pod.uid]
        for other in lower:
            self.nominator.remove(other.uid)
        self.nominator.add(pod, node)
        if self._evictor is None:
            return
        quotas = self.cache.quotas()
        for victim in result.victims:
            if not victim.deleting:  # one already terminating needs no second delete, nor event
                self._evictor.evict(victim, pod, node, *victim_rule(pod, victim, quotas))
        for other in lower:
            self._evictor.nominate(other, "")
        self._evictor.nominate(pod, node)


class GroupStatusSink(Protocol):
    """Where PodGroup and ElasticQuota statuses go (kube/status_writer.py writes them)."""

    def set(self, key: str, status: Mapping[str, Any]) -> None: ...

    def forget(self, key: str) -> None: ...

    @property
    def pending(self) -> list[str]: ...


def _generation(raw: Mapping[str, Any]) -> int:
    return int((raw.get("metadata") or {}).get("generation") or 0)


def _shows_gated(raw: Mapping[str, Any]) -> bool:
    """Whether the pod's PodScheduled condition already says SchedulingGated."""
    conditions = (raw.get("status") or {}).get("conditions") or ()
    return any(
        isinstance(c, Mapping) and c.get("type") == POD_SCHEDULED and c.get("reason") == SCHEDULING_GATED
        for c in conditions
    )


def _scheduling_properties_changed(old: Node, new: Node) -> bool:
    return (
        old.allocatable != new.allocatable
        or old.labels != new.labels
        or old.taints != new.taints
        or old.unschedulable != new.unschedulable
        or old.parse_error != new.parse_error
    )


__all__ = ["Scheduler", "SchedulerSettings"]
