"""MostRequestedPriority, RequestedToCapacityRatioPriority and ResourceLimitsPriority. Rows marked
"1.20 table" are the cases of noderesources/most_allocated_test.go and
requested_to_capacity_ratio_test.go with their expected scores; ResourceLimitsPriority follows
noderesources/resource_limits_test.go of 1.19, the last release that had it."""

from __future__ import annotations

from typing import Any

import pytest

from kubesched.model.objects import Node
from kubesched.plugins.node_resources.most_allocated import MostRequestedPriority
from kubesched.plugins.node_resources.requested_to_capacity_ratio import (
    RequestedToCapacityRatioPriority,
    broken_linear,
)
from kubesched.plugins.node_resources.resource_limits import ResourceLimitsPriority

from .algofixtures import container, make_node, make_pod, node_info, run_priority

CPU_ONLY: dict[str, Any] = {"containers": [container("1000m", "0"), container("2000m", "0")]}
CPU_AND_MEMORY: dict[str, Any] = {"containers": [container("1000m", "2000"), container("2000m", "3000")]}
BIG_CPU_AND_MEMORY: dict[str, Any] = {"containers": [container("2000m", "4000"), container("3000m", "5000")]}
NO_RESOURCES: dict[str, Any] = {"containers": []}


def machine(name: str, milli_cpu: int, memory: int, extra: dict[str, str] | None = None) -> Node:
    return make_node(name, allocatable={"cpu": f"{milli_cpu}m", "memory": str(memory), **(extra or {})})


def scores(priority: Any, pod: dict[str, Any], nodes: list[tuple[Node, list[dict[str, Any]]]]) -> list[int]:
    infos = [node_info(n, [make_pod(f"e{i}", **p) for i, p in enumerate(pods)]) for n, pods in nodes]
    return run_priority(priority, make_pod(**pod), infos)


@pytest.mark.parametrize(
    ("pod", "nodes", "expected"),
    [
        pytest.param(
            NO_RESOURCES,
            [(machine("m1", 4000, 10000), []), (machine("m2", 4000, 10000), [])],
            [0, 0],
            id="1.20 table: nothing scheduled, nothing requested",
        ),
        pytest.param(
            CPU_AND_MEMORY,
            [(machine("m1", 4000, 10000), []), (machine("m2", 6000, 10000), [])],
            [62, 50],
            id="1.20 table: nothing scheduled, resources requested, differently sized machines",
        ),
        pytest.param(
            NO_RESOURCES,
            [
                (machine("m1", 10000, 20000), [CPU_ONLY, CPU_ONLY]),
                (machine("m2", 10000, 20000), [CPU_ONLY, CPU_AND_MEMORY]),
            ],
            [30, 42],
            id="1.20 table: no resources requested, pods scheduled with resources",
        ),
        pytest.param(
            CPU_AND_MEMORY,
            [(machine("m1", 10000, 20000), [CPU_ONLY]), (machine("m2", 10000, 20000), [CPU_AND_MEMORY])],
            [42, 55],
            id="1.20 table: resources requested, pods scheduled with resources",
        ),
        pytest.param(
            BIG_CPU_AND_MEMORY,
            [(machine("m1", 4000, 10000), []), (machine("m2", 10000, 8000), [])],
            [45, 25],
            id="1.20 table: resources requested with more than the node",
        ),
    ],
)
def test_most_requested(pod: dict[str, Any], nodes: list[Any], expected: list[int]) -> None:
    """noderesources/most_allocated.go, cpu and memory weighted 1 each (the legacy priority)."""
    assert scores(MostRequestedPriority(), pod, nodes) == expected


def pod_with(cpu: int, memory: int) -> dict[str, Any]:
    return {"containers": [container(f"{cpu}m", str(memory))]}


LEAST_REQUESTED_SHAPE = RequestedToCapacityRatioPriority(((0, 100), (100, 0)), (("memory", 1), ("cpu", 1)))


@pytest.mark.parametrize(
    ("pod", "nodes", "expected"),
    [
        pytest.param(
            pod_with(0, 0),
            [(machine("n1", 4000, 10000), [pod_with(0, 0)]), (machine("n2", 4000, 10000), [pod_with(0, 0)])],
            [100, 100],
            id="1.20 table: nothing scheduled, nothing requested",
        ),
        pytest.param(
            pod_with(3000, 5000),
            [(machine("n1", 4000, 10000), [pod_with(0, 0)]), (machine("n2", 6000, 10000), [pod_with(0, 0)])],
            [38, 50],
            id="1.20 table: nothing scheduled, resources requested, differently sized machines",
        ),
        pytest.param(
            pod_with(0, 0),
            [
                (machine("n1", 4000, 10000), [pod_with(3000, 5000)]),
                (machine("n2", 6000, 10000), [pod_with(3000, 5000)]),
            ],
            [38, 50],
            id="1.20 table: no resources requested, pods scheduled with resources",
        ),
    ],
)
def test_requested_to_capacity_ratio_least_requested_shape(
    pod: dict[str, Any], nodes: list[Any], expected: list[int]
) -> None:
    """noderesources/requested_to_capacity_ratio.go, TestRequestedToCapacityRatio's shape 0->10, 100->0."""
    assert scores(LEAST_REQUESTED_SHAPE, pod, nodes) == expected


FOO = "intel.com/foo"


def foo_pod(amount: str) -> dict[str, Any]:
    return {"containers": [container(extra={FOO: amount})]}


@pytest.mark.parametrize(
    ("pod", "nodes", "expected"),
    [
        pytest.param(
            NO_RESOURCES,
            [
                (machine("m1", 4000, 10000 << 20, {FOO: "8"}), []),
                (machine("m2", 4000, 10000 << 20, {FOO: "4"}), []),
            ],
            [0, 0],
            id="1.20 table: nothing scheduled, nothing requested",
        ),
        pytest.param(
            foo_pod("2"),
            [
                (machine("m1", 4000, 10000 << 20, {FOO: "8"}), []),
                (machine("m2", 4000, 10000 << 20, {FOO: "4"}), []),
            ],
            [2, 5],
            id="1.20 table: resources requested, pods scheduled with less resources",
        ),
        pytest.param(
            foo_pod("2"),
            [
                (machine("m1", 4000, 10000 << 20, {FOO: "8"}), []),
                (machine("m2", 4000, 10000 << 20, {FOO: "4"}), [foo_pod("2")]),
            ],
            [2, 10],
            id="1.20 table: resources requested, on node with existing pod running",
        ),
        pytest.param(
            foo_pod("4"),
            [
                (machine("m1", 4000, 10000 << 20, {FOO: "8"}), []),
                (machine("m2", 4000, 10000 << 20, {FOO: "4"}), []),
            ],
            [5, 10],
            id="1.20 table: resources requested, pods scheduled with more resources",
        ),
    ],
)
def test_requested_to_capacity_ratio_bin_packing_extended_resource(
    pod: dict[str, Any], nodes: list[Any], expected: list[int]
) -> None:
    """TestResourceBinPackingSingleExtended: shape 0->0, 100->1 on intel.com/foo alone."""
    priority = RequestedToCapacityRatioPriority(((0, 0), (100, 10)), ((FOO, 1),))
    assert scores(priority, pod, nodes) == expected


@pytest.mark.parametrize(
    ("points", "assertions"),
    [
        (
            ((10, 1), (90, 9)),
            [
                (-10, 1),
                (0, 1),
                (9, 1),
                (10, 1),
                (15, 1),
                (19, 1),
                (20, 2),
                (89, 8),
                (90, 9),
                (99, 9),
                (100, 9),
                (110, 9),
            ],
        ),
        (
            ((0, 2), (40, 10), (100, 0)),
            [(-10, 2), (0, 2), (20, 6), (30, 8), (40, 10), (70, 5), (100, 0), (110, 0)],
        ),
    ],
)
def test_broken_linear_function(
    points: tuple[tuple[int, int], ...], assertions: list[tuple[int, int]]
) -> None:
    """TestBrokenLinearFunction (Go's integer division truncates toward zero on the falling segment)."""
    for p, expected in assertions:
        assert broken_linear(points, p) == expected, p


def test_requested_to_capacity_ratio_argument_defaults_to_cpu_and_memory() -> None:
    priority = RequestedToCapacityRatioPriority.from_argument(
        {"shape": [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}]}
    )
    assert priority.resources == (("cpu", 1), ("memory", 1))
    assert priority.shape == ((0, 0), (100, 100))  # scores scaled from 0..10 to 0..100


def limits(cpu: str | None = None, memory: str | None = None) -> dict[str, Any]:
    amounts = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    return {"name": "c", "image": "i", "resources": {"limits": amounts}}


@pytest.mark.parametrize(
    ("containers", "node", "expected"),
    [
        ([limits()], machine("a", 4000, 10000), 0),  # no limits: nothing to fit
        ([limits(cpu="1")], machine("a", 4000, 10000), 1),
        ([limits(cpu="5")], machine("a", 4000, 10000), 0),
        ([limits(cpu="5", memory="10000")], machine("a", 4000, 10000), 1),  # memory alone is enough
        ([limits(cpu="3"), limits(cpu="2")], machine("a", 4000, 10000), 0),  # summed: 5 cores
        ([limits(cpu="1")], machine("zero", 0, 0), 0),  # a node publishing nothing
    ],
)
def test_resource_limits(containers: list[dict[str, Any]], node: Node, expected: int) -> None:
    """noderesources/resource_limits.go (1.19): 1 when the cpu or the memory limit fits allocatable."""
    assert scores(ResourceLimitsPriority(), {"containers": containers}, [(node, [])]) == [expected]


def test_resource_limits_init_container_takes_over_when_larger() -> None:
    spec = {"containers": [limits(cpu="1")], "initContainers": [limits(cpu="8")]}
    assert scores(ResourceLimitsPriority(), spec, [(machine("a", 4000, 10000), [])]) == [0]
