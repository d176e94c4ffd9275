"""`kubesched explain`'s pure part: every predicate's verdict on every node, every priority's score
and weight for the feasible ones, best first, as a table and as JSON."""

from __future__ import annotations

import json
import random

import pytest

from kubesched.algorithm.generic import FitError
from kubesched.policy.compile import compile_policy
from kubesched.tools.explain import explain, render_json, render_table
from kubesched_dev.fixtures import model_node, model_pod, node_info, snapshot

POLICY = compile_policy(
    {
        "predicates": [{"name": "PodFitsResources"}, {"name": "MatchNodeSelector"}],
        "priorities": [
            {"name": "LeastRequestedPriority", "weight": 2},
            {"name": "BalancedResourceAllocation", "weight": 1},
        ],
    }
)
CLUSTER = snapshot(
    model_node("small", cpu="1", labels={"disk": "ssd"}),
    model_node("hdd", cpu="8", labels={"disk": "hdd"}),
    model_node(
        "tainted",
        cpu="8",
        labels={"disk": "ssd"},
        taints=[{"key": "k", "value": "v", "effect": "NoSchedule"}],
    ),
    model_node("both", cpu="1", labels={"disk": "hdd"}),
    node_info(model_node("busy", cpu="4", labels={"disk": "ssd"}), [model_pod("x", cpu="2")]),
    model_node("roomy", cpu="16", memory="32Gi", labels={"disk": "ssd"}),
)
POD = model_pod("web", cpu="2", nodeSelector={"disk": "ssd"})


def test_every_predicate_on_every_node_and_every_priority_on_the_feasible_ones() -> None:
    result = explain(POLICY, POD, CLUSTER, scheduler_name="kubesched", policy="test")
    rejected = {r.node: r.reasons for r in result.rejected}
    assert rejected == {
        "small": (("PodFitsResources", "Insufficient cpu"),),
        "hdd": (("MatchNodeSelector", "node(s) didn't match Pod's node affinity"),),
        "tainted": (("PodToleratesNodeTaints", "node(s) had taint {k: v}, that the pod didn't tolerate"),),
        # Checked all the way, unlike a scheduling cycle without alwaysCheckAllPredicates.
        "both": (
            ("MatchNodeSelector", "node(s) didn't match Pod's node affinity"),
            ("PodFitsResources", "Insufficient cpu"),
        ),
    }
    assert [s.node for s in result.feasible] == ["roomy", "busy"]
    best = result.feasible[0]
    assert [(p.priority, p.weight) for p in best.priorities] == [
        ("BalancedResourceAllocation", 1),
        ("LeastRequestedPriority", 2),
    ]
    assert best.total == sum(p.score * p.weight for p in best.priorities)
    assert result.message == "would be scheduled on roomy"
    assert result.best == ("roomy",)


def test_the_message_counts_what_the_scheduler_would_count() -> None:
    impossible = model_pod("huge", cpu="64", nodeSelector={"disk": "ssd"})
    result = explain(POLICY, impossible, CLUSTER)
    assert result.feasible == ()
    # Only the first failing predicate per node, as without alwaysCheckAllPredicates: the very
    # message of the scheduler's FailedScheduling event.
    assert (
        result.message
        == "0/6 nodes are available: 2 node(s) didn't match Pod's node affinity, 4 Insufficient cpu."
    )
    with pytest.raises(FitError) as caught:
        POLICY.schedule(impossible, CLUSTER, random.Random(0))
    assert str(caught.value) == result.message


def test_table_and_json() -> None:
    result = explain(POLICY, POD, CLUSTER, scheduler_name="kubesched", policy="test")
    table = render_table(result)
    assert table.splitlines()[0] == "Pod default/web   scheduler kubesched   policy test   6 node(s)"
    assert "REJECTED (4)" in table and "FEASIBLE (2), best first" in table
    assert any(line.split()[:3] == ["both", "MatchNodeSelector", "node(s)"] for line in table.splitlines())
    rank_one = next(line for line in table.splitlines() if line.startswith("1 "))
    assert rank_one.split()[:4] == ["1", "roomy", str(result.feasible[0].total), "BalancedResourceAllocation"]
    document = json.loads(render_json(result))
    assert document["best"] == ["roomy"]
    assert document["rejected"][0] == {
        "node": "both",
        "reasons": [
            {"by": "MatchNodeSelector", "reason": "node(s) didn't match Pod's node affinity"},
            {"by": "PodFitsResources", "reason": "Insufficient cpu"},
        ],
    }
    first = document["feasible"][0]["priorities"][1]
    assert first["priority"] == "LeastRequestedPriority"
    assert first["weighted"] == first["score"] * 2


def test_a_policy_without_priorities_scores_every_node_1() -> None:
    result = explain(
        compile_policy({"predicates": [], "priorities": []}),
        model_pod(),
        snapshot(model_node("a"), model_node("b")),
    )
    assert [(s.node, s.total) for s in result.feasible] == [("a", 1), ("b", 1)]
    assert result.message == "would be scheduled on one of a, b (tied, picked at random)"
