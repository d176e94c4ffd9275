"""LeastRequestedPriority and BalancedResourceAllocation (noderesources least_allocated.go,
balanced_allocation.go). Rows marked "1.20 table" are the cases of the Go unit tests with their
expected scores; the others are computed by hand from the same formulas."""

from __future__ import annotations

from typing import Any

import pytest

from kubesched.model.objects import Pod
from kubesched.plugins.node_resources.balanced_allocation import BalancedResourceAllocation
from kubesched.plugins.node_resources.least_allocated import LeastRequestedPriority, least_requested_score
from kubesched.plugins.node_resources.resource_allocation import scoring_request

from .algofixtures import container, make_node, make_pod, node_info, run_priority

# The Go tests' pods: "cpuOnly" asks 1000m + 2000m with memory explicitly 0 (so no default
# memory is assumed), "cpuAndMemory" 1000m/2000 + 2000m/3000 bytes, "noResources" has no container.
CPU_ONLY: dict[str, Any] = {"containers": [container("1000m", "0"), container("2000m", "0")]}
CPU_AND_MEMORY: dict[str, Any] = {"containers": [container("1000m", "2000"), container("2000m", "3000")]}
NO_RESOURCES: dict[str, Any] = {"containers": []}


def machine(name: str, milli_cpu: int, memory: int) -> Any:
    return make_node(name, allocatable={"cpu": f"{milli_cpu}m", "memory": str(memory)})


def scores(priority: Any, pod: dict[str, Any], nodes: list[tuple[Any, list[dict[str, Any]]]]) -> list[int]:
    infos = [node_info(n, [make_pod(f"e{i}", **p) for i, p in enumerate(pods)]) for n, pods in nodes]
    return run_priority(priority, make_pod(**pod), infos)


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
        [(make_node("n", allocatable={"cpu": "1", "memory": "1000Mi"}), [])],
        [85],
        [90],
    ),
    (
        # Integer division truncates: cpu (3000-1000)*100/3000 = 66.6 -> 66; mem 2/3 -> 66; (66+66)/2 = 66.
        # balanced: fractions 1/3 and 1/3 -> 100.
        "truncation",
        {"cpu": "1", "memory": "1Gi"},
        [(make_node("n", allocatable={"cpu": "3", "memory": "3Gi"}), [])],
        [66],
        [100],
    ),
    (
        # A node filled exactly: least gives cpu 0, balanced gives 0 because the fraction is >= 1.
        "exactly full cpu",
        {"cpu": "1", "memory": "1Gi"},
        [(make_node("n", allocatable={"cpu": "1", "memory": "4Gi"}), [])],
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
    pod: Pod = make_pod(cpu="500m", overhead={"cpu": "250m", "memory": "10Mi"})
    assert pod.non_zero_milli_cpu == 750  # what the node accounts once the pod runs there
    assert scoring_request(pod) == (501, 200 * 2**20 + 10 * 2**20)
    # cpu (4000-501)*100/4000 = 87 (not 81); memory (1000Mi-210Mi)*100/1000Mi = 79 -> (87+79)//2 = 83
    node = make_node("n", allocatable={"cpu": "4", "memory": "1000Mi"})
    assert run_priority(LeastRequestedPriority(), pod, [node_info(node)]) == [83]


@pytest.mark.parametrize(
    ("requested", "capacity", "score"),
    [(0, 0, 0), (1, 0, 0), (0, 10, 100), (5, 10, 50), (1, 3, 66), (2, 3, 33), (10, 10, 0), (11, 10, 0)],
)
def test_least_requested_score(requested: int, capacity: int, score: int) -> None:
    assert least_requested_score(requested, capacity) == score
