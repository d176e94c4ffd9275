"""Algorithm.schedule (core/generic_scheduler.go): search window, FitError message, scoring,
random tie-breaking, invalid pods and nodes."""

from __future__ import annotations

import pickle
import random
from collections import Counter
from collections.abc import Sequence
from typing import Any

import pytest

from kubesched.algorithm.generic import Algorithm, FitError, WeightedPriority
from kubesched.model.nodeinfo import NodeInfo, Snapshot
from kubesched.model.objects import Pod, node_from_dict
from kubesched.plugins.framework import Priority
from kubesched.plugins.node_affinity.filtering import ERR_REASON_NODE_AFFINITY
from kubesched.plugins.node_resources.fit import ERR_REASON_CPU, ERR_REASON_MEMORY
from kubesched.plugins.node_validity.filtering import ERR_REASON_INVALID_NODE
from kubesched.policy.compile import compile_policy
from kubesched_dev.fixtures import SEED_POLICY, model_node, model_pod, node_info, snapshot

SEED = compile_policy(SEED_POLICY)
RNG = random.Random(0)


def nodes(count: int, **kwargs: Any) -> Snapshot:
    return snapshot(*[model_node(f"n{i:04d}", **kwargs) for i in range(count)])


# ------------------------------------------------------------------------------------- FitError


def test_fit_error_message_counts_and_sorts_reasons_as_strings() -> None:
    pod = model_pod()
    error = FitError(
        pod,
        5,
        {
            "a": (ERR_REASON_NODE_AFFINITY,),
            "b": (ERR_REASON_NODE_AFFINITY,),
            "c": (ERR_REASON_CPU,),
            "d": (ERR_REASON_CPU, ERR_REASON_MEMORY),
            "e": (ERR_REASON_CPU,),
        },
    )
    expected = (
        "0/5 nodes are available: 1 Insufficient memory, "
        "2 node(s) didn't match Pod's node affinity/selector, 3 Insufficient cpu."
    )
    assert error.summary() == expected
    assert str(error) == expected
    assert error.reason_counts()[ERR_REASON_CPU] == 3


def test_fit_error_sorts_counts_as_strings_like_go() -> None:
    # sort.Strings on "<count> <reason>": "10 ..." sorts before "9 ...".
    reasons = {f"a{i}": ("x",) for i in range(10)} | {f"b{i}": ("y",) for i in range(9)}
    assert FitError(model_pod(), 19, reasons).summary() == "0/19 nodes are available: 10 x, 9 y."


def test_fit_error_pickles() -> None:
    error = FitError(model_pod(), 1, {"a": ("x",)})
    copy = pickle.loads(pickle.dumps(error))
    assert str(copy) == str(error) == "0/1 nodes are available: 1 x."


def test_schedule_raises_the_kube_scheduler_message() -> None:
    snap = snapshot(
        model_node("a", labels={"disk": "hdd"}),
        model_node("b", labels={"disk": "hdd"}),
        model_node("c", cpu="1", labels={"disk": "ssd"}),
        model_node("d", cpu="1", labels={"disk": "ssd"}),
        model_node("e", cpu="1", labels={"disk": "ssd"}),
    )
    with pytest.raises(FitError) as caught:
        SEED.schedule(model_pod(cpu="2", nodeSelector={"disk": "ssd"}), snap, RNG)
    assert str(caught.value) == (
        "0/5 nodes are available: 2 node(s) didn't match Pod's node affinity/selector, 3 Insufficient cpu."
    )
    assert caught.value.num_all_nodes == 5
    assert caught.value.node_reasons["a"] == (ERR_REASON_NODE_AFFINITY,)


def test_no_nodes_at_all() -> None:
    with pytest.raises(FitError, match=r"^no nodes available to schedule pods$"):
        SEED.schedule(model_pod(), snapshot(), RNG)


# --------------------------------------------------------------------------- predicate order


def test_filters_run_in_kube_scheduler_order_not_policy_order() -> None:
    # A node failing both: MatchNodeSelector runs before PodFitsResources whatever the policy says.
    policy = {"predicates": [{"name": "PodFitsResources"}, {"name": "MatchNodeSelector"}], "priorities": []}
    algorithm = compile_policy(policy)
    assert algorithm.predicate_names == (
        "CheckNodeUnschedulable",
        "MatchNodeSelector",
        "PodFitsResources",
        "PodToleratesNodeTaints",
    )
    with pytest.raises(FitError) as caught:
        algorithm.schedule(model_pod(cpu="8", nodeSelector={"x": "y"}), snapshot(model_node("a")), RNG)
    assert caught.value.node_reasons == {"a": (ERR_REASON_NODE_AFFINITY,)}


def test_always_check_all_predicates_collects_every_reason() -> None:
    node = model_node(
        "a",
        cpu="1",
        memory="1Gi",
        unschedulable=True,
        taints=[{"key": "k", "value": "v", "effect": "NoSchedule"}],
    )
    pod = model_pod(cpu="2", memory="2Gi", nodeSelector={"x": "y"})
    policy = dict(SEED_POLICY, alwaysCheckAllPredicates=True)
    with pytest.raises(FitError) as caught:
        compile_policy(policy).schedule(pod, snapshot(node), RNG)
    assert caught.value.node_reasons["a"] == (
        "node(s) were unschedulable",
        ERR_REASON_NODE_AFFINITY,
        ERR_REASON_CPU,
        ERR_REASON_MEMORY,
        "node(s) had taint {k: v}, that the pod didn't tolerate",
    )
    with pytest.raises(FitError) as first_only:
        SEED.schedule(pod, snapshot(node), RNG)
    assert first_only.value.node_reasons["a"] == ("node(s) were unschedulable",)


# ------------------------------------------------------------------------------ search window


@pytest.mark.parametrize(
    ("num_nodes", "percentage", "expected"),
    [
        (1, 0, 1),
        (99, 0, 99),  # fewer than 100 nodes: all of them
        (99, 10, 99),
        (100, 0, 100),  # 50% of 100 = 50, raised to the minimum of 100
        (200, 0, 100),  # 50 - 200/125 = 49% -> 98 -> 100
        (1000, 0, 420),  # 50 - 1000/125 = 42%
        (3000, 0, 780),  # 50 - 24 = 26%
        (5000, 0, 500),  # 50 - 40 = 10%
        (6000, 0, 300),  # 50 - 48 = 2%, raised to 5%
        (10000, 0, 500),
        (1000, 30, 300),
        (1000, 5, 100),  # 50, raised to 100
        (1000, 100, 1000),
        (1001, 42, 420),  # integer arithmetic: 1001 * 42 / 100 = 420.42
    ],
)
def test_num_feasible_nodes_to_find(num_nodes: int, percentage: int, expected: int) -> None:
    algorithm = compile_policy({"percentageOfNodesToScore": percentage})
    assert algorithm.num_feasible_nodes_to_find(num_nodes) == expected


def test_search_stops_after_enough_feasible_nodes_and_wraps_around() -> None:
    snap = nodes(1000, cpu="4")
    result = SEED.schedule(model_pod(cpu="1"), snap, RNG, start_index=990)
    assert result.evaluated_nodes == result.feasible_nodes == 420
    assert result.next_start_index == (990 + 420) % 1000
    expected = {f"n{i:04d}" for i in [*range(990, 1000), *range(0, 410)]}
    assert set(result.scores) == expected
    assert result.node_name in expected


def test_failed_nodes_count_as_evaluated() -> None:
    # Every third node is too small: 420 feasible nodes need about 630 checks from node 0.
    snap = snapshot(*[model_node(f"n{i:04d}", cpu="1" if i % 3 == 0 else "4") for i in range(1000)])
    result = SEED.schedule(model_pod(cpu="2"), snap, RNG)
    assert result.feasible_nodes == 420
    failed = len(result.failed_nodes)
    assert result.evaluated_nodes == 420 + failed == 630
    assert result.next_start_index == 630
    assert all(reasons == (ERR_REASON_CPU,) for reasons in result.failed_nodes.values())


def test_start_index_beyond_a_shrunken_cluster_wraps() -> None:
    result = SEED.schedule(model_pod(), nodes(3), RNG, start_index=7)
    assert result.evaluated_nodes == 3 and result.next_start_index == 1  # (7 % 3 + 3) % 3


# ------------------------------------------------------------------------- scoring and choice


def test_single_feasible_node_is_returned_without_scoring() -> None:
    snap = snapshot(model_node("small", cpu="1"), model_node("big", cpu="8"), model_node("other", cpu="1"))
    result = SEED.schedule(model_pod(cpu="2"), snap, RNG, start_index=1)
    assert (result.node_name, result.feasible_nodes, result.evaluated_nodes) == ("big", 1, 3)
    assert result.scores == {}
    assert result.next_start_index == 1  # all three checked: (1 + 3) % 3


def test_highest_total_wins_whatever_the_seed() -> None:
    # Non-zero requests: the new pod counts 100m / 200Mi, and so does the existing pod's memory.
    # busy: cpu 3000+100 of 4000, memory 400Mi of 8192Mi.
    #   least requested: cpu 900*100/4000 = 22, memory 7792*100/8192 = 95 -> (22+95)/2 = 58
    #   balanced: 1 - |0.775 - 0.048828125| = 0.2738 -> 27; spread: no selector -> 100. Total 185.
    # idle: cpu 100 of 4000, memory 200Mi of 8192Mi.
    #   least requested: cpu 3900*100/4000 = 97, memory 7992*100/8192 = 97 -> 97
    #   balanced: 1 - |0.025 - 0.0244140625| = 0.9994 -> 99; spread 100. Total 296.
    busy = node_info(model_node("busy", memory="8Gi"), [model_pod("x", cpu="3")])
    snap = snapshot(busy, model_node("idle", memory="8Gi"))
    for seed in range(20):
        result = SEED.schedule(model_pod(), snap, random.Random(seed))
        assert result.node_name == "idle"
    assert result.scores == {"busy": 185, "idle": 296}


def test_ties_are_broken_uniformly_at_random() -> None:
    snap = nodes(4)
    picks = Counter(SEED.schedule(model_pod(), snap, random.Random(seed)).node_name for seed in range(800))
    assert set(picks) == {"n0000", "n0001", "n0002", "n0003"}
    # Each node is expected 200 times; 130 is more than 5 standard deviations (12.2) away.
    assert all(130 < count < 270 for count in picks.values()), picks


def test_same_seed_same_choice() -> None:
    snap = nodes(10)
    first = [SEED.schedule(model_pod(), snap, random.Random(42)).node_name for _ in range(3)]
    assert len(set(first)) == 1


class FixedScore(Priority):
    name = "Fixed"

    def __init__(self, table: dict[str, int]) -> None:
        self.table = table

    def score(self, pod: Pod, state: Any, node: NodeInfo) -> int:
        return self.table[node.name]


class Halve(Priority):
    name = "Halve"

    def score(self, pod: Pod, state: Any, node: NodeInfo) -> int:
        return 10

    def normalize(self, pod: Pod, state: Any, nodes: Sequence[NodeInfo], scores: list[int]) -> None:
        scores[:] = [s // 2 for s in scores]


def test_weighted_sum_of_normalized_scores() -> None:
    algorithm = Algorithm(
        predicates=SEED.predicates,
        priorities=(WeightedPriority(FixedScore({"a": 10, "b": 40}), 3), WeightedPriority(Halve(), 2)),
    )
    result = algorithm.schedule(model_pod(), snapshot(model_node("a"), model_node("b")), RNG)
    assert result.scores == {"a": 3 * 10 + 2 * 5, "b": 3 * 40 + 2 * 5}
    assert result.node_name == "b"


def test_without_priorities_every_node_scores_one() -> None:
    algorithm = compile_policy({"priorities": []})
    result = algorithm.schedule(model_pod(), nodes(3), RNG)
    assert result.scores == {"n0000": 1, "n0001": 1, "n0002": 1}


# ----------------------------------------------------------------------- invalid pods and nodes


def test_pod_with_invalid_requests_gets_a_fit_error_saying_why() -> None:
    pod = model_pod(cpu="lots")
    assert pod.parse_error is not None
    with pytest.raises(FitError) as caught:
        SEED.schedule(pod, nodes(3), RNG)
    message = str(caught.value)
    assert message.startswith("0/3 nodes are available: pod has invalid resource requests: ")
    assert "'lots'" in message and message.endswith(".")
    assert caught.value.pod_error == pod.parse_error
    assert caught.value.node_reasons == {}


def broken_node(name: str) -> Any:
    # Valid allocatable, malformed taints: only the validity guard can reject it.
    node = node_from_dict(
        {
            "metadata": {"name": name},
            "spec": {"taints": ["not-a-taint"]},
            "status": {"allocatable": {"cpu": "64", "memory": "64Gi", "pods": "110"}},
        }
    )
    assert node.parse_error is not None
    return node


def test_node_with_parse_error_is_never_chosen() -> None:
    snap = snapshot(broken_node("broken"), model_node("ok", cpu="1"))
    for seed in range(10):
        result = SEED.schedule(model_pod(), snap, random.Random(seed))
        assert result.node_name == "ok"
        assert result.failed_nodes == {"broken": (ERR_REASON_INVALID_NODE,)}


def test_node_with_parse_error_is_a_reason_in_the_fit_error() -> None:
    policy = dict(SEED_POLICY, alwaysCheckAllPredicates=True)
    snap = snapshot(
        broken_node("broken"),
        node_from_dict({"metadata": {"name": "empty"}, "status": {}}),
        model_node("ok", cpu="1"),
    )
    with pytest.raises(FitError) as caught:
        compile_policy(policy).schedule(model_pod(cpu="2"), snap, RNG)
    assert (
        str(caught.value)
        == "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) had invalid spec or status."
    )
