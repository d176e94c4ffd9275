"""`python bench/first_bind.py --variant NAME=COMMAND ...`: seconds from a scheduler's process start
to its first bind, for command lines started in turn on one control plane (see bench/README.md)."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shlex
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from kubebench import workload
from kubebench.kubeapi import call, new_client
from kubebench.observe import BindWatcher
from kubebench.procstat import ProcessSampler, machine_busy_seconds, self_cpu_seconds
from kubebench.runner import CREATE_CONCURRENCY, delete_namespace, namespace_body, reset_cluster
from kubebench.schedulers import DEFAULT_POLICY, REPO_ROOT, KubeschedFlags, SchedulerProcess, compile_bytecode

from kubesched_dev.devcluster import LocalControlPlane
from kubesched_dev.fixtures import create_pods, post_object

POLL = 0.02  # the bind's time is the watch's receipt time: polling only decides when to stop
IDLE_WINDOW = 0.5
IDLE_CPU = 0.05  # API server + etcd CPU seconds per window below which the server counts as idle


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python bench/first_bind.py",
        description=(
            "Start each variant's scheduler in turn (order rotated every round) on the same nodes and "
            "fresh pending pods, and time its process start to the first pod seen bound."
        ),
    )
    parser.add_argument(
        "--variant",
        action="append",
        required=True,
        metavar="NAME=COMMAND",
        help=(
            "a scheduler command line (shell words; a leading `python` is this interpreter), to which "
            "the scheduler flags are appended (repeatable; the first is the baseline of the gains)"
        ),
    )
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=2000, help="pending pods at every start")
    parser.add_argument("--rounds", type=int, default=10, help="starts per variant")
    parser.add_argument("--policy-config-file", type=Path, default=DEFAULT_POLICY)
    parser.add_argument("--kube-api-qps", type=float, default=5000.0)
    parser.add_argument("--kube-api-burst", type=int, default=5000)
    parser.add_argument(
        "--arg", action="append", default=[], metavar="ARG", help="extra scheduler argument (repeatable)"
    )
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds a start may take to bind")
    parser.add_argument("--settle-timeout", type=float, default=30.0, help="longest wait for an idle server")
    parser.add_argument("--seed", type=int, default=1, help="seed of the nodes and pods")
    parser.add_argument("--out", type=Path, help="result JSON (default: in the log directory)")
    parser.add_argument("--log-dir", type=Path, help="scheduler logs (default: a new /tmp/first-bind-* dir)")
    parser.add_argument("--note", default="", help="a remark stored with the results")
    return parser.parse_args(argv)


def parse_variants(texts: list[str]) -> dict[str, list[str]]:
    """NAME=COMMAND pairs as argv lists, a leading `python` replaced by this interpreter."""
    variants: dict[str, list[str]] = {}
    for text in texts:
        name, sep, command = text.partition("=")
        argv = shlex.split(command)
        if not sep or not name or not argv or name in variants:
            raise SystemExit(f"bad --variant {text!r}: NAME=COMMAND, each NAME once")
        if argv[0] == "python":
            argv[0] = sys.executable
        variants[name] = argv
    return variants


def scheduler_flags(
    args: argparse.Namespace, flags: KubeschedFlags, kubeconfig: Path, scheduler_name: str
) -> list[str]:
    """The flags every variant gets: the bench's for kubesched (schedulers.py), without metrics."""
    return [
        "--kubeconfig", str(kubeconfig),
        "--scheduler-name", scheduler_name,
        "--policy-config-file", str(args.policy_config_file.resolve()),
        "--kube-api-qps", f"{args.kube_api_qps:g}",
        "--kube-api-burst", str(args.kube_api_burst),
        "--metrics-port", "0",
        "--log-level", "warning",
        *flags.leader_elect,
        *flags.score_all_nodes,
        *args.arg,
    ]  # fmt: skip


def rotation(names: list[str], rounds: int) -> list[tuple[int, str]]:
    """(round, variant) in start order, the order rotated every round: A B, B A, A B, ..."""
    return [(r, names[(r + i) % len(names)]) for r in range(rounds) for i in range(len(names))]


async def wait_idle(samplers: list[ProcessSampler], timeout: float) -> float:
    """Wait until the API server and etcd are idle for a window; returns how long that took."""
    began = time.monotonic()
    while time.monotonic() - began < timeout:
        for sampler in samplers:
            sampler.mark()
        await asyncio.sleep(IDLE_WINDOW)
        for sampler in samplers:
            sampler.sample()
        if sum(s.cpu_used for s in samplers) < IDLE_CPU:
            break
    return time.monotonic() - began


async def one_start(
    api: Any,
    args: argparse.Namespace,
    argv: list[str],
    namespace: str,
    control_plane: list[ProcessSampler],
    log_file: Path,
) -> dict[str, Any]:
    """Fresh pending pods, then one scheduler process until the harness sees its first bind."""
    await call(api, "POST", "/api/v1/namespaces", namespace_body(namespace))
    for service in workload.make_services(namespace):
        await post_object(api, f"/api/v1/namespaces/{namespace}/services", service)
    scheduler_name = argv[argv.index("--scheduler-name") + 1]
    pods = workload.make_pods(args.pods, namespace, scheduler_name, args.seed)
    await create_pods(api, pods, concurrency=CREATE_CONCURRENCY)
    watcher = BindWatcher(api, namespace)
    await watcher.start()  # listed: every bind from now on is seen
    record: dict[str, Any] = {
        "namespace": namespace,
        "settle_s": round(await wait_idle(control_plane, args.settle_timeout), 2),
    }
    record["loadavg"] = list(os.getloadavg())
    process: SchedulerProcess | None = None
    try:
        for sampler in control_plane:
            sampler.mark()
        busy0, self0 = machine_busy_seconds(), self_cpu_seconds()
        started = time.monotonic()
        process = SchedulerProcess("scheduler", argv, log_file)
        sched = ProcessSampler(process.pid)
        while not watcher.bound:
            await asyncio.sleep(POLL)
            if not process.alive():
                raise RuntimeError(f"exited with {process.exit_code()}: {process.log_tail(5)}")
            if time.monotonic() - started > args.timeout:
                raise RuntimeError(f"no bind in {args.timeout:g} s")
            if (error := watcher.failed()) is not None:
                raise RuntimeError(f"the harness's watch failed: {error!r}")
        ended = time.monotonic()
        sched.sample()
        for sampler in control_plane:
            sampler.sample()
        busy = machine_busy_seconds() - busy0
        harness = self_cpu_seconds() - self0
        server = sum(s.cpu_used for s in control_plane)
        record.update(
            first_bind_s=round(min(at for at, _ in watcher.bound.values()) - started, 3),
            scheduler_cpu_s=round(sched.cpu, 2),
            server_cpu_s=round(server, 2),
            # The rest of the machine's CPU meanwhile, in cores: other people's work on a shared machine.
            other_cores=round((busy - sched.cpu - harness - server) / max(ended - started, 1e-9), 2),
        )
    finally:
        if process is not None:
            record["exit_code"] = process.stop(10.0)
        await watcher.stop()
        await delete_namespace(api, namespace)
    return record


def summarise(starts: list[dict[str, Any]], names: list[str]) -> dict[str, dict[str, Any]]:
    """Per variant: count, median, min and max of the first binds, and the median's gain over the first
    variant's (positive: the first binds sooner)."""
    rows: dict[str, dict[str, Any]] = {}
    for name in names:
        times = [s["first_bind_s"] for s in starts if s["variant"] == name and "first_bind_s" in s]
        if times:
            rows[name] = {
                "starts": len(times),
                "median_s": round(statistics.median(times), 3),
                "min_s": min(times),
                "max_s": max(times),
                "values_s": times,
            }
    base = rows.get(names[0])
    for name, row in rows.items():
        if base is not None and name != names[0]:
            row[f"median_minus_{names[0]}_s"] = round(row["median_s"] - base["median_s"], 3)
    return rows


def child_kubesched() -> str:
    """Where a child started as the variants are (interpreter, environment, directory) finds kubesched."""
    code = "import kubesched; print(kubesched.__file__)"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO_ROOT, timeout=60
    )
    return (out.stdout or out.stderr).strip()


async def measure(args: argparse.Namespace) -> int:
    variants = parse_variants(args.variant)
    names = list(variants)
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    log_dir = args.log_dir or Path(f"/tmp/first-bind-{stamp}")
    log_dir.mkdir(parents=True, exist_ok=True)
    out = args.out or log_dir / "result.json"
    compile_bytecode(sys.executable)
    flags = KubeschedFlags.detect(sys.executable)
    meta: dict[str, Any] = {
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "nodes": args.nodes,
        "pods": args.pods,
        "rounds": args.rounds,
        "variants": {name: shlex.join(argv) for name, argv in variants.items()},
        "scheduler_flags": shlex.join(scheduler_flags(args, flags, Path("KUBECONFIG"), "NAME")),
        "kubesched_file": child_kubesched(),
        "pythonpath": os.environ.get("PYTHONPATH", ""),
        "cpus": os.cpu_count(),
        "loadavg_at_start": list(os.getloadavg()),
        "note": args.note,
    }
    print(
        f"first bind: {args.nodes} nodes, {args.pods} pending pods, {args.rounds} starts per variant\n"
        + "".join(f"  {name}: {command} ...\n" for name, command in meta["variants"].items())
        + f"  flags: {meta['scheduler_flags']}\n  kubesched: {meta['kubesched_file']}\n"
        + f"  load: {meta['loadavg_at_start']}\n  logs: {log_dir}",
        flush=True,
    )
    starts: list[dict[str, Any]] = []
    began = time.monotonic()
    with LocalControlPlane() as cp:
        async with await new_client(cp.kubeconfig) as api:
            await reset_cluster(api, args.nodes, args.seed)
            print(f"cluster ready: {args.nodes} nodes, {time.monotonic() - began:.0f} s", flush=True)
            control_plane = [ProcessSampler(int(p.pid)) for p in (cp.apiserver, cp.etcd) if p is not None]
            plan = rotation(names, args.rounds)
            for index, (round_, name) in enumerate(plan, 1):
                namespace = f"first-bind-{index:03d}"
                argv = [*variants[name], *scheduler_flags(args, flags, cp.kubeconfig, namespace)]
                log_file = log_dir / f"{index:03d}-{name}.log"
                record: dict[str, Any] = {"variant": name, "round": round_ + 1}
                try:
                    record.update(await one_start(api, args, argv, namespace, control_plane, log_file))
                except Exception as e:  # one failed start must not lose the others
                    record["error"] = repr(e)
                starts.append(record)
                figure = (
                    f"first bind {record['first_bind_s']:6.3f} s  "
                    f"(scheduler cpu {record['scheduler_cpu_s']:.2f} s, "
                    f"other cores {record['other_cores']:.2f}, load {record['loadavg'][0]:.2f}, "
                    f"settled in {record['settle_s']:.1f} s)"
                    if "first_bind_s" in record
                    else f"FAILED: {record.get('error')}"
                )
                print(f"{index:3d}/{len(plan)} {name:>12}: {figure}", flush=True)
                _write(out, meta, starts, names)
    meta["loadavg_at_end"] = list(os.getloadavg())
    rows = _write(out, meta, starts, names)
    print(f"\nload at start {meta['loadavg_at_start']}, at end {meta['loadavg_at_end']}")
    for name, row in rows.items():
        gain = row.get(f"median_minus_{names[0]}_s")
        print(
            f"{name:>12}: {row['starts']} starts, median {row['median_s']:.3f} s, "
            f"min {row['min_s']:.3f} s, max {row['max_s']:.3f} s"
            + (f", median - {names[0]}'s: {gain:+.3f} s" if gain is not None else "")
        )
    print(f"results: {out}")
    return 0 if all("first_bind_s" in s for s in starts) else 1


def _write(
    out: Path, meta: dict[str, Any], starts: list[dict[str, Any]], names: list[str]
) -> dict[str, dict[str, Any]]:
    rows = summarise(starts, names)
    out.write_text(json.dumps({"meta": meta, "summary": rows, "starts": starts}, indent=1))
    return rows


def main(argv: list[str] | None = None) -> int:
    try:
        return asyncio.run(measure(parse_args(argv)))
    except KeyboardInterrupt:
        print("\ninterrupted: scheduler and control plane stopped", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
