"""Node-local predicates and priorities: CheckNodeCondition and the pressure predicates (1.16's
algorithm/predicates/predicates.go), PodToleratesNodeNoExecuteTaints (1.17's predicates.go),
TaintTolerationPriority (tainttoleration/taint_toleration.go), NodeAffinityPriority
(nodeaffinity/node_affinity.go), ImageLocalityPriority (imagelocality/image_locality.go) and
NodePreferAvoidPodsPriority (nodepreferavoidpods/node_prefer_avoid_pods.go). Rows marked
"1.20 table" are cases of the 1.20 Go tests with their expected scores."""

from __future__ import annotations

import json
from typing import Any

import pytest

from kubesched.model.nodeinfo import NodeInfo
from kubesched.model.objects import node_from_dict, pod_from_dict
from kubesched.plugins.image_locality.scoring import ImageLocalityPriority, normalized_image_name
from kubesched.plugins.node_affinity.scoring import NodeAffinityPriority
from kubesched.plugins.node_conditions.filtering import (
    ERR_REASON_DISK_PRESSURE,
    ERR_REASON_MEMORY_PRESSURE,
    ERR_REASON_NETWORK_UNAVAILABLE,
    ERR_REASON_NOT_READY,
    ERR_REASON_PID_PRESSURE,
    ERR_REASON_UNSCHEDULABLE,
    CheckNodeCondition,
    CheckNodeDiskPressure,
    CheckNodeMemoryPressure,
    CheckNodePIDPressure,
)
from kubesched.plugins.node_prefer_avoid_pods.scoring import (
    PREFER_AVOID_PODS_ANNOTATION,
    NodePreferAvoidPodsPriority,
)
from kubesched.plugins.taint_toleration.filtering import (
    ERR_REASON_NOT_MATCH_1_17,
    PodToleratesNodeNoExecuteTaints,
)
from kubesched.plugins.taint_toleration.scoring import TaintTolerationPriority

from .algofixtures import container, make_node, make_pod, node_info, run_filter, run_priority

MB = 1024 * 1024


def node_with(
    name: str = "n",
    conditions: dict[str, str] | None = None,
    unschedulable: bool = False,
    images: list[tuple[list[str], int]] | None = None,
    annotations: dict[str, str] | None = None,
) -> NodeInfo:
    status: dict[str, Any] = {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}
    if conditions is not None:
        status["conditions"] = [{"type": k, "status": v} for k, v in conditions.items()]
    if images is not None:
        status["images"] = [{"names": names, "sizeBytes": size} for names, size in images]
    return NodeInfo(
        node_from_dict(
            {
                "metadata": {"name": name, "annotations": annotations or {}},
                "spec": {"unschedulable": unschedulable},
                "status": status,
            }
        )
    )


@pytest.mark.parametrize(
    ("conditions", "unschedulable", "expected"),
    [
        ({"Ready": "True"}, False, ()),
        ({}, False, ()),  # a node reporting no condition is not held back
        ({"Ready": "False"}, False, (ERR_REASON_NOT_READY,)),
        ({"Ready": "Unknown"}, False, (ERR_REASON_NOT_READY,)),
        ({"Ready": "True", "NetworkUnavailable": "True"}, False, (ERR_REASON_NETWORK_UNAVAILABLE,)),
        ({"Ready": "True", "NetworkUnavailable": "False"}, False, ()),
        ({"Ready": "True"}, True, (ERR_REASON_UNSCHEDULABLE,)),
        (
            {"Ready": "False", "NetworkUnavailable": "Unknown"},
            True,
            (ERR_REASON_NOT_READY, ERR_REASON_NETWORK_UNAVAILABLE, ERR_REASON_UNSCHEDULABLE),
        ),
    ],
)
def test_check_node_condition(
    conditions: dict[str, str], unschedulable: bool, expected: tuple[str, ...]
) -> None:
    """CheckNodeConditionPredicate (1.16): every reason found is returned."""
    info = node_with(conditions=conditions, unschedulable=unschedulable)
    assert run_filter(CheckNodeCondition(), make_pod(), info) == expected


BEST_EFFORT: dict[str, Any] = {"containers": [{"name": "c", "image": "i"}]}
BURSTABLE: dict[str, Any] = {"containers": [container(cpu="100m")]}
LIMITS_ONLY: dict[str, Any] = {
    "containers": [{"name": "c", "image": "i", "resources": {"limits": {"memory": "1Gi"}}}]
}
ZERO_REQUESTS: dict[str, Any] = {"containers": [container(cpu="0", memory="0")]}
INIT_REQUESTS: dict[str, Any] = {"containers": [{"name": "c"}], "initContainers": [container(memory="1Mi")]}


@pytest.mark.parametrize(
    ("spec", "pressure", "fits"),
    [
        (BEST_EFFORT, "True", False),
        (BEST_EFFORT, "False", True),
        (BURSTABLE, "True", True),  # only best-effort pods are kept off
        (LIMITS_ONLY, "True", True),
        (ZERO_REQUESTS, "True", False),  # zero quantities leave a pod best-effort
        (INIT_REQUESTS, "True", True),
    ],
)
def test_check_node_memory_pressure(spec: dict[str, Any], pressure: str, fits: bool) -> None:
    """CheckNodeMemoryPressurePredicate (1.16)."""
    info = node_with(conditions={"MemoryPressure": pressure})
    expected = () if fits else (ERR_REASON_MEMORY_PRESSURE,)
    assert run_filter(CheckNodeMemoryPressure(), make_pod(**spec), info) == expected


@pytest.mark.parametrize(
    ("predicate", "condition", "reason"),
    [
        (CheckNodeDiskPressure(), "DiskPressure", ERR_REASON_DISK_PRESSURE),
        (CheckNodePIDPressure(), "PIDPressure", ERR_REASON_PID_PRESSURE),
    ],
)
def test_disk_and_pid_pressure_keep_every_pod_off(predicate: Any, condition: str, reason: str) -> None:
    """CheckNodeDiskPressurePredicate, CheckNodePIDPressurePredicate (1.16)."""
    for spec in (BEST_EFFORT, BURSTABLE):
        assert run_filter(predicate, make_pod(**spec), node_with(conditions={condition: "True"})) == (reason,)
        assert run_filter(predicate, make_pod(**spec), node_with(conditions={condition: "False"})) == ()


@pytest.mark.parametrize(
    ("taints", "tolerations", "fits"),
    [
        ([{"key": "k", "value": "v", "effect": "NoSchedule"}], [], True),  # not this predicate's business
        ([{"key": "k", "value": "v", "effect": "NoExecute"}], [], False),
        ([{"key": "k", "value": "v", "effect": "NoExecute"}], [{"key": "k", "operator": "Exists"}], True),
        (
            [{"key": "k", "value": "v", "effect": "NoExecute"}],
            [{"key": "k", "value": "v", "effect": "NoSchedule"}],
            False,
        ),
    ],
)
def test_pod_tolerates_node_no_execute_taints(taints: list[Any], tolerations: list[Any], fits: bool) -> None:
    """PodToleratesNodeNoExecuteTaints (1.17): only NoExecute taints, 1.17's reason."""
    info = node_info(make_node("n", taints=taints))
    expected = () if fits else (ERR_REASON_NOT_MATCH_1_17,)
    assert run_filter(PodToleratesNodeNoExecuteTaints(), make_pod(tolerations=tolerations), info) == expected


def soft(key: str, value: str) -> dict[str, str]:
    return {"key": key, "value": value, "effect": "PreferNoSchedule"}


def tolerate(key: str, value: str, effect: str = "PreferNoSchedule") -> dict[str, str]:
    return {"key": key, "operator": "Equal", "value": value, "effect": effect}


@pytest.mark.parametrize(
    ("tolerations", "taints", "expected"),
    [
        pytest.param(
            [tolerate("foo", "bar")],
            [[soft("foo", "bar")], [soft("foo", "blah")]],
            [100, 0],
            id="1.20 table: tolerated taints score higher than intolerable ones",
        ),
        pytest.param(
            [tolerate("cpu-type", "arm64"), tolerate("disk-type", "ssd")],
            [[], [soft("cpu-type", "arm64")], [soft("cpu-type", "arm64"), soft("disk-type", "ssd")]],
            [100, 100, 100],
            id="1.20 table: all taints tolerated, same score whatever their number",
        ),
        pytest.param(
            [tolerate("foo", "bar")],
            [[], [soft("cpu-type", "arm64")], [soft("cpu-type", "arm64"), soft("disk-type", "ssd")]],
            [100, 50, 0],
            id="1.20 table: the more intolerable taints, the lower the score",
        ),
        pytest.param(
            [tolerate("cpu-type", "arm64", "NoSchedule"), tolerate("disk-type", "ssd", "NoSchedule")],
            [[], [{"key": "cpu-type", "value": "arm64", "effect": "NoSchedule"}], [soft("disk-type", "ssd")]],
            [100, 100, 0],
            id="1.20 table: only PreferNoSchedule taints and tolerations count",
        ),
        pytest.param([], [[], [soft("cpu-type", "arm64")]], [100, 0], id="1.20 table: no tolerations"),
    ],
)
def test_taint_toleration_priority(tolerations: list[Any], taints: list[Any], expected: list[int]) -> None:
    infos = [node_info(make_node(f"n{i}", taints=t)) for i, t in enumerate(taints)]
    assert run_priority(TaintTolerationPriority(), make_pod(tolerations=tolerations), infos) == expected


def preferred(weight: int, key: str, values: list[str]) -> dict[str, Any]:
    return {
        "weight": weight,
        "preference": {"matchExpressions": [{"key": key, "operator": "In", "values": values}]},
    }


ALL_THREE = {
    "weight": 5,
    "preference": {
        "matchExpressions": [
            {"key": "foo", "operator": "In", "values": ["bar"]},
            {"key": "key", "operator": "In", "values": ["value"]},
            {"key": "az", "operator": "In", "values": ["az1"]},
        ]
    },
}


@pytest.mark.parametrize(
    ("terms", "labels", "expected"),
    [
        pytest.param([], [{"foo": "bar"}, {"key": "value"}], [0, 0], id="1.20 table: no preferences"),
        pytest.param(
            [preferred(2, "foo", ["bar"])],
            [{"foo": "bar"}, {"key": "value"}, {"az": "az1"}],
            [100, 0, 0],
            id="1.20 table: only one node matches",
        ),
        pytest.param(
            [preferred(2, "foo", ["bar"]), preferred(4, "key", ["value"]), ALL_THREE],
            [{"foo": "bar"}, {"foo": "bar", "key": "value", "az": "az1"}, {"key": "value"}],
            [18, 100, 36],
            id="1.20 table: all machines match the preferences but with different priorities",
        ),
        pytest.param(
            [{**preferred(1, "foo", ["bar"]), "weight": 0}], [{"foo": "bar"}], [0], id="weight 0 ignored"
        ),
    ],
)
def test_node_affinity_priority(terms: list[Any], labels: list[dict[str, str]], expected: list[int]) -> None:
    affinity = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": terms}}
    infos = [node_info(make_node(f"n{i}", labels=node_labels)) for i, node_labels in enumerate(labels)]
    assert run_priority(NodeAffinityPriority(), make_pod(affinity=affinity), infos) == expected


def images_pod(*images: str) -> dict[str, Any]:
    return {"containers": [{"name": f"c{i}", "image": image} for i, image in enumerate(images)]}


NODE_40_300_2000 = [
    (["gcr.io/40:latest", "gcr.io/40:v1", "gcr.io/40:v1"], 40 * MB),
    (["gcr.io/300:latest", "gcr.io/300:v1"], 300 * MB),
    (["gcr.io/2000:latest"], 2000 * MB),
]
NODE_250_10 = [(["gcr.io/250:latest"], 250 * MB), (["gcr.io/10:latest", "gcr.io/10:v1"], 10 * MB)]
NODE_600_40_900 = [
    (["gcr.io/600:latest"], 600 * MB),
    (["gcr.io/40:latest"], 40 * MB),
    (["gcr.io/900:latest"], 900 * MB),
]
NODE_300_600_900 = [
    (["gcr.io/300:latest"], 300 * MB),
    (["gcr.io/600:latest"], 600 * MB),
    (["gcr.io/900:latest"], 900 * MB),
]
NODE_4000_30 = [(["gcr.io/4000:latest"], 4000 * MB), (["gcr.io/30:latest"], 30 * MB)]
NODE_20_30_40 = [
    (["gcr.io/20:latest"], 20 * MB),
    (["gcr.io/30:latest"], 30 * MB),
    (["gcr.io/40:latest"], 40 * MB),
]


@pytest.mark.parametrize(
    ("spec", "nodes", "expected"),
    [
        pytest.param(
            images_pod("gcr.io/40", "gcr.io/250"),
            [NODE_40_300_2000, NODE_250_10],
            [0, 5],
            id="1.20 table: two images spread on two nodes, prefer the larger image one",
        ),
        pytest.param(
            images_pod("gcr.io/40", "gcr.io/300"),
            [NODE_40_300_2000, NODE_250_10],
            [7, 0],
            id="1.20 table: two images on one node, prefer this node",
        ),
        pytest.param(
            images_pod("gcr.io/10", "gcr.io/4000"),
            [NODE_4000_30, NODE_250_10],
            [100, 0],
            id="1.20 table: if exceed limit, use limit",
        ),
        pytest.param(
            images_pod("gcr.io/10", "gcr.io/4000"),
            [NODE_4000_30, NODE_250_10, []],
            [66, 0, 0],
            id="1.20 table: if exceed limit, use limit (with node which has no images present)",
        ),
        pytest.param(
            images_pod("gcr.io/300", "gcr.io/600", "gcr.io/900"),
            [NODE_600_40_900, NODE_300_600_900, []],
            [32, 36, 0],
            id="1.20 table: pod with multiple large images, machine2 is preferred",
        ),
        pytest.param(
            images_pod("gcr.io/30", "gcr.io/40"),
            [NODE_20_30_40, NODE_4000_30],
            [1, 0],
            id="1.20 table: pod with multiple small images",
        ),
    ],
)
def test_image_locality(spec: dict[str, Any], nodes: list[Any], expected: list[int]) -> None:
    infos = [node_with(f"machine{i}", images=images) for i, images in enumerate(nodes)]
    assert run_priority(ImageLocalityPriority(), make_pod(**spec), infos) == expected


@pytest.mark.parametrize(
    ("name", "normalized"),
    [
        ("root", "root:latest"),
        ("gcr.io:5000/root", "gcr.io:5000/root:latest"),
        ("root:tag", "root:tag"),
        ("root@sha256:abc", "root@sha256:abc"),
    ],
)
def test_normalized_image_name(name: str, normalized: str) -> None:
    """TestNormalizedImageName."""
    assert normalized_image_name(name) == normalized


def avoid(kind: str, uid: str) -> dict[str, str]:
    signature = {
        "podController": {"apiVersion": "v1", "kind": kind, "name": "foo", "uid": uid, "controller": True}
    }
    value = {
        "preferAvoidPods": [{"podSignature": signature, "reason": "some reason", "message": "some message"}]
    }
    return {PREFER_AVOID_PODS_ANNOTATION: json.dumps(value)}


AVOIDING = [
    node_with("machine1", annotations=avoid("ReplicationController", "abcdef123456")),
    node_with("machine2", annotations=avoid("ReplicaSet", "qwert12345")),
    node_with("machine3"),
    node_with("machine4", annotations={PREFER_AVOID_PODS_ANNOTATION: "not json"}),
]


def owned_pod(kind: str, uid: str, controller: bool | None = True) -> Any:
    owner: dict[str, Any] = {"kind": kind, "name": "foo", "uid": uid}
    if controller is not None:
        owner["controller"] = controller
    return pod_from_dict({"metadata": {"name": "p", "uid": "u", "ownerReferences": [owner]}, "spec": {}})


@pytest.mark.parametrize(
    ("pod", "expected"),
    [
        pytest.param(
            owned_pod("ReplicationController", "abcdef123456"),
            [0, 100, 100, 100],
            id="1.20 table: pod managed by ReplicationController avoids a node",
        ),
        pytest.param(
            owned_pod("RandomController", "abcdef123456"),
            [100, 100, 100, 100],
            id="1.20 table: ownership by random controller should be ignored",
        ),
        pytest.param(
            owned_pod("ReplicationController", "abcdef123456", None),
            [100, 100, 100, 100],
            id="1.20 table: owner without Controller field set should be ignored",
        ),
        pytest.param(
            owned_pod("ReplicaSet", "qwert12345"),
            [100, 0, 100, 100],
            id="1.20 table: pod managed by ReplicaSet avoids a node",
        ),
    ],
)
def test_node_prefer_avoid_pods(pod: Any, expected: list[int]) -> None:
    assert run_priority(NodePreferAvoidPodsPriority(), pod, AVOIDING) == expected
