"""The benchmark's gang workload (bench/kubebench/gangs.py), its audit and its report.

A PodGroup is all or nothing, as scheduler-plugins' coscheduling defines it
(pkg/coscheduling/core/core.go: a group is placed once minMember members can be): at the end of a
run every group must have 0 or at least minMember members bound.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from kubebench import gangs
from kubebench.audit import audit, partial_groups
from kubebench.cli import CRD_DIR, binders_for, is_full_run, parse_args, scenarios_from
from kubebench.report import GANG_RATIO, ratios, summarise, table
from kubebench.runner import GANG, OK, Scenario
from kubebench.schedulers import ALL, KUBE_SCHEDULER, KUBESCHED, KUBESCHED_GANGS, NULL
from kubebench.workload import make_nodes, round_robin_fits

from kubesched_dev.fixtures import make_node, make_pod

NODE = make_node("n1", cpu="64", memory="256Gi", pods="110")


def member(name: str, group: str, node: str | None, *, legacy: bool = False) -> dict[str, Any]:
    label = gangs.LEGACY_POD_GROUP_LABEL if legacy else gangs.POD_GROUP_LABEL
    return make_pod(name, "bench", "s", cpu="100m", memory="128Mi", labels={label: group}, node_name=node)


def pod_group(name: str, min_member: int) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "bench"}, "spec": {"minMember": min_member}}


# ------------------------------------------------------------------------------------------ workload


def test_group_sizes_are_the_uniform_groups_plus_mixed_ones_drawn_from_the_seed() -> None:
    sizes = gangs.group_sizes(50, 32, 20, seed=1)
    assert len(sizes) == 70
    assert sizes.count(32) >= 50
    low, high = gangs.MIXED_SIZES
    assert (low, high) == (2, 64)
    assert all(low <= s <= high for s in sizes)
    assert len(set(sizes)) > 5, "mixed sizes should vary"
    assert sizes == gangs.group_sizes(50, 32, 20, seed=1)
    assert sizes != gangs.group_sizes(50, 32, 20, seed=2)
    # Shuffled: the mixed groups are not all behind the uniform ones.
    assert any(s != 32 for s in sizes[:35])


def test_the_same_pods_with_and_without_their_pod_group_label() -> None:
    sizes = (3, 5, 2)
    grouped = gangs.make_gang_pods(sizes, "ns", "sched", seed=4, grouped=True)
    plain = gangs.make_gang_pods(sizes, "ns", "sched", seed=4, grouped=False)
    assert len(grouped) == len(plain) == 10
    for with_group, without in zip(grouped, plain, strict=True):
        assert with_group["spec"] == without["spec"]
        labels = dict(with_group["metadata"]["labels"])
        assert labels.pop(gangs.POD_GROUP_LABEL) == labels[gangs.BENCH_GROUP_LABEL]
        assert labels == without["metadata"]["labels"]
        assert gangs.pod_group_of(without) == ""
    members = gangs.members_of(plain)
    assert {g: len(names) for g, names in members.items()} == {"group-000": 3, "group-001": 5, "group-002": 2}
    assert members["group-001"][0] == "group-001-000"
    assert len({p["metadata"]["name"] for p in grouped}) == 10


def test_one_pod_group_per_group_with_min_member_its_size() -> None:
    groups = gangs.make_pod_groups((3, 5), "ns")
    assert [(g["metadata"]["name"], g["spec"]["minMember"]) for g in groups] == [
        ("group-000", 3),
        ("group-001", 5),
    ]
    assert {g["apiVersion"] for g in groups} == {"scheduling.x-k8s.io/v1alpha1"}
    assert gangs.pod_groups_path("ns") == "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/ns/podgroups"


@pytest.mark.parametrize(("nodes", "groups", "size", "mixed"), [(1000, 50, 32, 20), (200, 10, 8, 4)])
def test_the_default_and_quick_gang_workloads_fit_even_placed_round_robin(
    nodes: int, groups: int, size: int, mixed: int
) -> None:
    sizes = gangs.group_sizes(groups, size, mixed, seed=1)
    pods = gangs.make_gang_pods(sizes, "bench", "s", seed=1, grouped=True)
    assert round_robin_fits(nodes, len(pods))
    node_objects = make_nodes(nodes, seed=1)
    for i, p in enumerate(pods):
        p["spec"]["nodeName"] = node_objects[i % nodes]["metadata"]["name"]
        p["spec"].pop("nodeSelector", None)  # round-robin ignores them; capacity is the point here
    names = {p["metadata"]["name"] for p in pods}
    result = audit(pods, pods, node_objects, names, {}, pod_groups=gangs.make_pod_groups(sizes, "bench"))
    assert result.ok, result.problems()
    assert result.groups_checked == groups + mixed


def test_the_crd_directory_defines_the_pod_group_crd(tmp_path: Path) -> None:
    assert not gangs.has_pod_group_crd(tmp_path)
    (tmp_path / "other.yaml").write_text("kind: CustomResourceDefinition\nmetadata: {name: x.example.com}\n")
    assert not gangs.has_pod_group_crd(tmp_path)
    (tmp_path / "pg.yaml").write_text(
        "---\nkind: CustomResourceDefinition\nmetadata: {name: podgroups.scheduling.x-k8s.io}\n"
    )
    assert gangs.has_pod_group_crd(tmp_path)


# --------------------------------------------------------------------------------------------- audit

PARTIAL_CASES = [
    # name, pods, PodGroups, expected partial groups, expected groups not found
    ("whole group bound", [member(f"a{i}", "a", "n1") for i in range(3)], [pod_group("a", 3)], [], []),
    ("no member bound", [member(f"a{i}", "a", None) for i in range(3)], [pod_group("a", 3)], [], []),
    (
        "two of three bound",
        [member("a0", "a", "n1"), member("a1", "a", "n1"), member("a2", "a", None)],
        [pod_group("a", 3)],
        ["a (2/3 bound, minMember 3)"],
        [],
    ),
    (
        "minMember reached, one member left over",
        [member("a0", "a", "n1"), member("a1", "a", "n1"), member("a2", "a", None)],
        [pod_group("a", 2)],
        [],
        [],
    ),
    (
        "the legacy label counts too",
        [member("a0", "a", "n1", legacy=True), member("a1", "a", None, legacy=True)],
        [pod_group("a", 2)],
        ["a (1/2 bound, minMember 2)"],
        [],
    ),
    ("a group that does not exist", [member("b0", "b", "n1")], [pod_group("a", 2)], [], ["b"]),
]


@pytest.mark.parametrize(
    ("pods", "groups", "partial", "not_found"),
    [c[1:] for c in PARTIAL_CASES],
    ids=[c[0] for c in PARTIAL_CASES],
)
def test_partial_groups(
    pods: list[dict[str, Any]], groups: list[dict[str, Any]], partial: list[str], not_found: list[str]
) -> None:
    assert partial_groups(pods, groups) == (partial, not_found)


def test_a_partly_bound_group_fails_the_audit_even_when_nothing_else_is_wrong() -> None:
    pods = [
        member("a0", "a", "n1"),
        member("a1", "a", "n1"),
        member("b0", "b", "n1"),
        member("b1", "b", "n1"),
    ]
    names = {p["metadata"]["name"] for p in pods}
    assert audit(pods, pods, [NODE], names, {}, pod_groups=[pod_group("a", 2), pod_group("b", 2)]).ok
    result = audit(pods, pods, [NODE], names, {}, pod_groups=[pod_group("a", 2), pod_group("b", 3)])
    assert result.problems() == [
        "1 pod groups partly bound (fewer than minMember, more than 0) (e.g. b (2/2 bound, minMember 3))"
    ]
    # Without PodGroups (the comparison run) nothing is asked of groups.
    assert audit(pods, pods, [NODE], names, {}).ok


# ------------------------------------------------------------------------------------------- figures


def test_group_figures_time_whole_groups_from_their_last_creation_to_their_last_bind() -> None:
    created = dict.fromkeys(["a0", "a1", "b0", "b1", "c0", "c1"], 10.0)
    created["b1"] = 12.0
    bound = {"a0": (11.0, "n"), "a1": (13.0, "n"), "b0": (14.0, "n"), "b1": (15.0, "n"), "c0": (11.0, "n")}
    members = {"a": ["a0", "a1"], "b": ["b0", "b1"], "c": ["c0", "c1"]}
    figures = gangs.group_figures(bound, members, created)
    # a: 13 - 10 = 3; b: 15 - 12 = 3 (its last member was created at 12); c is not whole.
    assert figures["groups_bound"] == 2
    assert figures["group_done_max_s"] == 3.0
    assert figures["group_done_p50_s"] == 3.0
    assert figures["group_spread_max_s"] == 2.0  # a: 11 -> 13
    assert figures["group_spread_p50_s"] == 1.5
    assert gangs.group_figures({}, members, created) == {"groups_bound": 0}


def test_makespan_runs_from_the_scheduler_start_to_the_last_bind() -> None:
    bound = {"a": (101.0, "n"), "b": (102.0, "n"), "c": (104.0, "n"), "d": (103.0, "n")}
    assert gangs.makespan_figures(bound, started=100.0) == {"makespan_s": 4.0, "makespan_pods_per_s": 1.0}
    assert gangs.makespan_figures({}, started=100.0) == {}


# -------------------------------------------------------------------------------------- report, cli


def run(kind: str, pods_per_s: float, makespan_pods_per_s: float, group_p95: float) -> dict[str, Any]:
    return {
        "scenario": "gang-x",
        "scheduler": kind,
        "repeat": 1,
        "status": OK,
        "detail": "",
        "pods_per_s": pods_per_s,
        "makespan_pods_per_s": makespan_pods_per_s,
        "makespan_s": 2.0,
        "group_done_p50_s": 1.0,
        "group_done_p95_s": group_p95,
        "group_done_max_s": group_p95,
        "group_spread_max_s": 0.1,
        "other_cpu_s": 0.0,
        "window_s": 5.0,
    }


@pytest.mark.parametrize(
    ("gang_rate", "gang_makespan_rate", "met", "verdict"),
    [
        (900.0, 450.0, True, "met"),
        (795.0, 450.0, False, "NOT met"),  # 0.795: shown with three digits, not as 0.80
        (900.0, 350.0, False, "NOT met"),
    ],
)
def test_the_gang_ratio_is_with_pod_groups_over_without_and_judged_against_the_goal(
    gang_rate: float, gang_makespan_rate: float, met: bool, verdict: str
) -> None:
    runs = [run(KUBESCHED, 1000.0, 500.0, 2.0), run(KUBESCHED_GANGS, gang_rate, gang_makespan_rate, 1.0)]
    rows = summarise(runs, ["gang-x"], [KUBESCHED, KUBESCHED_GANGS])
    (entry,) = ratios(rows, ["gang-x"])
    assert entry[GANG_RATIO] == {
        "pods_per_s": round(gang_rate / 1000, 3),
        "makespan_pods_per_s": round(gang_makespan_rate / 500, 3),
        "group_done_p95_s": 0.5,
    }
    assert entry["gang_rate_goal_met"] is met
    text = table(rows, [entry], {"gang-x": "gangs"})
    assert "group p95 s" in text and "pods/s from start" in text
    assert f"(goal: both rates >= 0.8x: {verdict})" in text
    assert f"pods_per_s {gang_rate / 1000:.3f}x" in text


def test_batch_blocks_keep_their_columns() -> None:
    batch = {**run(KUBESCHED, 1000.0, 0.0, 0.0), "scenario": "batch-x"}
    for key in ("makespan_pods_per_s", "makespan_s", "group_done_p50_s", "group_done_p95_s"):
        batch.pop(key)
    for key in ("group_done_max_s", "group_spread_max_s"):
        batch.pop(key)
    rows = summarise([batch], ["batch-x"], [KUBESCHED])
    assert "group p95 s" not in table(rows, ratios(rows, ["batch-x"]), {})


def test_the_gang_run_is_in_the_default_and_quick_runs_and_kubesched_only() -> None:
    (gang,) = [s for s in scenarios_from(parse_args([])) if s.mode == GANG]
    assert (gang.nodes, gang.groups, gang.group_size, gang.mixed) == (1000, 50, 32, 20)
    assert gang.pods == sum(gang.group_sizes) and len(gang.group_sizes) == 70
    (quick,) = [s for s in scenarios_from(parse_args(["--quick"])) if s.mode == GANG]
    assert (quick.nodes, quick.groups, quick.group_size, quick.mixed) == (200, 10, 8, 4)
    custom = scenarios_from(
        parse_args(
            [
                "--gang",
                "300x6x4",
                "--gang-mixed",
                "0",
                "--no-batch",
                "--no-steady",
                "--no-classes",
                "--no-quota",
            ]
        )
    )
    assert custom == [Scenario.gang(300, 6, 4, 0, seed=1)]
    assert custom[0].pods == 24
    assert not any(s.mode == GANG for s in scenarios_from(parse_args(["--no-gang"])))
    assert binders_for(gang, list(ALL)) == [KUBESCHED, KUBESCHED_GANGS]
    assert binders_for(gang, [NULL, KUBE_SCHEDULER]) == []
    batch = Scenario.batch(10, 10)
    assert binders_for(batch, list(ALL)) == list(ALL)
    assert is_full_run(parse_args([]), list(ALL), 3)
    for argv in (["--gang", "1000x50x32"], ["--gang-mixed", "3"], ["--no-gang"]):
        assert not is_full_run(parse_args(argv), list(ALL), 3)


def test_the_repository_ships_the_pod_group_crd_the_bench_installs() -> None:
    assert gangs.has_pod_group_crd(CRD_DIR), f"no {gangs.CRD_NAME} CRD in {CRD_DIR}: no gang run"
