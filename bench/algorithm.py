"""The algorithm alone: milliseconds per pod for a policy on the benchmark's nodes and pods, no API server.

Places `--pods` pods one after another on `--nodes` nodes (the `make bench` workload, with its two
Services), each pod seeing the ones placed before it, and reports the time per pod for the vectorised
path and, with `--compare`, the per-node path, checking that both choose the same nodes.

    python bench/algorithm.py --nodes 5000 --pods 2000 --compare
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from kubesched.algorithm.generic import Algorithm, FitError
from kubesched.kube.extender_transport import HTTPTransport
from kubesched.model.nodeinfo import ClusterObjects, NodeInfo, Snapshot
from kubesched.model.objects import node_from_dict, pod_from_dict
from kubesched.policy.compile import compile_policy, default_algorithm
from kubesched.policy.files import load_policy_file

sys.path.insert(0, str(Path(__file__).parent))
from kubebench.workload import make_nodes, make_pods, make_services

SEED_POLICY = Path(__file__).parents[1] / "examples" / "policies" / "seed-policy.json"


def cluster(nodes: int, pods: int, seed: int) -> tuple[Snapshot, list[Any]]:
    infos = [NodeInfo(node_from_dict(n)) for n in make_nodes(nodes, seed)]
    services = {f"bench/{s['metadata']['name']}": s for s in make_services("bench")}
    pending = [pod_from_dict(p) for p in make_pods(pods, "bench", "kubesched", seed)]
    return Snapshot.of(infos, ClusterObjects(services=services)), pending


def place_all(
    algorithm: Algorithm, snapshot: Snapshot, pods: list[Any], seed: int
) -> tuple[list[str], list[float]]:
    rng = random.Random(seed)
    chosen: list[str] = []
    times: list[float] = []
    start_index = 0
    for pod in pods:
        began = time.perf_counter()
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


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=2000)
    parser.add_argument(
        "--policy", type=Path, default=SEED_POLICY, help="a legacy Policy file ('default': none)"
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--percentage-of-nodes-to-score", type=int, default=100, help="0: the adaptive default (100: all)"
    )
    parser.add_argument("--compare", action="store_true", help="also time the per-node path; check agreement")
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args()

    algorithm = (
        default_algorithm()
        if str(args.policy) == "default"
        else compile_policy(load_policy_file(args.policy), transport=HTTPTransport)
    )
    algorithm = replace(algorithm, percentage_of_nodes_to_score=args.percentage_of_nodes_to_score)
    figures: dict[str, Any] = {
        "nodes": args.nodes,
        "pods": args.pods,
        "policy": str(args.policy),
        "percentage_of_nodes_to_score": args.percentage_of_nodes_to_score,
    }
    snapshot, pods = cluster(args.nodes, args.pods, args.seed)
    chosen, times = place_all(algorithm, snapshot, pods, args.seed)
    figures["vectorised"] = summary(times, chosen)
    if args.compare:
        snapshot, pods = cluster(args.nodes, args.pods, args.seed)
        scalar, scalar_times = place_all(replace(algorithm, vectorised=False), snapshot, pods, args.seed)
        figures["per_node"] = summary(scalar_times, scalar)
        figures["same_choices"] = sum(a == b for a, b in zip(chosen, scalar, strict=True))
    print(json.dumps(figures, indent=2))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    if args.compare and figures["same_choices"] != len(pods):
        sys.exit("the vectorised and per-node paths chose different nodes")


def summary(times: list[float], chosen: list[str]) -> dict[str, Any]:
    ordered = sorted(times)
    return {
        "ms_per_pod_mean": round(statistics.fmean(times) * 1000, 3),
        "ms_per_pod_p50": round(ordered[len(ordered) // 2] * 1000, 3),
        "ms_per_pod_p99": round(ordered[int(len(ordered) * 0.99)] * 1000, 3),
        "unschedulable": chosen.count(""),
    }


if __name__ == "__main__":
    main()
