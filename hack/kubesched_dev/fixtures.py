"""Objects and helpers that unit tests, integration tests, benchmarks and the demo share.

Two families of builders:

- `make_node` and `make_pod` return plain dicts shaped as the API server returns them (a kubelet's
  node with its labels and conditions, a pod for our scheduler), so the same object feeds a pure
  unit test and a POST to a real API server;
- `model_node`, `model_pod` (with `container`, `node_info`, `snapshot`) return the model's typed
  views, bare: only what a test names, as kube-scheduler's plugin tests build them; `run_filter`
  and `run_priority` run one plugin on them as the algorithm does.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import json
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar, overload

import yaml
from kubernetes_asyncio import config as k8s_config
from kubernetes_asyncio.client import (
    ApiClient,
    ApiException,
    AuthenticationV1TokenRequest,
    Configuration,
    CoreV1Api,
    V1Namespace,
    V1NamespaceSpec,
    V1ObjectMeta,
    V1TokenRequestSpec,
)

from kubesched.kube.client import request
from kubesched.model.nodeinfo import ClusterObjects, NodeInfo, Snapshot
from kubesched.model.objects import Node, Pod, node_from_dict, pod_from_dict
from kubesched.model.resources import ZERO, Resource
from kubesched.plugins.framework import SKIP, Predicate, Priority

T = TypeVar("T")

DEFAULT_CONCURRENCY = 50
PAUSE_IMAGE = "registry.k8s.io/pause:3.2"
PRIORITY_CLASS_PREFIX = "kubesched-priority-"

# ------------------------------------------------------------------------------------------- objects


def make_node(
    name: str,
    cpu: str = "4",
    memory: str = "16Gi",
    pods: str = "110",
    labels: Mapping[str, str] | None = None,
    taints: Sequence[Mapping[str, Any]] | None = None,
    unschedulable: bool = False,
    *,
    extended: Mapping[str, str] | None = None,
    ready: bool = True,
) -> dict[str, Any]:
    """A Node as a kubelet would register it: capacity = allocatable, hostname/os/arch labels, conditions.

    `extended` adds resources (e.g. {"ephemeral-storage": "100Gi", "example.com/gpu": "2"}).
    POST it as is: the API server keeps `status` from a create body.
    """
    resources = {"cpu": cpu, "memory": memory, "pods": pods, **(extended or {})}
    spec: dict[str, Any] = {}
    if taints:
        spec["taints"] = [dict(t) for t in taints]
    if unschedulable:
        spec["unschedulable"] = True
    now = _now()

    def condition(kind: str, status: bool, reason: str) -> dict[str, str]:
        return {
            "type": kind,
            "status": "True" if status else "False",
            "reason": reason,
            "lastHeartbeatTime": now,
            "lastTransitionTime": now,
        }

    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": _uid("node", name),
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                **(labels or {}),
            },
        },
        "spec": spec,
        "status": {
            "capacity": dict(resources),
            "allocatable": dict(resources),
            "conditions": [
                condition("MemoryPressure", False, "KubeletHasSufficientMemory"),
                condition("DiskPressure", False, "KubeletHasNoDiskPressure"),
                condition("PIDPressure", False, "KubeletHasSufficientPID"),
                condition("Ready", ready, "KubeletReady" if ready else "KubeletNotReady"),
            ],
            "addresses": [{"type": "Hostname", "address": name}],
            # Every field: kubernetes_asyncio refuses to deserialise a NodeSystemInfo missing one.
            "nodeInfo": {
                "architecture": "amd64",
                "bootID": _uid("boot", name),
                "containerRuntimeVersion": "fake://1.0",
                "kernelVersion": "5.10.0",
                "kubeProxyVersion": "v1.20.2",
                "kubeletVersion": "v1.20.2",
                "machineID": _uid("machine", name).replace("-", ""),
                "operatingSystem": "linux",
                "osImage": "kubesched fake node",
                "systemUUID": _uid("system", name),
            },
        },
    }


def make_pod(
    name: str,
    namespace: str = "default",
    scheduler_name: str = "kubesched",
    cpu: str | None = None,
    memory: str | None = None,
    labels: Mapping[str, str] | None = None,
    node_selector: Mapping[str, str] | None = None,
    host_port: int | None = None,
    tolerations: Sequence[Mapping[str, Any]] | None = None,
    priority: int | None = None,
    *,
    node_name: str | None = None,
    affinity: Mapping[str, Any] | None = None,
    annotations: Mapping[str, str] | None = None,
    extended: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A one-container pod for `scheduler_name`, requesting `cpu`/`memory` (none given: BestEffort).

    `priority` sets both `spec.priority` (for pure tests) and `spec.priorityClassName` =
    `priority_class_name(priority)`: the Priority admission plugin refuses a bare integer, and
    `create_pods` creates the classes it needs. `node_name` makes a pod already bound there.
    """
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    requests.update(extended or {})
    main: dict[str, Any] = {"name": "main", "image": PAUSE_IMAGE}
    if requests:
        main["resources"] = {"requests": requests}
    if host_port is not None:
        main["ports"] = [{"containerPort": host_port, "hostPort": host_port, "protocol": "TCP"}]
    spec: dict[str, Any] = {"schedulerName": scheduler_name, "containers": [main]}
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    if tolerations:
        spec["tolerations"] = [dict(t) for t in tolerations]
    if priority is not None:
        spec["priority"] = priority
        spec["priorityClassName"] = priority_class_name(priority)
    if node_name is not None:
        spec["nodeName"] = node_name
    if affinity:
        spec["affinity"] = dict(affinity)
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": _uid("pod", f"{namespace}/{name}"),
    }
    if labels:
        metadata["labels"] = dict(labels)
    if annotations:
        metadata["annotations"] = dict(annotations)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": spec,
        "status": {"phase": "Pending"},
    }


def priority_class_name(priority: int) -> str:
    """The PriorityClass `make_pod(priority=...)` refers to."""
    return (
        f"{PRIORITY_CLASS_PREFIX}{priority}" if priority >= 0 else f"{PRIORITY_CLASS_PREFIX}minus-{-priority}"
    )


def make_priority_class(priority: int) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": priority_class_name(priority)},
        "value": priority,
        "description": "made by kubesched_dev.fixtures",
    }


# ------------------------------------------------------------------------------- model objects

_uids = itertools.count()

# The seed policy the project ships, read from the file users run with.
SEED_POLICY: dict[str, Any] = json.loads(
    (Path(__file__).parents[2] / "examples" / "policies" / "seed-policy.json").read_text()
)


def label_preference_policy(count: int, label_length: int = 20) -> dict[str, Any]:
    """A valid SchedulerPolicy spec of `count` labelPreference priorities, each label `label_length`
    characters: about (95 + label_length) * count bytes of JSON, to build policies of a given size."""
    return {
        "priorities": [
            {
                "name": f"prefer-{i:05d}",
                "weight": 1,
                "argument": {
                    "labelPreference": {"label": f"{i:05d}".rjust(label_length, "l"), "presence": True}
                },
            }
            for i in range(count)
        ]
    }


def model_node(
    name: str,
    cpu: str = "4",
    memory: str = "8Gi",
    pods: str = "110",
    *,
    labels: Mapping[str, str] | None = None,
    taints: Sequence[Mapping[str, str]] = (),
    unschedulable: bool = False,
    extra: Mapping[str, str] | None = None,
    allocatable: Mapping[str, Any] | None = None,
    conditions: Mapping[str, str] | None = None,
    images: Sequence[tuple[Sequence[str], int]] = (),
    annotations: Mapping[str, str] | None = None,
) -> Node:
    """A bare Node: `allocatable` (or cpu, memory, pods and `extra`), and only the labels, taints,
    conditions (type -> status), images ((names, size in bytes)) and annotations given."""
    resources = dict(allocatable) if allocatable is not None else {"cpu": cpu, "memory": memory, "pods": pods}
    resources.update(extra or {})
    spec: dict[str, Any] = {"taints": [dict(t) for t in taints]}
    if unschedulable:
        spec["unschedulable"] = True
    metadata: dict[str, Any] = {"name": name, "uid": f"node-{name}", "labels": dict(labels or {})}
    if annotations:
        metadata["annotations"] = dict(annotations)
    status: dict[str, Any] = {"allocatable": resources}
    if conditions is not None:
        status["conditions"] = [{"type": kind, "status": value} for kind, value in conditions.items()]
    if images:
        status["images"] = [{"names": list(names), "sizeBytes": size} for names, size in images]
    return node_from_dict({"metadata": metadata, "spec": spec, "status": status})


def container(
    cpu: str | None = None,
    memory: str | None = None,
    extra: Mapping[str, str] | None = None,
    ports: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """A container spec requesting `cpu`, `memory` and `extra` resources, with `ports`."""
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    requests.update(extra or {})
    out: dict[str, Any] = {"name": "c", "image": "pause", "resources": {"requests": requests}}
    if ports:
        out["ports"] = [dict(p) for p in ports]
    return out


def model_pod(
    name: str = "pod",
    namespace: str = "default",
    cpu: str | None = None,
    memory: str | None = None,
    *,
    labels: Mapping[str, str] | None = None,
    containers: Sequence[Mapping[str, Any]] | None = None,
    init_containers: Sequence[Mapping[str, Any]] = (),
    extra: Mapping[str, str] | None = None,
    ports: Sequence[Mapping[str, Any]] = (),
    node_name: str = "",
    deleting: bool = False,
    **spec: Any,
) -> Pod:
    """A bare Pod with a fresh uid; `spec` keyword arguments (nodeSelector=..., affinity=...,
    volumes=...) go into its spec."""
    if containers is None:
        containers = [container(cpu, memory, extra, ports)]
    full_spec: dict[str, Any] = {"containers": [dict(c) for c in containers], **spec}
    if init_containers:
        full_spec["initContainers"] = [dict(c) for c in init_containers]
    if node_name:
        full_spec["nodeName"] = node_name
    meta: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": f"uid-{name}-{next(_uids)}",
        "labels": dict(labels or {}),
    }
    if deleting:
        meta["deletionTimestamp"] = "2021-01-01T00:00:00Z"
    return pod_from_dict({"metadata": meta, "spec": full_spec})


def node_info(node: Node, pods: Iterable[Pod] = ()) -> NodeInfo:
    """`node` running `pods`."""
    info = NodeInfo(node)
    for pod in pods:
        info = info.with_pod(pod)
    return info


def snapshot(*infos: NodeInfo | Node, objects: ClusterObjects | None = None) -> Snapshot:
    """A snapshot of these nodes (bare ones run no pods) and cluster `objects`."""
    return Snapshot.of([i if isinstance(i, NodeInfo) else NodeInfo(i) for i in infos], objects)


def sum_resources(items: Iterable[Resource]) -> Resource:
    """The total of `items`: what a node's pods request together."""
    total = ZERO
    for item in items:
        total = total + item
    return total


def run_filter(
    predicate: Predicate, pod: Pod, info: NodeInfo, snap: Snapshot | None = None
) -> tuple[str, ...]:
    """prefilter then filter, as the algorithm runs them; SKIP means the pod fits."""
    state = predicate.prefilter(pod, snap or snapshot(info))
    if state is SKIP:
        return ()
    return tuple(predicate.filter(pod, state, info))


def run_priority(
    priority: Priority, pod: Pod, infos: Sequence[NodeInfo], snap: Snapshot | None = None
) -> list[int]:
    """prescore, score and normalize over `infos`, as the algorithm runs them."""
    snap = snap or snapshot(*infos)
    state = priority.prescore(pod, snap, infos)
    scores = [priority.score(pod, state, info) for info in infos]
    priority.normalize(pod, state, infos, scores)
    return scores


# ------------------------------------------------------------------------------------ API helpers


async def new_api_client(kubeconfig: Path | str) -> ApiClient:
    """An ApiClient for the current context of `kubeconfig` (the caller closes it)."""
    configuration = Configuration()
    await k8s_config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)
    return ApiClient(configuration=configuration)


def new_token_client(server: str, ca_file: Path | str, token: str) -> ApiClient:
    """An ApiClient that authenticates with a bearer token (e.g. a ServiceAccount's) alone."""
    configuration = Configuration(
        host=server,
        api_key={"BearerToken": token},
        api_key_prefix={"BearerToken": "Bearer"},
        ssl_ca_cert=str(ca_file),
    )
    return ApiClient(configuration=configuration)


async def service_account_token(
    api_client: ApiClient, namespace: str, name: str, *, expiration_seconds: int = 3600
) -> str:
    """A fresh token for ServiceAccount `namespace/name` from the TokenRequest API (which must exist)."""
    # No audiences: the API server fills in its own (the issuer), as a kubelet's projected token has.
    spec = V1TokenRequestSpec(audiences=[], expiration_seconds=expiration_seconds)
    request = AuthenticationV1TokenRequest(spec=spec)
    reply = await CoreV1Api(api_client).create_namespaced_service_account_token(name, namespace, request)
    token: str = reply.status.token
    return token


async def create_nodes(
    api_client: ApiClient,
    nodes: Iterable[Mapping[str, Any]],
    *,
    concurrency: int = DEFAULT_CONCURRENCY,
    skip_existing: bool = False,
) -> int:
    """Create the nodes, `concurrency` requests at a time; returns how many were created.

    Replies are not deserialised (that costs more than the request): 1,000 nodes take a few seconds.
    """
    return await _create_all(api_client, [("/api/v1/nodes", n) for n in nodes], concurrency, skip_existing)


async def create_pods(
    api_client: ApiClient,
    pods: Iterable[Mapping[str, Any]],
    *,
    concurrency: int = DEFAULT_CONCURRENCY,
    skip_existing: bool = False,
) -> int:
    """Create the pods (each in its own namespace) and the PriorityClasses they name; returns the count."""
    pods = list(pods)
    priorities = sorted({p["spec"]["priority"] for p in pods if "priority" in p["spec"]})
    if priorities:
        await create_priority_classes(api_client, priorities)
    requests = [(f"/api/v1/namespaces/{p['metadata']['namespace']}/pods", p) for p in pods]
    return await _create_all(api_client, requests, concurrency, skip_existing)


async def create_namespace(api_client: ApiClient, name: str, *, skip_existing: bool = False) -> bool:
    """Create a namespace; returns False if it existed and `skip_existing` is set."""
    body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    return await post_object(api_client, "/api/v1/namespaces", body, skip_existing=skip_existing)


async def create_priority_classes(api_client: ApiClient, priorities: Iterable[int]) -> int:
    """Create `make_priority_class(p)` for each priority, skipping those that exist."""
    requests = [("/apis/scheduling.k8s.io/v1/priorityclasses", make_priority_class(p)) for p in priorities]
    return await _create_all(api_client, requests, DEFAULT_CONCURRENCY, skip_existing=True)


async def delete_all_nodes(api_client: ApiClient) -> None:
    """Delete every Node in one request (nodes are cluster-scoped: tests must not leak them)."""
    await CoreV1Api(api_client).delete_collection_node()


async def delete_namespace(api_client: ApiClient, name: str) -> None:
    """Delete a namespace and its pods now, without the namespace controller (none runs here).

    Pods are deleted with grace period 0: a bound pod would otherwise wait forever for a kubelet.
    The namespace's `kubernetes` finalizer is then dropped by hand, so it vanishes instead of
    staying Terminating; other objects in it are left behind in etcd, unseen.
    """
    core = CoreV1Api(api_client)
    try:
        await core.delete_collection_namespaced_pod(name, grace_period_seconds=0)
        await core.delete_namespace(name)
        await core.replace_namespace_finalize(
            name, V1Namespace(metadata=V1ObjectMeta(name=name), spec=V1NamespaceSpec(finalizers=[]))
        )
    except ApiException as e:
        if e.status != 404:
            raise


TRANSIENT_ATTEMPTS = 5


async def post_object(
    api_client: ApiClient, path: str, body: Mapping[str, Any], *, skip_existing: bool = False
) -> bool:
    """POST a raw object to `path` (e.g. /api/v1/nodes); False if it existed and `skip_existing` is set.

    Server errors (5xx, 429) are retried with backoff: fault tests freeze or restart the API server
    while objects are being created. A 409 after such a retry means the first attempt landed. So is
    a pod refused for a PriorityClass just created, which admission has not seen yet.
    """
    for attempt in range(TRANSIENT_ATTEMPTS):
        status, text = await _post_once(api_client, path, body)
        if 200 <= status < 300:
            return True
        if status == 409 and attempt > 0:
            return True
        if status == 409 and skip_existing:
            return False
        # The Priority admission plugin reads PriorityClasses from an informer: one created a
        # moment ago may not be there yet.
        lagging = status == 403 and "no PriorityClass with name" in text
        if (status >= 500 or status == 429 or lagging) and attempt + 1 < TRANSIENT_ATTEMPTS:
            await asyncio.sleep(0.5 * 2**attempt)
            continue
        break
    raise ApiException(status=status, reason=text[:1000])


async def _post_once(api_client: ApiClient, path: str, body: Mapping[str, Any]) -> tuple[int, str]:
    # The generated create_* methods want model objects and deserialise the reply; a raw POST
    # of the dict is both simpler and several times cheaper on the client's CPU.
    response = await api_client.call_api(
        path,
        "POST",
        header_params={"Accept": "application/json", "Content-Type": "application/json"},
        body=body,
        auth_settings=["BearerToken"],
        _preload_content=False,
    )
    async with response:
        if 200 <= response.status < 300:
            await response.read()
            return int(response.status), ""
        return int(response.status), await response.text()


CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


async def install_crds(api_client: ApiClient, directory: Path, timeout: float = 30.0) -> list[str]:
    """Create or update every CustomResourceDefinition in `directory`'s YAML files; wait until Established."""
    names = []
    for path in sorted(directory.glob("*.yaml")):
        for manifest in yaml.safe_load_all(path.read_text()):
            if not manifest or manifest.get("kind") != "CustomResourceDefinition":
                continue
            name = manifest["metadata"]["name"]
            status, body = await request(api_client, "POST", CRD_PATH, manifest)
            if status == 409:  # there already (a reused control plane): bring it up to date
                status, body = await request(api_client, "GET", f"{CRD_PATH}/{name}")
                if status == 200:
                    version = {"resourceVersion": body["metadata"]["resourceVersion"]}
                    current = {**manifest, "metadata": {**manifest["metadata"], **version}}
                    status, body = await request(api_client, "PUT", f"{CRD_PATH}/{name}", current)
            if status >= 300:
                raise RuntimeError(f"CustomResourceDefinition {name}: {status} {body}")
            names.append(name)
    for name in names:
        await wait_for(_established(api_client, name), timeout, message=f"{name} Established")
    return names


def _established(api_client: ApiClient, name: str) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        status, body = await request(api_client, "GET", f"{CRD_PATH}/{name}")
        conditions = (body.get("status") or {}).get("conditions") or [] if status == 200 else []
        return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)

    return check


@overload
async def wait_for(
    predicate: Callable[[], Awaitable[T]],
    timeout: float = ...,
    interval: float = ...,
    message: str | None = ...,
) -> T: ...


@overload
async def wait_for(
    predicate: Callable[[], T], timeout: float = ..., interval: float = ..., message: str | None = ...
) -> T: ...


async def wait_for(
    predicate: Callable[[], Any],
    timeout: float = 10.0,
    interval: float = 0.1,
    message: str | None = None,
) -> Any:
    """Call `predicate` (sync or async) until it returns something truthy, and return that.

    Raises TimeoutError after `timeout` seconds, with `message` and the last value seen.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        if time.monotonic() >= deadline:
            raise TimeoutError(f"{message or 'condition'} not met after {timeout} s (last value: {value!r})")
        await asyncio.sleep(interval)


# ---------------------------------------------------------------------------------------- internals


async def _create_all(
    api_client: ApiClient,
    requests: Sequence[tuple[str, Mapping[str, Any]]],
    concurrency: int,
    skip_existing: bool,
) -> int:
    semaphore = asyncio.Semaphore(concurrency)

    async def create(path: str, body: Mapping[str, Any]) -> bool:
        async with semaphore:
            return await post_object(api_client, path, body, skip_existing=skip_existing)

    results = await asyncio.gather(*(create(path, body) for path, body in requests))
    return sum(results)


def _uid(kind: str, name: str) -> str:
    # Stable across runs, so pure tests can key on it; the API server assigns its own on create.
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"kubesched-testing/{kind}/{name}"))


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class WatchResponse:
    """The chunked reply of a watch: one JSON event per line."""

    def __init__(self, lines: list[bytes]) -> None:
        self.status = 200
        self._lines = lines

    @property
    def content(self) -> AsyncIterator[bytes]:
        async def lines() -> AsyncIterator[bytes]:
            for line in self._lines:
                yield line

        return lines()

    def release(self) -> None:
        pass


class WatchApi:
    """Stands in for the API client of an Informer: answers its watch request with the raw lines
    given, as the API server streams them."""

    def __init__(self, lines: list[bytes]) -> None:
        self.lines = lines

    async def call_api(self, *args: Any, **kwargs: Any) -> WatchResponse:
        return WatchResponse(self.lines)
