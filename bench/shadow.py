"""The cost of shadowing: scheduling throughput of one batch loop with and without Shadow policies.

Runs the scheduler's own `schedule_batch` (the work the executor does per batch) on the `make bench`
workload, with no shadow, then with Shadow policies evaluated beside the seed policy: an identical
one, and one with other weights (it disagrees, so its top score terms are worked out too, at most
five times per reporting interval as in the scheduler), at several sample rates.

The cases are interleaved and repeated, and each reports its best repetition in CPU time per pod
(process time: what the executor thread spends, and what other processes sharing the machine
disturb least) and the scheduling throughput that CPU time allows.

    python bench/shadow.py --nodes 1000 --pods 1000 --repeat 3
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

from kubesched.algorithm.batch import schedule_batch
from kubesched.algorithm.generic import Algorithm
from kubesched.policy.files import load_policy_file
from kubesched.policy.shadow import ShadowRunner
from kubesched.policy.store import PolicyStore

sys.path.insert(0, str(Path(__file__).parent))
from algorithm import SEED_POLICY, cluster

OWN = "kubesched"
BATCH = 32
INTERVAL_PODS = 500  # figures taken (details budget reset) every this many pods, as every ~10 s


def store(shadows: list[tuple[str, dict[str, Any], float]]) -> PolicyStore:
    policies = PolicyStore(OWN)
    base = load_policy_file(SEED_POLICY)
    base = {k: v for k, v in base.items() if k not in ("kind", "apiVersion")}
    policies.upsert(
        {"metadata": {"name": "active", "uid": "a", "generation": 1, "creationTimestamp": "1"}, "spec": base}
    )
    for i, (name, spec, rate) in enumerate(shadows):
        body = {**base, **spec, "mode": "Shadow", "shadow": {"sampleRate": rate}}
        meta = {"name": name, "uid": name, "generation": 1, "creationTimestamp": str(2 + i)}
        policies.upsert({"metadata": meta, "spec": body})
    return policies


def run(shadows: list[tuple[str, dict[str, Any], float]], nodes: int, pods: int, seed: int) -> dict[str, Any]:
    snapshot, pending = cluster(nodes, pods, seed)
    policies = store(shadows)
    profiles: dict[str, Algorithm] = policies.profiles()
    runner = ShadowRunner(seed=seed)
    runner.update(policies.shadows(), policies.active(), profiles)
    rng = random.Random(seed)
    start = 0
    began = time.process_time()
    evaluated = agreed = 0
    for i in range(0, len(pending), BATCH):
        batch = pending[i : i + BATCH]
        # The hook is always on, as in the scheduler: the baseline pays its call per pod too.
        outcomes, start = schedule_batch(profiles, batch, snapshot, rng, start, runner.observe)
        for pod, outcome in zip(batch, outcomes, strict=True):
            node = getattr(outcome, "node_name", None)
            if node is not None:
                snapshot = snapshot.with_pod_on(pod, node)
        if (i // BATCH) % (INTERVAL_PODS // BATCH) == 0:
            for tally in runner.take().values():
                evaluated, agreed = evaluated + tally.evaluated, agreed + tally.agreed
    for tally in runner.take().values():
        evaluated, agreed = evaluated + tally.evaluated, agreed + tally.agreed
    elapsed = time.process_time() - began
    return {
        "shadows": [f"{name}@{rate}" for name, _, rate in shadows],
        "cpu_ms_per_pod": round(1000 * elapsed / pods, 3),
        "pods_per_cpu_second": round(pods / elapsed, 1),
        "shadow_evaluations": evaluated,
        "agreement": round(100 * agreed / evaluated, 1) if evaluated else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    other = {
        "priorities": [
            {"name": "MostRequestedPriority", "weight": 2},
            {"name": "LeastRequestedPriority", "weight": 1},
        ]
    }
    cases: list[list[tuple[str, dict[str, Any], float]]] = [
        [],
        [("twin", {}, 1.0)],
        [("other", other, 1.0)],
        [("other", other, 0.25)],
        [("twin", {}, 1.0), ("other", other, 1.0)],
    ]
    best: list[dict[str, Any]] = [{} for _ in cases]
    for _ in range(args.repeat):
        for i, shadows in enumerate(cases):
            result = run(shadows, args.nodes, args.pods, args.seed)
            if not best[i] or result["cpu_ms_per_pod"] < best[i]["cpu_ms_per_pod"]:
                best[i] = result
    baseline = best[0]["pods_per_cpu_second"]
    for result in best:
        result["throughput_vs_no_shadow"] = f"{100 * result['pods_per_cpu_second'] / baseline:.0f}%"
        print(json.dumps(result))


if __name__ == "__main__":
    main()
