"""Assembling and running the scheduler process: client, cache, loop, Kopf watches, shutdown."""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import signal
import sys
from dataclasses import replace

import structlog

from kubesched.app.discovery import served_kinds
from kubesched.app.settings import RunSettings
from kubesched.app.startup import initial_sync, keep_reconciling, sync_bound_pods
from kubesched.app.tuning import hold_gc, release_gc, share_gil
from kubesched.kube.binding import Binder
from kubesched.kube.client import TokenBucket, api_client, load_configuration
from kubesched.kube.early_listing import EarlyListings
from kubesched.kube.election import ElectionThread
from kubesched.kube.events import Recorder
from kubesched.kube.eviction import Evictor
from kubesched.kube.extender_transport import HTTPTransport
from kubesched.kube.informer import Informer
from kubesched.kube.listing import name_of, namespaced_name_of
from kubesched.kube.podgroup_status import PodGroupStatusWriter
from kubesched.model.kinds import NODES, POD_GROUPS, PODS
from kubesched.policy.compile import compile_policy, default_algorithm
from kubesched.policy.controller import PolicyController, PolicyStatusWriter
from kubesched.policy.files import load_policy_file
from kubesched.policy.shadow import ShadowRunner
from kubesched.policy.shadow_status import ShadowReporter
from kubesched.policy.store import PolicyStore
from kubesched.runtime.queue import SchedulingQueue
from kubesched.runtime.scheduler import Scheduler
from kubesched.telemetry import metrics
from kubesched.telemetry.http_server import Endpoints
from kubesched.telemetry.looplag import LoopLagMonitor

log = structlog.get_logger("kubesched")


async def run_scheduler(settings: RunSettings, *, early: EarlyListings | None = None) -> None:
    """Run the scheduler process until SIGINT or SIGTERM, or until its scheduling loop fails.

    `early`: the start-up sync's first node and pod requests, if sent already (early_listing.py)."""
    hold_gc()  # until every listed pod is fed (app/tuning.py)
    share_gil()
    if settings.scheduling.policy_config_file:
        algorithm = compile_policy(
            load_policy_file(settings.scheduling.policy_config_file), transport=HTTPTransport
        )
    else:
        algorithm = default_algorithm()
    if settings.scheduling.percentage_of_nodes_to_score is not None:
        algorithm = replace(
            algorithm, percentage_of_nodes_to_score=settings.scheduling.percentage_of_nodes_to_score
        )
    election = settings.election.config(settings.scheduling.scheduler_name)
    loop = asyncio.get_running_loop()
    stopping = asyncio.Event()
    _handle_signals(loop, stopping)
    conf = await load_configuration(settings.connection.kubeconfig, early=early)
    conf.connection_pool_maxsize = settings.scheduling.bind_concurrency + 16
    synced = asyncio.Event()
    endpoints = Endpoints(ready=synced.is_set)
    if settings.observability.metrics_port:
        await endpoints.start(settings.observability.metrics_port)
    lag = LoopLagMonitor()
    lagging = asyncio.create_task(lag.run(), name="loop-lag")
    async with api_client(conf) as api:
        elector = ElectionThread(conf, election) if election else None
        is_leader = elector.is_leader if elector else _always
        limiter = TokenBucket(settings.connection.qps, settings.connection.burst)
        metrics.CLIENT_QPS_LIMIT.set(settings.connection.qps)
        metrics.CLIENT_BURST_LIMIT.set(settings.connection.burst)
        recorder = Recorder(api, settings.scheduling.scheduler_name, limiter)
        metrics.EVENT_HANDOFF.track(lambda: {recorder.component: recorder.handoff_seconds})
        evictor = Evictor(api, limiter, recorder, may_act=elector.is_leader if elector else None)
        group_statuses = PodGroupStatusWriter(api)
        writing_statuses = asyncio.create_task(group_statuses.run(), name="podgroup-status-writer")
        scheduler = Scheduler(
            settings.scheduling.scheduler(),
            algorithm,
            Binder(api, limiter, may_bind=elector.is_leader if elector else None),
            recorder,
            evictor=evictor,
            queue=SchedulingQueue(settings.scheduling.queue()),
            status_writer=group_statuses,
        )
        endpoints.cache_view = scheduler.cache.describe
        # Policies before pods, so that the first cycle already runs the profiles they define.
        shadows = ShadowRunner(settings.scheduling.seed)
        scheduler.observe = shadows.observe
        policies = PolicyController(
            PolicyStore(settings.scheduling.scheduler_name, HTTPTransport),
            scheduler,
            PolicyStatusWriter(api, is_leader),
            shadows=shadows,
        )
        metrics.POLICY_ACCEPTED.track(policies.store.acceptance)
        # Only what the server serves, for our listing and Kopf's watches alike: Kopf warns about
        # every resource it cannot find. Asked while the policies are listed.
        loaded, kinds = await asyncio.gather(policies.load(api), served_kinds(api))
        watched_policies = policies if loaded else None
        reporter = ShadowReporter(
            shadows, policies.store, policies.writer, interval=settings.observability.shadow_status_interval
        )
        reporting = asyncio.create_task(reporter.run(), name="shadow-status")
        nodes = Informer(
            api,
            NODES.path,
            scheduler.on_node,
            relisted=lambda listing: scheduler.reconcile(listing, None),
            key=name_of,
            query=NODES.query,
        )
        pods = Informer(
            api,
            PODS.path,
            scheduler.on_pod,
            relisted=lambda listing: scheduler.reconcile(None, listing),
            query=PODS.query,
        )
        informers = [nodes, pods]
        if POD_GROUPS in kinds:  # PodGroups have a watch of their own too (model/kinds.py)
            kinds = tuple(kind for kind in kinds if kind is not POD_GROUPS)
            groups = Informer(
                api,
                POD_GROUPS.path,
                lambda event, raw: scheduler.on_object(POD_GROUPS.kind, event, raw),
                relisted=scheduler.reconcile_pod_groups,
                key=namespaced_name_of,
            )
            await groups.list()  # before the pods: a member never finds its group missing
            informers.append(groups)
        await initial_sync(api, scheduler, nodes, pods, kinds, early=early)
        # The first cycle runs alone: the pending pods beyond a first slice, and Kopf's import, wait
        # for its binds to leave, rather than take the GIL from it. A follower's loop does not run.
        first_batch = scheduler.first_batch_out.wait if elector is None else None
        watches = [
            asyncio.create_task(w.run(first_batch if w is pods else None), name=f"watch {w.path}")
            for w in informers
        ]
        # The pending pods left for the pod watch to feed are part of the start-up's state too.
        gc_back = asyncio.create_task(_release_gc_when(pods.fed), name="release-gc")
        synced.set()
        # A re-list after a watch gap sends no DELETED for what vanished meanwhile: see kube/listing.py.
        reconciling = asyncio.create_task(
            keep_reconciling(api, scheduler, settings.cache.reconcile_interval), name="cache-reconcile"
        )
        if elector:
            # Every replica watches and keeps its cache and policies warm; only a leader schedules,
            # each term starting once the last leader's final binds are in the cache. A
            # leader that loses the lease becomes a follower rather than exiting as kube-scheduler
            # does: all its state lives on this event loop, so cancelling the term (its binds
            # forget their assumptions) leaves a clean, still-warm standby, where an exit would
            # cost a restart and a full re-list before it could take over again.
            async def catch_up() -> None:
                await sync_bound_pods(api, scheduler)
                await policies.sync_statuses()  # status is the leader's to write: whatever changed meanwhile

            campaign = elector.run(lambda: scheduler.lead(catch_up))
            scheduling = asyncio.create_task(campaign, name="leader-election")
        else:
            scheduling = asyncio.create_task(scheduler.run(), name="scheduling-loop")
        # Kopf watches what changes seldom (SchedulerPolicies, the kinds of model/kinds.py, all
        # listed above already); its import, the start-up's largest, waits for the first batch's
        # binds (with leader election, it runs beside the first cycles).
        if first_batch is not None:
            await first_batch()
        await asyncio.to_thread(import_kopf_wiring)
        from kubesched.app import handlers  # imported by now

        kopf_stop: asyncio.Future[None] = loop.create_future()
        kopf_ready = asyncio.Event()
        operator = asyncio.create_task(
            handlers.operator(
                handlers.build_registry(
                    scheduler, await handlers.connection_info(conf), watched_policies, kinds
                ),
                stop_flag=kopf_stop,
                ready_flag=kopf_ready,
            ),
            name="kopf",
        )
        stop_wait = asyncio.create_task(stopping.wait(), name="stop-signal")
        ready_wait = asyncio.create_task(kopf_ready.wait(), name="kopf-ready")
        waiting = {operator, scheduling, stop_wait, ready_wait}
        while True:
            done, waiting = await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
            if ready_wait in done:
                # Kopf installs its own signal handlers on start; ours come back so that a
                # SIGTERM drains the binds before the watches stop.
                _handle_signals(loop, stopping)
            if done - {ready_wait}:
                break
        if scheduling.done() and not scheduling.cancelled() and scheduling.exception() is not None:
            log.error("scheduling_loop_crashed", error=repr(scheduling.exception()))
        log.info("shutting_down")
        await scheduler.drain()
        await scheduler.stand_down()  # binds that outlived the grace: cancelled before the lease goes
        reporting.cancel()
        lagging.cancel()
        (log.warning if lag.worst > lag.warn_after else log.info)(
            "event_loop_lag",
            worst_seconds=round(lag.worst, 3),
            worst_own_cpu_seconds=round(lag.worst_busy, 3),
            stall_sites=[f"{count}x {site}" for site, count in lag.top_stall_sites()],
        )
        reconciling.cancel()
        gc_back.cancel()
        for watch in watches:
            watch.cancel()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(reporter.flush(), 5.0)  # the last figures, while still leader
        if elector:
            await elector.release()
        await policies.close()
        await evictor.close()  # before the recorder: an eviction posts its event there
        await group_statuses.close()
        writing_statuses.cancel()
        await recorder.close()
        for task in waiting:
            task.cancel()
        if not kopf_stop.done():
            kopf_stop.set_result(None)
        with contextlib.suppress(asyncio.CancelledError):
            await operator
        await endpoints.stop()
        log.info("stopped")
        if scheduling.done() and not scheduling.cancelled() and scheduling.exception() is not None:
            sys.exit(1)


def import_kopf_wiring() -> None:
    """app/handlers.py, and Kopf with it. Kopf imports kubernetes_asyncio's models, when installed,
    only to recognise them in `kopf.adopt()` and its kin, which kubesched never calls; they are the
    largest import there is. So the generated client is hidden while Kopf is imported (unless
    something imported it already), and Kopf takes it for absent, as it is meant to."""
    if "kubernetes_asyncio" in sys.modules:
        importlib.import_module("kubesched.app.handlers")
        return
    sys.modules["kubernetes_asyncio"] = None  # type: ignore[assignment]  # import raises ImportError
    try:
        importlib.import_module("kubesched.app.handlers")
    finally:
        del sys.modules["kubernetes_asyncio"]


async def _release_gc_when(fed: asyncio.Event) -> None:
    await fed.wait()
    release_gc()


def _always() -> bool:
    return True


def _handle_signals(loop: asyncio.AbstractEventLoop, stopping: asyncio.Event) -> None:
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stopping.set)
