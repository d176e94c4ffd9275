"""One measured run: fresh nodes, fresh pods, one scheduler, its binds watched, then the audit."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import numpy as np
from kubernetes_asyncio import client

from kubebench import classes, gangs, quotas, workload
from kubebench.audit import audit
from kubebench.kubeapi import call, list_items
from kubebench.observe import BindWatcher, scheduled_events
from kubebench.procstat import ProcessSampler, machine_busy_seconds, self_cpu_seconds
from kubebench.schedulers import KUBESCHED_GANGS, KUBESCHED_QUOTAS, NULL, SchedulerConfig, SchedulerProcess
from kubesched_dev.fixtures import create_nodes, create_pods, post_object

BATCH = "batch"
STEADY = "steady"
GANG = "gang"  # a pending batch of whole groups, with PodGroups or without (see gangs.py)
CLASS = "class"  # a pending batch of one constraint class (see classes.py), under its own policy
QUOTA = "quota"  # a pending batch over 5 namespaces, with ElasticQuotas or without (see quotas.py)
PENDING = (BATCH, GANG, CLASS, QUOTA)  # every pod exists before the scheduler starts
CANARY = "canary"
CREATE_CONCURRENCY = 64
TICK = 0.2
# The longest the CPU windows wait, after the last bind, for the run's Scheduled events.
EVENTS_LIMIT = 60.0

# The figures of a run; a run that did not end "ok" keeps none of them.
FIGURES = (
    "pods_per_s",
    "bind_span_s",
    "first_bind_s",
    "latency_p50_ms",
    "latency_p99_ms",
    "latency_max_ms",
    "cpu_s_per_1000_pods",
    "peak_rss_mib",
    "loop_lag_max_ms",
    "loop_busy_max_ms",
    "recorder_loop_share_pct",
    "recorder_thread_cpu_pct",
    "makespan_s",
    "makespan_pods_per_s",
    "group_done_p50_s",
    "group_done_p95_s",
    "group_done_max_s",
    "group_spread_p50_s",
    "group_spread_max_s",
)

# Statuses of a run; only "ok" runs give figures.
OK = "ok"
STALLED = "stalled"  # no new bind for --stall-timeout seconds (or none before --startup-timeout)
TIMED_OUT = "timeout"  # still binding when --run-timeout ran out
CRASHED = "crashed"  # the scheduler exited by itself
AUDIT_FAILED = "audit-failed"
ERROR = "error"  # the harness could not do its part (API error, watch failure)


@dataclass(frozen=True, slots=True)
class Scenario:
    """A cluster size and a way pods arrive: all pending at once (batch), at a fixed rate (steady),
    all pending at once in whole groups (gang), or all pending at once with the constraints of a
    workload class (class)."""

    mode: str
    nodes: int
    pods: int
    rate: float = 0.0  # pods/s, steady only
    duration: float = 0.0  # seconds, steady only
    groups: int = 0  # gang only: groups of `group_size`
    group_size: int = 0
    mixed: int = 0  # gang only: groups of sizes drawn from gangs.MIXED_SIZES
    group_sizes: tuple[int, ...] = ()  # gang only: every group's size, in the order created
    workload: str = ""  # class only: its name in classes.CLASSES

    @classmethod
    def batch(cls, nodes: int, pods: int) -> Scenario:
        return cls(BATCH, nodes, pods)

    @classmethod
    def steady(cls, nodes: int, rate: float, duration: float) -> Scenario:
        return cls(STEADY, nodes, round(rate * duration), rate, duration)

    @classmethod
    def gang(cls, nodes: int, groups: int, size: int, mixed: int, seed: int) -> Scenario:
        sizes = gangs.group_sizes(groups, size, mixed, seed)
        return cls(GANG, nodes, sum(sizes), groups=groups, group_size=size, mixed=mixed, group_sizes=sizes)

    @classmethod
    def constraint_class(cls, workload: str, nodes: int, pods: int) -> Scenario:
        if workload not in classes.CLASSES:
            raise ValueError(f"unknown workload class {workload!r}")
        return cls(CLASS, nodes, pods, workload=workload)

    @classmethod
    def quota(cls, nodes: int, pods: int) -> Scenario:
        return cls(QUOTA, nodes, pods)

    @property
    def name(self) -> str:
        if self.mode == QUOTA:
            return f"quota-{self.nodes}n-{self.pods}p"
        if self.mode == BATCH:
            return f"batch-{self.nodes}n-{self.pods}p"
        if self.mode == GANG:
            return f"gang-{self.nodes}n-{self.groups}x{self.group_size}-mixed{self.mixed}"
        if self.mode == CLASS:
            return f"{self.workload}-{self.nodes}n-{self.pods}p"
        return f"steady-{self.nodes}n-{self.rate:g}pps-{self.duration:g}s"

    @property
    def title(self) -> str:
        if self.mode == BATCH:
            return f"{self.pods:,} pending pods, {self.nodes:,} nodes"
        if self.mode == QUOTA:
            return f"{self.pods:,} pending pods in {len(quotas.SHARES)} namespaces, {self.nodes:,} nodes"
        if self.mode == GANG:
            low, high = gangs.MIXED_SIZES
            return (
                f"{self.groups} groups of {self.group_size} + {self.mixed} of {low}-{high} "
                f"({self.pods:,} pods), {self.nodes:,} nodes"
            )
        if self.mode == CLASS:
            return f"{classes.CLASSES[self.workload].title}: {self.pods:,} pods, {self.nodes:,} nodes"
        return f"{self.rate:g} pods/s for {self.duration:g} s, {self.nodes:,} nodes"


@dataclass(frozen=True, slots=True)
class Limits:
    run_timeout: float | None  # None: from the scenario's size
    startup_timeout: float
    stall_timeout: float
    stop_grace: float

    def for_scenario(self, scenario: Scenario) -> float:
        if self.run_timeout is not None:
            return self.run_timeout
        if scenario.mode in PENDING:
            return self.startup_timeout + 60 + scenario.pods / 10
        return self.startup_timeout + scenario.duration + 120


@dataclass(slots=True)
class Context:
    api: client.ApiClient
    kubeconfig: Path
    control_plane_pids: dict[str, int]
    config: SchedulerConfig
    limits: Limits
    seed: int
    log_dir: Path
    progress: Callable[[str, bool], None]


class Stop(Exception):
    """Ends a run early with a status."""

    def __init__(self, status: str, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


async def run_once(ctx: Context, scenario: Scenario, kind: str, repeat: int, index: int) -> dict[str, Any]:
    """One scheduler on one scenario, from fresh nodes; a record with figures or the reason for none."""
    namespace = f"bench-{index:03d}-{kind}"
    scheduler_name = f"bench-{kind}-{index:03d}"
    label = f"{scenario.name} {kind} #{repeat + 1}"
    record: dict[str, Any] = {
        "scenario": scenario.name,
        "mode": scenario.mode,
        "scheduler": kind,
        "repeat": repeat + 1,
        "nodes": scenario.nodes,
        "pods": scenario.pods,
        **({"workload": scenario.workload} if scenario.workload else {}),
        **(
            {"groups": len(scenario.group_sizes), "grouped": kind == KUBESCHED_GANGS}
            if scenario.group_sizes
            else {}
        ),
        "namespace": namespace,
        "scheduler_name": scheduler_name,
        "status": ERROR,
        "detail": "",
        "loadavg_before": list(os.getloadavg()),
    }
    process: SchedulerProcess | None = None
    watcher: BindWatcher | None = None
    pacer: asyncio.Task[None] | None = None
    namespaces = quotas.quota_namespaces(namespace) if scenario.mode == QUOTA else [namespace]
    try:
        began = time.monotonic()
        await reset_cluster(ctx.api, scenario.nodes, ctx.seed)
        for name in namespaces:
            await call(ctx.api, "POST", "/api/v1/namespaces", namespace_body(name))
        pods = await _make_pods(ctx, scenario, kind, namespace, scheduler_name)
        for name in namespaces:
            services = (
                classes.make_class_services(scenario.workload, pods, name)
                if scenario.mode == CLASS
                else workload.make_services(name)
            )
            await _post_all(ctx.api, f"/api/v1/namespaces/{name}/services", services)
        expected = {p["metadata"]["name"] for p in pods}
        created_at: dict[str, float] = {}
        create_latency: list[float] = []
        if scenario.mode in PENDING:
            await create_pods(ctx.api, pods, concurrency=CREATE_CONCURRENCY)
        record["setup_s"] = round(time.monotonic() - began, 2)
        watcher = BindWatcher(ctx.api, namespace if scenario.mode != QUOTA else "")
        await watcher.start()

        samplers = {name: ProcessSampler(pid) for name, pid in ctx.control_plane_pids.items()}
        for sampler in samplers.values():
            sampler.mark()
        busy0, self0 = machine_busy_seconds(), self_cpu_seconds()
        log_file = ctx.log_dir / f"{index:03d}-{scenario.name}-{kind}.log"
        record["log"] = str(log_file)
        started = time.monotonic()
        policy = ctx.config.class_policy_file if scenario.mode == CLASS else None
        argv = ctx.config.command(kind, ctx.kubeconfig, scheduler_name, policy)
        record["policy"] = str(policy or ctx.config.policy_file)
        process = SchedulerProcess(kind, argv, log_file)
        sched = ProcessSampler(process.pid)
        if scenario.mode in PENDING:
            created_at = dict.fromkeys(expected, started)
        else:
            # A canary proves the scheduler is up (synced and scheduling) before the clock starts.
            canary = workload.make_pods(1, namespace, scheduler_name, ctx.seed)[0]
            canary["metadata"]["name"] = CANARY
            await post_object(ctx.api, f"/api/v1/namespaces/{namespace}/pods", canary)
            await _wait_canary(ctx, watcher, process, sched, label, started)
            record["startup_s"] = round(time.monotonic() - started, 2)
            pacer = asyncio.create_task(
                _pace(ctx.api, pods, scenario.rate, created_at, create_latency), name="pacer"
            )
        status, detail = await _monitor(
            ctx, scenario, watcher, process, sched, pacer, expected, created_at, label, started
        )
        if status == OK and kind != NULL:  # the null binder writes no events
            last_bind = time.monotonic()
            record["scheduled_events"] = await scheduled_events(
                ctx.api, namespaces, len(expected), EVENTS_LIMIT
            )
            record["events_after_last_bind_s"] = round(time.monotonic() - last_bind, 2)
        ended = time.monotonic()
        sched.sample()
        for sampler in samplers.values():
            sampler.sample()
        busy = machine_busy_seconds() - busy0
        harness_cpu = self_cpu_seconds() - self0
        record.update(await _scheduler_metrics(process.argv))
        record["exit_code"] = process.stop(ctx.limits.stop_grace)
        if pacer is not None and pacer.done() and not pacer.cancelled() and pacer.exception():
            status, detail = ERROR, f"creating pods failed: {pacer.exception()!r}"

        bound = {n: watcher.bound[n] for n in expected if n in watcher.bound}
        _dump_pods(log_file.with_suffix(".pods.json"), bound, created_at)
        record.update(
            _figures(bound, created_at, started, scenario, sched.cpu),
            peak_rss_mib=round(sched.peak_rss / 2**20, 1),
            cpu_s=round(sched.cpu, 2),
            bound=len(bound),
            window_s=round(ended - started, 2),
            apiserver_cpu_s=round(samplers["kube-apiserver"].cpu_used, 2),
            etcd_cpu_s=round(samplers["etcd"].cpu_used, 2),
            harness_cpu_s=round(harness_cpu, 2),
            # CPU the machine spent on anything else meanwhile (other work on a shared machine).
            other_cpu_s=round(busy - sched.cpu - harness_cpu - sum(s.cpu_used for s in samplers.values()), 2),
            machine_busy_s=round(busy, 2),
            watch_restarts=watcher.restarts,
        )
        if scenario.mode in PENDING:
            record.update(gangs.makespan_figures(bound, started))
        if scenario.mode == GANG:
            record.update(gangs.group_figures(bound, gangs.members_of(pods), created_at))
        if create_latency:
            record["create_p99_ms"] = round(float(np.percentile(create_latency, 99)) * 1000, 1)
            record["arrival_rate"] = round(
                (len(created_at) - 1) / max(max(created_at.values()) - min(created_at.values()), 1e-9), 1
            )

        # The audit runs whatever happened: a stalled run's partial placements must be sound too.
        all_pods, _ = await list_items(ctx.api, "/api/v1/pods")
        run_pods = [
            p
            for p in all_pods
            if p["metadata"]["namespace"] in namespaces and p["metadata"]["name"] != CANARY
        ]
        nodes, _ = await list_items(ctx.api, "/api/v1/nodes")
        pod_groups = None
        if scenario.mode == GANG:
            pod_groups, _ = await list_items(ctx.api, gangs.pod_groups_path(namespace))
        result = audit(
            run_pods,
            all_pods,
            nodes,
            expected,
            watcher.rebound,
            check_selectors=kind != NULL,
            pod_groups=pod_groups,
        )
        if kind == KUBESCHED_QUOTAS:
            in_force = []
            for name in namespaces:
                in_force.extend((await list_items(ctx.api, quotas.elastic_quotas_path(name)))[0])
            order = sorted((p for p in bound if p in expected), key=lambda p: bound[p][0])
            by_name = {p["metadata"]["name"]: p for p in run_pods}
            result.quota_violations = quotas.over_max(order, by_name, in_force)
            result.quotas_checked = len(in_force)
        record["audit"] = result.as_dict()
        if status == OK and not result.ok:
            status, detail = AUDIT_FAILED, "; ".join(result.problems())
        record["status"], record["detail"] = status, detail
        if status != OK:
            for key in FIGURES:
                record.pop(key, None)  # a failed run reports its failure, not a figure
    except Stop as e:
        record["status"], record["detail"] = e.status, e.detail
    except Exception as e:  # one broken run must not lose the others' results
        record["status"], record["detail"] = ERROR, f"{e!r}\n{traceback.format_exc(limit=5)}"
    finally:
        # The scheduler first: nothing below may leave it running, not even a second Ctrl-C.
        if process is not None:
            code = process.stop(ctx.limits.stop_grace)
            record.setdefault("exit_code", code)
            if record["status"] != OK:
                record["log_tail"] = process.log_tail()
        if pacer is not None:
            pacer.cancel()
            await asyncio.wait([pacer])  # not `await pacer`: that would swallow our own cancellation
        if watcher is not None:
            await watcher.stop()
        record["loadavg_after"] = list(os.getloadavg())
        for name in namespaces:
            with contextlib.suppress(Exception):
                await delete_namespace(ctx.api, name)
    ctx.progress(_summary_line(label, record), True)
    return record


async def _make_pods(
    ctx: Context, scenario: Scenario, kind: str, namespace: str, scheduler_name: str
) -> list[dict[str, Any]]:
    """The run's pods; for a gang run with PodGroups, the PodGroups are created first, as a job's
    controller creates them before its pods."""
    if scenario.mode == CLASS:
        return classes.make_class_pods(scenario.workload, scenario.pods, namespace, scheduler_name, ctx.seed)
    if scenario.mode == QUOTA:
        pods = quotas.make_quota_pods(scenario.pods, namespace, scheduler_name, ctx.seed)
        if kind == KUBESCHED_QUOTAS:  # in force before the first pod exists, as in a real cluster
            for quota in quotas.make_elastic_quotas(pods):
                await post_object(ctx.api, quotas.elastic_quotas_path(quota["metadata"]["namespace"]), quota)
        return pods
    if scenario.mode != GANG:
        return workload.make_pods(scenario.pods, namespace, scheduler_name, ctx.seed)
    grouped = kind == KUBESCHED_GANGS
    if grouped:
        for group in gangs.make_pod_groups(scenario.group_sizes, namespace):
            await post_object(ctx.api, gangs.pod_groups_path(namespace), group)
    return gangs.make_gang_pods(scenario.group_sizes, namespace, scheduler_name, ctx.seed, grouped=grouped)


async def _wait_canary(
    ctx: Context,
    watcher: BindWatcher,
    process: SchedulerProcess,
    sched: ProcessSampler,
    label: str,
    started: float,
) -> None:
    while CANARY not in watcher.bound:
        await asyncio.sleep(TICK)
        sched.sample()
        elapsed = time.monotonic() - started
        if not process.alive():
            raise Stop(CRASHED, f"exited with {process.exit_code()} before binding the canary pod")
        if elapsed > ctx.limits.startup_timeout:
            raise Stop(STALLED, f"canary pod not bound after {ctx.limits.startup_timeout:g} s")
        ctx.progress(f"{label}: waiting for the scheduler to bind a canary pod ({elapsed:.0f} s)", False)


async def _monitor(
    ctx: Context,
    scenario: Scenario,
    watcher: BindWatcher,
    process: SchedulerProcess,
    sched: ProcessSampler,
    pacer: asyncio.Task[None] | None,
    expected: set[str],
    created_at: dict[str, float],
    label: str,
    started: float,
) -> tuple[str, str]:
    """Wait until every expected pod is seen bound, or the scheduler stalls, crashes or times out."""
    timeout = ctx.limits.for_scenario(scenario)
    total = len(expected)
    last_count, last_change = -1, started
    while True:
        await asyncio.sleep(TICK)
        sched.sample()
        now = time.monotonic()
        count = sum(1 for name in watcher.bound if name in expected)
        creating = pacer is not None and not pacer.done()
        if count >= total and not creating:
            return OK, ""
        if pacer is not None and pacer.done() and not pacer.cancelled() and pacer.exception():
            return ERROR, f"creating pods failed: {pacer.exception()!r}"
        if not process.alive():
            return CRASHED, f"exited with {process.exit_code()} after binding {count}/{total}"
        if (error := watcher.failed()) is not None:
            return ERROR, f"the harness's watch failed: {error!r}"
        if count != last_count:
            last_count, last_change = count, now
        patience = ctx.limits.stall_timeout if count else ctx.limits.startup_timeout
        if now - last_change > patience:
            return STALLED, f"no bind for {now - last_change:.0f} s, {count}/{total} bound"
        if now - started > timeout:
            return TIMED_OUT, f"{count}/{total} bound after {timeout:.0f} s"
        elapsed = now - started
        ctx.progress(
            f"{label}: bound {count:>5}/{total}  {elapsed:6.1f} s  cpu {sched.cpu:6.1f} s"
            + (f"  created {len(created_at)}" if pacer is not None else ""),
            False,
        )


def _dump_pods(path: Path, bound: dict[str, tuple[float, str]], created_at: dict[str, float]) -> None:
    """Each pod's creation and bind times (wall clock, seconds) and node, for a look at the tail."""
    to_wall = time.time() - time.monotonic()
    rows = {
        name: {
            "created": round(created_at[name] + to_wall, 4) if name in created_at else None,
            "bound": round(at + to_wall, 4),
            "node": node,
        }
        for name, (at, node) in bound.items()
    }
    path.write_text(json.dumps(rows))


def _figures(
    bound: dict[str, tuple[float, str]],
    created_at: dict[str, float],
    started: float,
    scenario: Scenario,
    cpu: float,
) -> dict[str, Any]:
    figures: dict[str, Any] = {}
    times = sorted(t for t, _ in bound.values())
    if len(times) >= 2 and times[-1] > times[0]:
        # n binds span n-1 intervals.
        figures["pods_per_s"] = round((len(times) - 1) / (times[-1] - times[0]), 1)
        figures["bind_span_s"] = round(times[-1] - times[0], 3)
    if times and scenario.mode in PENDING:
        figures["first_bind_s"] = round(times[0] - started, 3)
    latencies = [max(0.0, t - created_at[name]) for name, (t, _) in bound.items() if name in created_at]
    if latencies:
        figures["latency_p50_ms"] = round(float(np.percentile(latencies, 50)) * 1000, 1)
        figures["latency_p99_ms"] = round(float(np.percentile(latencies, 99)) * 1000, 1)
        figures["latency_max_ms"] = round(max(latencies) * 1000, 1)
    if bound:
        figures["cpu_s_per_1000_pods"] = round(cpu / len(bound) * 1000, 3)
    return figures


async def _pace(
    api: client.ApiClient,
    pods: list[dict[str, Any]],
    rate: float,
    created_at: dict[str, float],
    create_latency: list[float],
) -> None:
    """Create the pods at `rate` a second (catching up if a request was slow); record when each exists."""
    limit = asyncio.Semaphore(CREATE_CONCURRENCY)

    async def create(pod: dict[str, Any]) -> None:
        async with limit:
            sent = time.monotonic()
            await post_object(api, f"/api/v1/namespaces/{pod['metadata']['namespace']}/pods", pod)
            # Created = when the API server confirmed it (it exists from then on).
            created_at[pod["metadata"]["name"]] = done = time.monotonic()
            create_latency.append(done - sent)

    start = time.monotonic()
    tasks = []
    for i, pod in enumerate(pods):
        delay = start + i / rate - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(create(pod)))
    await asyncio.gather(*tasks)


# ------------------------------------------------------------------------------------ cluster state


async def _post_all(api: client.ApiClient, path: str, bodies: list[dict[str, Any]]) -> None:
    """POST every body to `path`, CREATE_CONCURRENCY at a time."""
    limit = asyncio.Semaphore(CREATE_CONCURRENCY)

    async def post(body: dict[str, Any]) -> None:
        async with limit:
            await post_object(api, path, body)

    await asyncio.gather(*(post(b) for b in bodies))


def namespace_body(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


async def reset_cluster(api: client.ApiClient, nodes: int, seed: int) -> None:
    """No pods anywhere and `nodes` freshly created empty nodes, the same ones (seeded) every run."""
    leftovers, _ = await list_items(api, "/api/v1/pods")
    for namespace in sorted({p["metadata"]["namespace"] for p in leftovers}):
        await delete_namespace(api, namespace)
    await call(api, "DELETE", "/api/v1/nodes")
    deadline = time.monotonic() + 60
    while (await call(api, "GET", "/api/v1/nodes", query=[("limit", 1)]))["items"]:
        if time.monotonic() > deadline:
            raise Stop(ERROR, "nodes still there 60 s after deleting them")
        await asyncio.sleep(0.2)
    await create_nodes(api, workload.make_nodes(nodes, seed), concurrency=CREATE_CONCURRENCY)


async def delete_namespace(api: client.ApiClient, namespace: str) -> None:
    """Pods (grace 0: no kubelet would confirm), Services, Events and PodGroups, then the namespace.

    No namespace controller runs here, so its finalizer is dropped by hand.
    """
    base = f"/api/v1/namespaces/{namespace}"
    gone = (200, 202, 404)
    await call(api, "DELETE", f"{base}/pods", query=[("gracePeriodSeconds", 0)], ok=gone)
    services, _ = await list_items(api, f"{base}/services")
    for service in services:
        await call(api, "DELETE", f"{base}/services/{service['metadata']['name']}", ok=gone)
    await call(api, "DELETE", f"{base}/events", ok=gone)
    # 404 where the PodGroup CRD is not installed (every class but the gang one).
    await call(api, "DELETE", gangs.pod_groups_path(namespace), ok=gone)
    await call(api, "DELETE", quotas.elastic_quotas_path(namespace), ok=gone)
    await call(api, "DELETE", f"/apis/events.k8s.io/v1/namespaces/{namespace}/events", ok=gone)
    await call(api, "DELETE", base, ok=(*gone, 409))
    body = {**namespace_body(namespace), "spec": {"finalizers": []}}
    await call(api, "PUT", f"{base}/finalize", body, ok=(*gone, 409))


def _summary_line(label: str, record: dict[str, Any]) -> str:
    if record["status"] != OK:
        return f"{label}: {record['status'].upper()}: {record['detail']}"
    return (
        f"{label}: {record.get('pods_per_s', 0):.0f} pods/s, p50 {record.get('latency_p50_ms', 0):.0f} ms, "
        f"p99 {record.get('latency_p99_ms', 0):.0f} ms, "
        f"cpu {record.get('cpu_s_per_1000_pods', 0):.2f} s/1000 pods, "
        f"rss {record.get('peak_rss_mib', 0):.0f} MiB, "
        f"other cores {record.get('other_cpu_s', 0) / max(record.get('window_s', 1), 1e-9):.2f}"
    )


def progress_printer(stream: Any = sys.stderr, every: float = 5.0) -> Callable[[str, bool], None]:
    """Progress on one rewritten line on a terminal; a line every `every` seconds in a log."""
    tty = hasattr(stream, "isatty") and stream.isatty()
    last = [0.0]
    width = [0]

    def show(text: str, final: bool) -> None:
        now = time.monotonic()
        if tty:
            pad = max(0, width[0] - len(text))
            stream.write("\r" + text + " " * pad + ("\n" if final else ""))
            width[0] = 0 if final else len(text)
            stream.flush()
        elif final or now - last[0] >= every:
            last[0] = now
            stream.write(text + "\n")
            stream.flush()

    return show


LOOP_GAUGES = {
    "kubesched_event_loop_lag_max_seconds": "loop_lag_max_ms",
    "kubesched_event_loop_busy_max_seconds": "loop_busy_max_ms",
}
THREAD_CPU = "kubesched_thread_cpu_seconds"
EVENT_HANDOFF = "kubesched_event_handoff_seconds"


async def _scheduler_metrics(argv: list[str]) -> dict[str, float]:
    """kubesched's own figures from its /metrics at the end of a run (nothing for the others): the
    longest event loop lag and the longest its own CPU time could account for, in ms; and the event
    recorder's share of the event loop's CPU time (its hand-off, the only part that runs there) and
    of all the threads' CPU time (its thread), in %."""
    if "--metrics-port" not in argv:
        return {}
    port = argv[argv.index("--metrics-port") + 1]
    try:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as session,
            session.get(f"http://127.0.0.1:{port}/metrics") as response,
        ):
            text = await response.text()
    except (aiohttp.ClientError, TimeoutError):
        return {}
    return scheduler_figures(text)


def scheduler_figures(text: str) -> dict[str, float]:
    """The figures `_scheduler_metrics` reports, from a Prometheus text exposition."""
    found: dict[str, float] = {}
    threads: dict[str, float] = {}
    handoff = 0.0
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        name, _, value = line.rpartition(" ")
        family, _, labels = name.partition("{")
        if family in LOOP_GAUGES:
            found[LOOP_GAUGES[family]] = round(float(value) * 1000, 1)
        elif family == THREAD_CPU:
            threads[labels.split('"')[1]] = float(value)
        elif family == EVENT_HANDOFF:
            handoff += float(value)
    loop_cpu, all_cpu = threads.get("event-loop", 0.0), sum(threads.values())
    if loop_cpu > 0:
        found["recorder_loop_share_pct"] = round(100 * handoff / loop_cpu, 3)
    if all_cpu > 0:
        found["recorder_thread_cpu_pct"] = round(100 * threads.get("event-recorder", 0.0) / all_cpu, 2)
    return found
