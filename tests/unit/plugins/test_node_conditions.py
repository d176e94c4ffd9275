"""CheckNodeCondition and the pressure predicates (1.16's algorithm/predicates/predicates.go)."""

from __future__ import annotations

from typing import Any

import pytest

from kubesched.plugins.node_conditions.filtering import (
    ERR_REASON_DISK_PRESSURE,
    ERR_REASON_MEMORY_PRESSURE,
    ERR_REASON_NETWORK_UNAVAILABLE,
    ERR_REASON_NOT_READY,
    ERR_REASON_PID_PRESSURE,
    CheckNodeCondition,
    CheckNodeDiskPressure,
    CheckNodeMemoryPressure,
    CheckNodePIDPressure,
)
from kubesched.plugins.node_unschedulable.filtering import ERR_REASON_UNSCHEDULABLE
from kubesched_dev.fixtures import container, model_node, model_pod, node_info, run_filter


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
    info = node_info(model_node("n", conditions=conditions, unschedulable=unschedulable))
    assert run_filter(CheckNodeCondition(), model_pod(), info) == expected


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
    info = node_info(model_node("n", conditions={"MemoryPressure": pressure}))
    expected = () if fits else (ERR_REASON_MEMORY_PRESSURE,)
    assert run_filter(CheckNodeMemoryPressure(), model_pod(**spec), info) == expected


@pytest.mark.parametrize(
    ("predicate", "condition", "reason"),
    [
        (CheckNodeDiskPressure(), "DiskPressure", ERR_REASON_DISK_PRESSURE),
        (CheckNodePIDPressure(), "PIDPressure", ERR_REASON_PID_PRESSURE),
    ],
)
def test_disk_and_pid_pressure_keep_every_pod_off(predicate: Any, condition: str, reason: str) -> None:
    """CheckNodeDiskPressurePredicate, CheckNodePIDPressurePredicate (1.16)."""
    pressed = node_info(model_node("n", conditions={condition: "True"}))
    relieved = node_info(model_node("n", conditions={condition: "False"}))
    for spec in (BEST_EFFORT, BURSTABLE):
        assert run_filter(predicate, model_pod(**spec), pressed) == (reason,)
        assert run_filter(predicate, model_pod(**spec), relieved) == ()
