"""`kubesched simulate` and snapshot files: the diff it prints, the order it places pods in, the seed,
PodGroups placed all or nothing, the file round trip, and the command line on a saved file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from kubesched.cli import main
from kubesched.policy.compile import compile_policy, default_algorithm
from kubesched.policy.store import policy_manifest
from kubesched.tools.simulate import (
    GroupOutcome,
    GroupPlacement,
    SimulateError,
    parse_label_selector,
    render_table,
    simulate,
)
from kubesched.tools.snapshot import ClusterState, SnapshotError, load, save
from kubesched_dev.fixtures import make_node, make_pod

OWN = "kubesched"
LEAST = compile_policy({"priorities": [{"name": "LeastRequestedPriority", "weight": 1}]})
MOST = compile_policy({"priorities": [{"name": "MostRequestedPriority", "weight": 1}]})
NO_SELECTOR = compile_policy({"predicates": [{"name": "PodFitsResources"}], "priorities": []})
SERVICE = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": "default"}}


def state(*, bound: int = 0, pending: int = 6, extra: list[dict[str, Any]] | None = None) -> ClusterState:
    """Three 4-cpu nodes, one of them half full, some bound pods of ours on the others, pending pods."""
    nodes = [make_node(n, cpu="4", memory="8Gi") for n in ("a", "b", "c")]
    pods = [make_pod("resident", cpu="2", memory="4Gi", node_name="a", scheduler_name="other")]
    pods += [make_pod(f"bound-{i}", cpu="500m", node_name="bc"[i % 2]) for i in range(bound)]
    pods += [make_pod(f"web-{i}", cpu="500m", memory="512Mi") for i in range(pending)]
    pods += extra or []
    return ClusterState(nodes, pods, {"Service": [SERVICE]}, [])


def test_pending_pods_under_a_packing_candidate_move_and_the_spread_grows() -> None:
    result = simulate(state(pending=4), MOST, LEAST, scheduler_name=OWN, seed=3)
    assert len(result.placements) == 4
    # Spreading keeps the half-full node `a` for last; packing fills it first.
    assert all(p.current in ("b", "c") for p in result.placements)
    assert {p.candidate for p in result.placements} == {"a"}
    assert len(result.moved) == 4 and not result.newly_unschedulable
    before, after = {s.resource: s for s in result.before}, {s.resource: s for s in result.after}
    assert before["cpu"].mean == after["cpu"].mean == round((2 + 2) / 12, 4)
    assert after["cpu"].stdev > before["cpu"].stdev and after["cpu"].high == 1.0


def test_pods_becoming_schedulable_or_not_are_listed_with_the_reason() -> None:
    picky = make_pod("picky", cpu="100m", node_selector={"disk": "ssd"})
    result = simulate(state(pending=0, extra=[picky]), NO_SELECTOR, default_algorithm(), scheduler_name=OWN)
    (placement,) = result.newly_schedulable
    assert placement.pod == "default/picky" and placement.candidate in ("a", "b", "c")
    assert (
        placement.current_reason
        == "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector."
    )
    reverse = simulate(state(pending=0, extra=[picky]), default_algorithm(), NO_SELECTOR, scheduler_name=OWN)
    (placement,) = reverse.newly_unschedulable
    assert (
        placement.candidate is None
        and "didn't match Pod's node affinity/selector" in placement.candidate_reason
    )
    assert reverse.as_dict()["newlyUnschedulable"] == ["default/picky"]


def test_gated_pods_are_left_out_and_named() -> None:
    """schedulinggates/scheduling_gates.go (1.32): a gated pod never reaches the scheduler, so
    neither policy places it."""
    gated = make_pod("gated", cpu="100m")
    gated["spec"]["schedulingGates"] = [{"name": "example.com/quota"}]
    result = simulate(state(pending=2, extra=[gated]), LEAST, MOST, scheduler_name=OWN)
    assert sorted(p.pod for p in result.placements) == ["default/web-0", "default/web-1"]
    assert result.notes == ("1 pending pod(s) left out, waiting for scheduling gates: default/gated",)


def test_pods_are_placed_in_queue_order_and_the_seed_alone_decides_ties() -> None:
    extra = [make_pod("urgent", cpu="500m", priority=1000)]
    equal = compile_policy({"priorities": [{"name": "EqualPriority", "weight": 1}]})
    runs = {
        seed: simulate(state(extra=extra), equal, equal, scheduler_name=OWN, seed=seed) for seed in range(6)
    }
    assert all(r.placements[0].pod == "default/urgent" for r in runs.values())
    again = simulate(state(extra=extra), equal, equal, scheduler_name=OWN, seed=4)
    assert again.placements == runs[4].placements and not again.moved  # same policy, same seed: no move
    assert len({tuple(p.candidate for p in r.placements) for r in runs.values()}) > 1


def test_replay_takes_bound_pods_off_their_nodes_and_places_them_again() -> None:
    result = simulate(state(bound=4, pending=0), MOST, LEAST, scheduler_name=OWN, replay=True)
    assert result.mode == "replay" and len(result.placements) == 4
    assert [p.current for p in result.placements] == ["b", "c", "b", "c"]  # where they are
    assert {p.candidate for p in result.placements} == {"a"}  # the half-full node packs them all
    assert result.current_policy == "the placements in the cluster state"
    assert dict((s.resource, s.mean) for s in result.before) == dict(
        (s.resource, s.mean) for s in result.after
    )


def test_the_selector_and_namespace_pick_the_pods() -> None:
    extra = [make_pod("api-0", labels={"app": "api"}, cpu="100m"), make_pod("x", "other-ns", cpu="100m")]
    cluster = state(pending=2, extra=extra)
    assert [p.pod for p in simulate(cluster, MOST, LEAST, scheduler_name=OWN).placements] == [
        "default/web-0",
        "default/web-1",
        "default/api-0",
        "other-ns/x",
    ]
    picked = simulate(cluster, MOST, LEAST, scheduler_name=OWN, selector=parse_label_selector("app in (api)"))
    assert [p.pod for p in picked.placements] == ["default/api-0"]
    scoped = simulate(cluster, MOST, LEAST, scheduler_name=OWN, namespace="other-ns")
    assert [p.pod for p in scoped.placements] == ["other-ns/x"]


@pytest.mark.parametrize(
    ("selector", "labels", "matches"),
    [
        ("app=web", {"app": "web"}, True),
        ("app==web,tier!=db", {"app": "web", "tier": "db"}, False),
        ("env in (a, b),!legacy", {"env": "b"}, True),
        ("env notin (a,b)", {"env": "b"}, False),
        ("app", {}, False),
        ("", {}, True),
    ],
)
def test_label_selectors_in_kubectl_syntax(selector: str, labels: dict[str, str], matches: bool) -> None:
    assert parse_label_selector(selector).matches(labels) is matches


def test_a_malformed_selector_is_an_error() -> None:
    with pytest.raises(SimulateError, match="cannot parse"):
        parse_label_selector("app=(web")


# --------------------------------------------------------------------------------- snapshot files


def test_a_snapshot_file_round_trips_to_the_same_cluster_and_the_same_simulation(tmp_path: Path) -> None:
    original = state(bound=2)
    path = tmp_path / "snap.json"
    save(original, str(path))
    loaded = load(str(path))
    assert loaded.nodes == original.nodes and loaded.pods == original.pods
    assert loaded.objects == original.objects and loaded.policies == []
    assert loaded.cache().snapshot().objects.services == {"default/web": SERVICE}
    assert simulate(loaded, MOST, LEAST, scheduler_name=OWN, seed=2) == simulate(
        original, MOST, LEAST, scheduler_name=OWN, seed=2
    )
    # managedFields are left out: bulk no scheduler reads.
    noisy = state()
    noisy.nodes[0]["metadata"]["managedFields"] = [{"manager": "kubelet"}]
    assert "managedFields" not in noisy.document()["nodes"][0]["metadata"]


@pytest.mark.parametrize(
    ("document", "error"),
    [
        ({"kind": "Policy"}, 'not a ClusterSnapshot (no "kind": "ClusterSnapshot")'),
        ({"kind": "ClusterSnapshot", "version": 9}, "format version 9 is not supported"),
        ({"kind": "ClusterSnapshot", "version": 1, "nodes": {}}, "nodes: must be a list of objects"),
        (
            {"kind": "ClusterSnapshot", "version": 1, "objects": {"Secret": []}},
            "objects: unknown kind(s) Secret",
        ),
    ],
)
def test_files_that_are_not_snapshots_are_refused_with_the_reason(
    tmp_path: Path, document: dict[str, Any], error: str
) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(document))
    with pytest.raises(SnapshotError) as caught:
        load(str(path))
    assert str(caught.value).startswith(f"{path}: {error}")


# ----------------------------------------------------------------------------------- command line


def test_simulate_reads_a_scheduler_policy_manifest_from_stdin_and_a_saved_snapshot(tmp_path: Path) -> None:
    path = tmp_path / "snap.json"
    save(state(pending=4), str(path))
    manifest = policy_manifest({"priorities": [{"name": "MostRequestedPriority", "weight": 1}]}, "pack", OWN)
    runner = CliRunner()
    args = ["simulate", "--policy", "-", "--nodes-from", str(path), "-o", "json"]
    outcome = runner.invoke(main, args, input=yaml.safe_dump(manifest))
    assert outcome.exit_code == 0, outcome.output
    result = json.loads(outcome.output)
    assert result["currentPolicy"] == "built-in default (kube-scheduler 1.20)"
    assert result["candidatePolicy"] == "standard input" and result["moved"] == 4
    table = runner.invoke(main, args[:-2], input=yaml.safe_dump(manifest))
    assert "moved: 4 of 4 (100.0%)" in table.output and "MOVED (4)" in table.output


def test_simulate_explains_what_is_wrong_with_its_input(tmp_path: Path) -> None:
    runner = CliRunner()
    both = runner.invoke(main, ["simulate", "--policy", "-", "--nodes-from", "-"])
    assert both.exit_code == 2 and "cannot both read standard input" in both.output
    typo = {"kind": "Policy", "priorities": [{"name": "MostRequestedPriorty", "weight": 1}]}
    path = tmp_path / "snap.json"
    save(state(), str(path))
    bad = runner.invoke(
        main, ["simulate", "--policy", "-", "--nodes-from", str(path)], input=json.dumps(typo)
    )
    assert bad.exit_code == 1 and 'priorities[0].name: unknown priority "MostRequestedPriorty"' in bad.output
    policy = tmp_path / "policy.json"
    policy.write_text(json.dumps({"kind": "Policy"}))
    missing = runner.invoke(
        main, ["simulate", "--policy", str(policy), "--nodes-from", str(tmp_path / "none")]
    )
    assert missing.exit_code == 1 and f"{tmp_path / 'none'}: cannot read" in missing.output


def test_explain_reads_a_saved_snapshot(tmp_path: Path) -> None:
    path = tmp_path / "snap.json"
    save(state(pending=1, extra=[make_pod("huge", cpu="64")]), str(path))
    outcome = CliRunner().invoke(main, ["explain", "default/huge", "--snapshot", str(path), "-o", "json"])
    assert outcome.exit_code == 0, outcome.output
    assert json.loads(outcome.output)["message"] == "0/3 nodes are available: 3 Insufficient cpu."
    absent = CliRunner().invoke(main, ["explain", "default/nope", "--snapshot", str(path)])
    assert absent.exit_code == 1 and "pod default/nope is not in the snapshot" in absent.output


# ------------------------------------------------------------------------------------- pod groups


def pod_group(name: str, min_member: int) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default", "uid": f"pg-{name}"},
        "spec": {"minMember": min_member},
    }


def members(group: str, count: int, cpu: str = "2") -> list[dict[str, Any]]:
    return [
        make_pod(f"{group}-{i}", cpu=cpu, labels={"scheduling.x-k8s.io/pod-group": group})
        for i in range(count)
    ]


def with_groups(pods: list[dict[str, Any]], *groups: dict[str, Any]) -> ClusterState:
    """`state()`'s nodes and resident pod, with these pending pods and PodGroups."""
    return ClusterState(state().nodes, [*state(pending=0).pods, *pods], {"PodGroup": list(groups)}, [])


def test_two_groups_that_fit_alone_but_not_together_one_is_placed_whole(tmp_path: Path) -> None:
    """algorithm/gang.py: all or nothing. The three nodes have room for five 2-cpu pods; each group
    of three fits alone, not both: the first in queue order is placed whole, the other not at all
    (one by one, two of its members would have been placed)."""
    cluster = with_groups([*members("g1", 3), *members("g2", 3)], pod_group("g1", 3), pod_group("g2", 3))
    short = (
        "pod group default/g2: only 2 of 3 members can be placed: "
        "0/3 nodes are available: 3 Insufficient cpu."
    )
    for candidate, current in ((MOST, LEAST), (LEAST, MOST)):
        result = simulate(cluster, candidate, current, scheduler_name=OWN)
        nodes = {p.pod: p.candidate for p in result.placements}
        assert all(nodes[f"default/g1-{i}"] for i in range(3)), nodes
        assert [nodes[f"default/g2-{i}"] for i in range(3)] == [None, None, None]
        assert {p.candidate_reason for p in result.placements if p.pod.startswith("default/g2")} == {short}
        assert result.groups == (
            GroupPlacement("default/g1", 3, GroupOutcome(True, 3), GroupOutcome(True, 3)),
            GroupPlacement("default/g2", 3, GroupOutcome(False, 0, short), GroupOutcome(False, 0, short)),
        )
    document = result.as_dict()["podGroups"]
    assert document[1] == {
        "group": "default/g2",
        "members": 3,
        "current": {"placed": False, "membersPlaced": 0, "reason": short},
        "candidate": {"placed": False, "membersPlaced": 0, "reason": short},
    }
    table = render_table(result).splitlines()
    assert table[table.index("POD GROUPS (2)") + 2].split() == [
        "default/g1", "3", "placed", "(3)", "placed", "(3)"
    ]  # fmt: skip
    assert f"default/g2 not placed under the candidate: {short}" in table
    # Saved and read back, the PodGroups are in the state and decide the same.
    path = tmp_path / "snap.json"
    save(cluster, str(path))
    assert simulate(load(str(path)), LEAST, MOST, scheduler_name=OWN) == result


def test_a_group_missing_members_waits() -> None:
    """coscheduling's PreFilter: fewer than minMember members exist, so none is tried, room or not."""
    waiting = simulate(
        with_groups(members("g", 2, cpu="100m"), pod_group("g", 3)), MOST, LEAST, scheduler_name=OWN
    )
    reason = "pod group default/g: 2 of 3 members exist."
    assert [(p.pod, p.current, p.candidate, p.candidate_reason) for p in waiting.placements] == [
        ("default/g-0", None, None, reason),
        ("default/g-1", None, None, reason),
    ]
    assert waiting.groups[0].candidate == waiting.groups[0].current == GroupOutcome(False, 0, reason)
    assert "pod group default/g: 2 of 3 members exist." in render_table(waiting)


@pytest.mark.parametrize("left_out", ["gated", "not selected"])
def test_a_member_that_is_not_placed_here_still_counts(left_out: str) -> None:
    """A gated member (or one the selector leaves out) exists for the scheduler without being
    placed: with minMember 3 the two others are not enough; with minMember 2 they are."""
    pods = members("g", 3, cpu="100m")
    if left_out == "gated":
        pods[2]["spec"]["schedulingGates"] = [{"name": "example.com/quota"}]
    else:
        pods[2]["metadata"]["labels"]["tier"] = "batch"
    selector = parse_label_selector("!tier")
    result = simulate(
        with_groups(pods, pod_group("g", 3)), MOST, LEAST, scheduler_name=OWN, selector=selector
    )
    assert [p.pod for p in result.placements] == ["default/g-0", "default/g-1"]
    short = "pod group default/g: only 2 of 3 members can be placed."
    assert result.groups[0].candidate == GroupOutcome(False, 0, short)
    assert result.notes[-1] == (
        "pod group default/g: 1 other member(s) counted, not placed here (gated, not selected, or pending)"
    )
    enough = simulate(
        with_groups(pods, pod_group("g", 2)), MOST, LEAST, scheduler_name=OWN, selector=selector
    )
    assert enough.groups[0].candidate == GroupOutcome(True, 2)


def test_elastic_quotas_refuse_as_in_the_scheduler_and_their_use_is_shown_before_and_after() -> None:
    quota = {
        "metadata": {"namespace": "default", "name": "eq", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"min": {"cpu": "3500m", "memory": "16Gi"}, "max": {"cpu": "3500m"}},
    }
    cluster = ClusterState(state().nodes, state().pods, {"ElasticQuota": [quota]}, [])
    result = simulate(cluster, MOST, LEAST, scheduler_name=OWN, seed=3)
    # `resident` (2 cpu) counts against the quota too: three pods of 500m fit under its max.
    placed = [p for p in result.placements if p.candidate is not None]
    assert len(placed) == 3 and len(result.unschedulable_in_both) == 3
    refused = "0/3 nodes are available: ElasticQuota default/eq: over max: cpu 4000m > 3500m."
    assert {p.candidate_reason for p in result.unschedulable_in_both} == {refused}
    uses = {q.resource: (q.min, q.max, q.before, q.after) for q in result.quotas}
    assert uses == {
        "cpu": ("3500m", "3500m", "3500m", "3500m"),
        "memory": ("16384Mi", "-", "5632Mi", "5632Mi"),  # a row in one unit
    }
    assert result.as_dict()["quotas"][0] == {
        "quota": "default/eq",
        "resource": "cpu",
        "min": "3500m",
        "max": "3500m",
        "before": "3500m",
        "after": "3500m",
    }
    text = render_table(result)
    assert "ELASTIC QUOTAS (1)" in text
    assert ["default/eq", "cpu", "3500m", "3500m", "3500m", "3500m"] in [
        line.split() for line in text.split("\n")
    ]
    # Replayed, the bound pods are taken off first: `before` is where they are.
    bound = [make_pod(f"b{i}", cpu="500m", node_name="b") for i in range(2)]
    replayed = simulate(
        ClusterState(state().nodes, [*state(pending=0).pods, *bound], {"ElasticQuota": [quota]}, []),
        MOST,
        LEAST,
        scheduler_name=OWN,
        replay=True,
    )
    assert [(q.before, q.after) for q in replayed.quotas if q.resource == "cpu"] == [("3000m", "3000m")]


def test_without_quotas_simulate_reads_as_before() -> None:
    result = simulate(state(pending=2), MOST, LEAST, scheduler_name=OWN)
    assert result.quotas == () and "quotas" not in result.as_dict()
    assert "ELASTIC QUOTAS" not in render_table(result)
