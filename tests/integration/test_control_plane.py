"""The local control plane is a real, secured kube-apiserver: what the scheduler's tests rely on."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio.client import (
    ApiClient,
    ApiException,
    CoreV1Api,
    RbacAuthorizationV1Api,
    RbacV1Subject,
    V1ClusterRole,
    V1ClusterRoleBinding,
    V1ObjectMeta,
    V1PolicyRule,
    V1RoleRef,
    V1ServiceAccount,
)

from kubesched_dev.devcluster import LocalControlPlane
from kubesched_dev.devcluster.__main__ import main as devcluster_main
from kubesched_dev.devcluster.demo import NAMESPACE as DEMO_NAMESPACE
from kubesched_dev.devcluster.demo import ZONE_LABEL, create_demo
from kubesched_dev.fixtures import (
    create_nodes,
    create_pods,
    delete_namespace,
    make_node,
    make_pod,
    new_token_client,
    post_object,
    priority_class_name,
    service_account_token,
    wait_for,
)


async def test_lists_the_namespaces_the_api_server_bootstraps(api: ApiClient) -> None:
    names = {ns.metadata.name for ns in (await CoreV1Api(api).list_namespace()).items}
    assert {"default", "kube-system", "kube-public", "kube-node-lease"} <= names


async def test_node_status_posted_with_the_node_is_kept(api: ApiClient) -> None:
    node = make_node("big", cpu="8", memory="32Gi", labels={"topology.kubernetes.io/zone": "zone-a"})
    assert await create_nodes(api, [node]) == 1

    stored = await CoreV1Api(api).read_node("big")
    assert stored.status.allocatable == {"cpu": "8", "memory": "32Gi", "pods": "110"}
    assert stored.status.capacity == stored.status.allocatable
    assert {c.type: c.status for c in stored.status.conditions}["Ready"] == "True"
    assert stored.metadata.labels["topology.kubernetes.io/zone"] == "zone-a"
    assert not stored.spec.taints  # TaintNodesByCondition is off: no not-ready taint to lift


async def test_creates_a_thousand_nodes_in_a_few_seconds(api: ApiClient) -> None:
    began = time.monotonic()
    created = await create_nodes(api, [make_node(f"n-{i:04d}") for i in range(1000)])
    elapsed = time.monotonic() - began

    assert created == 1000
    assert len((await CoreV1Api(api).list_node()).items) == 1000
    assert elapsed < 15, f"1,000 nodes took {elapsed:.1f} s"
    # Existing ones are skipped, not an error, when asked.
    assert await create_nodes(api, [make_node("n-0000")], skip_existing=True) == 0


async def test_pods_get_their_priority_class_and_stay_pending_once_bound(
    api: ApiClient, namespace: str
) -> None:
    await create_nodes(api, [make_node("node-a")])
    pod = make_pod("p", namespace, "kubesched", cpu="500m", memory="1Gi", priority=1000)
    await create_pods(api, [pod])

    binding = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": "p"},
        "target": {"kind": "Node", "name": "node-a"},
    }
    await post_object(api, f"/api/v1/namespaces/{namespace}/pods/p/binding", binding)

    stored = await CoreV1Api(api).read_namespaced_pod("p", namespace)
    assert stored.spec.scheduler_name == "kubesched"
    assert stored.spec.priority_class_name == priority_class_name(1000)
    assert stored.spec.priority == 1000
    assert stored.spec.node_name == "node-a"
    assert stored.status.phase == "Pending"  # no kubelet runs it
    with pytest.raises(ApiException) as conflict:
        await post_object(api, f"/api/v1/namespaces/{namespace}/pods/p/binding", binding)
    assert conflict.value.status == 409


async def test_an_unknown_token_gets_401(control_plane: LocalControlPlane) -> None:
    client = new_token_client(control_plane.server, control_plane.ca_file, "not-a-token")
    try:
        with pytest.raises(ApiException) as error:
            await CoreV1Api(client).list_namespace()
    finally:
        await client.close()
    assert error.value.status == 401


async def test_a_service_account_has_only_the_permissions_rbac_grants(
    api: ApiClient, control_plane: LocalControlPlane, namespace: str
) -> None:
    await CoreV1Api(api).create_namespaced_service_account(
        namespace, V1ServiceAccount(metadata=V1ObjectMeta(name="probe"))
    )
    token = await service_account_token(api, namespace, "probe")
    client = new_token_client(control_plane.server, control_plane.ca_file, token)
    rbac = RbacAuthorizationV1Api(api)
    role_name = f"{namespace}-node-reader"
    try:
        with pytest.raises(ApiException) as forbidden:
            await CoreV1Api(client).list_node()
        assert forbidden.value.status == 403  # authenticated (not 401), but not authorised
        assert f"system:serviceaccount:{namespace}:probe" in str(forbidden.value.body)

        await rbac.create_cluster_role(
            V1ClusterRole(
                metadata=V1ObjectMeta(name=role_name),
                rules=[V1PolicyRule(api_groups=[""], resources=["nodes"], verbs=["list"])],
            )
        )
        await rbac.create_cluster_role_binding(
            V1ClusterRoleBinding(
                metadata=V1ObjectMeta(name=role_name),
                role_ref=V1RoleRef(api_group="rbac.authorization.k8s.io", kind="ClusterRole", name=role_name),
                subjects=[RbacV1Subject(kind="ServiceAccount", name="probe", namespace=namespace)],
            )
        )

        async def can_list_nodes() -> bool:
            try:
                await CoreV1Api(client).list_node()
            except ApiException as e:
                if e.status != 403:
                    raise
                return False
            return True

        await wait_for(can_list_nodes, timeout=10, message="the binding to take effect")
    finally:
        await client.close()
        for delete in (rbac.delete_cluster_role_binding, rbac.delete_cluster_role):
            try:
                await delete(role_name)
            except ApiException as e:
                if e.status != 404:
                    raise


async def test_restarting_the_api_server_keeps_the_data(
    api: ApiClient, control_plane: LocalControlPlane
) -> None:
    await create_nodes(api, [make_node("survivor", cpu="3")])
    old_pid = control_plane.apiserver.pid if control_plane.apiserver else None

    await asyncio.to_thread(control_plane.restart_apiserver)

    assert control_plane.apiserver is not None and control_plane.apiserver.pid != old_pid
    node = await wait_for(lambda: _read_node(api, "survivor"), timeout=10, message="the node after restart")
    assert node.status.allocatable["cpu"] == "3"


async def test_a_paused_etcd_stalls_writes_until_resumed(
    api: ApiClient, control_plane: LocalControlPlane
) -> None:
    control_plane.pause_etcd()
    try:
        with pytest.raises(asyncio.TimeoutError):
            await CoreV1Api(api).create_node(make_node("stalled"), _request_timeout=2)  # type: ignore[arg-type]
    finally:
        control_plane.resume_etcd()
    assert await create_nodes(api, [make_node("after-resume")]) == 1


async def _read_node(api: ApiClient, name: str) -> Any:
    try:
        return await CoreV1Api(api).read_node(name)
    except Exception:  # the first request after a restart may meet a closed pooled connection
        return None


async def test_the_demo_workload_is_created_once(api: ApiClient, control_plane: LocalControlPlane) -> None:
    try:
        first = await create_demo(control_plane.kubeconfig, nodes=6, pods=12, scheduler_name="kubesched")
        again = await create_demo(control_plane.kubeconfig, nodes=6, pods=12, scheduler_name="kubesched")

        assert (first.nodes_created, first.pods_created) == (6, 12)
        assert (again.nodes_created, again.pods_created) == (0, 0)
        core = CoreV1Api(api)
        zones = {n.metadata.labels[ZONE_LABEL] for n in (await core.list_node()).items}
        assert zones == {"zone-a", "zone-b", "zone-c"}
        pods = (await core.list_namespaced_pod(DEMO_NAMESPACE)).items
        assert {p.spec.scheduler_name for p in pods} == {"kubesched"}
        assert all(p.spec.node_name is None for p in pods)
        assert sum(1 for p in pods if p.spec.node_selector) == 2
        service = await core.read_namespaced_service("web", DEMO_NAMESPACE)
        assert service.spec.selector == {"app": "web"}
    finally:
        await delete_namespace(api, DEMO_NAMESPACE)


def test_up_status_down_manage_a_detached_control_plane(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    work_dir = tmp_path / "cluster"
    assert devcluster_main(["up", "--dir", str(work_dir)]) == 0
    try:
        assert f"export KUBECONFIG={work_dir / 'kubeconfig'}" in capsys.readouterr().out
        cp = LocalControlPlane.attach(work_dir)
        assert cp.is_ready()
        # A second `up` finds it running and leaves it alone.
        assert devcluster_main(["up", "--dir", str(work_dir)]) == 0
        assert LocalControlPlane.attach(work_dir).state()["pids"] == cp.state()["pids"]
        assert devcluster_main(["status", "--dir", str(work_dir)]) == 0
    finally:
        assert devcluster_main(["down", "--dir", str(work_dir)]) == 0

    assert not cp.etcd or not cp.etcd.alive()
    assert not cp.apiserver or not cp.apiserver.alive()
    assert not work_dir.exists()  # data removed
    assert devcluster_main(["status", "--dir", str(work_dir)]) == 1
