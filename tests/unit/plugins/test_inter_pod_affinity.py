"""MatchInterPodAffinity and InterPodAffinityPriority (interpodaffinity/filtering.go, scoring.go).
Rows marked "1.20 table" are cases of TestRequiredAffinitySingleNode,
TestRequiredAffinityMultipleNodes, TestPreferredAffinity and
TestPreferredAffinityWithHardPodAffinitySymmetricWeight with their expected results."""

from __future__ import annotations

from typing import Any

import pytest

from kubesched.model.nodeinfo import Snapshot
from kubesched.model.objects import Pod
from kubesched.plugins.framework import Reject
from kubesched.plugins.inter_pod_affinity.filtering import (
    ERR_REASON_AFFINITY_NOT_MATCH,
    ERR_REASON_AFFINITY_RULES_NOT_MATCH,
    ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH,
    ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH,
    MatchInterPodAffinity,
)
from kubesched.plugins.inter_pod_affinity.scoring import InterPodAffinityPriority
from kubesched_dev.fixtures import model_node, model_pod, node_info, run_filter, run_priority, snapshot

OK: tuple[str, ...] = ()
AFFINITY = (ERR_REASON_AFFINITY_NOT_MATCH, ERR_REASON_AFFINITY_RULES_NOT_MATCH)
ANTI = (ERR_REASON_AFFINITY_NOT_MATCH, ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH)
EXISTING_ANTI = (ERR_REASON_AFFINITY_NOT_MATCH, ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH)


def term(
    key: str, operator: str, values: list[str] | None, topology: str, namespaces: list[str] | None = None
) -> dict[str, Any]:
    expression: dict[str, Any] = {"key": key, "operator": operator}
    if values is not None:
        expression["values"] = values
    out: dict[str, Any] = {"labelSelector": {"matchExpressions": [expression]}, "topologyKey": topology}
    if namespaces:
        out["namespaces"] = namespaces
    return out


def weighted(weight: int, t: dict[str, Any]) -> dict[str, Any]:
    return {"weight": weight, "podAffinityTerm": t}


def affinity(
    required: list[Any] | None = None,
    anti: list[Any] | None = None,
    preferred: list[Any] | None = None,
    preferred_anti: list[Any] | None = None,
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if required is not None or preferred is not None:
        out["podAffinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": required or [],
            "preferredDuringSchedulingIgnoredDuringExecution": preferred or [],
        }
    if anti is not None or preferred_anti is not None:
        out["podAntiAffinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": anti or [],
            "preferredDuringSchedulingIgnoredDuringExecution": preferred_anti or [],
        }
    return out


def pod(
    labels: dict[str, str] | None = None, aff: dict[str, Any] | None = None, namespace: str = "default"
) -> Pod:
    spec = {"affinity": aff} if aff else {}
    return model_pod("p", namespace, labels=labels, **spec)


def cluster(nodes: dict[str, dict[str, str]], pods: list[tuple[str, Pod]]) -> Snapshot:
    return snapshot(
        *[
            node_info(model_node(name, labels=labels), [p for on, p in pods if on == name])
            for name, labels in nodes.items()
        ]
    )


SCAN = {"service": "securityscan"}
S1 = {"security": "S1"}
S2 = {"security": "S2"}
MACHINE1 = {"machine1": {"region": "r1", "zone": "z11"}}
IN_SCAN = term("service", "In", ["securityscan", "value2"], "region")


@pytest.mark.parametrize(
    ("incoming", "nodes", "pods", "expected"),
    [
        pytest.param(pod(), MACHINE1, [], [OK], id="1.20 table: no required pod affinity, node without pods"),
        pytest.param(
            pod(S1, affinity([IN_SCAN])),
            MACHINE1,
            [("machine1", pod(SCAN))],
            [OK],
            id="1.20 table: PodAffinity In operator matches the existing pod",
        ),
        pytest.param(
            pod(S1, affinity([term("service", "NotIn", ["securityscan3", "value3"], "region")])),
            MACHINE1,
            [("machine1", pod(SCAN))],
            [OK],
            id="1.20 table: PodAffinity NotIn operator matches the existing pod",
        ),
        pytest.param(
            pod(
                S1, affinity([term("service", "In", ["securityscan", "value2"], "region", ["DiffNameSpace"])])
            ),
            MACHINE1,
            [("machine1", pod(SCAN, namespace="ns"))],
            [AFFINITY],
            id="1.20 table: PodAffinity not satisfied because of a different namespace",
        ),
        pytest.param(
            pod(S1, affinity([term("service", "In", ["antivirusscan", "value2"], "region")])),
            MACHINE1,
            [("machine1", pod(SCAN))],
            [AFFINITY],
            id="1.20 table: PodAffinity labelSelector does not match",
        ),
        pytest.param(
            pod(S1, affinity([IN_SCAN], [term("service", "In", ["antivirusscan", "value2"], "node")])),
            MACHINE1,
            [("machine1", pod(SCAN))],
            [OK],
            id="1.20 table: satisfies PodAffinity and PodAntiAffinity",
        ),
        pytest.param(
            pod(S1, affinity([IN_SCAN], [term("service", "In", ["securityscan", "value2"], "zone")])),
            MACHINE1,
            [("machine1", pod(SCAN))],
            [ANTI],
            id="1.20 table: satisfies PodAffinity but not PodAntiAffinity",
        ),
        pytest.param(
            pod(S1, affinity([IN_SCAN], [term("service", "In", ["antivirusscan", "value2"], "node")])),
            MACHINE1,
            [("machine1", pod(SCAN, affinity(anti=[term("security", "In", ["S1"], "zone")])))],
            [EXISTING_ANTI],
            id="1.20 table: satisfies PodAffinity and PodAntiAffinity, not the existing pod's anti-affinity",
        ),
        pytest.param(
            pod(SCAN, affinity([term("service", "NotIn", ["securityscan3"], "region")])),
            MACHINE1,
            [("machine1", pod(SCAN))],
            [OK],
            id="1.20 table: pod matches its own label in PodAffinity",
        ),
        pytest.param(
            pod(S1),
            MACHINE1,
            [("machine1", pod(SCAN, affinity(anti=[term("security", "In", ["S1"], "zone")])))],
            [EXISTING_ANTI],
            id="1.20 table: existing pod's PodAntiAffinity respected without AntiAffinity on the pod",
        ),
        pytest.param(
            pod(S1),
            MACHINE1,
            [("machine1", pod(SCAN, affinity(anti=[term("security", "NotIn", ["S1"], "zone")])))],
            [OK],
            id="1.20 table: existing pod's PodAntiAffinity satisfied",
        ),
        pytest.param(
            pod(
                {"foo": "bar", **SCAN},
                affinity(
                    [term("foo", "In", ["bar"], "zone"), term("service", "In", ["securityscan"], "zone")]
                ),
            ),
            {"nodeA": {"zone": "az1", "hostname": "h1"}, "nodeB": {"zone": "az2", "hostname": "h2"}},
            [("nodeA", pod({"foo": "bar"}))],
            [OK, OK],
            id="1.20 table: the first pod of a collection with affinity to itself is not blocked",
        ),
        pytest.param(
            pod(
                {"foo": "bar", **SCAN},
                affinity(
                    [term("foo", "In", ["bar"], "zone"), term("service", "In", ["securityscan"], "zone")]
                ),
            ),
            {
                "nodeA": {"zoneLabel": "az1", "hostname": "h1"},
                "nodeB": {"zoneLabel": "az2", "hostname": "h2"},
            },
            [("nodeA", pod({"foo": "bar"}))],
            [AFFINITY, AFFINITY],
            id="1.20 table: the first pod of a collection needs nodes with the topology keys",
        ),
        pytest.param(
            pod(S1, affinity([term("foo", "In", ["bar"], "region")])),
            {
                "machine1": {"region": "China"},
                "machine2": {"region": "China", "az": "az1"},
                "machine3": {"region": "India"},
            },
            [("machine1", pod({"foo": "bar"}))],
            [OK, OK, AFFINITY],
            id="1.20 table: every node of the matching pod's region fits",
        ),
        pytest.param(
            pod(None, affinity(anti=[term("foo", "In", ["abc"], "region")])),
            {"nodeA": {"region": "r1", "hostname": "nodeA"}, "nodeB": {"region": "r1", "hostname": "nodeB"}},
            [("nodeA", pod({"foo": "abc"}))],
            [ANTI, ANTI],
            id="1.20 table: anti-affinity keeps the pod off every node of the matching pod's region",
        ),
    ],
)
def test_match_inter_pod_affinity(
    incoming: Pod,
    nodes: dict[str, dict[str, str]],
    pods: list[tuple[str, Pod]],
    expected: list[tuple[str, ...]],
) -> None:
    snap = cluster(nodes, pods)
    assert [run_filter(MatchInterPodAffinity(), incoming, info, snap) for info in snap.nodes] == expected


def test_an_unparsable_term_rejects_every_node() -> None:
    """1.20 table: PodAffinity fails PreFilter with an invalid affinity label syntax."""
    bad = pod(S1, affinity([term("service", "In", ["{{.bad-value.}}"], "region")]))
    snap = cluster(MACHINE1, [])
    state = MatchInterPodAffinity().prefilter(bad, snap)
    assert isinstance(state, Reject)
    assert state.reasons[0].startswith("parsing pod: requiredAffinityTerms: invalid label value")


CHINA = {"region": "China"}
INDIA = {"region": "India"}
AZ1 = {"az": "az1"}
AZ2 = {"az": "az2"}
STAY_S1_REGION = affinity(preferred=[weighted(5, term("security", "In", ["S1"], "region"))])
STAY_S2_REGION = affinity(preferred=[weighted(6, term("security", "In", ["S2"], "region"))])
AFFINITY3 = affinity(
    preferred=[
        weighted(
            8,
            {
                "labelSelector": {
                    "matchExpressions": [
                        {"key": "security", "operator": "NotIn", "values": ["S1"]},
                        {"key": "security", "operator": "In", "values": ["S2"]},
                    ]
                },
                "topologyKey": "region",
            },
        ),
        weighted(
            2,
            {
                "labelSelector": {
                    "matchExpressions": [
                        {"key": "security", "operator": "Exists"},
                        {"key": "wrongkey", "operator": "DoesNotExist"},
                    ]
                },
                "topologyKey": "region",
            },
        ),
    ]
)
HARD = affinity(
    required=[
        term("security", "In", ["S1", "value2"], "region"),
        {
            "labelSelector": {
                "matchExpressions": [
                    {"key": "security", "operator": "Exists"},
                    {"key": "wrongkey", "operator": "DoesNotExist"},
                ]
            },
            "topologyKey": "region",
        },
    ]
)
AWAY_S1_AZ = affinity(preferred_anti=[weighted(5, term("security", "In", ["S1"], "az"))])
AWAY_S2_AZ = affinity(preferred_anti=[weighted(5, term("security", "In", ["S2"], "az"))])
STAY_S1_AWAY_S2 = affinity(
    preferred=[weighted(8, term("security", "In", ["S1"], "region"))],
    preferred_anti=[weighted(5, term("security", "In", ["S2"], "az"))],
)


@pytest.mark.parametrize(
    ("incoming", "nodes", "pods", "expected"),
    [
        pytest.param(
            pod(S1), {"m1": CHINA, "m2": INDIA, "m3": AZ1}, [], [0, 0, 0], id="1.20 table: no affinity"
        ),
        pytest.param(
            pod(S1, STAY_S1_REGION),
            {"m1": CHINA, "m2": INDIA, "m3": AZ1},
            [("m1", pod(S1)), ("m2", pod(S2)), ("m3", pod(S1))],
            [100, 0, 0],
            id="1.20 table: matching topology key and pods score high",
        ),
        pytest.param(
            pod(None, STAY_S1_REGION),
            {"m1": CHINA, "m2": {**CHINA, **AZ1}, "m3": INDIA},
            [("m1", pod(S1))],
            [100, 100, 0],
            id="1.20 table: every node of the topology value scores the same",
        ),
        pytest.param(
            pod(S1, STAY_S2_REGION),
            {"m1": CHINA, "m2": INDIA, "m3": CHINA, "m4": CHINA, "m5": INDIA},
            [
                ("m1", pod(S2)),
                ("m1", pod(S2)),
                ("m2", pod(S2)),
                ("m3", pod(S2)),
                ("m4", pod(S2)),
                ("m5", pod(S2)),
            ],
            [100, 50, 100, 100, 50],
            id="1.20 table: the region with more matching pods scores higher",
        ),
        pytest.param(
            pod(S1, AFFINITY3),
            {"m1": CHINA, "m2": INDIA, "m3": AZ1},
            [("m1", pod(S1)), ("m2", pod(S2)), ("m3", pod(S1))],
            [20, 100, 0],
            id="1.20 table: different operators and values, some match failures",
        ),
        pytest.param(
            pod(S2),
            {"m1": CHINA, "m2": INDIA, "m3": AZ1},
            [("m1", pod(S1, STAY_S1_REGION)), ("m2", pod(S2, STAY_S2_REGION))],
            [0, 100, 0],
            id="1.20 table: symmetry of preferred affinity",
        ),
        pytest.param(
            pod(S1),
            {"m1": CHINA, "m2": INDIA, "m3": AZ1},
            [("m1", pod(S1, HARD)), ("m2", pod(S2, HARD))],
            [100, 100, 0],
            id="1.20 table: symmetry of required affinity (hardPodAffinitySymmetricWeight 1)",
        ),
        pytest.param(
            pod(S1, AWAY_S1_AZ),
            {"m1": AZ1, "m2": CHINA},
            [("m1", pod(S1)), ("m2", pod(S2))],
            [0, 100],
            id="1.20 table: anti-affinity, a node without matching pods scores high",
        ),
        pytest.param(
            pod(S1, AWAY_S1_AZ),
            {"m1": AZ1, "m2": INDIA},
            [("m1", pod(S1)), ("m1", pod(S1)), ("m2", pod(S2))],
            [0, 100],
            id="1.20 table: anti-affinity, more matching pods score lower",
        ),
        pytest.param(
            pod(S2),
            {"m1": AZ1, "m2": AZ2},
            [("m1", pod(S1, AWAY_S2_AZ)), ("m2", pod(S2, AWAY_S1_AZ))],
            [0, 100],
            id="1.20 table: symmetry of preferred anti-affinity",
        ),
        pytest.param(
            pod(S1, STAY_S1_AWAY_S2),
            {"m1": CHINA, "m2": AZ1},
            [("m1", pod(S1)), ("m2", pod(S1))],
            [100, 0],
            id="1.20 table: affinity and anti-affinity together",
        ),
    ],
)
def test_inter_pod_affinity_priority(
    incoming: Pod, nodes: dict[str, dict[str, str]], pods: list[tuple[str, Pod]], expected: list[int]
) -> None:
    snap = cluster(nodes, pods)
    assert run_priority(InterPodAffinityPriority(1), incoming, list(snap.nodes), snap) == expected


@pytest.mark.parametrize(("weight", "expected"), [(1, [100, 100, 0]), (0, [0, 0, 0])])
def test_hard_pod_affinity_symmetric_weight(weight: int, expected: list[int]) -> None:
    """1.20 table (TestPreferredAffinityWithHardPodAffinitySymmetricWeight): 0 turns the symmetry off."""
    hard = affinity(required=[term("service", "In", ["S1"], "region")])
    snap = cluster({"m1": CHINA, "m2": INDIA, "m3": AZ1}, [("m1", pod(None, hard)), ("m2", pod(None, hard))])
    incoming = pod({"service": "S1"})
    assert run_priority(InterPodAffinityPriority(weight), incoming, list(snap.nodes), snap) == expected
