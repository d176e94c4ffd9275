"""The NodeResources plugins (noderesources/): PodFitsResources (fit.go), every shortfall a reason,
pod count included; LeastRequestedPriority and BalancedResourceAllocation (least_allocated.go,
balanced_allocation.go); MostRequestedPriority and RequestedToCapacityRatioPriority
(most_allocated.go, requested_to_capacity_ratio.go); ResourceLimitsPriority (resource_limits.go of
1.19, the last release that had it). Rows marked "1.20 table" are the
cases of the Go unit tests with their expected scores; the others are computed by hand from the
same formulas."""

from __future__ import annotations

from typing import Any

import pytest

from kubesched.model.objects import Node, Pod
from kubesched.plugins.node_resources.balanced_allocation import BalancedResourceAllocation
from kubesched.plugins.node_resources.fit import (
    ERR_REASON_CPU,
    ERR_REASON_EPHEMERAL_STORAGE,
    ERR_REASON_MEMORY,
    ERR_REASON_TOO_MANY_PODS,
    PodFitsResources,
)
from kubesched.plugins.node_resources.least_allocated import LeastRequestedPriority, least_requested_score
from kubesched.plugins.node_resources.most_allocated import MostRequestedPriority
from kubesched.plugins.node_resources.requested_to_capacity_ratio import (
    RequestedToCapacityRatioPriority,
    broken_linear,
)
from kubesched.plugins.node_resources.resource_allocation import scoring_request
from kubesched.plugins.node_resources.resource_limits import ResourceLimitsPriority
from kubesched_dev.fixtures import container, model_node, model_pod, node_info, run_filter, run_priority

NODE = model_node(
    "n", cpu="1", memory="1Gi", pods="3", extra={"ephemeral-storage": "10Gi", "example.com/gpu": "2"}
)


@pytest.mark.parametrize(
    ("name", "pod_kwargs", "existing", "reasons"),
    [
        ("fits exactly", {"cpu": "600m", "memory": "512Mi"}, [{"cpu": "400m", "memory": "512Mi"}], ()),
        ("cpu one milli over", {"cpu": "601m"}, [{"cpu": "400m"}], (ERR_REASON_CPU,)),
        ("memory one byte over", {"memory": str(2**30 - 99)}, [{"memory": "100"}], (ERR_REASON_MEMORY,)),
        (
            "cpu and memory both reported, in fit.go's order",
            {"cpu": "2", "memory": "2Gi"},
            [],
            (ERR_REASON_CPU, ERR_REASON_MEMORY),
        ),
        ("ephemeral storage", {"extra": {"ephemeral-storage": "11Gi"}}, [], (ERR_REASON_EPHEMERAL_STORAGE,)),
        (
            "extended resource fits",
            {"extra": {"example.com/gpu": "1"}},
            [{"extra": {"example.com/gpu": "1"}}],
            (),
        ),
        (
            "extended resource short",
            {"extra": {"example.com/gpu": "1"}},
            [{"extra": {"example.com/gpu": "2"}}],
            ("Insufficient example.com/gpu",),
        ),
        (
            "extended resource the node lacks",
            {"extra": {"example.com/fpga": "1"}},
            [],
            ("Insufficient example.com/fpga",),
        ),
        (
            "hugepages are scalar too",
            {"extra": {"hugepages-2Mi": "2Mi"}},
            [],
            ("Insufficient hugepages-2Mi",),
        ),
        ("pod count: 2 running + 1 fits in 3", {}, [{}, {}], ()),
        ("pod count: 3 running + 1 > 3", {}, [{}, {}, {}], (ERR_REASON_TOO_MANY_PODS,)),
        (
            "too many pods is checked even for a pod requesting nothing, and first",
            {"cpu": "2"},
            [{}, {}, {}],
            (ERR_REASON_TOO_MANY_PODS, ERR_REASON_CPU),
        ),
        # A zero-request pod returns before cpu is compared, even on an overcommitted node.
        ("zero request on an overcommitted node", {}, [{"cpu": "2"}], ()),
    ],
)
def test_fit(name: str, pod_kwargs: dict, existing: list[dict], reasons: tuple[str, ...]) -> None:
    info = node_info(NODE, [model_pod(f"e{i}", **kw) for i, kw in enumerate(existing)])
    assert run_filter(PodFitsResources(), model_pod(**pod_kwargs), info) == reasons


def test_init_containers_count_as_their_maximum_and_overhead_is_added() -> None:
    # containers 300m + 300m = 600m; init 800m wins as the max; overhead +250m -> 1050m > 1000m.
    pod = model_pod(
        containers=[container("300m"), container("300m")],
        init_containers=[container("800m"), container("100m")],
        overhead={"cpu": "250m"},
    )
    assert pod.requests.milli_cpu == 1050
    assert run_filter(PodFitsResources(), pod, node_info(NODE)) == (ERR_REASON_CPU,)
    without_overhead = model_pod(containers=[container("300m")], init_containers=[container("1")])
    assert run_filter(PodFitsResources(), without_overhead, node_info(NODE)) == ()


def test_ignored_extended_resources_and_groups() -> None:
    pod = model_pod(extra={"example.com/gpu": "5", "other.io/x": "1"})
    info = node_info(NODE)
    assert run_filter(PodFitsResources(), pod, info) == (
        "Insufficient example.com/gpu",
        "Insufficient other.io/x",
    )
    ignoring = PodFitsResources(frozenset({"example.com/gpu"}), frozenset({"other.io"}))
    assert run_filter(ignoring, pod, info) == ()


# The Go tests' pods: "cpuOnly" asks 1000m + 2000m with memory explicitly 0 (so no default
# memory is assumed), "cpuAndMemory" 1000m/2000 + 2000m/3000 bytes, "noResources" has no container.
CPU_ONLY: dict[str, Any] = {"containers": [container("1000m", "0"), container("2000m", "0")]}
CPU_AND_MEMORY: dict[str, Any] = {"containers": [container("1000m", "2000"), container("2000m", "3000")]}
BIG_CPU_AND_MEMORY: dict[str, Any] = {"containers": [container("2000m", "4000"), container("3000m", "5000")]}
NO_RESOURCES: dict[str, Any] = {"containers": []}


def machine(name: str, milli_cpu: int, memory: int, extra: dict[str, str] | None = None) -> Node:
    return model_node(name, allocatable={"cpu": f"{milli_cpu}m", "memory": str(memory), **(extra or {})})


def scores(priority: Any, pod: dict[str, Any], nodes: list[tuple[Node, list[dict[str, Any]]]]) -> list[int]:
    infos = [node_info(n, [model_pod(f"e{i}", **p) for i, p in enumerate(pods)]) for n, pods in nodes]
    return run_priority(priority, model_pod(**pod), infos)


CASES = [
    # name, pod, [(node, pods on it)], least requested scores, balanced allocation scores
    (
        "1.20 table: nothing scheduled, nothing requested",
        NO_RESOURCES,
        [(machine("m1", 4000, 10000), []), (machine("m2", 4000, 10000), [])],
        [100, 100],
        [100, 100],
    ),
    (
        # least: cpu (4000-3000)*100/4000 = 25, mem (10000-5000)*100/10000 = 50 -> (25+50)/2 = 37
        # balanced: |0.75 - 0.5| -> 75 ; |0.5 - 0.5| -> 100
        "1.20 table: nothing scheduled, resources requested, differently sized machines",
        CPU_AND_MEMORY,
        [(machine("m1", 4000, 10000), []), (machine("m2", 6000, 10000), [])],
        [37, 50],
        [75, 100],
    ),
    (
        "1.20 table: no resources requested, pods scheduled with resources",
        NO_RESOURCES,
        [
            (machine("m1", 10000, 20000), [CPU_ONLY, CPU_ONLY]),
            (machine("m2", 10000, 20000), [CPU_ONLY, CPU_AND_MEMORY]),
        ],
        [70, 57],
        [40, 65],
    ),
    (
        "1.20 table: resources requested, pods scheduled with resources",
        CPU_AND_MEMORY,
        [(machine("m1", 10000, 20000), [CPU_ONLY]), (machine("m2", 10000, 20000), [CPU_AND_MEMORY])],
        [57, 45],
        [65, 90],
    ),
    (
        "1.20 table: differently sized machines",
        CPU_AND_MEMORY,
        [(machine("m1", 10000, 20000), [CPU_ONLY]), (machine("m2", 10000, 50000), [CPU_AND_MEMORY])],
        [57, 60],
        [65, 60],
    ),
    (
        "1.20 table: requested resources exceed node capacity",
        CPU_ONLY,
        [(machine("m1", 4000, 10000), [CPU_ONLY]), (machine("m2", 4000, 10000), [CPU_AND_MEMORY])],
        [50, 25],
        [0, 0],
    ),
    (
        "1.20 table: zero node resources",
        NO_RESOURCES,
        [(machine("m1", 0, 0), [CPU_ONLY]), (machine("m2", 0, 0), [CPU_AND_MEMORY])],
        [0, 0],
        [0, 0],
    ),
    (
        # A container without requests counts 100m and 200Mi (non-zero defaults):
        # least: cpu (1000-100)*100/1000 = 90, mem (1000Mi-200Mi)*100/1000Mi = 80 -> 85
        # balanced: |0.1 - 0.2| = 0.1 -> int(0.9 * 100) = 90
        "defaults for unset requests",
        {},
        [(model_node("n", allocatable={"cpu": "1", "memory": "1000Mi"}), [])],
        [85],
        [90],
    ),
    (
        # Integer division truncates: cpu (3000-1000)*100/3000 = 66.6 -> 66; mem 2/3 -> 66; (66+66)/2 = 66.
        # balanced: fractions 1/3 and 1/3 -> 100.
        "truncation",
        {"cpu": "1", "memory": "1Gi"},
        [(model_node("n", allocatable={"cpu": "3", "memory": "3Gi"}), [])],
        [66],
        [100],
    ),
    (
        # A node filled exactly: least gives cpu 0, balanced gives 0 because the fraction is >= 1.
        "exactly full cpu",
        {"cpu": "1", "memory": "1Gi"},
        [(model_node("n", allocatable={"cpu": "1", "memory": "4Gi"}), [])],
        [37],  # (0 + 75) // 2
        [0],
    ),
]


@pytest.mark.parametrize(("name", "pod", "nodes", "least", "balanced"), CASES, ids=[c[0] for c in CASES])
def test_scores(
    name: str,
    pod: dict[str, Any],
    nodes: list[tuple[Any, list[dict[str, Any]]]],
    least: list[int],
    balanced: list[int],
) -> None:
    assert scores(LeastRequestedPriority(), pod, nodes) == least
    assert scores(BalancedResourceAllocation(), pod, nodes) == balanced


def test_overhead_cpu_counts_in_whole_cores_when_scoring() -> None:
    # 1.20 adds the overhead's cpu with Quantity.Value(): 250m counts as 1 (millicore), not 250.
    pod: Pod = model_pod(cpu="500m", overhead={"cpu": "250m", "memory": "10Mi"})
    assert pod.non_zero_milli_cpu == 750  # what the node accounts once the pod runs there
    assert scoring_request(pod) == (501, 200 * 2**20 + 10 * 2**20)
    # cpu (4000-501)*100/4000 = 87 (not 81); memory (1000Mi-210Mi)*100/1000Mi = 79 -> (87+79)//2 = 83
    node = model_node("n", allocatable={"cpu": "4", "memory": "1000Mi"})
    assert run_priority(LeastRequestedPriority(), pod, [node_info(node)]) == [83]


@pytest.mark.parametrize(
    ("requested", "capacity", "score"),
    [(0, 0, 0), (1, 0, 0), (0, 10, 100), (5, 10, 50), (1, 3, 66), (2, 3, 33), (10, 10, 0), (11, 10, 0)],
)
def test_least_requested_score(requested: int, capacity: int, score: int) -> None:
    assert least_requested_score(requested, capacity) == score


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
