"""The benchmark's quota workload (bench/kubebench/quotas.py), its audit and its report."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from kubebench import quotas
from kubebench.cli import CRD_DIR, binders_for, is_full_run, parse_args, scenarios_from
from kubebench.report import QUOTA_RATIO, ratios, summarise, table
from kubebench.runner import OK, QUOTA, Scenario
from kubebench.schedulers import ALL, KUBE_SCHEDULER, KUBESCHED, KUBESCHED_QUOTAS, NULL
from kubebench.workload import make_nodes, parse_cpu, parse_memory

from kubesched_dev.fixtures import make_pod

POD_COUNT = 2000


@pytest.fixture(scope="module")
def pods() -> list[dict[str, Any]]:
    return quotas.make_quota_pods(POD_COUNT, "bench-001", "s", seed=1)


def test_the_pods_are_the_batch_mix_dealt_to_five_namespaces_by_share(pods: list[dict[str, Any]]) -> None:
    namespaces = quotas.quota_namespaces("bench-001")
    counts = {ns: sum(p["metadata"]["namespace"] == ns for p in pods) for ns in namespaces}
    assert list(counts.values()) == [round(POD_COUNT * s) for s in quotas.SHARES]
    assert len({p["metadata"]["name"] for p in pods}) == POD_COUNT
    # Interleaved: the last tenth of the queue still holds pods of every namespace.
    assert {p["metadata"]["namespace"] for p in pods[-POD_COUNT // 10 :]} == set(namespaces)


def test_mins_fit_the_demand_and_not_the_cluster_and_every_max_is_above_its_min(
    pods: list[dict[str, Any]],
) -> None:
    bounds = quotas.quota_bounds(pods)
    demand = quotas.demand(pods)
    nodes = make_nodes(1000, seed=1)
    for resource, parse in (("cpu", parse_cpu), ("memory", parse_memory)):
        mins = sum(b["min"][resource] for b in bounds.values())
        capacity = sum(parse(n["status"]["allocatable"][resource]) for n in nodes)
        assert sum(d[resource] for d in demand.values()) <= mins < capacity / 2
        for namespace, b in bounds.items():
            assert b["max"][resource] > b["min"][resource]
            assert b["max"][resource] >= demand[namespace][resource]  # every pod fits in the end
    borrowers = [ns for ns, b in bounds.items() if b["min"]["cpu"] < demand[ns]["cpu"]]
    assert len(borrowers) == 2


def test_the_elastic_quotas_carry_the_bounds_as_quantities(pods: list[dict[str, Any]]) -> None:
    made = quotas.make_elastic_quotas(pods)
    assert len(made) == 5 and {q["kind"] for q in made} == {"ElasticQuota"}
    bounds = quotas.quota_bounds(pods)
    for quota in made:
        wanted = bounds[quota["metadata"]["namespace"]]
        assert parse_cpu(quota["spec"]["max"]["cpu"]) == wanted["max"]["cpu"]
        assert parse_memory(quota["spec"]["min"]["memory"]) == wanted["min"]["memory"]


def eq(namespace: str, cpu: str, memory: str = "1Gi") -> dict[str, Any]:
    return {
        "metadata": {"namespace": namespace, "name": "quota"},
        "spec": {"max": {"cpu": cpu, "memory": memory}},
    }


def test_the_audit_replays_binds_in_order_and_names_the_bind_that_passed_a_max() -> None:
    made = {
        name: make_pod(name, ns, cpu=cpu, memory="100Mi")
        for name, ns, cpu in (("a1", "a", "600m"), ("a2", "a", "600m"), ("b1", "b", "2"), ("c1", "c", "5"))
    }
    limits = [eq("a", "1"), eq("b", "2")]  # c has no quota: never limited
    assert quotas.over_max(["a1", "b1", "c1"], made, limits) == []
    assert quotas.over_max(["a1", "a2", "b1"], made, limits) == ["a2: a cpu 1200 > 1000"]
    tight = [eq("a", "2", memory="150Mi")]
    assert quotas.over_max(["a2", "a1"], made, tight) == [f"a1: a memory {200 * 2**20} > {150 * 2**20}"]


def test_a_bind_order_past_a_max_fails_the_run_audit(pods: list[dict[str, Any]]) -> None:
    # What the runner does with a run under quotas: every pod bound, in the pods' order.
    by_name = {p["metadata"]["name"]: p for p in pods}
    order = list(by_name)
    assert quotas.over_max(order, by_name, quotas.make_elastic_quotas(pods)) == []
    smaller = quotas.make_elastic_quotas(pods)
    smaller[0]["spec"]["max"]["cpu"] = "1"
    found = quotas.over_max(order, by_name, smaller)
    assert found and all(f": {smaller[0]['metadata']['namespace']} cpu " in f for f in found)


def run(kind: str, rate: float, makespan_rate: float) -> dict[str, Any]:
    return {
        "scenario": "quota-x",
        "scheduler": kind,
        "repeat": 1,
        "status": OK,
        "detail": "",
        "pods_per_s": rate,
        "makespan_pods_per_s": makespan_rate,
        "other_cpu_s": 0.0,
        "window_s": 5.0,
    }


@pytest.mark.parametrize(("rate", "makespan_rate", "met"), [(900.0, 450.0, True), (899.0, 450.0, False)])
def test_the_quota_ratio_is_with_quotas_over_without_and_judged_against_90_percent(
    rate: float, makespan_rate: float, met: bool
) -> None:
    runs = [run(KUBESCHED, 1000.0, 500.0), run(KUBESCHED_QUOTAS, rate, makespan_rate)]
    rows = summarise(runs, ["quota-x"], [KUBESCHED, KUBESCHED_QUOTAS])
    (entry,) = ratios(rows, ["quota-x"])
    assert entry[QUOTA_RATIO] == {"pods_per_s": round(rate / 1000, 3), "makespan_pods_per_s": 0.9}
    assert entry["quota_rate_goal_met"] is met
    text = table(rows, [entry], {"quota-x": "quotas"})
    assert f"(goal: both rates >= 0.9x: {'met' if met else 'NOT met'})" in text


def test_the_quota_run_is_in_the_default_and_quick_runs_and_kubesched_only() -> None:
    (default,) = [s for s in scenarios_from(parse_args([])) if s.mode == QUOTA]
    assert (default.nodes, default.pods, default.name) == (1000, 2000, "quota-1000n-2000p")
    (quick,) = [s for s in scenarios_from(parse_args(["--quick"])) if s.mode == QUOTA]
    assert (quick.nodes, quick.pods) == (200, 400)
    assert not any(s.mode == QUOTA for s in scenarios_from(parse_args(["--no-quota"])))
    assert binders_for(default, list(ALL)) == [KUBESCHED, KUBESCHED_QUOTAS]
    assert binders_for(default, [NULL, KUBE_SCHEDULER]) == []
    for argv in (["--quota", "1000x2000"], ["--no-quota"]):
        assert not is_full_run(parse_args(argv), list(ALL), 3)
    assert Scenario.quota(300, 600) in scenarios_from(parse_args(["--quota", "300x600"]))


def test_the_repository_ships_the_elastic_quota_crd_the_bench_installs() -> None:
    names = [
        (m or {}).get("metadata", {}).get("name")
        for path in sorted(CRD_DIR.glob("*.yaml"))
        for m in yaml.safe_load_all(path.read_text())
    ]
    assert quotas.CRD_NAME in names
