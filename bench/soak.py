"""`python bench/soak.py [--pods N] [--duration S] ...`: churn pods through one `kubesched run` and
watch its memory (see bench/README.md; `make soak` runs it).

A local control plane, fake nodes and one scheduler process under the built-in default policy.
Batches of pods are created at a set rate, bound and deleted, over and over; each batch holds
every kind of pod the scheduler keeps state for: plain pods, gangs (PodGroups), a preempted victim
and its preemptor, pods unschedulable until a node gets a label (FailedScheduling events, a
PodScheduled condition, a queue entry), and a SchedulerPolicy is created, edited and deleted now
and then. Every `--sample-every` pods, once the scheduler has seen the last batch go, the harness
reads its RSS (VmRSS) and `/debug/sizes`. At the end it reports the RSS growth after the warm-up
per 100,000 pods, every structure whose size differs from the start and what of ours only a full
garbage collection frees (reference cycles); exit 1 if any, or if the growth exceeds `--max-growth`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import aiohttp
from kubebench import workload
from kubebench.gangs import POD_GROUP_LABEL, pod_groups_path
from kubebench.kubeapi import ApiError, call, new_client
from kubebench.procstat import ProcessSampler, status_kib
from kubebench.runner import CREATE_CONCURRENCY, namespace_body
from kubebench.schedulers import REPO_ROOT, KubeschedFlags, SchedulerProcess, compile_bytecode, free_port

from kubesched_dev.devcluster import LocalControlPlane
from kubesched_dev.fixtures import (
    create_nodes,
    create_priority_classes,
    install_crds,
    make_node,
    make_pod,
    post_object,
)

NAMESPACE = "soak"
SCHEDULER = "kubesched"
BATCH_LABEL = "soak-batch"
# The late pods fit only the node LATE_NODE once it has the label LATE_LABEL=<batch>, given mid-batch;
# tainted, so that no other pod fills it (a packing policy would fill any node of the others).
LATE_LABEL = "soak-late"
LATE_NODE = "soak-late"
LATE_TAINT = {"key": "soak/late", "effect": "NoSchedule"}
PREEMPT_NODE = "soak-preempt"
PREEMPT_TAINT = {"key": "soak/preempt", "effect": "NoSchedule"}
VICTIM_PRIORITY, PREEMPTOR_PRIORITY = 10, 1000
POLICIES = "/apis/kubesched.io/v1alpha1/schedulerpolicies"
POLICY_STEPS = (  # a policy for our own scheduler name, in turn created, edited and deleted
    [{"name": "LeastRequestedPriority", "weight": 1}],
    [{"name": "MostRequestedPriority", "weight": 1}],
    None,
)
MERGE_PATCH = "application/merge-patch+json"
MIB = 1024 * 1024
# Process-wide figures: not the scheduler's own structures, and allowed to differ at the end.
PROCESS_KEYS = ("gc.", "asyncio.", "metrics.", "tracemalloc.", "python.", "malloc.")
POOL = "._pool."


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python bench/soak.py",
        description="Churn pods through one kubesched process; sample its RSS and the sizes of its maps.",
    )
    parser.add_argument("--pods", type=int, default=300_000, help="pods to churn (default 300,000)")
    parser.add_argument(
        "--duration", type=float, default=0, help="stop after this many seconds (0: no limit)"
    )
    parser.add_argument("--nodes", type=int, default=200)
    parser.add_argument("--batch", type=int, default=200, help="pods per batch")
    parser.add_argument("--rate", type=float, default=50.0, help="pods created per second within a batch")
    parser.add_argument("--gangs", type=int, default=2, help="PodGroups per batch")
    parser.add_argument("--gang-size", type=int, default=8)
    parser.add_argument(
        "--late", type=int, default=4, help="pods per batch unschedulable until a node is labelled"
    )
    parser.add_argument("--policy-every", type=int, default=10, help="batches between two policy edits")
    parser.add_argument("--sample-every", type=int, default=4000, help="pods churned between two samples")
    parser.add_argument(
        "--warmup", type=int, default=10_000, help="pods churned before the growth is measured"
    )
    parser.add_argument(
        "--max-growth", type=float, default=1.0, help="MiB of RSS per 100,000 pods after the warm-up, at most"
    )
    parser.add_argument("--batch-timeout", type=float, default=120.0, help="seconds a batch may take to bind")
    parser.add_argument("--settle-timeout", type=float, default=60.0, help="seconds the end state may take")
    parser.add_argument(
        "--tracemalloc", type=int, default=0, metavar="FRAMES", help="trace allocations in the scheduler"
    )
    parser.add_argument("--kubesched-arg", action="append", default=[], metavar="ARG")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path, help="result JSON (default: in the log directory)")
    parser.add_argument("--log-dir", type=Path, help="default: a new /tmp/soak-* directory")
    return parser.parse_args(argv)


# ------------------------------------------------------------------------------------------ pods


def batch_pods(index: int, args: argparse.Namespace) -> dict[str, list[dict[str, Any]]]:
    """One batch's pods by kind: plain (the bench's mix), gang members, late ones, victim, preemptor."""
    tag = f"b{index:07d}"
    labels = {BATCH_LABEL: tag}
    members = args.gangs * args.gang_size
    plain = workload.make_pods(
        max(args.batch - members - args.late - 2, 0) + members, NAMESPACE, SCHEDULER, index
    )
    for i, pod in enumerate(plain):
        pod["metadata"]["name"] = f"{tag}-{i:04d}"
        pod["metadata"]["labels"].update(labels)
    gang = plain[:members]
    for i, pod in enumerate(gang):
        pod["metadata"]["labels"][POD_GROUP_LABEL] = f"{tag}-g{i // args.gang_size}"
    late = [
        make_pod(
            f"{tag}-late-{i}",
            NAMESPACE,
            cpu="100m",
            labels=labels,
            node_selector={LATE_LABEL: tag},
            tolerations=[{**LATE_TAINT, "operator": "Exists"}],
        )
        for i in range(args.late)
    ]
    toleration = [{**PREEMPT_TAINT, "operator": "Exists"}]
    on_preempt_node = {"soak-role": "preempt"}

    def preempting(name: str, priority: int) -> dict[str, Any]:
        return make_pod(
            f"{tag}-{name}", NAMESPACE, cpu="700m", labels=labels, node_selector=on_preempt_node,
            tolerations=toleration, priority=priority,
        )  # fmt: skip

    return {
        "plain": plain[members:],
        "gang": gang,
        "late": late,
        "victim": [preempting("victim", VICTIM_PRIORITY)],
        "preemptor": [preempting("preemptor", PREEMPTOR_PRIORITY)],
    }


def pod_groups(index: int, args: argparse.Namespace) -> list[dict[str, Any]]:
    tag = f"b{index:07d}"
    return [
        {
            "apiVersion": "scheduling.x-k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": f"{tag}-g{g}", "namespace": NAMESPACE, "labels": {BATCH_LABEL: tag}},
            "spec": {"minMember": args.gang_size},
        }
        for g in range(args.gangs)
    ]


# -------------------------------------------------------------------------------------- the churn


class Churn:
    """Creates, binds and deletes one batch at a time, playing the kubelet for the preempted victim."""

    def __init__(self, api: Any, args: argparse.Namespace) -> None:
        self.api = api
        self.args = args
        self.stalls = 0

    async def batch(self, index: int) -> None:
        tag = f"b{index:07d}"
        pods = batch_pods(index, self.args)
        for group in pod_groups(index, self.args):
            await post_object(self.api, pod_groups_path(NAMESPACE), group)
        await self._create(pods["late"] + pods["victim"], rate=0)
        preemption = asyncio.create_task(self._preempt(pods["victim"][0], pods["preemptor"][0]))
        await self._create(pods["gang"] + pods["plain"], rate=self.args.rate)
        # The late pods have been tried by now: a node that lets them fit moves them (NodeUpdate).
        await self._label_node(tag)
        try:
            await asyncio.wait_for(
                asyncio.gather(preemption, self._until_bound(tag)), self.args.batch_timeout
            )
        except TimeoutError:
            self.stalls += 1
            print(f"batch {tag}: not all bound within {self.args.batch_timeout:g} s", flush=True)
        await self._delete(tag)

    async def _create(self, bodies: list[dict[str, Any]], rate: float) -> None:
        limit = asyncio.Semaphore(CREATE_CONCURRENCY)
        start = time.monotonic()

        async def create(i: int, body: dict[str, Any]) -> None:
            if rate and (delay := start + i / rate - time.monotonic()) > 0:
                await asyncio.sleep(delay)
            async with limit:
                await post_object(self.api, f"/api/v1/namespaces/{NAMESPACE}/pods", body)

        await asyncio.gather(*(create(i, b) for i, b in enumerate(bodies)))

    async def _preempt(self, victim: dict[str, Any], preemptor: dict[str, Any]) -> None:
        """The victim binds; the preemptor evicts it (deleted here, as a kubelet would), then binds."""
        path = f"/api/v1/namespaces/{NAMESPACE}/pods"
        await self._until(lambda p: bool(p["spec"].get("nodeName")), f"{path}/{victim['metadata']['name']}")
        await post_object(self.api, path, preemptor)
        victim_path = f"{path}/{victim['metadata']['name']}"
        await self._until(lambda p: bool(p["metadata"].get("deletionTimestamp")), victim_path)
        await call(self.api, "DELETE", victim_path, query=[("gracePeriodSeconds", 0)], ok=(200, 202, 404))

    async def _until(self, done: Any, path: str) -> None:
        while True:
            try:
                if done(await call(self.api, "GET", path)):
                    return
            except ApiError as e:
                if e.status != 404:
                    raise
                return  # gone: nothing left to wait for
            await asyncio.sleep(0.2)

    async def _until_bound(self, tag: str) -> None:
        query = [("labelSelector", f"{BATCH_LABEL}={tag}"), ("fieldSelector", "spec.nodeName=")]
        while True:
            pending = await call(self.api, "GET", f"/api/v1/namespaces/{NAMESPACE}/pods", query=query)
            if not pending["items"]:
                return
            await asyncio.sleep(0.5)

    async def _label_node(self, value: str | None) -> None:
        patch = {"metadata": {"labels": {LATE_LABEL: value}}}
        await call(self.api, "PATCH", f"/api/v1/nodes/{LATE_NODE}", patch, content_type=MERGE_PATCH)

    async def _delete(self, tag: str) -> None:
        selector = [("labelSelector", f"{BATCH_LABEL}={tag}")]
        gone = (200, 202, 404)
        base = f"/api/v1/namespaces/{NAMESPACE}"
        await call(self.api, "DELETE", f"{base}/pods", query=[*selector, ("gracePeriodSeconds", 0)], ok=gone)
        await call(self.api, "DELETE", pod_groups_path(NAMESPACE), query=selector, ok=gone)
        await self._label_node(None)
        # The scheduler's events would pile up in etcd for an hour (the API server's event TTL).
        await call(self.api, "DELETE", f"{base}/events", ok=gone)

    async def policy(self, step: int) -> None:
        """Create, edit or delete the SchedulerPolicy that drives our scheduler name."""
        priorities = POLICY_STEPS[step % len(POLICY_STEPS)]
        path = f"{POLICIES}/soak"
        if priorities is None:
            await call(self.api, "DELETE", path, ok=(200, 202, 404))
            return
        body = {
            "apiVersion": "kubesched.io/v1alpha1",
            "kind": "SchedulerPolicy",
            "metadata": {"name": "soak"},
            "spec": {"schedulerName": SCHEDULER, "priorities": priorities},
        }
        try:
            current = await call(self.api, "GET", path)
        except ApiError as e:
            if e.status != 404:
                raise
            await call(self.api, "POST", POLICIES, body)
            return
        body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
        await call(self.api, "PUT", path, body)


# -------------------------------------------------------------------------------------- sampling


def rss_mib(pid: int, field: str = "VmRSS") -> float | None:
    """The process's RSS, or the part of it named `field` in /proc/PID/status (RssFile: the pages of
    its libraries and modules, shared and clean, which the kernel may drop and read again)."""
    kib = status_kib(pid, field)
    return None if kib is None else kib / 1024


async def debug(session: aiohttp.ClientSession, port: int, what: str) -> Any:
    """The scheduler's /debug/`what`; None where it has none (an older checkout) or fails."""
    try:
        async with session.get(f"http://127.0.0.1:{port}/debug/{what}") as reply:
            return await reply.json() if reply.status == 200 else None
    except (aiohttp.ClientError, TimeoutError, ValueError):
        return None


def own(sizes: Mapping[str, int]) -> dict[str, int]:
    """The scheduler's own structures, without the process-wide figures and the API connections kept
    open (kube/http1.py: as many as the last burst of requests needed, bounded by the pool's limit)."""
    return {k: v for k, v in sizes.items() if not k.startswith(PROCESS_KEYS) and POOL not in k}


def drained(sizes: Mapping[str, int], start: Mapping[str, int]) -> bool:
    """Whether the scheduler has seen the last batch go: no pod of it cached, queued or pending."""
    keys = (
        "scheduler.cache._pods",
        "scheduler.queue._pods",
        "scheduler._unbound",
        "scheduler.nominator._pods",
    )
    return all(sizes.get(k, 0) <= start.get(k, 0) for k in keys)


def differences(end: Mapping[str, int], start: Mapping[str, int]) -> dict[str, list[int]]:
    """Start and end of each size that differs (one not reported counts as empty)."""
    keys = sorted(start.keys() | end.keys())
    return {k: [start.get(k, 0), end.get(k, 0)] for k in keys if start.get(k, 0) != end.get(k, 0)}


def slope_per_100k(
    samples: Sequence[Mapping[str, Any]],
    warmup: int,
    key: Callable[[Mapping[str, Any]], float | None] | None = None,
) -> float | None:
    """Least-squares growth in MiB per 100,000 pods over the samples after the warm-up: of the RSS, or
    of what `key` reads off each sample."""
    read = key or (lambda s: s["rss_mib"])
    points = [(s["pods"], y) for s in samples if s["pods"] >= warmup and (y := read(s)) is not None]
    if len(points) < 2:
        return None
    mx = sum(x for x, _ in points) / len(points)
    my = sum(y for _, y in points) / len(points)
    var = sum((x - mx) ** 2 for x, _ in points)
    return sum((x - mx) * (y - my) for x, y in points) / var * 100_000 if var else None


def anonymous_mib(sample: Mapping[str, Any]) -> float | None:
    """The RSS less its file-backed pages: the process's own memory."""
    rss, file = sample["rss_mib"], sample.get("rss_file_mib")
    return None if rss is None or file is None else rss - file


def table(samples: Sequence[Mapping[str, Any]]) -> str:
    """The RSS by pods churned, beside its parts: file-backed pages, glibc's malloc in use (of which
    mapped: blocks of their own, resident only where written) and Python's arenas (blank where not
    reported)."""
    heads = (("pods churned", 12), ("minutes", 8), ("RSS MiB", 8), ("file MiB", 8), ("malloc MiB", 10))
    rows = [" ".join(f"{head:>{width}}" for head, width in heads) + f" {'mapped MiB':>10} {'arenas MiB':>10}"]
    for s in samples:
        if not s["rss_mib"]:
            continue
        sizes = s.get("sizes") or {}
        file = s.get("rss_file_mib")
        malloc, mapped = sizes.get("malloc.in_use_kib"), sizes.get("malloc.mapped_kib")
        arenas = sizes.get("python.arenas")
        rows.append(
            f"{s['pods']:>12,} {s['seconds'] / 60:>8.1f} {s['rss_mib']:>8.1f}"
            f" {'' if file is None else f'{file:.1f}':>8}"
            f" {'' if malloc is None else f'{malloc / 1024:.1f}':>10}"
            f" {'' if mapped is None else f'{mapped / 1024:.1f}':>10}"
            f" {'' if arenas is None else arenas:>10}"  # 1 MiB each
        )
    return "\n".join(rows)


# ------------------------------------------------------------------------------------------- main


async def soak(args: argparse.Namespace) -> int:
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    log_dir = args.log_dir or Path(f"/tmp/soak-{stamp}")
    log_dir.mkdir(parents=True, exist_ok=True)
    out = args.out or log_dir / "result.json"
    compile_bytecode(sys.executable)
    flags = KubeschedFlags.detect(sys.executable)
    meta = {
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "args": {k: str(v) for k, v in vars(args).items()},
        "pythonpath": os.environ.get("PYTHONPATH", ""),
        "loadavg_at_start": list(os.getloadavg()),
    }
    samples: list[dict[str, Any]] = []
    result: dict[str, Any] = {"meta": meta, "samples": samples}

    def save() -> None:
        out.write_text(json.dumps(result, indent=1))

    print(
        f"soak: {args.pods:,} pods in batches of {args.batch} on {args.nodes} nodes; logs {log_dir}",
        flush=True,
    )
    with LocalControlPlane() as cp:
        async with (
            await new_client(cp.kubeconfig) as api,
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as session,
        ):
            await install_crds(api, REPO_ROOT / "crds")
            await create_nodes(
                api, workload.make_nodes(args.nodes, args.seed), concurrency=CREATE_CONCURRENCY
            )
            for name, taint, labels in (
                (PREEMPT_NODE, PREEMPT_TAINT, {"soak-role": "preempt"}),
                (LATE_NODE, LATE_TAINT, {}),
            ):
                node = make_node(name, cpu="1", memory="4Gi", labels=labels)
                node["spec"]["taints"] = [taint]
                await post_object(api, "/api/v1/nodes", node)
            await call(api, "POST", "/api/v1/namespaces", namespace_body(NAMESPACE))
            for service in workload.make_services(NAMESPACE):
                await post_object(api, f"/api/v1/namespaces/{NAMESPACE}/services", service)
            await create_priority_classes(api, (VICTIM_PRIORITY, PREEMPTOR_PRIORITY))
            port = free_port()
            argv = [
                sys.executable, "-m", "kubesched", "run",
                "--kubeconfig", str(cp.kubeconfig), "--scheduler-name", SCHEDULER,
                "--kube-api-qps", "5000", "--kube-api-burst", "5000",
                "--metrics-port", str(port), "--log-level", "warning",
                *flags.leader_elect, *args.kubesched_arg,
            ]  # fmt: skip
            if args.tracemalloc:
                os.environ["PYTHONTRACEMALLOC"] = str(args.tracemalloc)
            process = SchedulerProcess(SCHEDULER, argv, log_dir / "kubesched.log")
            sampler = ProcessSampler(process.pid)
            try:
                return await _churn(args, api, session, port, process, sampler, result, save)
            finally:
                process.stop(15.0)
                meta["exit_code"] = process.exit_code()
                save()
                print(f"results: {out}")


async def _churn(
    args: argparse.Namespace,
    api: Any,
    session: aiohttp.ClientSession,
    port: int,
    process: SchedulerProcess,
    sampler: ProcessSampler,
    result: dict[str, Any],
    save: Any,
) -> int:
    samples: list[dict[str, Any]] = result["samples"]
    while not await _ready(session, port):
        if not process.alive():
            raise SystemExit(f"kubesched exited: {process.log_tail(10)}")
        await asyncio.sleep(0.2)
    start = await debug(session, port, "sizes") or {}
    result["start_sizes"] = start
    began = time.monotonic()
    churn = Churn(api, args)
    churned = index = 0
    next_sample = 0
    traced_from_warmup = False
    deadline = began + args.duration if args.duration else float("inf")
    while True:
        if churned >= next_sample or churned >= args.pods or time.monotonic() >= deadline:
            sizes = await _settled(session, port, start, 15.0)
            sampler.sample()
            sample = {
                "pods": churned,
                "seconds": round(time.monotonic() - began, 1),
                "rss_mib": rss_mib(process.pid),
                "rss_file_mib": rss_mib(process.pid, "RssFile"),
                "cpu_s": round(sampler.cpu, 1),
                "sizes": sizes,
            }
            samples.append(sample)
            if not traced_from_warmup and churned >= args.warmup:
                # What grows after the warm-up, not what the warm-up filled (caches, pools).
                traced_from_warmup = await debug(session, port, "tracemalloc?rebase=1") is not None
            grown = differences(own(sizes or {}), own(start))
            print(
                f"{churned:>9,} pods {sample['seconds'] / 60:6.1f} min  RSS {sample['rss_mib']:.1f} MiB  "
                f"cpu {sample['cpu_s']:.0f} s  stalls {churn.stalls}  "
                f"gc objects {(sizes or {}).get('gc.objects')}"
                + (
                    f"  traced {sizes['tracemalloc.traced_kib'] / 1024:.1f} MiB"
                    if sizes and "tracemalloc.traced_kib" in sizes
                    else ""
                )
                + (f"  differ: {dict(list(grown.items())[:8])}" if grown and sizes else ""),
                flush=True,
            )
            save()
            next_sample += args.sample_every
            if churned >= args.pods or time.monotonic() >= deadline:
                break
        if not process.alive():
            print(f"kubesched exited: {process.log_tail(10)}", flush=True)
            return 1
        if index % args.policy_every == args.policy_every - 1:
            await churn.policy(index // args.policy_every)
        await churn.batch(index)
        churned += args.batch
        index += 1
    # Back to the starting state: no pods, no policy.
    await churn.policy(len(POLICY_STEPS) - 1)
    end = await _settled(session, port, start, args.settle_timeout, exact=True)
    result["end_sizes"] = end
    result["tracemalloc_top"] = await debug(session, port, "tracemalloc")
    result["tracemalloc_lines"] = await debug(session, port, "tracemalloc?group=lineno")
    # Reference cycles among our own objects hold what they reach until a rare full collection.
    garbage = await debug(session, port, "garbage")
    cycles = None if garbage is None else {k: v for k, v in garbage.items() if k.startswith("kubesched.")}
    slope = slope_per_100k(samples, args.warmup)
    anonymous = slope_per_100k(samples, args.warmup, anonymous_mib)
    differ = differences(own(end or {}), own(start)) if end is not None else None
    result["summary"] = {
        "pods_churned": churned,
        "stalled_batches": churn.stalls,
        "rss_growth_mib_per_100k_pods_after_warmup": None if slope is None else round(slope, 3),
        "anonymous_rss_growth_mib_per_100k_pods_after_warmup": None
        if anonymous is None
        else round(anonymous, 3),
        "sizes_differing_from_start": differ,
        "cyclic_garbage_of_ours": cycles,
        "cyclic_garbage": garbage,
        "process_figures": {
            k: [start.get(k), (end or {}).get(k)] for k in sorted(end or {}) if k.startswith(PROCESS_KEYS)
        },
    }
    save()
    print("\n" + table(samples))
    print(
        f"\nRSS growth after {args.warmup:,} pods: "
        + ("n/a" if slope is None else f"{slope:.2f} MiB per 100,000 pods")
        + ("" if anonymous is None else f" ({anonymous:.2f} without the file-backed pages)")
    )
    if differ is None:
        print("sizes: not reported (no /debug/sizes)")
    else:
        print("sizes back to the start: " + ("all" if not differ else f"NOT {differ}"))
    if cycles is not None:
        print("cyclic garbage of ours: " + ("none" if not cycles else f"{cycles}"))
    for line in (result["tracemalloc_top"] or [])[:10]:
        print(f"  {line['size_diff'] / 1024:9.1f} KiB {line['count_diff']:+8d}  {line['where']}")
    ok = not differ and not cycles and slope is not None and slope < args.max_growth and not churn.stalls
    return 0 if ok else 1


async def _ready(session: aiohttp.ClientSession, port: int) -> bool:
    try:
        async with session.get(f"http://127.0.0.1:{port}/readyz") as reply:
            return reply.status == 200
    except aiohttp.ClientError:
        return False


async def _settled(
    session: aiohttp.ClientSession,
    port: int,
    start: Mapping[str, int],
    timeout: float,
    *,
    exact: bool = False,
) -> dict[str, int] | None:
    """The sizes once the scheduler has seen the last batch go (`exact`: once every one is back to the
    start), or as they are after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        sizes = await debug(session, port, "sizes")
        if sizes is None:
            # A request that failed is asked again; a checkout without sizes waits out the timeout,
            # which gives the deletes time to arrive.
            if time.monotonic() > deadline:
                return None
            await asyncio.sleep(1.0)
            continue
        settled = not differences(own(sizes), own(start)) if exact else drained(sizes, start)
        if settled or time.monotonic() > deadline:
            return dict(sizes)
        await asyncio.sleep(0.5)


def main(argv: Sequence[str] | None = None) -> int:
    # Stopped with SIGTERM (a run in the background ignores SIGINT), it cleans up as on Ctrl-C.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        return asyncio.run(soak(parse_args(argv)))
    except KeyboardInterrupt:
        print("\ninterrupted: scheduler and control plane stopped", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
