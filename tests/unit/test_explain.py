"""`kubesched explain`'s pure part: every predicate's verdict on every node, every priority's score
and weight for the feasible ones, best first, as a table and as JSON; and for a member of a
PodGroup, its group's section."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from kubesched.algorithm.batch import schedule_batch
from kubesched.algorithm.generic import FitError
from kubesched.model.nodeinfo import ClusterObjects, Snapshot
from kubesched.model.objects import Pod
from kubesched.policy.compile import compile_policy
from kubesched.policy.published import MAX_CONTENT, lease_annotations
from kubesched.tools.explain import (
    BOUND,
    DOES_NOT_FIT,
    FITS,
    GATED,
    PLACED,
    GroupMember,
    Rejection,
    explain,
    explain_snapshot,
    render_json,
    render_table,
)
from kubesched.tools.snapshot import ClusterState
from kubesched_dev.fixtures import make_node, make_pod, model_node, model_pod, node_info, snapshot

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
        "hdd": (("MatchNodeSelector", "node(s) didn't match Pod's node affinity/selector"),),
        "tainted": (("PodToleratesNodeTaints", "node(s) had taint {k: v}, that the pod didn't tolerate"),),
        # Checked all the way, unlike a scheduling cycle without alwaysCheckAllPredicates.
        "both": (
            ("MatchNodeSelector", "node(s) didn't match Pod's node affinity/selector"),
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
        == "0/6 nodes are available: 2 node(s) didn't match Pod's node affinity/selector, 4 Insufficient cpu."
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
            {"by": "MatchNodeSelector", "reason": "node(s) didn't match Pod's node affinity/selector"},
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


# ------------------------------------------------------------------------------------ pod groups

GROUP_LABEL = {"scheduling.x-k8s.io/pod-group": "train"}
SIMPLE = compile_policy({"predicates": [{"name": "PodFitsResources"}], "priorities": []})


def pod_group(min_member: Any, name: str = "train") -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default", "uid": f"pg-{name}"},
        "spec": {"minMember": min_member},
    }


def two_nodes(*groups: dict[str, Any], resident: Pod | None = None) -> Snapshot:
    """Two 4-cpu nodes (`resident` on the first) and these PodGroups."""
    first = model_node("n1", cpu="4")
    objects = ClusterObjects(pod_groups={f"default/{g['metadata']['name']}": g for g in groups})
    return snapshot(
        node_info(first, [resident] if resident else []), model_node("n2", cpu="4"), objects=objects
    )


def member(name: str, cpu: str = "3", **spec: Any) -> Pod:
    return model_pod(name, cpu=cpu, labels=GROUP_LABEL, **spec)


def test_a_member_of_a_group_that_is_short_says_so_in_the_words_of_the_scheduler() -> None:
    """algorithm/gang.py: members placed all or nothing; three 3-cpu members on two 4-cpu nodes,
    minMember 3: two fit, so none is placed, and each member's FailedScheduling message says why."""
    first, second, third = member("t-0"), member("t-1"), member("t-2")
    cluster = two_nodes(pod_group(3))
    result = explain(SIMPLE, first, cluster, pending=[second, third, model_pod("stranger", cpu="1")])
    group = result.group
    assert group is not None
    short = (
        "pod group default/train: only 2 of 3 members can be placed: "
        "0/2 nodes are available: 2 Insufficient cpu."
    )
    assert result.message == group.message == short
    # The scheduler's own batch writes the same message for this member.
    outcomes, _ = schedule_batch(
        {"default-scheduler": SIMPLE}, [first, second, third], cluster, random.Random(0), 0
    )
    assert isinstance(outcomes[0], FitError) and outcomes[0].summary() == short
    assert (group.key, group.min_member, group.problem) == ("default/train", 3, "")
    assert (group.exist, group.bound, group.placeable, group.placed) == (3, 0, 2, False)
    assert [(m.pod, m.status, m.reason) for m in group.members] == [
        ("default/t-0", FITS, ""),
        ("default/t-1", FITS, ""),
        ("default/t-2", DOES_NOT_FIT, "0/2 nodes are available: 2 Insufficient cpu."),
    ]
    assert {m.node for m in group.members[:2]} == {"n1", "n2"}
    # The node-by-node part is the member's own, alone on the cluster.
    assert [s.node for s in result.feasible] == ["n1", "n2"]
    table = render_table(result)
    assert (
        "POD GROUP default/train   minMember 3   3 member(s), 0 bound   2 pending member(s) fit now" in table
    )
    assert table.splitlines()[1] == short
    assert any(line.split()[:3] == ["default/t-2", "does", "not"] for line in table.splitlines())
    document = json.loads(render_json(result))
    assert document["group"]["placeable"] == 2 and document["group"]["members"][2]["status"] == DOES_NOT_FIT


def test_a_group_placed_whole_keeps_the_members_own_verdict_and_counts_the_bound_ones() -> None:
    """coscheduling counts the members already bound towards minMember (algorithm/gang.py)."""
    bound = member("t-0", node_name="n1")
    pod, other = member("t-1", cpu="1"), member("t-2", cpu="1")
    result = explain(SIMPLE, pod, two_nodes(pod_group(3), resident=bound), pending=[other])
    group = result.group
    assert group is not None and group.placed
    assert result.message.startswith("would be scheduled on ")
    assert group.message == "would be placed: 2 pending member(s) now, with 1 bound"
    assert (group.exist, group.bound, group.placeable) == (3, 1, 2)
    assert [(m.pod, m.status) for m in group.members] == [
        ("default/t-0", BOUND),
        ("default/t-1", PLACED),
        ("default/t-2", PLACED),
    ]
    assert group.members[0].node == "n1"


@pytest.mark.parametrize(
    ("groups", "problem", "message"),
    [
        ((), "the PodGroup does not exist", "the PodGroup does not exist; its members wait for it."),
        (
            (pod_group(0),),
            "the PodGroup is invalid: spec.minMember must be at least 1, got 0",
            "the PodGroup is invalid: spec.minMember must be at least 1, got 0.",
        ),
        ((pod_group(3),), "", "2 of 3 members exist."),
    ],
)
def test_a_group_that_cannot_be_tried_says_why(
    groups: tuple[dict[str, Any], ...], problem: str, message: str
) -> None:
    """coscheduling's PreFilter: the group must exist, be valid, and have minMember members."""
    pod = member("t-0", cpu="1")
    result = explain(SIMPLE, pod, two_nodes(*groups), pending=[member("t-1", cpu="1")])
    group = result.group
    assert group is not None and group.problem == problem and not group.placed
    assert group.min_member == (3 if not problem else None)
    assert result.message == f"pod group default/train: {message}"
    # Each member fits by itself: what holds them back is the group.
    assert group.placeable == 2 and [m.status for m in group.members] == [FITS, FITS]


def test_a_gated_member_counts_but_is_not_tried() -> None:
    """A gated member exists (coscheduling counts it) but never reaches the scheduler."""
    gated = model_pod("t-2", cpu="1", labels=GROUP_LABEL, schedulingGates=[{"name": "example.com/quota"}])
    pod = member("t-0", cpu="1")
    result = explain(SIMPLE, pod, two_nodes(pod_group(3)), pending=[member("t-1", cpu="1"), gated])
    group = result.group
    assert group is not None and group.exist == 3
    assert result.message == "pod group default/train: only 2 of 3 members can be placed."
    assert group.members[-1] == GroupMember(
        "default/t-2", GATED, reason="waiting for scheduling gates: [example.com/quota]"
    )


def test_a_pod_of_no_group_reads_as_before() -> None:
    result = explain(POLICY, POD, CLUSTER, pending=[member("t-0")])
    assert result.group is None and "group" not in result.as_dict()
    assert "POD GROUP" not in render_table(result)


def test_explain_finds_the_members_in_the_cluster_state() -> None:
    """`explain --snapshot`: the PodGroup and the members (either label) come from the state."""
    legacy = {"pod-group.scheduling.sigs.k8s.io": "train"}
    nodes = [make_node("n1", cpu="4"), make_node("n2", cpu="4")]
    pods = [
        make_pod("t-0", cpu="3", labels=GROUP_LABEL),
        make_pod("t-1", cpu="3", labels=legacy),
        make_pod("t-2", cpu="3", labels=GROUP_LABEL),
        make_pod("t-3", "elsewhere", cpu="3", labels=GROUP_LABEL),  # another namespace: another group
        make_pod("b-0", cpu="1", labels=GROUP_LABEL, node_name="n2"),
    ]
    state = ClusterState(nodes, pods, {"PodGroup": [pod_group(4)]}, [])
    result = explain_snapshot(state, "default", "t-0", None, None)
    group = result.group
    assert group is not None and (group.exist, group.bound, group.placeable) == (4, 1, 2)
    assert result.message == (
        "pod group default/train: only 3 of 4 members can be placed: "
        "0/2 nodes are available: 2 Insufficient cpu."
    )


# ------------------------------------------------------------------------- bound pods, names, policy


def test_a_bound_pod_is_judged_as_if_pending_and_the_headline_says_where_it_is_bound() -> None:
    """The scheduler judges pending pods only: a bound pod's spec.nodeName would have HostName reject
    every other node, which says nothing of why it went there."""
    with_hostname = compile_policy({"predicates": [{"name": "HostName"}, {"name": "PodFitsResources"}]})
    nodes = [make_node("a", cpu="1"), make_node("b", cpu="4"), make_node("c", cpu="8")]
    state = ClusterState(nodes, [make_pod("web", cpu="2", node_name="b")], {}, [])
    result = explain_snapshot(state, "default", "web", None, None)
    assert result.rejected == (Rejection("a", (("PodFitsResources", "Insufficient cpu"),)),)
    assert result.message == "bound to b; judged as if it were pending now: would be scheduled on c"
    assert (
        result.notes[0]
        == "spec.nodeName names b; it is ignored here, or HostName would reject every other node"
    )
    hosted = explain(with_hostname, model_pod("web", cpu="2", node_name="busy"), CLUSTER)
    assert all(by != "HostName" for r in hosted.rejected for by, _ in r.reasons)
    assert hosted.message.startswith("bound to busy; judged as if it were pending now: would be scheduled on")


def test_the_headline_and_the_table_both_name_the_node_selector() -> None:
    """A pod with a nodeSelector and no affinity: MatchNodeSelector's reason names the selector, in
    the table and in the FailedScheduling message above it."""
    result = explain(POLICY, model_pod("web", nodeSelector={"disk": "nvme"}), CLUSTER)
    assert result.message == "0/6 nodes are available: 6 node(s) didn't match Pod's node affinity/selector."
    assert {reason for r in result.rejected for by, reason in r.reasons if by == "MatchNodeSelector"} == {
        "node(s) didn't match Pod's node affinity/selector"
    }


def published_lease(
    annotations: dict[str, str], holder: str = "kubesched-0_abc", namespace: str = "ks"
) -> Any:
    return {
        "metadata": {"name": "kubesched", "namespace": namespace, "annotations": annotations},
        "spec": {"holderIdentity": holder, "renewTime": "2024-01-01T00:00:00.000000Z"},
    }


def test_explain_judges_with_the_policy_the_scheduler_publishes_on_its_lease() -> None:
    policy = {
        "kind": "Policy",
        "apiVersion": "v1",
        "priorities": [{"name": "MostRequestedPriority", "weight": 3}],
    }
    annotations = lease_annotations("kubesched", "/etc/kubesched/policy.json", json.dumps(policy))
    state = ClusterState([make_node("a")], [make_pod("web")], {}, [], leases=[published_lease(annotations)])
    result = explain_snapshot(state, "default", "web", None, None)
    assert [(p.priority, p.weight) for p in result.feasible[0].priorities] == [("MostRequestedPriority", 3)]
    assert result.policy == "/etc/kubesched/policy.json, published on Lease ks/kubesched"
    assert result.warnings == ()

    # The built-in default, said so by the scheduler: no warning either.
    state = ClusterState(
        [make_node("a")],
        [make_pod("web")],
        {},
        [],
        leases=[published_lease(lease_annotations("kubesched", None, ""))],
    )
    result = explain_snapshot(state, "default", "web", None, None)
    assert result.policy == "built-in default (kube-scheduler 1.20), published on Lease ks/kubesched"
    assert result.warnings == ()


@pytest.mark.parametrize(
    ("leases", "why"),
    [
        (None, "Leases are not readable with these credentials"),
        ([], "no Lease publishes the policy of scheduler kubesched"),
        (
            [published_lease(lease_annotations("kubesched", "big.json", "#" * (MAX_CONTENT + 1)))],
            f"its Lease ks/kubesched says big.json (not published: {MAX_CONTENT + 1} bytes, "
            f"over {MAX_CONTENT})",
        ),
    ],
)
def test_explain_warns_when_it_cannot_know_the_schedulers_policy(leases: Any, why: str) -> None:
    state = ClusterState([make_node("a")], [make_pod("web")], {}, [], leases=leases)
    result = explain_snapshot(state, "default", "web", None, None)
    (warning,) = result.warnings
    assert warning.startswith(f"the scheduler's policy is unknown: {why}")
    assert warning.endswith("; judged with the built-in default (kube-scheduler 1.20) instead")
    assert result.policy == "built-in default (kube-scheduler 1.20)"
    assert render_table(result).splitlines()[2] == f"WARNING: {warning}"
    assert json.loads(render_json(result))["warnings"] == [warning]


# ------------------------------------------------------------------------------- ElasticQuotas

GPU = "nvidia.com/gpu"


def _quota(namespace: str, minimum: dict[str, str], maximum: dict[str, str]) -> dict[str, Any]:
    meta = {
        "namespace": namespace,
        "name": "eq",
        "uid": f"eq-{namespace}",
        "creationTimestamp": "2026-01-01T00:00:00Z",
    }
    return {"metadata": meta, "spec": {"min": minimum, "max": maximum}}


def _gpu_cluster(busy: int = 3) -> Snapshot:
    """team (min 4 GPUs, max 6) uses 2 GPUs and 500m per busy pod; other (min 6, max 8) nothing."""
    quotas = {
        "team/eq": _quota("team", {GPU: "4", "cpu": "2"}, {GPU: "6"}),
        "other/eq": _quota("other", {GPU: "6", "cpu": "4"}, {GPU: "8"}),
    }
    used = [model_pod(f"u{i}", "team", cpu="500m", extra={GPU: "2"}, node_name="gpu") for i in range(busy)]
    return snapshot(
        node_info(model_node("gpu", cpu="64", extra={GPU: "16"}), used),
        objects=ClusterObjects(elastic_quotas=quotas),
    )


def test_a_pod_its_quota_refuses_is_explained_by_the_quota_with_the_nodes_as_without_it() -> None:
    pod = model_pod("train", "team", cpu="1", extra={GPU: "2"})
    result = explain(POLICY, pod, _gpu_cluster())
    assert result.message == f"0/1 nodes are available: ElasticQuota team/eq: over max: {GPU} 8 > 6."
    assert result.notes[0] == "without the quota: would be scheduled on gpu"
    assert result.quota is not None and not result.quota.admitted
    assert result.quota.verdict == f"over max: {GPU} 8 > 6"
    lines = {q.resource: (q.used, q.min, q.max, q.request) for q in result.quota.resources}
    assert lines == {"cpu": ("1500m", "2000m", "-", "1000m"), GPU: ("6", "4", "6", "2")}
    text = render_table(result)
    assert f"ELASTIC QUOTA team/eq   over max: {GPU} 8 > 6" in text
    assert [GPU, "6", "4", "6", "2"] in [line.split() for line in text.split("\n")]
    as_json = json.loads(render_json(result))
    assert as_json["quota"]["verdict"] == f"over max: {GPU} 8 > 6"
    assert as_json["quota"]["resources"][1] == {
        "resource": GPU,
        "used": "6",
        "min": "4",
        "max": "6",
        "request": "2",
    }


def test_a_pod_within_max_says_whether_it_borrows_beyond_min() -> None:
    cluster = _gpu_cluster()
    small = explain(POLICY, model_pod("s", "team", cpu="100m"), cluster)
    assert small.quota is not None and small.quota.admitted
    assert small.quota.verdict == "within max; within min"
    assert small.message == "would be scheduled on gpu"
    borrowing = explain(POLICY, model_pod("b", "team", cpu="1"), cluster)
    assert borrowing.quota is not None and borrowing.quota.verdict == "within max; borrowing: cpu"


def test_the_nominated_pods_of_the_quota_count_as_in_the_scheduler() -> None:
    pod = model_pod("one", "team", extra={GPU: "1"})
    alone = explain(POLICY, pod, _gpu_cluster(busy=2))
    assert alone.quota is not None and alone.quota.verdict == "within max; borrowing: nvidia.com/gpu"
    earlier = model_pod("first", "team", extra={GPU: "2"})  # nominated, of the same priority
    refused = explain(POLICY, pod, _gpu_cluster(busy=2), nominated=[earlier])
    assert refused.quota is not None and refused.quota.verdict == f"over max: {GPU} 7 > 6"


def test_a_pod_of_a_namespace_without_quota_has_no_quota_section() -> None:
    result = explain(POLICY, model_pod("free", "elsewhere", extra={GPU: "10"}), _gpu_cluster())
    assert result.quota is None and "quota" not in result.as_dict()
    assert result.message == "would be scheduled on gpu"


def test_explaining_from_a_cluster_state_counts_its_quotas_and_nominations() -> None:
    nodes = [make_node("gpu", cpu="64", extended={GPU: "16"})]
    bound = make_pod("u", "team", cpu="1", extended={GPU: "4"}, node_name="gpu")
    nominee = make_pod("first", "team", extended={GPU: "1"})
    nominee["status"]["nominatedNodeName"] = "gpu"
    pods = [bound, nominee, make_pod("one", "team", extended={GPU: "2"})]
    quota = _quota("team", {GPU: "4"}, {GPU: "6"})
    state = ClusterState(nodes, pods, {"ElasticQuota": [quota]}, [])
    result = explain_snapshot(state, "team", "one", None, None)
    assert result.message == f"0/1 nodes are available: ElasticQuota team/eq: over max: {GPU} 7 > 6."
    # A bound pod is judged without itself in its quota's use.
    again = explain_snapshot(state, "team", "u", None, None)
    assert again.quota is not None and again.quota.resources[-1].used == "0"
