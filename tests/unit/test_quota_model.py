"""model/quota.py: ElasticQuota parsing and the accounting upstream's capacity scheduling does."""

from __future__ import annotations

from typing import Any

from kubesched.model.objects import Pod, pod_from_dict
from kubesched.model.quota import QuotaState, elastic_quota_from_dict, in_one_unit, over


def quota(namespace: str, created: str = "2026-01-01T00:00:00Z", **spec: Any) -> Any:
    meta = {"namespace": namespace, "name": f"eq-{namespace}", "creationTimestamp": created}
    return elastic_quota_from_dict({"metadata": meta, "spec": spec})


def pod(namespace: str, node: str = "n1", phase: str = "Running", **requests: str) -> Pod:
    return pod_from_dict(
        {
            "metadata": {"namespace": namespace, "name": "p", "uid": f"{namespace}-{len(requests)}"},
            "spec": {"nodeName": node, "containers": [{"name": "c", "resources": {"requests": requests}}]},
            "status": {"phase": phase},
        }
    )


def test_parse_keeps_named_zeros_and_skips_pods() -> None:
    eq = quota("a", min={"cpu": "1", "example.com/gpu": 0}, max={"memory": "1Gi", "pods": 3})
    assert not eq.error
    assert eq.min == {"cpu": 1000, "example.com/gpu": 0}
    assert eq.max == {"memory": 1024**3}


def test_a_malformed_amount_is_an_error_not_an_exception() -> None:
    eq = quota("a", max={"cpu": "lots"})
    assert eq.error.startswith("spec.max: ")


def test_max_unnamed_is_unlimited_min_unnamed_is_zero() -> None:
    state = QuotaState.build([quota("a", min={"cpu": "1"}, max={"cpu": "2"})], [pod("a", cpu="1")])
    gpu = {"example.com/gpu": 4}
    assert state.over_max("a", gpu) == []
    assert state.over_min("a", gpu) == ["example.com/gpu"]
    assert state.over_max("a", {"cpu": 1001}) == ["cpu"]
    assert state.over_max("a", {"cpu": 1000}) == []


def test_cpu_memory_and_storage_are_judged_even_when_not_asked_for() -> None:
    """As upstream's cmp2: a quota over its max in cpu admits no pod, whatever it asks for."""
    assert over({"cpu": 3000}, {"memory": 1}, {"cpu": 2000, "memory": 10}, unnamed_unlimited=True) == ["cpu"]
    assert over({"example.com/gpu": 3}, {"cpu": 1}, {"cpu": 10, "example.com/gpu": 2}) == []


def test_only_placed_unfinished_pods_count_and_only_under_a_quota() -> None:
    pods = [
        pod("a", cpu="1"),
        pod("a", node="", cpu="5"),
        pod("a", phase="Succeeded", cpu="7"),
        pod("b", cpu="9"),
    ]
    state = QuotaState.build([quota("a")], pods)
    assert state.used == {"a": {"cpu": 1000}}
    assert state.with_pod(pod("b", cpu="1")) is state
    assert state.with_pod(pod("a", memory="1Gi")).used_by("a") == {"cpu": 1000, "memory": 1024**3}
    assert state.without_pod(pod("a", cpu="1")).used_by("a") == {}


def test_the_oldest_quota_of_a_namespace_is_in_force() -> None:
    older = quota("a", created="2025-01-01T00:00:00Z", max={"cpu": "1"})
    newer = quota("a", created="2026-01-01T00:00:00Z", max={"cpu": "9"})
    assert QuotaState.build([newer, older], []).of("a") == older


def test_aggregated_use_against_the_sum_of_mins() -> None:
    quotas = [quota("a", min={"cpu": "2"}), quota("b", min={"cpu": "2"})]
    state = QuotaState.build(quotas, [pod("a", cpu="3")])
    assert state.aggregated_over_min({"cpu": 1000}) == []
    assert state.aggregated_over_min({"cpu": 1001}) == ["cpu"]


def test_amounts_are_written_in_the_largest_unit_that_writes_them_all() -> None:
    assert in_one_unit("cpu", 100, 14900) == ("100m", "14900m")
    assert in_one_unit("cpu", 2000, 0) == ("2", "0")
    assert in_one_unit("memory", 2 << 30, 1 << 30) == ("2Gi", "1Gi")
    assert in_one_unit("memory", 0) == ("0",)
    assert in_one_unit("memory", 0, 1 << 20) == ("0Mi", "1Mi")
