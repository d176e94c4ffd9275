"""NodePreferAvoidPodsPriority (nodepreferavoidpods/node_prefer_avoid_pods.go). Rows marked
"1.20 table" are cases of the 1.20 Go tests with their expected scores."""

from __future__ import annotations

import json
from typing import Any

import pytest

from kubesched.model.objects import pod_from_dict
from kubesched.plugins.node_prefer_avoid_pods.scoring import (
    PREFER_AVOID_PODS_ANNOTATION,
    NodePreferAvoidPodsPriority,
)
from kubesched_dev.fixtures import model_node, node_info, run_priority


def avoid(kind: str, uid: str) -> dict[str, str]:
    signature = {
        "podController": {"apiVersion": "v1", "kind": kind, "name": "foo", "uid": uid, "controller": True}
    }
    value = {
        "preferAvoidPods": [{"podSignature": signature, "reason": "some reason", "message": "some message"}]
    }
    return {PREFER_AVOID_PODS_ANNOTATION: json.dumps(value)}


AVOIDING = [
    node_info(model_node("machine1", annotations=avoid("ReplicationController", "abcdef123456"))),
    node_info(model_node("machine2", annotations=avoid("ReplicaSet", "qwert12345"))),
    node_info(model_node("machine3")),
    node_info(model_node("machine4", annotations={PREFER_AVOID_PODS_ANNOTATION: "not json"})),
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
