"""The install in manifests/: it passes the API server's own validation, its pods would be admitted,
and the operator schedules with nothing but its ServiceAccount's permissions, and no more."""

from __future__ import annotations

import asyncio
import json
import re
import socket
import subprocess
import urllib.request
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import yaml
from kubernetes_asyncio.client import ApiClient

from kubesched.kube.client import request
from kubesched.model.kinds import WATCHED_OBJECTS
from kubesched.policy.store import API_GROUP, API_VERSION, PLURAL
from kubesched_dev.devcluster import LocalControlPlane
from kubesched_dev.fixtures import (
    create_nodes,
    create_pods,
    make_node,
    make_pod,
    service_account_token,
    wait_for,
)

from .kubesched_process import KubeschedProcess

REPO = Path(__file__).parents[2]
MANIFESTS = REPO / "manifests"
NAMESPACE = "kubesched"
ACCOUNT = f"system:serviceaccount:{NAMESPACE}:kubesched"
POLICY = f"/apis/{API_GROUP}/{API_VERSION}/{PLURAL}/kubesched"


def kubectl(
    control_plane: LocalControlPlane, *args: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    command = [str(control_plane.bin_dir / "kubectl"), "--kubeconfig", str(control_plane.kubeconfig), *args]
    return subprocess.run(command, input=stdin, capture_output=True, text=True, timeout=60, check=False)


def built(control_plane: LocalControlPlane) -> list[dict[str, Any]]:
    """What `kubectl apply -k manifests/` sends, as kubectl 1.20's kustomize builds it."""
    result = kubectl(control_plane, "kustomize", str(MANIFESTS))
    assert result.returncode == 0, result.stderr
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def one(objects: Sequence[Mapping[str, Any]], kind: str) -> Mapping[str, Any]:
    (found,) = [o for o in objects if o["kind"] == kind]
    return found


@pytest.fixture(scope="module")
def namespace_created(control_plane: LocalControlPlane) -> None:
    # Server-side dry run checks namespaced objects against their namespace: it must exist.
    result = kubectl(control_plane, "apply", "-f", str(MANIFESTS / "namespace.yaml"))
    assert result.returncode == 0, result.stderr


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def installed(
    control_plane: LocalControlPlane, api: ApiClient, namespace_created: None
) -> AsyncIterator[None]:
    result = await asyncio.to_thread(kubectl, control_plane, "apply", "-k", str(MANIFESTS))
    assert result.returncode == 0, result.stderr
    yield
    # The default policy would drive other tests' `kubesched` profile; the rest is inert without
    # a controller-manager, and the namespace must stay (none could finalise its deletion).
    await request(api, "DELETE", POLICY)


def test_the_manifests_pass_server_side_dry_run(
    control_plane: LocalControlPlane, namespace_created: None
) -> None:
    result = kubectl(control_plane, "apply", "--dry-run=server", "-k", str(MANIFESTS))
    assert result.returncode == 0, result.stderr
    kinds = {line.split("/")[0].split(".")[0] for line in result.stdout.splitlines()}
    assert kinds == {
        "namespace",
        "customresourcedefinition",
        "serviceaccount",
        "clusterrole",
        "clusterrolebinding",
        "role",
        "rolebinding",
        "deployment",
        "poddisruptionbudget",
        "service",
        "schedulerpolicy",
    }


def test_the_deployment_is_highly_available_restricted_and_its_pods_are_admitted(
    control_plane: LocalControlPlane, namespace_created: None
) -> None:
    objects = built(control_plane)
    deployment = one(objects, "Deployment")
    template = deployment["spec"]["template"]
    labels = template["metadata"]["labels"]
    pod = template["spec"]
    (container,) = pod["containers"]

    assert deployment["spec"]["replicas"] == 3
    (term,) = pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert term["topologyKey"] == "kubernetes.io/hostname"
    assert term["labelSelector"]["matchLabels"].items() <= labels.items()
    assert one(objects, "PodDisruptionBudget")["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert pod["priorityClassName"] == "system-cluster-critical"
    env = {e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"] for e in container["env"]}
    assert env == {"POD_NAME": "metadata.name", "POD_NAMESPACE": "metadata.namespace"}

    # The probes and the Service reach the port the operator serves on.
    port = int(next(a for a in container["args"] if a.startswith("--metrics-port=")).split("=")[1])
    (named,) = container["ports"]
    assert named["containerPort"] == port
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": named["name"]}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": named["name"]}
    service = one(objects, "Service")
    assert service["spec"]["selector"].items() <= labels.items()
    assert service["spec"]["ports"][0]["targetPort"] == named["name"]
    assert (
        set(container["resources"]["requests"]) == set(container["resources"]["limits"]) == {"cpu", "memory"}
    )

    # Pod Security "restricted" (1.20 has no admission for it: checked field by field).
    security = container["securityContext"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] > 0
    assert security["allowPrivilegeEscalation"] is False
    assert security["readOnlyRootFilesystem"] is True
    assert security["capabilities"] == {"drop": ["ALL"]}
    assert (
        pod["securityContext"]["seccompProfile"] == security["seccompProfile"] == {"type": "RuntimeDefault"}
    )
    assert not any(pod.get(f) for f in ("hostNetwork", "hostPID", "hostIPC"))
    assert all("hostPath" not in v for v in pod.get("volumes", []))

    # The API server admits the pods the Deployment would create (the priority class resolves).
    manifest = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "kubesched-x", **template["metadata"]},
    }
    manifest["spec"] = pod
    result = kubectl(control_plane, "create", "--dry-run=server", "-n", NAMESPACE, "-o", "yaml", "-f", "-",
                     stdin=yaml.safe_dump(manifest))  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert yaml.safe_load(result.stdout)["spec"]["priority"] == 2_000_000_000


def test_the_image_runs_what_the_deployment_expects(control_plane: LocalControlPlane) -> None:
    dockerfile = (REPO / "Dockerfile").read_text()
    (entrypoint,) = re.findall(r"^ENTRYPOINT (.+)$", dockerfile, re.M)
    assert json.loads(entrypoint) == ["kubesched", "run"]
    assert 'kubesched = "kubesched.cli:main"' in (REPO / "pyproject.toml").read_text()
    pod = one(built(control_plane), "Deployment")["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert "command" not in container and all(a.startswith("--") for a in container["args"])
    # The image's user is the one the pod asks for (runAsNonRoot needs a numeric one).
    (user,) = re.findall(r"^USER (\d+):(?:\d+)$", dockerfile, re.M)
    assert int(user) == pod["securityContext"]["runAsUser"]


def test_the_roles_name_every_verb_and_resource_and_no_wildcard(control_plane: LocalControlPlane) -> None:
    rules = [
        rule for o in built(control_plane) if o["kind"] in ("ClusterRole", "Role") for rule in o["rules"]
    ]
    for rule in rules:
        assert "*" not in [*rule["apiGroups"], *rule["resources"], *rule["verbs"]], rule


# (verb, resource as `kubectl auth can-i` takes it, namespace or None: all namespaces or cluster-scoped).
ALLOWED = [
    ("list", "pods", None),
    ("watch", "pods", None),
    ("list", "nodes", None),
    ("watch", "nodes", None),
    ("create", "pods --subresource=binding", "default"),
    ("patch", "pods --subresource=status", "default"),
    ("create", "events", "default"),
    ("delete", "pods", "default"),  # preemption victims
    ("list", "schedulerpolicies.kubesched.io", None),
    ("watch", "schedulerpolicies.kubesched.io", None),
    ("patch", "schedulerpolicies.kubesched.io --subresource=status", None),
    ("patch", "podgroups.scheduling.x-k8s.io --subresource=status", "default"),
    ("patch", "elasticquotas.scheduling.x-k8s.io --subresource=status", "default"),
    ("get", "leases.coordination.k8s.io/kubesched", NAMESPACE),
    ("watch", "leases.coordination.k8s.io/kubesched", NAMESPACE),
    ("update", "leases.coordination.k8s.io/kubesched", NAMESPACE),
    ("create", "leases.coordination.k8s.io", NAMESPACE),
    # Volume binding (kube/volume_writer.py).
    ("patch", "persistentvolumes", None),
    ("patch", "persistentvolumes --subresource=status", None),
    ("get", "persistentvolumeclaims", "default"),
    ("patch", "persistentvolumeclaims", "default"),
    ("patch", "persistentvolumeclaims --subresource=status", "default"),
]
# Every watched kind, by (verb, API group, resource), asked with a SubjectAccessReview: `kubectl auth
# can-i` maps a resource through discovery first and, for a kind this 1.20 API server does not
# serve (CSIStorageCapacity), asks about a core resource of that name instead, which is denied.
WATCHED_ACCESS = sorted(
    {(verb, watched.group, watched.plural) for watched in WATCHED_OBJECTS for verb in ("list", "watch")}
)
DENIED = [
    ("get", "secrets", None),
    ("list", "secrets", NAMESPACE),
    ("get", "configmaps", NAMESPACE),
    ("create", "nodes", None),
    ("update", "nodes", None),
    ("patch", "nodes", None),
    ("delete", "nodes", None),
    ("patch", "nodes --subresource=status", None),
    ("create", "pods", "default"),
    ("patch", "pods", "default"),
    ("delete", "persistentvolumes", None),
    ("create", "persistentvolumeclaims", "default"),
    ("create", "pods --subresource=exec", "default"),
    ("update", "schedulerpolicies.kubesched.io", None),
    ("delete", "schedulerpolicies.kubesched.io", None),
    ("patch", "podgroups.scheduling.x-k8s.io", "default"),
    ("patch", "elasticquotas.scheduling.x-k8s.io", "default"),
    ("delete", "elasticquotas.scheduling.x-k8s.io", "default"),
    ("get", "leases.coordination.k8s.io/kube-scheduler", "kube-system"),
    ("update", "leases.coordination.k8s.io/kube-scheduler", "kube-system"),
    ("create", "leases.coordination.k8s.io", "kube-system"),
    ("list", "leases.coordination.k8s.io", NAMESPACE),
    ("watch", "leases.coordination.k8s.io", NAMESPACE),  # only the one Lease
    ("update", "leases.coordination.k8s.io/someone-else", NAMESPACE),
    ("delete", "leases.coordination.k8s.io/kubesched", NAMESPACE),
    ("create", "clusterrolebindings.rbac.authorization.k8s.io", None),
    ("escalate", "clusterroles.rbac.authorization.k8s.io", None),
    ("impersonate", "serviceaccounts", NAMESPACE),
]


@pytest.mark.usefixtures("installed")
async def test_the_service_account_may_do_what_the_operator_does_and_nothing_else(
    control_plane: LocalControlPlane,
) -> None:
    async def can(verb: str, resource: str, namespace: str | None) -> bool:
        where = ["-n", namespace] if namespace else ["--all-namespaces"]
        args = ["auth", "can-i", verb, *resource.split(), "--as", ACCOUNT, *where]
        async with limit:
            result = await asyncio.to_thread(kubectl, control_plane, *args)
        assert result.stdout.strip() in ("yes", "no"), result.stderr
        return result.stdout.strip() == "yes"

    async def reviewed(verb: str, group: str, resource: str) -> bool:
        review = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {
                "user": ACCOUNT,
                "resourceAttributes": {"verb": verb, "group": group, "resource": resource},
            },
        }
        async with limit:
            result = await asyncio.to_thread(
                kubectl, control_plane, "create", "-o", "json", "-f", "-", stdin=json.dumps(review)
            )
        assert result.returncode == 0, result.stderr
        return bool(json.loads(result.stdout)["status"].get("allowed"))

    limit = asyncio.Semaphore(8)
    allowed = await asyncio.gather(*(can(*case) for case in ALLOWED))
    denied = await asyncio.gather(*(can(*case) for case in DENIED))
    watching = await asyncio.gather(*(reviewed(*case) for case in WATCHED_ACCESS))
    wrong = [(*case, "denied") for case, yes in zip(ALLOWED, allowed, strict=True) if not yes]
    wrong += [(*case, "allowed") for case, yes in zip(DENIED, denied, strict=True) if yes]
    wrong += [(*case, "denied") for case, yes in zip(WATCHED_ACCESS, watching, strict=True) if not yes]
    assert wrong == []


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def http_get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
            return int(response.status), response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def service_account_kubeconfig(control_plane: LocalControlPlane, token: str, path: Path) -> Path:
    """A kubeconfig holding nothing but the ServiceAccount's token, as an in-cluster pod has."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": control_plane.server,
                                               "certificate-authority": str(control_plane.ca_file)}}],
        "users": [{"name": "kubesched", "user": {"token": token}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "kubesched"}}],
        "current-context": "c",
    }  # fmt: skip
    path.write_text(yaml.safe_dump(config))
    path.chmod(0o600)
    return path


@pytest.fixture
def shipped_operator(control_plane: LocalControlPlane, tmp_path: Path) -> Iterator[tuple[list[str], int]]:
    """The Deployment's container args, on a free metrics port."""
    deployment = one(built(control_plane), "Deployment")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    port = free_port()
    args = [f"--metrics-port={port}" if a.startswith("--metrics-port=") else a for a in container["args"]]
    yield args, port


async def pod_view(api: ApiClient, namespace: str, name: str) -> dict[str, Any]:
    status, body = await request(api, "GET", f"/api/v1/namespaces/{namespace}/pods/{name}")
    assert status == 200, body
    result: dict[str, Any] = body
    return result


async def event_reasons(api: ApiClient, namespace: str) -> set[tuple[str, str]]:
    status, body = await request(api, "GET", f"/api/v1/namespaces/{namespace}/events")
    assert status == 200, body
    return {(e["involvedObject"]["name"], e["reason"]) for e in body["items"]}


@pytest.mark.usefixtures("installed")
async def test_the_operator_schedules_with_its_service_account_token_alone(
    api: ApiClient,
    control_plane: LocalControlPlane,
    namespace: str,
    tmp_path: Path,
    shipped_operator: tuple[list[str], int],
) -> None:
    args, port = shipped_operator
    token = await service_account_token(api, NAMESPACE, "kubesched")
    kubeconfig = service_account_kubeconfig(control_plane, token, tmp_path / "sa-kubeconfig")
    await create_nodes(api, [make_node(f"install-{i}", cpu="2", memory="4Gi") for i in range(2)])
    low = [make_pod(f"low-{i}", namespace, cpu="1500m", priority=1) for i in range(2)]  # one per node
    await create_pods(api, [*low, make_pod("too-big", namespace, cpu="64")])
    # POD_NAME and POD_NAMESPACE as the downward API sets them.
    operator = KubeschedProcess(
        kubeconfig, "kubesched", tmp_path, args, name="kubesched-7d9f-abcde", env={"POD_NAMESPACE": NAMESPACE}
    )
    with operator:
        for pod in ("low-0", "low-1"):
            await wait_for(partial(_bound, api, namespace, pod), timeout=40, message=f"{pod} bound")

        async def told(*wanted: tuple[str, str]) -> bool:
            return set(wanted) <= await event_reasons(api, namespace)

        await wait_for(lambda: told(("low-0", "Scheduled"), ("too-big", "FailedScheduling")), timeout=20)
        too_big = await pod_view(api, namespace, "too-big")
        condition = next(c for c in too_big["status"]["conditions"] if c["type"] == "PodScheduled")
        assert (condition["status"], condition["reason"]) == ("False", "Unschedulable")

        # Preemption: a victim deleted (no kubelet confirms it here, so it stays Terminating), the
        # preemptor nominated to its node.
        await create_pods(api, [make_pod("urgent", namespace, cpu="1", priority=1000)])

        async def nominated() -> str | None:
            node: str | None = (await pod_view(api, namespace, "urgent"))["status"].get("nominatedNodeName")
            return node

        node = await wait_for(nominated, timeout=20, message="urgent nominated")
        (victim,) = [
            p for p in ("low-0", "low-1") if (await pod_view(api, namespace, p))["spec"]["nodeName"] == node
        ]
        assert "deletionTimestamp" in (await pod_view(api, namespace, victim))["metadata"]
        await wait_for(lambda: told((victim, "Preempted")), timeout=20, message="Preempted event")

        async def policy_accepted() -> bool:
            status, body = await request(api, "GET", POLICY)
            conditions = (body.get("status") or {}).get("conditions") or [] if status == 200 else []
            return {"type": "Accepted", "status": "True"}.items() <= next(
                (c for c in conditions if c["type"] == "Accepted"), {}
            ).items()

        await wait_for(policy_accepted, timeout=20, message="the policy's status written by the operator")
        status, lease = await request(
            api, "GET", f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases/kubesched"
        )
        assert status == 200, lease
        assert lease["spec"]["holderIdentity"].startswith("kubesched-7d9f-abcde_")

        # What the probes and Prometheus see.
        code, metrics = await asyncio.to_thread(http_get, port, "/metrics")
        assert code == 200
        assert (
            _sample(metrics, 'scheduler_schedule_attempts_total{profile="kubesched",result="scheduled"}') >= 1
        )
        assert (
            _sample(metrics, 'scheduler_schedule_attempts_total{profile="kubesched",result="unschedulable"}')
            >= 1
        )
        assert _sample(metrics, "scheduler_preemption_attempts_total") >= 1
        assert _sample(metrics, 'leader_election_master_status{name="kubesched"}') == 1
        assert await asyncio.to_thread(http_get, port, "/healthz") == (200, "ok")
        assert await asyncio.to_thread(http_get, port, "/readyz") == (200, "ok")
    assert operator.proc is not None and operator.proc.returncode == 0, operator.log()[-3000:]
    log = operator.log()
    assert "lease_released" in log  # the Lease update on the way out was allowed too
    refused = [line for line in log.splitlines() if re.search(r"forbidden|\b403\b", line, re.IGNORECASE)]
    assert refused == []


async def _bound(api: ApiClient, namespace: str, name: str) -> dict[str, Any] | None:
    pod = await pod_view(api, namespace, name)
    return pod if pod["spec"].get("nodeName") else None


def _sample(metrics: str, series: str) -> float:
    for line in metrics.splitlines():
        if line.startswith(series + " "):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{series} not in /metrics")
