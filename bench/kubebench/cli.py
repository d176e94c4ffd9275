"""`make bench` / `python bench/run.py`: the benchmark from the command line."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import signal
import socket
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kubebench import classes, gangs, report, workload
from kubebench.kubeapi import new_client
from kubebench.runner import CLASS, GANG, QUOTA, Context, Limits, Scenario, progress_printer, run_once
from kubebench.schedulers import (
    ALL,
    DEFAULT_CLASS_POLICY,
    DEFAULT_POLICY,
    KNOWN,
    KUBE_SCHEDULER,
    KUBESCHED,
    KUBESCHED_GANGS,
    KUBESCHED_QUOTAS,
    KUBESCHED_SAMPLED,
    NULL,
    REPO_ROOT,
    KubeschedFlags,
    SchedulerConfig,
    SetupError,
    compile_bytecode,
    kube_scheduler_version,
)
from kubesched_dev.devcluster import LocalControlPlane
from kubesched_dev.devcluster.binaries import ensure_binaries
from kubesched_dev.fixtures import install_crds

RESULTS_DIR = Path(__file__).resolve().parent.parent / "results"
# The small sizes are where the per-pod cost decides (most clusters are small); the last is the memory
# case: 10,000 pods cached on 5,000 nodes.
DEFAULT_BATCH = ("200x400", "100x1000", "1000x2000", "5000x5000", "5000x10000")
DEFAULT_STEADY = "1000x100x30"
QUICK_BATCH = ("200x400",)
QUICK_STEADY = "200x50x10"
DEFAULT_GANG, DEFAULT_GANG_MIXED = "1000x50x32", 20
QUICK_GANG, QUICK_GANG_MIXED = "200x10x8", 4
DEFAULT_QUOTA, QUICK_QUOTA = "1000x2000", "200x400"
# The constraint classes: by default the four with pod-to-pod terms at 1,000 nodes / 2,000 pods, which
# keeps `make bench` under about an hour; node affinity, the mix and 5000x10000 by flag.
DEFAULT_CLASSES = (classes.ANTI_AFFINITY, classes.AFFINITY, classes.PREFERRED, classes.SPREAD)
DEFAULT_CLASS_SIZES = ("1000x2000",)
QUICK_CLASS_SIZES = ("200x400",)
CRD_DIR = REPO_ROOT / "crds"
SHARED_MACHINE_NOTE = (
    "Measured on a shared 2-core machine: the API server, etcd, the scheduler under test and the "
    "harness share its CPU, and other work may have run at the same time (see other_cpu_s and the "
    "load averages of each run)."
)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="make bench",
        description=(
            "kubesched, kube-scheduler 1.20.2 and a null binder, one at a time, on one local API server."
        ),
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help=(
            f"smoke run: batch {QUICK_BATCH[0]}, steady {QUICK_STEADY}, "
            f"gang {QUICK_GANG} + {QUICK_GANG_MIXED} mixed, quota {QUICK_QUOTA}, "
            f"classes at {QUICK_CLASS_SIZES[0]}, 1 repeat"
        ),
    )
    parser.add_argument(
        "--batch",
        action="append",
        metavar="NODESxPODS",
        help=f"a pending-batch size (repeatable; default {' and '.join(DEFAULT_BATCH)})",
    )
    parser.add_argument(
        "--steady",
        metavar="NODESxRATExSECONDS",
        help=f"the steady-arrival run (default {DEFAULT_STEADY}: pods/s for seconds)",
    )
    parser.add_argument(
        "--gang",
        metavar="NODESxGROUPSxSIZE",
        help=f"the gang run, kubesched only (default {DEFAULT_GANG}: GROUPS PodGroups of SIZE pods)",
    )
    parser.add_argument(
        "--gang-mixed",
        type=int,
        metavar="GROUPS",
        help=(
            f"groups of sizes drawn from {gangs.MIXED_SIZES[0]}-{gangs.MIXED_SIZES[1]} added to the gang run "
            f"(default {DEFAULT_GANG_MIXED}, --quick {QUICK_GANG_MIXED})"
        ),
    )
    parser.add_argument(
        "--quota",
        metavar="NODESxPODS",
        help=f"the quota run, kubesched only, with ElasticQuotas and without (default {DEFAULT_QUOTA})",
    )
    parser.add_argument(
        "--classes",
        metavar="NAME,NAME",
        help=(
            f"the constraint classes to run, or 'all' (known: {', '.join(classes.CLASSES)}; "
            f"default {','.join(DEFAULT_CLASSES)})"
        ),
    )
    parser.add_argument(
        "--class-size",
        action="append",
        metavar="NODESxPODS",
        help=(
            f"a size for every constraint class (repeatable; default {' and '.join(DEFAULT_CLASS_SIZES)}, "
            f"--quick {QUICK_CLASS_SIZES[0]}; the issue's second size is 5000x10000)"
        ),
    )
    parser.add_argument(
        "--class-policy-config-file",
        type=Path,
        default=DEFAULT_CLASS_POLICY,
        help="the Policy every scheduler gets in the constraint classes (default: 1.20's defaults)",
    )
    parser.add_argument("--no-batch", action="store_true", help="skip the pending-batch sizes")
    parser.add_argument("--no-steady", action="store_true", help="skip the steady-arrival run")
    parser.add_argument("--no-gang", action="store_true", help="skip the gang run")
    parser.add_argument("--no-quota", action="store_true", help="skip the quota run")
    parser.add_argument("--no-classes", action="store_true", help="skip the constraint classes")
    parser.add_argument("--repeats", type=int, help="runs per scheduler and size (default 3, --quick 1)")
    parser.add_argument(
        "--schedulers",
        default=",".join(ALL),
        help=(
            f"which, in order (default {','.join(ALL)}; also {KUBESCHED_SAMPLED}: kubesched at its "
            f"default node sampling, which the constraint classes run beside {KUBESCHED} anyway)"
        ),
    )
    parser.add_argument("--kube-api-qps", type=float, default=5000.0, help="client QPS for every scheduler")
    parser.add_argument("--kube-api-burst", type=int, default=5000, help="client burst for every scheduler")
    parser.add_argument("--policy-config-file", type=Path, default=DEFAULT_POLICY)
    parser.add_argument("--kube-scheduler-bin", type=Path, help="default: the cached 1.20.2 build")
    parser.add_argument(
        "--kubesched-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="extra argument for `kubesched run` (repeatable)",
    )
    parser.add_argument(
        "--kube-scheduler-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="extra argument for kube-scheduler (repeatable)",
    )
    parser.add_argument("--null-concurrency", type=int, default=64, help="binds in flight, null binder")
    parser.add_argument("--run-timeout", type=float, help="seconds per run (default: from its size)")
    parser.add_argument(
        "--startup-timeout", type=float, default=180.0, help="seconds a scheduler may take to its first bind"
    )
    parser.add_argument(
        "--stall-timeout",
        type=float,
        default=60.0,
        help="seconds without a new bind before a run counts as stalled",
    )
    parser.add_argument("--seed", type=int, default=1, help="seed of the nodes and pods")
    parser.add_argument("--results-dir", type=Path, default=RESULTS_DIR)
    parser.add_argument("--log-dir", type=Path, help="scheduler logs (default: a new /tmp/kubebench-* dir)")
    parser.add_argument("--note", default="", help="a remark stored with the results")
    parser.add_argument("--no-plot", action="store_true")
    parser.add_argument(
        "--report",
        type=Path,
        metavar="JSON",
        help="run nothing: summarise the runs of an earlier results file again (table, JSON, PNG)",
    )
    return parser.parse_args(argv)


def scenarios_from(args: argparse.Namespace) -> list[Scenario]:
    found: list[Scenario] = []
    if not args.no_batch:
        for text in args.batch or (QUICK_BATCH if args.quick else DEFAULT_BATCH):
            nodes, pods = _numbers(text, 2, "--batch NODESxPODS")
            found.append(Scenario.batch(int(nodes), int(pods)))
    if not args.no_steady:
        nodes, rate, seconds = _numbers(
            args.steady or (QUICK_STEADY if args.quick else DEFAULT_STEADY), 3, "--steady NODESxRATExSECONDS"
        )
        found.append(Scenario.steady(int(nodes), rate, seconds))
    if not args.no_gang:
        nodes, groups, size = _numbers(
            args.gang or (QUICK_GANG if args.quick else DEFAULT_GANG), 3, "--gang NODESxGROUPSxSIZE"
        )
        mixed = (
            args.gang_mixed
            if args.gang_mixed is not None
            else (QUICK_GANG_MIXED if args.quick else DEFAULT_GANG_MIXED)
        )
        if mixed < 0:
            raise SystemExit(f"bad value {mixed}: --gang-mixed GROUPS")
        found.append(Scenario.gang(int(nodes), int(groups), int(size), mixed, args.seed))
    if not args.no_quota:
        nodes, pods = _numbers(
            args.quota or (QUICK_QUOTA if args.quick else DEFAULT_QUOTA), 2, "--quota NODESxPODS"
        )
        found.append(Scenario.quota(int(nodes), int(pods)))
    if not args.no_classes:
        names = class_names(args.classes)
        for text in args.class_size or (QUICK_CLASS_SIZES if args.quick else DEFAULT_CLASS_SIZES):
            nodes, pods = _numbers(text, 2, "--class-size NODESxPODS")
            found.extend(Scenario.constraint_class(name, int(nodes), int(pods)) for name in names)
    return found


def class_names(text: str | None) -> list[str]:
    """The classes `--classes` names (comma-separated, or 'all'), in the order given."""
    if text is None:
        return list(DEFAULT_CLASSES)
    if text.strip() == "all":
        return list(classes.CLASSES)
    names = list(dict.fromkeys(n.strip() for n in text.split(",") if n.strip()))
    unknown = [n for n in names if n not in classes.CLASSES]
    if unknown or not names:
        known = ", ".join(classes.CLASSES)
        raise SystemExit(f"bad value {text!r}: --classes NAME,NAME (known: {known}, all)")
    return names


def binders_for(scenario: Scenario, schedulers: list[str]) -> list[str]:
    """Who runs a scenario: the chosen binders; for the gang run kubesched without PodGroups and with
    (kube-scheduler 1.20 has no gangs, and the null binder would only ignore them); for a constraint
    class kube-scheduler, kubesched scoring every node and kubesched at its default sampling (the
    null binder would break the constraints); for the quota run kubesched without ElasticQuotas and
    with (kube-scheduler 1.20 has none)."""
    if scenario.mode == GANG:
        return [KUBESCHED, KUBESCHED_GANGS] if KUBESCHED in schedulers else []
    if scenario.mode == QUOTA:
        return [KUBESCHED, KUBESCHED_QUOTAS] if KUBESCHED in schedulers else []
    if scenario.mode == CLASS:
        sampled = KUBESCHED in schedulers or KUBESCHED_SAMPLED in schedulers
        return [
            k
            for k in (KUBE_SCHEDULER, KUBESCHED, KUBESCHED_SAMPLED)
            if k in schedulers or (k == KUBESCHED_SAMPLED and sampled)
        ]
    return schedulers


def is_full_run(args: argparse.Namespace, schedulers: list[str], repeats: int) -> bool:
    """Every default size, every binder, at least three repeats: a run that may replace latest.*."""
    default_sizes = not (
        args.batch
        or args.steady
        or args.gang
        or args.gang_mixed is not None
        or args.no_batch
        or args.no_steady
        or args.no_gang
        or args.quota
        or args.no_quota
        or args.classes
        or args.class_size
        or args.no_classes
    )
    return default_sizes and set(schedulers) == set(ALL) and repeats >= 3


def _numbers(text: str, count: int, usage: str) -> list[float]:
    parts = text.lower().split("x")
    try:
        values = [float(p) for p in parts]
    except ValueError:
        values = []
    if len(values) != count or any(v <= 0 for v in values):
        raise SystemExit(f"bad value {text!r}: {usage}")
    return values


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.report:
        return report_again(args.report, not args.no_plot)
    try:
        return asyncio.run(_main(args))
    except KeyboardInterrupt:
        print("\ninterrupted: processes and control plane stopped", file=sys.stderr)
        return 130


async def _main(args: argparse.Namespace) -> int:
    task = asyncio.current_task()
    assert task is not None
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
    scenarios = scenarios_from(args)
    schedulers = [s.strip() for s in args.schedulers.split(",") if s.strip()]
    unknown = set(schedulers) - set(KNOWN)
    skipped = [s for s in scenarios if not binders_for(s, schedulers)]
    scenarios = [s for s in scenarios if s not in skipped]
    if unknown or not schedulers or not scenarios:
        raise SystemExit(
            f"nothing to run, or unknown schedulers {sorted(unknown)} (known: {', '.join(KNOWN)})"
        )
    for scenario in skipped:
        print(f"note: {scenario.name} skipped: none of the chosen schedulers runs it", file=sys.stderr)
    if any(s.mode == GANG for s in scenarios) and not gangs.has_pod_group_crd(CRD_DIR):
        print(
            f"cannot run: no {gangs.CRD_NAME} CRD in {CRD_DIR} (--no-gang skips the gang run)",
            file=sys.stderr,
        )
        return 2
    kinds = list(dict.fromkeys(k for s in scenarios for k in binders_for(s, schedulers)))
    repeats = args.repeats or (1 if args.quick else 3)
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    log_dir = args.log_dir or Path(f"/tmp/kubebench-{stamp}")
    log_dir.mkdir(parents=True, exist_ok=True)
    bin_path = args.kube_scheduler_bin or ensure_binaries() / "kube-scheduler"
    try:
        wants_kubesched = KUBESCHED in kinds or KUBESCHED_SAMPLED in kinds
        flags = KubeschedFlags()
        if wants_kubesched:
            compile_bytecode(sys.executable)
            flags = KubeschedFlags.detect(sys.executable)
        config = SchedulerConfig(
            args.kube_api_qps,
            args.kube_api_burst,
            args.policy_config_file.resolve(),
            bin_path,
            null_concurrency=args.null_concurrency,
            kubesched_flags=flags,
            kubesched_extra=tuple(args.kubesched_arg),
            kube_scheduler_extra=tuple(args.kube_scheduler_arg),
            class_policy_file=args.class_policy_config_file.resolve(),
        )
        policies = [config.policy_file]
        if any(s.mode == CLASS for s in scenarios):
            policies.append(config.class_policy_file)
        config.check(kinds, policies)
    except SetupError as e:
        print(f"cannot run: {e}", file=sys.stderr)
        return 2
    for scenario in scenarios:
        if NULL in binders_for(scenario, schedulers) and not workload.round_robin_fits(
            scenario.nodes, scenario.pods
        ):
            print(
                f"note: at {scenario.name} the null binder's round-robin may overcommit small nodes "
                "(its audit would fail)",
                file=sys.stderr,
            )

    limits = Limits(args.run_timeout, args.startup_timeout, args.stall_timeout, stop_grace=10.0)
    meta = _meta(args, config, schedulers, repeats, stamp, log_dir)
    meta["scenarios"] = {s.name: s.title for s in scenarios}
    print(_plan(scenarios, schedulers, repeats, config, log_dir), file=sys.stderr, flush=True)
    show = progress_printer()
    runs: list[dict[str, Any]] = []
    titles = {s.name: s.title for s in scenarios}
    partial = log_dir / "runs.json"
    interrupted = False
    index = 0
    try:
        for scenario in scenarios:
            # A fresh control plane per scenario keeps etcd's history from one size out of the next.
            show(f"{scenario.name}: starting a control plane", True)
            with LocalControlPlane() as cp:
                api = await new_client(cp.kubeconfig)
                async with api:
                    pids = {"kube-apiserver": _pid(cp.apiserver), "etcd": _pid(cp.etcd)}
                    ctx = Context(api, cp.kubeconfig, pids, config, limits, args.seed, log_dir, show)
                    if scenario.mode in (GANG, QUOTA):
                        # Before any scheduler starts, so that both kubesched runs see the kinds served.
                        await install_crds(api, CRD_DIR)
                    binders = binders_for(scenario, schedulers)
                    for repeat in range(repeats):
                        # Rotate the order each repeat, so that drift on the machine hits all alike.
                        shift = repeat % len(binders)
                        for kind in binders[shift:] + binders[:shift]:
                            index += 1
                            runs.append(await run_once(ctx, scenario, kind, repeat, index))
                            report.write_json({"meta": meta, "runs": runs}, [partial])
    except asyncio.CancelledError:
        interrupted = True
    meta["finished_at"] = datetime.now(UTC).isoformat(timespec="seconds")
    meta["interrupted"] = interrupted
    names = [s.name for s in scenarios]
    rows = report.summarise(runs, names, kinds)
    found_ratios = report.ratios(rows, names)
    results = {"meta": meta, "summary": rows, "ratios": found_ratios, "runs": runs}
    # Smoke runs keep only their latest result, and so do runs of other sizes, binders or fewer
    # repeats; the full run latest.* and a timestamped copy in runs/ (not committed: the tree keeps
    # only latest.*); an interrupted run stays in the log directory.
    if interrupted:
        paths = [log_dir / "interrupted"]
    elif args.quick:
        paths = [args.results_dir / "quick-latest"]
    elif is_full_run(args, schedulers, repeats):
        paths = [args.results_dir / "latest", args.results_dir / "runs" / f"bench-{stamp}"]
    else:
        paths = [args.results_dir / "partial-latest"]
    json_paths = report.write_json(results, [p.with_suffix(".json") for p in paths])
    print(report.table(rows, found_ratios, titles))
    print(f"\n{meta['note']}")
    print(f"results: {', '.join(str(p) for p in json_paths)}")
    if not args.no_plot and rows:
        from kubebench.plot import plot

        png = plot(rows, names, titles, kinds, _heading(meta), paths[0].with_suffix(".png"), found_ratios)
        for path in paths[1:]:
            path.with_suffix(".png").write_bytes(png.read_bytes())
        print(f"plot: {', '.join(str(p.with_suffix('.png')) for p in paths)}")
    print(f"logs: {log_dir} (partial results as the runs went: {partial})")
    if interrupted:
        raise KeyboardInterrupt
    failed = [r for r in runs if r["status"] != "ok"]
    return 1 if failed else 0


def report_again(path: Path, with_plot: bool) -> int:
    """Summarise the runs of an earlier results file again: rewrite its summary, print, re-plot."""
    results = json.loads(path.read_text())
    runs, meta = results["runs"], results["meta"]
    names = list(dict.fromkeys(r["scenario"] for r in runs))
    # The configured binders in their order, then those only some scenarios run (kubesched-gangs).
    configured = [*meta["config"]["schedulers"], *(r["scheduler"] for r in runs)]
    schedulers = [s for s in dict.fromkeys(configured) if any(r["scheduler"] == s for r in runs)]
    titles = meta.get("scenarios") or {}
    rows = report.summarise(runs, names, schedulers)
    found_ratios = report.ratios(rows, names)
    results.update(summary=rows, ratios=found_ratios)
    report.write_json(results, [path])
    print(report.table(rows, found_ratios, titles))
    print(f"\n{meta['note']}\nresults: {path}")
    if with_plot:
        from kubebench.plot import plot

        png = plot(rows, names, titles, schedulers, _heading(meta), path.with_suffix(".png"), found_ratios)
        print(f"plot: {png}")
    return 0


def _heading(meta: dict[str, Any]) -> str:
    config = meta["config"]
    return (
        f"kubesched vs kube-scheduler 1.20.2 vs null binder — {meta['started_at']}, "
        f"{meta['machine']['cpus']} cores (shared), "
        f"client QPS {config['kube_api_qps']:g}/{config['kube_api_burst']}, median of {config['repeats']}"
    )


def _pid(process: Any) -> int:
    return int(process.pid) if process is not None else 0


def _plan(
    scenarios: list[Scenario], schedulers: list[str], repeats: int, config: SchedulerConfig, log_dir: Path
) -> str:
    lines = [
        f"benchmark: {len(scenarios)} scenario(s) x {len(schedulers)} scheduler(s) x {repeats} repeat(s)",
        *(f"  {s.name}: {s.title} ({', '.join(binders_for(s, schedulers))})" for s in scenarios),
        f"  schedulers: {', '.join(schedulers)}; "
        f"client QPS {config.kube_api_qps:g}, burst {config.kube_api_burst}",
        f"  policy: {config.policy_file}",
    ]
    if any(s.mode == CLASS for s in scenarios):
        lines.append(f"  constraint classes' policy: {config.class_policy_file}")
    if KUBESCHED in schedulers or KUBESCHED_SAMPLED in schedulers:
        extra = [*config.kubesched_flags.leader_elect, *config.kubesched_flags.score_all_nodes]
        lines.append(
            f"  kubesched flags found: {' '.join(extra) or '(no leader election or percentage flag)'}"
        )
    if KUBE_SCHEDULER in schedulers:
        lines.append(f"  kube-scheduler: {config.kube_scheduler_bin}")
    lines.append(f"  logs: {log_dir}")
    return "\n".join(lines)


def _meta(
    args: argparse.Namespace,
    config: SchedulerConfig,
    schedulers: list[str],
    repeats: int,
    stamp: str,
    log_dir: Path,
) -> dict[str, Any]:
    note = SHARED_MACHINE_NOTE + (f" {args.note}" if args.note else "")
    return {
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "stamp": stamp,
        "quick": bool(args.quick),
        "note": note,
        "latency_note": (
            "creation-to-bound: for pending-batch runs creation time is when the scheduler process was "
            "started (all pods already existed), so it includes the scheduler's start-up and sync; for the "
            "steady run it is when the API server confirmed the pod's creation. Bind time is when the "
            "harness's watch first saw the pod with a nodeName."
        ),
        "throughput_note": "pods/s = (bound pods - 1) / (last bind - first bind), binds as seen by the watch",
        "cpu_note": (
            "scheduler CPU = utime+stime of its process from start to the last bind (start-up and sync "
            "included), from /proc/<pid>/stat; peak RSS = VmHWM from /proc/<pid>/status"
        ),
        "machine": {
            "host": socket.gethostname(),
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
            "loadavg_at_start": list(os.getloadavg()),
        },
        "versions": {
            "kubesched_commit": _git("rev-parse", "HEAD"),
            "kubesched_tree_dirty": bool(_git("status", "--porcelain", "--", "operator")),
            "kube_scheduler": kube_scheduler_version(config.kube_scheduler_bin)
            if KUBE_SCHEDULER in schedulers
            else None,
        },
        "config": {
            "schedulers": schedulers,
            "repeats": repeats,
            "kube_api_qps": config.kube_api_qps,
            "kube_api_burst": config.kube_api_burst,
            "policy_file": str(config.policy_file),
            "class_policy_file": str(config.class_policy_file),
            "classes": {name: c.title for name, c in classes.CLASSES.items()},
            "kubesched_command": config.command(KUBESCHED, Path("K"), "NAME")
            if KUBESCHED in schedulers
            else None,
            "kubesched_sampled_command": config.command(KUBESCHED_SAMPLED, Path("K"), "NAME")
            if KUBESCHED in schedulers or KUBESCHED_SAMPLED in schedulers
            else None,
            "kube_scheduler_command": config.command(KUBE_SCHEDULER, Path("K"), "NAME")
            if KUBE_SCHEDULER in schedulers
            else None,
            "null_concurrency": config.null_concurrency,
            "seed": args.seed,
            "run_timeout": args.run_timeout,
            "startup_timeout": args.startup_timeout,
            "stall_timeout": args.stall_timeout,
            "log_dir": str(log_dir),
        },
    }


def _git(*argv: str) -> str:
    try:
        out = subprocess.run(["git", *argv], capture_output=True, text=True, timeout=20, cwd=REPO_ROOT)
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.stdout.strip()


if __name__ == "__main__":
    sys.exit(main())
