"""Sidecar containers (restartable init containers, 1.29+) count as kube-scheduler 1.32 counts them:
resource.PodRequests (k8s.io/component-helpers/resource/helpers.go) for the requests, the
non-zero scoring requests and every resource predicate and scorer built on them, and
util.GetHostPorts (pkg/scheduler/util/utils.go) for host ports. Pods without sidecars keep 1.20's
sums (the other unit tests hold them)."""

from __future__ import annotations

import random
from typing import Any

import pytest

from kubesched.algorithm.generic import FitError
from kubesched.algorithm.preemption import preempt
from kubesched.model.objects import HostPort, Pod
from kubesched.model.resources import DEFAULT_MEMORY_REQUEST, DEFAULT_MILLI_CPU_REQUEST
from kubesched.plugins.node_ports.filtering import ERR_REASON_PORTS, PodFitsHostPorts
from kubesched.plugins.node_resources.balanced_allocation import BalancedResourceAllocation
from kubesched.plugins.node_resources.fit import ERR_REASON_CPU, PodFitsResources
from kubesched.plugins.node_resources.least_allocated import LeastRequestedPriority, least_requested_score
from kubesched.plugins.node_resources.resource_allocation import pod_resource_request
from kubesched.policy.compile import compile_policy, default_algorithm
from kubesched.tools.explain import explain
from kubesched_dev.fixtures import (
    container,
    model_node,
    model_pod,
    node_info,
    run_filter,
    run_priority,
    snapshot,
)


def sidecar(cpu: str | None = None, memory: str | None = None, **kwargs: Any) -> dict[str, Any]:
    """A restartable init container."""
    return {**container(cpu, memory, **kwargs), "restartPolicy": "Always"}


def init(cpu: str | None = None, memory: str | None = None, **kwargs: Any) -> dict[str, Any]:
    return container(cpu, memory, **kwargs)


@pytest.mark.parametrize(
    ("containers", "init_containers", "milli_cpu"),
    [
        pytest.param([container("1")], [sidecar("1")], 2000, id="restartable init container"),
        pytest.param(
            [container("1")],
            [init("5"), sidecar("1"), sidecar("2"), sidecar("3")],
            7000,
            id="multiple restartable init containers: max(5, 1 + 1+2+3)",
        ),
        pytest.param(
            [container("1")],
            [init("5"), sidecar("1"), sidecar("2"), init("5"), sidecar("3")],
            8000,
            id="multiple restartable and regular init containers: init-2 needs 5 + 1+2",
        ),
        pytest.param(
            [container("100")],
            [sidecar("10"), init("200")],
            210000,
            id="restartable-init, init and regular: init-1 needs 200 + 10",
        ),
        pytest.param([container("1")], [init("2")], 2000, id="no sidecar: 1.20's maximum"),
    ],
)
def test_pod_requests(containers: list[Any], init_containers: list[Any], milli_cpu: int) -> None:
    """TestPodRequests (component-helpers/resource/helpers_test.go) and TestCalculateResource's
    restartable cases (pkg/scheduler/framework/types_test.go), cpu in cores."""
    pod = model_pod("p", containers=containers, init_containers=init_containers)
    assert pod.requests.milli_cpu == milli_cpu


def test_every_resource_adds_up_and_overhead_comes_on_top() -> None:
    pod = model_pod(
        "p",
        containers=[container("500m", "1Gi", {"ephemeral-storage": "1Gi", "nvidia.com/gpu": "1"})],
        init_containers=[
            sidecar("250m", "256Mi", extra={"ephemeral-storage": "2Gi", "nvidia.com/gpu": "1"}),
            init("2", "128Mi", extra={"nvidia.com/gpu": "1"}),
        ],
        overhead={"cpu": "100m", "memory": "10Mi"},
    )
    # containers + sidecar: 750m, 1.25Gi, 3Gi, 2 gpus; init: 2 + 250m, 384Mi, 2Gi, 2 gpus.
    assert pod.requests.milli_cpu == 2250 + 100
    assert pod.requests.memory == 1280 * 2**20 + 10 * 2**20
    assert pod.requests.ephemeral_storage == 3 * 2**30
    assert pod.requests.scalar == {"nvidia.com/gpu": 2}
    assert pod_resource_request(pod, "nvidia.com/gpu") == 2
    assert pod_resource_request(pod, "ephemeral-storage") == 3 * 2**30


def test_non_zero_requests_default_each_sidecar() -> None:
    """NonMissingContainerRequests: a container or sidecar without cpu or memory requests counts
    100m and 200 MiB when scoring (calculatePodResourceRequest, resource_allocation.go)."""
    pod = model_pod("p", containers=[container()], init_containers=[sidecar(), init("1")])
    # containers + sidecar: 2 defaults; the init container: 1 core + one sidecar default.
    assert pod.non_zero_milli_cpu == 1000 + DEFAULT_MILLI_CPU_REQUEST
    assert pod.non_zero_memory == 2 * DEFAULT_MEMORY_REQUEST
    assert (pod.requests.milli_cpu, pod.requests.memory) == (1000, 0)


def test_pod_fits_resources_counts_the_sidecar() -> None:
    """fit_test.go: a sidecar's request adds to the containers'; 1.20 would have taken the maximum."""
    node = node_info(model_node("n", cpu="2"), [model_pod("e", cpu="500m")])
    fits = model_pod("p", containers=[container("1")], init_containers=[sidecar("500m")])
    too_big = model_pod("q", containers=[container("1")], init_containers=[sidecar("600m")])
    assert run_filter(PodFitsResources(), fits, node) == ()
    assert run_filter(PodFitsResources(), too_big, node) == (ERR_REASON_CPU,)


def test_a_pod_on_a_node_counts_its_sidecars() -> None:
    running = model_pod("e", containers=[container("1")], init_containers=[sidecar("1")])
    node = node_info(model_node("n", cpu="2"), [running])
    assert node.requested.milli_cpu == 2000
    assert run_filter(PodFitsResources(), model_pod("p", cpu="100m"), node) == (ERR_REASON_CPU,)


def test_least_requested_and_balanced_allocation_score_the_sidecar() -> None:
    node = node_info(model_node("n", cpu="4", memory="8Gi"))
    pod = model_pod("p", containers=[container("1", "1Gi")], init_containers=[sidecar("1", "3Gi")])
    cpu, memory = least_requested_score(2000, 4000), least_requested_score(4 * 2**30, 8 * 2**30)
    assert run_priority(LeastRequestedPriority(), pod, [node]) == [(cpu + memory) // 2]
    # cpu and memory both at one half: perfectly balanced.
    assert run_priority(BalancedResourceAllocation(), pod, [node]) == [100]


def test_sidecar_host_ports_are_taken() -> None:
    """GetHostPorts: a sidecar runs for the pod's whole life, so its host ports count, on both
    sides; a regular init container's do not."""
    port = {"containerPort": 80, "hostPort": 8080}
    with_sidecar = model_pod("s", containers=[container()], init_containers=[sidecar(ports=[port])])
    assert with_sidecar.host_ports == (HostPort("0.0.0.0", "TCP", 8080),)
    assert model_pod("i", containers=[container()], init_containers=[init(ports=[port])]).host_ports == ()
    node = node_info(model_node("n"), [with_sidecar])
    assert run_filter(PodFitsHostPorts(), model_pod("p", ports=[port]), node) == (ERR_REASON_PORTS,)


def test_preemption_evicts_enough_for_the_sidecar() -> None:
    """The preemptor's sidecar makes one victim too few: 1.20's maximum would have stopped at one."""
    algorithm = default_algorithm()
    low = [model_pod(f"low-{i}", cpu="1", priority=1) for i in range(4)]
    snap = snapshot(node_info(model_node("n", cpu="4"), low))
    preemptor: Pod = model_pod("p", containers=[container("1")], init_containers=[sidecar("1")], priority=100)
    with pytest.raises(FitError) as caught:
        algorithm.schedule(preemptor, snap, random.Random(0))
    result = preempt(caught.value, snap, algorithm.predicates, (), random.Random(0), "")
    assert result.node_name == "n"
    assert len(result.victims) == 2


def test_explain_reports_the_sidecar_shortfall() -> None:
    policy = compile_policy({"predicates": [{"name": "PodFitsResources"}], "priorities": []})
    cluster = snapshot(model_node("small", cpu="1"), model_node("big", cpu="2"))
    pod = model_pod("p", containers=[container("800m")], init_containers=[sidecar("400m")])
    result = explain(policy, pod, cluster)
    rejected = {r.node: r.reasons for r in result.rejected}
    assert rejected == {"small": (("PodFitsResources", "Insufficient cpu"),)}
    assert result.best == ("big",)
