"""Several `kubesched run` replicas against the real API server: marked `integration`, nodes cleaned up."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from pathlib import Path

import pytest
import pytest_asyncio
from kubernetes_asyncio.client import ApiClient

from kubesched.kube.client import request
from kubesched_dev.devcluster import LocalControlPlane
from kubesched_dev.fixtures import install_crds

from ..integration.kubesched_process import KubeschedProcess
from .replicas import LEASE_NAMESPACE, SEED_POLICY, LeaseHistory, Replica, free_port

HERE = Path(__file__).parent
CRDS = HERE.parents[1] / "crds"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # This hook sees the items of the whole session, not only of this folder.
    for item in items:
        if item.path.is_relative_to(HERE):
            item.add_marker(pytest.mark.integration)


@pytest.fixture(autouse=True)
def _nodes_deleted_after_each_test(clean_nodes: None) -> Iterator[None]:
    yield


@pytest_asyncio.fixture(scope="session", loop_scope="session", autouse=True)
async def _crds_installed(api: ApiClient) -> list[str]:
    """The CRDs in crds/, as a cluster would have them (PodGroups: the gang failover test)."""
    return await install_crds(api, CRDS)


@pytest.fixture
def start_replicas(
    control_plane: LocalControlPlane, tmp_path: Path
) -> Iterator[Callable[..., list[Replica]]]:
    started: list[Replica] = []

    def start(count: int, scheduler_name: str, args: Sequence[str]) -> list[Replica]:
        group = []
        for i in range(count):
            port = free_port()
            proc = KubeschedProcess(
                control_plane.kubeconfig,
                scheduler_name,
                tmp_path,
                ["--policy-config-file", str(SEED_POLICY), *args, "--metrics-port", str(port)],
                name=f"{scheduler_name}-r{len(started) + i}",  # unique: a replacement is a new identity
            )
            group.append(Replica(proc.start(), port))
        started.extend(group)
        return group

    yield start
    for replica in started:  # all at once, then wait for each
        if replica.proc.alive and replica.proc.proc is not None:
            replica.proc.proc.send_signal(signal.SIGTERM)
    for replica in started:
        replica.proc.stop()


@pytest_asyncio.fixture
async def lease_history(api: ApiClient, scheduler_name: str) -> AsyncIterator[LeaseHistory]:
    history = LeaseHistory(api, scheduler_name)
    task = asyncio.create_task(history.poll())
    yield history
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    await request(
        api, "DELETE", f"/apis/coordination.k8s.io/v1/namespaces/{LEASE_NAMESPACE}/leases/{scheduler_name}"
    )


@pytest.fixture
def scheduler_name(namespace: str) -> str:
    """The scheduler name of this test, which is also its Lease's name."""
    return f"ks-{namespace}"
