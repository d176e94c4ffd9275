"""The composition root: every long-lived part of the scheduler process, started in order under one
AsyncExitStack, so that shutdown, or a failure anywhere in start-up, closes what had started in the
reverse order and leaves no task, thread or socket behind.

The order, and why (each part is closed after every part started after it):

1. the metrics and probe server, the loop-lag monitor: up first, so a slow start is visible;
2. the API client, then the writers that post through it (events, PodGroup statuses, evictions);
3. the Lease elector (released after the policies' last status writes and before those writers);
4. SchedulerPolicies, loaded before any pod so that the first cycle runs their profiles;
5. the watches of every kind the scheduler reads: listed, then watching, reconciled now and then;
6. the scheduling loop, or the campaign that runs it while leading: drained first on shutdown;
7. Kopf, for the SchedulerPolicy watch (app/handlers.py), imported last; not at all without the CRD.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import importlib
import os
import signal
import sys
from collections.abc import Awaitable, Coroutine, Iterator
from contextlib import AsyncExitStack
from dataclasses import replace
from typing import Any

import structlog

from kubesched.algorithm.generic import Algorithm
from kubesched.app.discovery import served_kinds
from kubesched.app.settings import RunSettings
from kubesched.app.startup import initial_sync, keep_reconciling, sync_bound_pods, watches_for
from kubesched.app.tuning import release_gc
from kubesched.kube.binding import Binder
from kubesched.kube.client import Configuration, TokenBucket, api_client, load_configuration
from kubesched.kube.election import ElectionThread
from kubesched.kube.events import Recorder
from kubesched.kube.eviction import Evictor
from kubesched.kube.extender_transport import HTTPTransport
from kubesched.kube.status_writer import StatusWriter, pod_group_status_writer
from kubesched.model.kinds import ELASTIC_QUOTAS
from kubesched.policy.compile import compile_policy, default_algorithm, parse_policy_text
from kubesched.policy.controller import PolicyController, PolicyStatusWriter
from kubesched.policy.files import read_policy_text
from kubesched.policy.published import lease_annotations
from kubesched.policy.shadow import ShadowRunner
from kubesched.policy.shadow_status import ShadowReporter
from kubesched.policy.store import PolicyStore
from kubesched.runtime.queue import SchedulingQueue
from kubesched.runtime.scheduler import Scheduler
from kubesched.telemetry import metrics
from kubesched.telemetry.http_server import Endpoints
from kubesched.telemetry.looplag import LoopLagMonitor
from kubesched.telemetry.sizes import container_sizes

log = structlog.get_logger("kubesched")

SIGNALS = (signal.SIGINT, signal.SIGTERM)
# Connections beyond the binds' own: one per watch, and a few for the rest.
SPARE_CONNECTIONS = 32


class StartupError(RuntimeError):
    """A step of the start-up failed; the message is one line naming the step and the cause."""


@contextlib.contextmanager
def step(what: str) -> Iterator[None]:
    """Report any failure inside as a StartupError that says what was being done."""
    try:
        yield
    except StartupError:
        raise
    except Exception as exc:
        raise StartupError(f"{what}: {_one_line(exc)}") from exc


def base_algorithm(settings: RunSettings) -> tuple[Algorithm, dict[str, str]]:
    """The policy file's algorithm (kube-scheduler 1.20's defaults without one), and the Lease
    annotations that publish it, from one read of the file."""
    scheduling = settings.scheduling
    path, text = scheduling.policy_config_file, ""
    if path:
        text = read_policy_text(path)
        algorithm = compile_policy(parse_policy_text(text, str(path)), transport=HTTPTransport)
    else:
        algorithm = default_algorithm()
    if scheduling.percentage_of_nodes_to_score is not None:
        algorithm = replace(algorithm, percentage_of_nodes_to_score=scheduling.percentage_of_nodes_to_score)
    return algorithm, lease_annotations(scheduling.scheduler_name, path or None, text)


async def run_scheduler(settings: RunSettings) -> None:
    """Run the scheduler process until SIGINT or SIGTERM, or until its scheduling loop fails.

    Raises StartupError when a start-up step fails, once what had started is closed; exits with
    status 1 when the scheduling loop fails. The process is tuned by its command (app/tuning.py);
    the collector, if held, is released once every listed pod is fed."""
    algorithm, published = base_algorithm(settings)
    stopping = asyncio.Event()
    async with AsyncExitStack() as stack:
        stack.callback(gc.enable)  # held until the initial sync, which a failed start never ends
        _handle_signals(stopping)
        stack.callback(_restore_signals)
        with step(f"reading {_kubeconfig_named(settings.connection.kubeconfig)}"):
            conf = await load_configuration(settings.connection.kubeconfig)
        conf.connection_pool_maxsize = settings.scheduling.bind_concurrency + SPARE_CONNECTIONS
        ended = await _start(stack, settings, algorithm, published, conf, stopping)
        failed = await ended
    log.info("stopped")
    if failed:
        sys.exit(1)


async def _start(
    stack: AsyncExitStack,
    settings: RunSettings,
    algorithm: Algorithm,
    published: dict[str, str],
    conf: Configuration,
    stopping: asyncio.Event,
) -> Awaitable[bool]:
    """Start every part in order, each one's close pushed onto `stack`; returns what waits for the
    end (True when the scheduling loop failed)."""
    scheduling_settings = settings.scheduling
    server = conf.host
    synced = asyncio.Event()
    endpoints = Endpoints(ready=synced.is_set)
    if settings.observability.metrics_port:
        with step(f"serving metrics on port {settings.observability.metrics_port}"):
            await endpoints.start(settings.observability.metrics_port)
        stack.push_async_callback(endpoints.stop)
    lag = LoopLagMonitor()
    stack.callback(_report_lag, lag)  # once its task has stopped
    await _background(stack, lag.run(), "loop-lag")

    api = await stack.enter_async_context(api_client(conf))
    limiter = TokenBucket(settings.connection.qps, settings.connection.burst)
    metrics.CLIENT_QPS_LIMIT.set(settings.connection.qps)
    metrics.CLIENT_BURST_LIMIT.set(settings.connection.burst)
    recorder = Recorder(api, scheduling_settings.scheduler_name, limiter)
    stack.push_async_callback(recorder.close)
    metrics.EVENT_HANDOFF.track(lambda: {recorder.component: recorder.handoff_seconds})
    group_statuses = pod_group_status_writer(api)
    await _background(stack, group_statuses.run(), "podgroup-status-writer")
    stack.push_async_callback(group_statuses.close)  # before its task is cancelled: a last round
    quota_statuses = StatusWriter(api, ELASTIC_QUOTAS)
    await _background(stack, quota_statuses.run(), "elasticquota-status-writer")
    stack.push_async_callback(quota_statuses.close)
    election = settings.election.config(scheduling_settings.scheduler_name)
    elector = ElectionThread(conf, election, published) if election else None
    may_act = elector.is_leader if elector else None
    evictor = Evictor(api, limiter, recorder, may_act=may_act)
    stack.push_async_callback(evictor.close)  # before the recorder: an eviction posts its event there
    if elector is not None:
        stack.push_async_callback(elector.release)  # after the last status writes, as leader
    scheduler = Scheduler(
        scheduling_settings.scheduler(),
        algorithm,
        Binder(api, limiter, may_bind=may_act),
        recorder,
        evictor=evictor,
        queue=SchedulingQueue(scheduling_settings.queue()),
        status_writer=group_statuses,
        quota_writer=quota_statuses,
    )
    endpoints.cache_view = scheduler.cache.describe
    scheduler.pod_gone = recorder.forget

    shadows = ShadowRunner(scheduling_settings.seed)
    scheduler.observe = shadows.observe
    policies = PolicyController(
        PolicyStore(scheduling_settings.scheduler_name, HTTPTransport),
        scheduler,
        PolicyStatusWriter(api, may_act or _always),
        shadows=shadows,
    )
    stack.push_async_callback(policies.close)
    metrics.POLICY_ACCEPTED.track(policies.store.acceptance)
    # Only what the server serves is watched, found while the policies are listed.
    discovering = asyncio.create_task(served_kinds(api), name="api-discovery")
    try:
        with step(f"loading the SchedulerPolicies from {server}"):
            loaded = await policies.load(api)
        kinds = await discovering
    finally:
        if not discovering.done():  # the policies failed: no request may outlive the start's client
            discovering.cancel()
            await asyncio.wait([discovering])
    reporter = ShadowReporter(
        shadows, policies.store, policies.writer, interval=settings.observability.shadow_status_interval
    )
    stack.push_async_callback(_flush, reporter)  # the last figures, while still leader
    await _background(stack, reporter.run(), "shadow-status")

    watches = watches_for(api, scheduler, kinds)
    roots = {"scheduler": scheduler, "policies": policies, "shadows": shadows, "watches": watches}
    endpoints.sizes_view = functools.partial(container_sizes, roots)
    with step(f"listing the cluster from {server}"):
        await initial_sync(watches)
    # The first cycle runs alone: the pending pods beyond a first slice, and Kopf's import, wait
    # for its binds to leave, rather than take the GIL from it. A follower's loop does not run.
    first_batch = scheduler.first_batch_out.wait if elector is None else None
    for watch in watches.every:
        await _background(
            stack, watch.run(first_batch if watch is watches.pods else None), f"watch {watch.path}"
        )
    # The pending pods left for the pod watch to feed are part of the start-up's state too.
    await _background(stack, _release_gc_when(watches.pods.fed), "release-gc")
    synced.set()
    await _background(stack, keep_reconciling(watches, settings.cache.reconcile_interval), "cache-reconcile")

    if elector is not None:
        # Every replica watches and keeps its cache and policies warm; only a leader schedules,
        # each term starting once the last leader's final binds are in the cache. A leader that
        # loses the lease becomes a follower rather than exiting as kube-scheduler does: all its
        # state lives on this event loop, so cancelling the term (its binds forget their
        # assumptions) leaves a clean, still-warm standby, where an exit would cost a restart and
        # a full re-list before it could take over again.
        async def catch_up() -> None:
            await sync_bound_pods(api, scheduler)
            await policies.sync_statuses()  # status is the leader's to write: whatever changed meanwhile

        scheduling = asyncio.create_task(
            elector.run(lambda: scheduler.lead(catch_up)), name="leader-election"
        )
    else:
        scheduling = asyncio.create_task(scheduler.run(), name="scheduling-loop")
    stack.push_async_callback(_stop_scheduling, scheduler, scheduling)

    # Kopf watches the SchedulerPolicies (listed above already). Without their CRD, or the right to
    # read them, it would watch nothing (the policies' warning says to restart once they are there):
    # not started. Its import, the start-up's largest (0.1-0.2 s of CPU, at 400 pending pods a fifth
    # of the first-to-last bind), waits for the first batch's binds (with leader election, it runs
    # beside the first cycles).
    if not loaded:
        return _until_stopped(scheduling, None, stopping)
    if first_batch is not None:
        await first_batch()
    kopf_ended = await _start_kopf(stack, scheduler, conf, policies, stopping)
    return _until_stopped(scheduling, kopf_ended, stopping)


async def _start_kopf(
    stack: AsyncExitStack,
    scheduler: Scheduler,
    conf: Configuration,
    policies: PolicyController,
    stopping: asyncio.Event,
) -> asyncio.Task[None]:
    with step("loading Kopf"):
        await asyncio.to_thread(import_kopf_wiring)
    from kubesched.app import handlers  # imported by now

    kopf_stop: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    kopf_ready = asyncio.Event()
    registry = handlers.build_registry(await handlers.connection_info(conf), policies)
    operator = asyncio.create_task(
        handlers.operator(registry, stop_flag=kopf_stop, ready_flag=kopf_ready), name="kopf"
    )

    async def stop_kopf() -> None:
        if not kopf_stop.done():
            kopf_stop.set_result(None)
        with contextlib.suppress(asyncio.CancelledError):
            await operator

    stack.push_async_callback(stop_kopf)

    async def signals_back() -> None:
        # Kopf installs its own signal handlers on start; ours come back so that a SIGTERM drains
        # the binds before the watches stop.
        await kopf_ready.wait()
        _handle_signals(stopping)

    await _background(stack, signals_back(), "kopf-ready")
    return operator


async def _until_stopped(
    scheduling: asyncio.Task[None], kopf: asyncio.Task[None] | None, stopping: asyncio.Event
) -> bool:
    """Wait for a signal, the scheduling loop's end or Kopf's; True when the scheduling loop failed."""
    signalled = asyncio.create_task(stopping.wait(), name="stop-signal")
    try:
        ends = {scheduling, signalled} if kopf is None else {scheduling, kopf, signalled}
        await asyncio.wait(ends, return_when=asyncio.FIRST_COMPLETED)
    finally:
        signalled.cancel()
    failed = scheduling.done() and not scheduling.cancelled() and scheduling.exception() is not None
    if failed:
        log.error("scheduling_loop_crashed", error=repr(scheduling.exception()))
    log.info("shutting_down")
    return failed


async def _stop_scheduling(scheduler: Scheduler, scheduling: asyncio.Task[None]) -> None:
    """Drain the binds in flight, cancel those that outlive the grace, then the loop itself."""
    await scheduler.drain()
    await scheduler.stand_down()  # binds that outlived the grace: cancelled before the lease goes
    scheduling.cancel()
    with contextlib.suppress(BaseException):
        await scheduling


async def _background(stack: AsyncExitStack, work: Coroutine[Any, Any, Any], name: str) -> asyncio.Task[Any]:
    """Run `work` as a task that the stack cancels, and waits for, on close."""
    task = asyncio.create_task(work, name=name)

    async def stop() -> None:
        task.cancel()
        with contextlib.suppress(BaseException):
            await task

    stack.push_async_callback(stop)
    return task


async def _flush(reporter: ShadowReporter) -> None:
    with contextlib.suppress(Exception):
        await asyncio.wait_for(reporter.flush(), 5.0)


def _report_lag(lag: LoopLagMonitor) -> None:
    (log.warning if lag.worst > lag.warn_after else log.info)(
        "event_loop_lag",
        worst_seconds=round(lag.worst, 3),
        worst_own_cpu_seconds=round(lag.worst_busy, 3),
        stall_sites=[f"{count}x {site}" for site, count in lag.top_stall_sites()],
    )


def import_kopf_wiring() -> None:
    """app/handlers.py, and Kopf with it. Kopf imports kubernetes_asyncio's models, when installed,
    only to recognise them in `kopf.adopt()` and its kin, which kubesched never calls; they are the
    largest import there is. So the generated client is hidden while Kopf is imported (unless
    something imported it already), and Kopf takes it for absent, as it is meant to. It earns its
    keep in CPU, not in the first bind: this import took 0.10 s of CPU instead of 0.42 s, while the
    first batches are being scheduled."""
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


def _kubeconfig_named(flag: str | None) -> str:
    """Which kubeconfig load_configuration reads, in words."""
    path = flag or os.environ.get("KUBECONFIG")
    return f"the kubeconfig {path}" if path else "the kubeconfig (~/.kube/config, or in-cluster)"


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 300 else text[:297] + "..."


def _handle_signals(stopping: asyncio.Event) -> None:
    loop = asyncio.get_running_loop()
    for sig in SIGNALS:
        loop.add_signal_handler(sig, stopping.set)


def _restore_signals() -> None:
    loop = asyncio.get_running_loop()
    for sig in SIGNALS:
        loop.remove_signal_handler(sig)
