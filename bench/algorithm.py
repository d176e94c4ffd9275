"""The algorithm alone: milliseconds per pod for a policy on the benchmark's nodes and pods, no API server.

Places `--pods` pods one after another on `--nodes` nodes (the `make bench` nodes, in 5 zones),
each pod seeing the ones placed before it, and reports the time per pod (median over the pods) for
the vectorised path and, with `--compare`, the per-node path, checking that both choose the same
nodes.

`--workload` picks what the pods ask for: one of `make bench`'s classes (bench/kubebench/classes.py),
apps of 20 pods each carrying the app's constraints, with a Service per app, or `mix`, the `make
bench` batch mix (requests, some node selectors, two Services, no pod-to-pod terms).

`--bound N` first binds N more pods of the same workload, placed directly (round-robin over the
nodes that their required node affinity allows, an app with required pod affinity in one zone; no
algorithm), as the pods a running cluster already holds. The pods are decided in batches of
`--batch` on one snapshot chain each, every batch starting from a fresh snapshot of the nodes as
the scheduler's cache hands it over (the vectorised view and its indexes carried over, every
per-snapshot memo empty); 0: one chain for all pods. The policy defaults to the seed policy for
`mix` and to kube-scheduler 1.20's default predicates and priorities (`--policy default`) for
the others.

    python bench/algorithm.py --nodes 5000 --pods 2000 --compare
    python bench/algorithm.py --workload anti-affinity --nodes 5000 --bound 10000 --pods 2000
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from kubesched.algorithm.generic import Algorithm, FitError
from kubesched.kube.extender_transport import HTTPTransport
from kubesched.model.nodeinfo import ClusterObjects, NodeInfo, Snapshot
from kubesched.model.objects import Pod, node_from_dict, pod_from_dict
from kubesched.plugins.node_affinity.filtering import node_affinity_state
from kubesched.policy.compile import compile_policy, default_algorithm
from kubesched.policy.files import load_policy_file

sys.path.insert(0, str(Path(__file__).parent))
from kubebench.classes import APP_SIZE, CLASSES, MIX, ZONE, make_class_pods, make_class_services
from kubebench.workload import make_nodes

SEED_POLICY = Path(__file__).parents[1] / "examples" / "policies" / "seed-policy.json"
NAMESPACE = "bench"
BATCH = 32  # the scheduler's default batch size (runtime/scheduler.py)


def bound_rows(pod: Pod, infos: Sequence[NodeInfo], zone: str | None) -> list[int]:
    """The nodes a bound pod goes round-robin over: those its required node affinity allows, in
    `zone` when given."""
    affinity = node_affinity_state(pod)
    return [
        i
        for i, info in enumerate(infos)
        if (affinity is None or affinity.matches(info.node.labels, info.name))
        and (zone is None or info.node.labels.get(ZONE) == zone)
    ]


def cluster(
    workload: str, nodes: int, bound: int, pods: int, seed: int
) -> tuple[list[NodeInfo], ClusterObjects, list[Pod]]:
    """The nodes with `bound` pods bound to them, the objects, and `pods` pending pods."""
    raw = make_class_pods(workload, bound + pods, NAMESPACE, "kubesched", seed)
    infos = [NodeInfo(node_from_dict(n)) for n in make_nodes(nodes, seed)]
    zones = sorted({info.node.labels.get(ZONE, "") for info in infos})
    rows_by_app: dict[str, list[int]] = {}
    for j, raw_pod in enumerate(raw[:bound]):
        raw_pod["metadata"]["name"] = raw_pod["metadata"]["uid"] = f"bound-{j:05d}"
        pod = pod_from_dict(raw_pod)
        app = pod.labels.get("app", "")
        rows = rows_by_app.get(app)
        if rows is None:
            # An app with required pod affinity (to itself, by zone) lives in one zone.
            pod_affinity = pod.affinity.get("podAffinity") or {}
            required = pod_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
            zone = zones[(j // APP_SIZE) % len(zones)] if required else None
            rows = rows_by_app[app] = bound_rows(pod, infos, zone)
        i = rows[j % len(rows)]
        infos[i] = infos[i].with_pod(replace(pod, node_name=infos[i].name))
    services = {
        f"{NAMESPACE}/{s['metadata']['name']}": s for s in make_class_services(workload, raw, NAMESPACE)
    }
    namespaces = {NAMESPACE: {"metadata": {"name": NAMESPACE, "labels": {"team": "bench"}}}}
    objects = ClusterObjects(services=services, namespaces=namespaces)
    return infos, objects, [pod_from_dict(p) for p in raw[bound:]]


def fresh(snapshot: Snapshot) -> Snapshot:
    """The next batch's snapshot, as the cache makes it: the same nodes and vectorised view, no memo."""
    return Snapshot(
        snapshot.nodes, snapshot.objects, snapshot.index, columns=snapshot.columns, usage=snapshot.usage
    )


def place_all(
    algorithm: Algorithm, snapshot: Snapshot, pods: Sequence[Pod], seed: int, batch: int
) -> tuple[list[str], list[float]]:
    rng = random.Random(seed)
    chosen: list[str] = []
    times: list[float] = []
    start_index = 0
    for k, pod in enumerate(pods):
        began = time.perf_counter()
        if batch and k and k % batch == 0:
            snapshot = fresh(snapshot)
        try:
            result = algorithm.schedule(pod, snapshot, rng, start_index)
        except FitError:
            times.append(time.perf_counter() - began)
            chosen.append("")
            continue
        start_index = result.next_start_index
        snapshot = snapshot.with_pod_on(pod, result.node_name)
        times.append(time.perf_counter() - began)
        chosen.append(result.node_name)
    return chosen, times


def run(
    algorithm: Algorithm, infos: Sequence[NodeInfo], objects: ClusterObjects, pods: Sequence[Pod], args: Any
) -> tuple[list[str], dict[str, Any]]:
    snapshot = Snapshot.of(infos, objects)
    began = time.perf_counter()
    snapshot.table()  # the cache keeps the vectorised view across snapshots: not part of any pod's time
    built = time.perf_counter() - began
    chosen, times = place_all(algorithm, snapshot, pods, args.seed, args.batch)
    figures = summary(times, chosen)
    if algorithm.vectorised:
        figures["table_build_ms"] = round(built * 1000, 1)
    return chosen, figures


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--workload", choices=sorted(CLASSES), default=MIX)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=2000)
    parser.add_argument("--bound", type=int, default=0, help="pods of the workload bound before timing")
    parser.add_argument("--batch", type=int, default=BATCH, help="pods per snapshot chain (0: one chain)")
    parser.add_argument(
        "--policy", type=Path, help="a legacy Policy file, or 'default' (kube-scheduler 1.20's defaults)"
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--percentage-of-nodes-to-score", type=int, default=100, help="0: the adaptive default (100: all)"
    )
    parser.add_argument("--compare", action="store_true", help="also time the per-node path; check agreement")
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args()

    policy = args.policy or (SEED_POLICY if args.workload == MIX else Path("default"))
    algorithm = (
        default_algorithm()
        if str(policy) == "default"
        else compile_policy(load_policy_file(policy), transport=HTTPTransport)
    )
    algorithm = replace(algorithm, percentage_of_nodes_to_score=args.percentage_of_nodes_to_score)
    figures: dict[str, Any] = {
        "workload": args.workload,
        "nodes": args.nodes,
        "bound": args.bound,
        "pods": args.pods,
        "batch": args.batch,
        "policy": str(policy),
        "percentage_of_nodes_to_score": args.percentage_of_nodes_to_score,
    }
    infos, objects, pods = cluster(args.workload, args.nodes, args.bound, args.pods, args.seed)
    chosen, figures["vectorised"] = run(algorithm, infos, objects, pods, args)
    if args.compare:
        scalar, figures["per_node"] = run(replace(algorithm, vectorised=False), infos, objects, pods, args)
        figures["same_choices"] = sum(a == b for a, b in zip(chosen, scalar, strict=True))
    print(json.dumps(figures, indent=2))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    if args.compare and figures["same_choices"] != len(pods):
        sys.exit("the vectorised and per-node paths chose different nodes")


def summary(times: Sequence[float], chosen: Sequence[str]) -> dict[str, Any]:
    ordered = sorted(times)
    return {
        "ms_per_pod_mean": round(statistics.fmean(times) * 1000, 3),
        "ms_per_pod_p50": round(ordered[len(ordered) // 2] * 1000, 3),
        "ms_per_pod_p99": round(ordered[int(len(ordered) * 0.99)] * 1000, 3),
        "unschedulable": list(chosen).count(""),
    }


if __name__ == "__main__":
    main()
