"""EvenPodsSpread and EvenPodsSpreadPriority / SelectorSpreadPriority as PodTopologySpread
(podtopologyspread/filtering.go, scoring.go, common.go). Rows marked "1.20 table" are cases of
TestSingleConstraint, TestMultipleConstraints and TestPodTopologySpreadScore with their expected
results."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from kubesched.model.nodeinfo import ClusterObjects, Snapshot
from kubesched.model.objects import Pod
from kubesched.plugins.framework import Reject
from kubesched.plugins.pod_topology_spread.filtering import (
    ERR_REASON_CONSTRAINTS_NOT_MATCH,
    ERR_REASON_NODE_LABEL_NOT_MATCH,
    EvenPodsSpread,
)
from kubesched.plugins.pod_topology_spread.scoring import PodTopologySpreadPriority
from kubesched.policy.compile import PolicyError, compile_policy
from kubesched_dev.fixtures import model_node, model_pod, node_info, run_filter, run_priority, snapshot

HOST = "kubernetes.io/hostname"
FOO = {"matchExpressions": [{"key": "foo", "operator": "Exists"}]}
BAR = {"matchExpressions": [{"key": "bar", "operator": "Exists"}]}


def spread(max_skew: int, key: str, when: str = "DoNotSchedule", selector: Any = FOO) -> dict[str, Any]:
    return {"maxSkew": max_skew, "topologyKey": key, "whenUnsatisfiable": when, "labelSelector": selector}


def incoming(*constraints: dict[str, Any], labels: tuple[str, ...] = ("foo",), **spec: Any) -> Pod:
    return model_pod(
        "p", labels=dict.fromkeys(labels, ""), topologySpreadConstraints=list(constraints), **spec
    )


def cluster(
    nodes: dict[str, dict[str, str]], pods: list[tuple[str, tuple[str, ...]]], **kwargs: Any
) -> Snapshot:
    """Nodes by name with their labels; pods as (node, label keys), "!" first meaning terminating,
    "ns1:" a pod of namespace ns1."""
    infos = []
    for name, labels in nodes.items():
        placed = []
        for on, keys in pods:
            if on != name:
                continue
            namespace = "ns1" if "ns1:" in keys else "default"
            plain = [k for k in keys if k not in ("!", "ns1:")]
            placed.append(model_pod("e", namespace, labels=dict.fromkeys(plain, ""), deleting="!" in keys))
        infos.append(node_info(model_node(name, labels=labels), placed))
    return snapshot(*infos, **kwargs)


HOSTS = {name: {HOST: name} for name in ("node-a", "node-b", "node-c", "node-d")}
ZONED_HOSTS = {
    n: {"zone": z, HOST: n}
    for n, z in (("node-a", "zone1"), ("node-b", "zone1"), ("node-x", "zone2"), ("node-y", "zone2"))
}


def on(node: str, count: int, *labels: str) -> list[tuple[str, tuple[str, ...]]]:
    """`count` pods with `labels` on `node`."""
    return [(node, labels or ("foo",))] * count


ZONES = {
    "node-a": {"zone": "zone1", "node": "node-a"},
    "node-b": {"zone": "zone1", "node": "node-b"},
    "node-x": {"zone": "zone2", "node": "node-x"},
    "node-y": {"zone": "zone2", "node": "node-y"},
}
SPREAD_2_1_0_3 = [("node-a", ("foo",)), ("node-a", ("foo",)), ("node-b", ("foo",))] + [
    ("node-y", ("foo",))
] * 3
OK = ()
SKEW = (ERR_REASON_CONSTRAINTS_NOT_MATCH,)
NO_LABEL = (ERR_REASON_NODE_LABEL_NOT_MATCH,)


@pytest.mark.parametrize(
    ("pod", "nodes", "pods", "expected"),
    [
        pytest.param(
            incoming(spread(1, "zone")), ZONES, [], [OK, OK, OK, OK], id="1.20 table: no existing pods"
        ),
        pytest.param(
            incoming(spread(1, "zone", selector=BAR)),
            ZONES,
            [],
            [OK, OK, OK, OK],
            id="1.20 table: no existing pods, incoming pod doesn't match itself",
        ),
        pytest.param(
            incoming(spread(1, "zone")),
            ZONES,
            [
                ("node-a", ("foo", "ns1:")),
                ("node-a", ("foo", "ns1:")),
                ("node-x", ("foo",)),
                ("node-y", ("foo",)),
            ],
            [OK, OK, SKEW, SKEW],
            id="1.20 table: existing pods in a different namespace do not count",
        ),
        pytest.param(
            incoming(spread(1, "zone")),
            ZONES,
            on("node-a", 2) + on("node-b", 1) + on("node-y", 3),
            [OK, OK, OK, OK],
            id="1.20 table: pods spread across zones as 3/3, all nodes fit",
        ),
        pytest.param(
            incoming(spread(1, "zone")),
            {**ZONES, "node-b": {"zon": "zone1", "node": "node-b"}},
            [("node-a", ("foo",)), ("node-b", ("foo",)), ("node-x", ("foo",)), ("node-y", ("foo",))],
            [OK, NO_LABEL, SKEW, SKEW],
            id="1.20 table: spread 1/2 due to absence of label 'zone' on node-b",
        ),
        pytest.param(
            incoming(spread(1, "rack")),
            {k: ZONES[k] for k in ("node-a", "node-x")},
            [],
            [NO_LABEL, NO_LABEL],
            id="1.20 table: all nodes don't have label 'rack'",
        ),
        pytest.param(
            incoming(spread(1, "node")),
            ZONES,
            SPREAD_2_1_0_3,
            [SKEW, SKEW, OK, SKEW],
            id="1.20 table: pods spread across nodes as 2/1/0/3, only node-x fits",
        ),
        pytest.param(
            incoming(spread(2, "node")),
            ZONES,
            SPREAD_2_1_0_3,
            [SKEW, OK, OK, SKEW],
            id="1.20 table: 2/1/0/3, maxSkew is 2, node-b and node-x fit",
        ),
        pytest.param(
            incoming(spread(1, "node"), labels=("bar",)),
            ZONES,
            SPREAD_2_1_0_3,
            [SKEW, OK, OK, SKEW],
            id="1.20 table: 2/1/0/3, but pod doesn't match itself",
        ),
        pytest.param(
            incoming(
                spread(1, "node"),
                affinity={
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {
                                    "matchExpressions": [
                                        {"key": "node", "operator": "In", "values": ["node-a", "node-y"]}
                                    ]
                                }
                            ]
                        }
                    }
                },
            ),
            ZONES,
            SPREAD_2_1_0_3,
            [OK, OK, OK, SKEW],
            id="1.20 table: incoming pod has nodeAffinity, pods spread as 2/~1~/~0~/3, hence node-a fits",
        ),
        pytest.param(
            incoming(spread(1, "node")),
            {"node-a": {"node": "node-a"}, "node-b": {"node": "node-b"}},
            [("node-a", ("!", "foo")), ("node-b", ("foo",))],
            [OK, SKEW],
            id="1.20 table: terminating Pods should be excluded",
        ),
        pytest.param(
            incoming(spread(1, "zone"), spread(1, "node")),
            ZONES,
            [("node-a", ("foo",)), ("node-x", ("foo",)), ("node-x", ("foo",)), ("node-y", ("foo",))],
            [SKEW, OK, SKEW, SKEW],
            id="1.20 table (TestMultipleConstraints): zone 1/3 and node 1/0/2/1, only node-b fits",
        ),
    ],
)
def test_even_pods_spread(
    pod: Pod, nodes: dict[str, dict[str, str]], pods: list[Any], expected: list[tuple[str, ...]]
) -> None:
    snap = cluster(nodes, pods)
    assert [run_filter(EvenPodsSpread(), pod, info, snap) for info in snap.nodes] == expected


def test_schedule_anyway_constraints_do_not_filter() -> None:
    snap = cluster(ZONES, SPREAD_2_1_0_3)
    pod = incoming(spread(1, "node", "ScheduleAnyway"))
    assert [run_filter(EvenPodsSpread(), pod, info, snap) for info in snap.nodes] == [OK] * 4


def anyway(max_skew: int, key: str, selector: Any = FOO) -> dict[str, Any]:
    return spread(max_skew, key, "ScheduleAnyway", selector)


@pytest.mark.parametrize(
    ("pod", "nodes", "pods", "feasible", "expected"),
    [
        pytest.param(
            incoming(anyway(1, HOST)), {k: HOSTS[k] for k in ("node-a", "node-b")}, [], ["node-a", "node-b"],
            [100, 100], id="1.20 table: one constraint on node, no existing pods",
        ),
        pytest.param(
            incoming(anyway(1, HOST)), {k: HOSTS[k] for k in ("node-a", "node-b")},
            [("node-a", ("foo",)), ("node-a", ("foo",)), ("node-b", ("foo",))], ["node-a"], [100],
            id="1.20 table: one constraint on node, only one node is candidate",
        ),
        pytest.param(
            incoming(anyway(1, HOST)), HOSTS,
            on("node-a", 2) + on("node-b", 1) + on("node-d", 3), list(HOSTS),
            [40, 80, 100, 0], id="1.20 table: one constraint on node, all 4 nodes are candidates",
        ),
        pytest.param(
            incoming(anyway(2, HOST)), HOSTS,
            on("node-a", 2) + on("node-b", 1) + on("node-d", 3), list(HOSTS),
            [50, 83, 100, 16], id="1.20 table: all 4 nodes are candidates, maxSkew=2",
        ),
        pytest.param(
            incoming(anyway(3, HOST)), HOSTS,
            on("node-a", 4) + on("node-b", 3) + on("node-c", 2) + on("node-d", 1),
            list(HOSTS), [33, 55, 77, 100], id="1.20 table: all 4 nodes are candidates, maxSkew=3",
        ),
        pytest.param(
            incoming(anyway(1, "zone")),
            ZONED_HOSTS,
            on("node-a", 4) + on("node-b", 2) + on("node-x", 1) + on("node-y", 3),
            ["node-a", "node-b", "node-x"], [62, 62, 100],
            id="1.20 table: one constraint on zone, 3 out of 4 nodes are candidates",
        ),
        pytest.param(
            incoming(anyway(1, "zone"), anyway(1, HOST)),
            ZONED_HOSTS,
            on("node-a", 2) + on("node-b", 1) + on("node-x", 2) + on("node-y", 4),
            ["node-a", "node-x"], [100, 54],
            id="1.20 table: two constraints on zone and node, 2 out of 4 nodes are candidates",
        ),
        pytest.param(
            incoming(anyway(1, "zone"), anyway(1, HOST, BAR), labels=("foo", "bar")),
            ZONED_HOSTS,
            [("node-a", ("foo",)), ("node-b", ("foo", "bar")), ("node-y", ("foo",)), ("node-y", ("bar",))],
            ["node-a", "node-b", "node-x", "node-y"], [75, 25, 100, 50],
            id="1.20 table: two constraints on zone and node, with different labelSelectors",
        ),
        pytest.param(
            incoming(anyway(1, HOST)), {k: HOSTS[k] for k in ("node-a", "node-b")},
            [("node-a", ("foo", "ns1:")), ("node-a", ("foo",)), ("node-b", ("foo",)), ("node-b", ("foo",))],
            ["node-a", "node-b"],
            [100, 50],
            id="1.20 table: existing pods in a different namespace do not count",
        ),
        pytest.param(
            incoming(anyway(1, HOST)), {"node-a": HOSTS["node-a"], "node-b": {"n": "node-b"}},
            [], ["node-a", "node-b"], [100, 0], id="a node missing the key scores 0",
        ),
        pytest.param(
            incoming(), {k: HOSTS[k] for k in ("node-a", "node-b")}, on("node-a", 1), ["node-a", "node-b"],
            [100, 100], id="no constraints at all: every node 100 (normalised zeros)",
        ),
    ],
)  # fmt: skip
def test_pod_topology_spread_score(
    pod: Pod, nodes: dict[str, dict[str, str]], pods: list[Any], feasible: list[str], expected: list[int]
) -> None:
    snap = cluster(nodes, pods)
    infos = [info for name in feasible if (info := snap.get(name)) is not None]
    assert run_priority(PodTopologySpreadPriority(), pod, infos, snap) == expected


def test_system_default_constraints_spread_a_services_pods() -> None:
    """SelectorSpreadPriority with DefaultPodTopologySpread on: system defaults (hostname maxSkew 3,
    zone maxSkew 5) with the Service's selector, for a pod without constraints of its own."""
    service = {"metadata": {"name": "web", "namespace": "default"}, "spec": {"selector": {"app": "web"}}}
    objects = ClusterObjects(services={"default/web": service})
    zoned = {
        "n1": {HOST: "n1", "topology.kubernetes.io/zone": "a"},
        "n2": {HOST: "n2", "topology.kubernetes.io/zone": "a"},
        "n3": {HOST: "n3", "topology.kubernetes.io/zone": "b"},
    }
    infos = [
        node_info(
            model_node(name, labels=labels),
            [model_pod(f"w{i}", labels={"app": "web"}) for i in range(2 if name == "n1" else 0)],
        )
        for name, labels in zoned.items()
    ]
    snap = snapshot(*infos, objects=objects)
    pod = model_pod("web-new", labels={"app": "web"})
    # hostname: n1 2 pods, weight log(3+2); zone a 2 pods, b 0, weight log(2+2); +2 and +4 for maxSkew-1.
    # raw: n1 = 2*1.609+2 + 2*1.386+4 = 11.99 -> 11; n2 = 2 + 6.77 = 8; n3 = 2 + 4 = 6
    # normalised: 100*(11+6-s)/11 -> n1 54, n2 81, n3 100
    assert run_priority(PodTopologySpreadPriority(system_defaults=True), pod, infos, snap) == [54, 81, 100]
    # Without the system defaults (EvenPodsSpreadPriority alone) nothing spreads this pod.
    assert run_priority(PodTopologySpreadPriority(), pod, infos, snap) == [100, 100, 100]
    # A pod nothing selects gets no default constraints either.
    assert (
        run_priority(PodTopologySpreadPriority(system_defaults=True), model_pod("x"), infos, snap)
        == [100] * 3
    )


# ------------------------------------------------------------------ 1.32's fields (1.27+ clusters)


def newer(spec: dict[str, Any], **fields: Any) -> dict[str, Any]:
    """A constraint with 1.32 fields (minDomains=..., nodeAffinityPolicy=..., matchLabelKeys=...)."""
    return {**spec, **fields}


# filtering_test.go's cluster for minDomains: node-0..3, zone-0 (node-0, node-1), zone-1 (node-2, node-3).
FOUR = {f"node-{i}": {"node": f"node-{i}", "zone": f"zone-{i // 2}"} for i in range(4)}
NOT_NODE_0 = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {"matchExpressions": [{"key": "node", "operator": "NotIn", "values": ["node-0"]}]}
            ]
        }
    }
}
TAINTED = {
    "node-a": {"zone": "zone1", "node": "node-a"},
    "node-b": {"zone": "zone1", "node": "node-b"},
    "node-x": {"zone": "zone2", "node": "node-x"},
}
NO_SCHEDULE = [{"key": "node.kubernetes.io/unschedulable", "value": "", "effect": "NoSchedule"}]


def tainted_cluster(pods: list[tuple[str, tuple[str, ...]]]) -> Snapshot:
    """TAINTED with node-x tainted NoSchedule."""
    infos = []
    for name, labels in TAINTED.items():
        placed = [model_pod("e", labels=dict.fromkeys(keys, "")) for on, keys in pods if on == name]
        taints = NO_SCHEDULE if name == "node-x" else []
        infos.append(node_info(model_node(name, labels=labels, taints=taints), placed))
    return snapshot(*infos)


@pytest.mark.parametrize(
    ("pod", "nodes", "pods", "expected"),
    [
        pytest.param(
            incoming(newer(spread(2, "node"), minDomains=4), affinity=NOT_NODE_0),
            FOUR,
            on("node-1", 2) + on("node-2", 2) + on("node-3", 1),
            [OK, SKEW, SKEW, OK],
            id="1.32 table: 2/2/1, maxSkew 2, 3 domains < minDomains 4: minimum 0, the third node fits",
        ),
        pytest.param(
            incoming(spread(2, "node"), affinity=NOT_NODE_0),
            FOUR,
            on("node-1", 2) + on("node-2", 2) + on("node-3", 1),
            [OK, OK, OK, OK],
            id="the same without minDomains: global minimum 1, every node fits",
        ),
        pytest.param(
            incoming(newer(spread(2, "zone"), minDomains=1)),
            FOUR,
            on("node-1", 1) + on("node-2", 1) + on("node-3", 1),
            [OK, OK, OK, OK],
            id="1.32 table: zones 1/2, maxSkew 2, minDomains 1 below the 2 domains: all nodes fit",
        ),
        pytest.param(
            incoming(newer(spread(2, "zone"), minDomains=3)),
            FOUR,
            on("node-1", 1) + on("node-2", 1) + on("node-3", 1),
            [OK, OK, SKEW, SKEW],
            id="zones 1/2, maxSkew 2, 2 domains < minDomains 3: zone-1 is 3 above 0",
        ),
        pytest.param(
            incoming(spread(1, "zone"), nodeSelector={"foo": ""}),
            {
                "node-1": {"zone": "zone-1", "foo": ""},
                "node-2": {"zone": "zone-1", "foo": ""},
                "node-3": {"zone": "zone-2"},
                "node-4": {"zone": "zone-2"},
            },
            on("node-1", 1) + on("node-2", 1),
            [OK, OK, OK, OK],
            id="1.32 table: nodeAffinityPolicy Honor (default): zone-2 fails the selector, zone-1 alone",
        ),
        pytest.param(
            incoming(newer(spread(1, "zone"), nodeAffinityPolicy="Ignore"), nodeSelector={"foo": ""}),
            {
                "node-1": {"zone": "zone-1", "foo": ""},
                "node-2": {"zone": "zone-1", "foo": ""},
                "node-3": {"zone": "zone-2"},
                "node-4": {"zone": "zone-2"},
            },
            on("node-1", 1) + on("node-2", 1),
            [SKEW, SKEW, OK, OK],
            id="nodeAffinityPolicy Ignore: the empty zone-2 counts, zone-1 is 3 above it",
        ),
        pytest.param(
            incoming(newer(spread(1, "zone"), matchLabelKeys=["bar"]), labels=("foo", "bar")),
            ZONES,
            [("node-a", ("foo",)), ("node-a", ("foo",)), ("node-x", ("foo",))],
            [OK, OK, OK, OK],
            id="matchLabelKeys: the pod's bar is ANDed in, no existing pod has it",
        ),
        pytest.param(
            incoming(newer(spread(1, "zone"), matchLabelKeys=["missing"])),
            ZONES,
            [("node-a", ("foo",)), ("node-a", ("foo",)), ("node-x", ("foo",))],
            [SKEW, SKEW, OK, OK],
            id="1.32 table: matchLabelKeys naming a label the pod lacks is ignored",
        ),
    ],
)
def test_even_pods_spread_1_32_fields(
    pod: Pod, nodes: dict[str, dict[str, str]], pods: list[Any], expected: list[tuple[str, ...]]
) -> None:
    """TestSingleConstraint (podtopologyspread/filtering_test.go, 1.32): minDomains,
    nodeAffinityPolicy, matchLabelKeys. Rows not marked "1.32 table" are computed from filtering.go."""
    snap = cluster(nodes, pods)
    assert [run_filter(EvenPodsSpread(), pod, info, snap) for info in snap.nodes] == expected


def test_match_label_keys_counts_only_pods_with_the_same_values() -> None:
    """filterTopologySpreadConstraints: app=x pods only; node-a's app=y pods do not count."""
    app_y = [model_pod(f"y{i}", labels={"foo": "", "app": "y"}) for i in range(3)]
    app_x = [model_pod("x", labels={"foo": "", "app": "x"})]
    infos = [
        node_info(model_node("node-a", labels={"zone": "zone1"}), app_y),
        node_info(model_node("node-x", labels={"zone": "zone2"}), app_x),
    ]
    snap = snapshot(*infos)
    pod = model_pod(
        "p",
        labels={"foo": "", "app": "x"},
        topologySpreadConstraints=[newer(spread(1, "zone"), matchLabelKeys=["app"])],
    )
    assert [run_filter(EvenPodsSpread(), pod, info, snap) for info in snap.nodes] == [OK, SKEW]
    plain = model_pod("p", labels={"foo": "", "app": "x"}, topologySpreadConstraints=[spread(1, "zone")])
    assert [run_filter(EvenPodsSpread(), plain, info, snap) for info in snap.nodes] == [SKEW, OK]


def test_node_taints_policy() -> None:
    """matchNodeInclusionPolicies: Honor leaves out node-x, whose NoSchedule taint the pod does not
    tolerate (TaintToleration filters node-x itself); Ignore, the default, counts its empty zone."""
    snap = tainted_cluster(on("node-a", 1) + on("node-b", 1))
    honor = incoming(newer(spread(1, "zone"), nodeTaintsPolicy="Honor"))
    ignore = incoming(newer(spread(1, "zone"), nodeTaintsPolicy="Ignore"))
    tolerating = incoming(
        newer(spread(1, "zone"), nodeTaintsPolicy="Honor"), tolerations=[{"operator": "Exists"}]
    )
    assert [run_filter(EvenPodsSpread(), honor, info, snap) for info in snap.nodes] == [OK, OK, OK]
    assert [run_filter(EvenPodsSpread(), ignore, info, snap) for info in snap.nodes] == [SKEW, SKEW, OK]
    assert [run_filter(EvenPodsSpread(), tolerating, info, snap) for info in snap.nodes] == [SKEW, SKEW, OK]


def test_1_20_rules_count_pods_of_nodes_failing_the_affinity_1_32_rules_do_not() -> None:
    """The one counting difference kept for pods without the new fields (module docstring): node-b
    fails the pod's affinity, yet its pods count in zone1 under 1.20's rules."""
    nodes = {
        "node-a": {"zone": "zone1", "ok": ""},
        "node-b": {"zone": "zone1"},
        "node-x": {"zone": "zone2", "ok": ""},
    }
    snap = cluster(nodes, on("node-b", 2))
    old = incoming(spread(1, "zone"), nodeSelector={"ok": ""})
    current = incoming(newer(spread(1, "zone"), nodeAffinityPolicy="Honor"), nodeSelector={"ok": ""})
    assert [run_filter(EvenPodsSpread(), old, info, snap) for info in snap.nodes] == [SKEW, SKEW, OK]
    assert [run_filter(EvenPodsSpread(), current, info, snap) for info in snap.nodes] == [OK, OK, OK]


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("minDomains", 0, "minDomains must be an integer greater than zero"),
        ("nodeAffinityPolicy", "Sometimes", "nodeAffinityPolicy must be Honor or Ignore"),
        ("matchLabelKeys", "app", "matchLabelKeys must be a list of label keys"),
    ],
)
def test_a_malformed_new_field_rejects_the_pod(field: str, value: Any, message: str) -> None:
    pod = incoming(newer(spread(1, "zone"), **{field: value}))
    state = EvenPodsSpread().prefilter(pod, cluster(ZONES, []))
    assert isinstance(state, Reject)
    assert len(state.reasons) == 1 and message in state.reasons[0]


def test_score_node_taints_policy() -> None:
    """scoring.go: with Honor, node-x's pods leave zone2's count, node-x being tainted NoSchedule."""
    snap = tainted_cluster(on("node-a", 1) + on("node-x", 3))
    infos = list(snap.nodes)
    honor = incoming(newer(anyway(1, "zone"), nodeTaintsPolicy="Honor"))
    ignore = incoming(newer(anyway(1, "zone"), nodeTaintsPolicy="Ignore"))
    # weight log(2 + 2). Honor: zone1 1 pod, zone2 none -> round(1.39) = 1 for zone1, 0 for node-x.
    assert run_priority(PodTopologySpreadPriority(), honor, infos, snap) == [0, 0, 100]
    # Ignore: zone2's 3 pods count -> zone1 1, node-x round(4.16) = 4 -> 100 * (4 + 1 - s) / 4.
    assert run_priority(PodTopologySpreadPriority(), ignore, infos, snap) == [100, 100, 25]


def test_score_rounds_under_1_32_rules_and_truncates_under_1_20() -> None:
    """Score: 1.32 returns int64(math.Round(score)); 1.20 truncated. Hostname weight log(3 + 2):
    node-a 2 pods 3.22, node-b 1 pod 1.61, node-c 0."""
    snap = cluster({k: HOSTS[k] for k in ("node-a", "node-b", "node-c")}, on("node-a", 2) + on("node-b", 1))
    infos = list(snap.nodes)
    old = incoming(anyway(1, HOST))
    current = incoming(newer(anyway(1, HOST), nodeAffinityPolicy="Honor"))
    # truncated 3/1/0 -> 0, 100 * 2 / 3 = 66, 100; rounded 3/2/0 -> 0, 33, 100
    assert run_priority(PodTopologySpreadPriority(), old, infos, snap) == [0, 66, 100]
    assert run_priority(PodTopologySpreadPriority(), current, infos, snap) == [0, 33, 100]


def test_the_vectorised_score_leaves_1_32_pods_to_the_per_node_path() -> None:
    snap = cluster(HOSTS, on("node-a", 1))
    rows = np.arange(len(snap.nodes))
    table = snap.table()
    assert table is not None
    priority = PodTopologySpreadPriority()
    current = incoming(newer(anyway(1, HOST), matchLabelKeys=["foo"]))
    assert priority.score_nodes(current, snap, table, rows, snap.nodes) is None
    assert priority.score_nodes(incoming(anyway(1, HOST)), snap, table, rows, snap.nodes) is not None


# ------------------------------------------------- the policy's default constraints (List defaulting)

WEB_SERVICE = {"metadata": {"name": "web", "namespace": "default"}, "spec": {"selector": {"app": "web"}}}


def test_policy_default_constraints_filter_and_score_a_services_pods() -> None:
    """buildDefaultConstraints with List defaulting (common.go): the policy's constraints take the
    selector of the pod's Service; a pod of no Service, or with constraints of its own, is unaffected."""
    algorithm = compile_policy(
        {
            "predicates": [{"name": "EvenPodsSpread"}],
            "priorities": [{"name": "SelectorSpreadPriority", "weight": 1}],
            "podTopologySpreadDefaultConstraints": [
                {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"},
                {"maxSkew": 1, "topologyKey": HOST, "whenUnsatisfiable": "ScheduleAnyway"},
            ],
        }
    )
    (predicate,) = [p for p in algorithm.predicates if p.name == "EvenPodsSpread"]
    (weighted,) = algorithm.priorities
    objects = ClusterObjects(services={"default/web": WEB_SERVICE})
    infos = [
        node_info(
            model_node("n1", labels={"zone": "a", HOST: "n1"}), [model_pod("w", labels={"app": "web"})]
        ),
        node_info(model_node("n2", labels={"zone": "a", HOST: "n2"})),
        node_info(model_node("n3", labels={"zone": "b", HOST: "n3"})),
    ]
    snap = snapshot(*infos, objects=objects)
    web = model_pod("web-2", labels={"app": "web"})
    assert [run_filter(predicate, web, info, snap) for info in snap.nodes] == [SKEW, SKEW, OK]
    # hostname, maxSkew 1 instead of the system defaults' 3: n1 round(1 * log(5)) = 2 -> 0.
    assert run_priority(weighted.priority, web, infos, snap) == [0, 100, 100]
    lone = model_pod("lone", labels={"app": "other"})
    assert [run_filter(predicate, lone, info, snap) for info in snap.nodes] == [OK, OK, OK]
    own = model_pod("own", labels={"app": "web"}, topologySpreadConstraints=[anyway(5, HOST)])
    assert [run_filter(predicate, own, info, snap) for info in snap.nodes] == [OK, OK, OK]


@pytest.mark.parametrize(
    ("constraints", "field"),
    [
        ([{"maxSkew": 0, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}], "[0].maxSkew"),
        ([{"maxSkew": 1, "whenUnsatisfiable": "DoNotSchedule"}], "[0].topologyKey"),
        ([{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "Never"}], "[0].whenUnsatisfiable"),
        (
            [
                {
                    "maxSkew": 1,
                    "topologyKey": "zone",
                    "whenUnsatisfiable": "DoNotSchedule",
                    "labelSelector": {},
                }
            ],
            "[0].labelSelector",
        ),
        (
            [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}] * 2,
            "[1]",
        ),
        (
            [{"maxSkew": 1, "topologyKey": "z", "whenUnsatisfiable": "DoNotSchedule", "minDomains": 0}],
            "[0]",
        ),
        ({"maxSkew": 1}, ""),
    ],
)
def test_policy_default_constraints_are_validated(constraints: Any, field: str) -> None:
    """validateDefaultConstraints (apis/config/validation): a field error names the constraint."""
    with pytest.raises(PolicyError) as caught:
        compile_policy({"podTopologySpreadDefaultConstraints": constraints})
    assert caught.value.field == "podTopologySpreadDefaultConstraints" + field
