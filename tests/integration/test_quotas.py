"""ElasticQuotas on a real API server, with `kubesched run` as a process: KEP 9's story 1 (borrowing up
to max, then waiting with the quota named), a gang its quota cannot hold, life under
scheduler-plugins' own CRD (scheduler_plugins_elasticquota_crd.yaml), and reclaim by preemption:
a quota under its min takes back what it lent, and nothing more (issue 36's acceptance cases);
and every case of scheduler-plugins' own integration test, binding the pods it expects.

Upstream: kubernetes-sigs/scheduler-plugins, pkg/capacityscheduling/ and
test/integration/capacity_scheduling_test.go; kep/9-capacity-scheduling. Run with -s to read what was seen.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import yaml
from kubernetes_asyncio.client import ApiClient

from kubesched.kube.client import request
from kubesched.model.quota import in_one_unit
from kubesched_dev import fixtures as testing
from kubesched_dev.fixtures import CRD_PATH, create_nodes, install_crds, make_node, make_pod, wait_for

from .kubeapi import pods_by_name, wait_bound
from .kubesched_process import KubeschedProcess
from .podgroups import create_object, delete_namespace, failed_scheduling, member, node_of, pod_group
from .quotas import create_quota, delete_quotas, elastic_quota, wait_used

HERE = Path(__file__).parent
REPO = HERE.parents[1]
THEIRS = HERE / "scheduler_plugins_elasticquota_crd.yaml"
CRD_NAME = "elasticquotas.scheduling.x-k8s.io"
GPU = "example.com/gpu"


async def wait_refused(api: ApiClient, namespace: str, pod: str, needle: str) -> list[str]:
    messages: list[str] = []

    async def refused() -> bool:
        messages[:] = await failed_scheduling(api, namespace, pod)
        return any(needle in m for m in messages)

    await wait_for(refused, timeout=60, interval=0.3, message=f"{namespace}/{pod} refused: {needle}")
    print(f"{namespace}/{pod} FailedScheduling: {messages}")
    return messages


@pytest.fixture(scope="module")
def kubesched(control_plane: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[KubeschedProcess]:
    name = f"ks-quotas-{uuid.uuid4().hex[:8]}"
    proc = KubeschedProcess(control_plane.kubeconfig, name, tmp_path_factory.mktemp("quotas"))
    with proc:
        proc.wait_for_log("cache_synced")
        proc.wait_for_log("leader_elected")
        yield proc


@pytest_asyncio.fixture
async def namespaces(api: ApiClient) -> AsyncIterator[list[str]]:
    """Namespaces of this test; their quotas, groups and pods are deleted after it (no namespace
    controller runs), so that no quota's min lingers into another test's sum of mins."""
    made: list[str] = []
    yield made
    for namespace in made:
        await delete_quotas(api, namespace)
        await delete_namespace(api, namespace)


async def new_namespace(api: ApiClient, made: list[str], label: str) -> str:
    namespace = f"quota-{label}-{uuid.uuid4().hex[:6]}"
    await testing.create_namespace(api, namespace)
    made.append(namespace)
    return namespace


async def gpu_node(api: ApiClient, name: str) -> dict[str, str]:
    """A node of 10 GPUs only this test's pods select."""
    selector = {"quota-test": name}
    await create_nodes(api, [make_node(name, cpu="64", labels=selector, extended={GPU: "10"})])
    return selector


def with_gpus(manifest: dict[str, Any], gpus: int) -> dict[str, Any]:
    """`manifest` asking for `gpus` (an extended resource needs its limit equal to its request)."""
    resources = manifest["spec"]["containers"][0].setdefault("resources", {})
    resources.setdefault("requests", {})[GPU] = str(gpus)
    resources.setdefault("limits", {})[GPU] = str(gpus)
    return manifest


def gpu_pod(
    name: str, namespace: str, scheduler: str, gpus: int, selector: Mapping[str, str]
) -> dict[str, Any]:
    return with_gpus(make_pod(name, namespace, scheduler, node_selector=selector), gpus)


async def test_story_1_a_borrows_up_to_its_max_then_waits_naming_its_quota(
    api: ApiClient, kubesched: KubeschedProcess, namespaces: list[str]
) -> None:
    """KEP 9 story 1: quota A (min 4, max 6) borrows B's unused min (B: min 6, max 8, using 3)."""
    a, b = [await new_namespace(api, namespaces, x) for x in "ab"]
    selector = await gpu_node(api, f"{a}-node")
    await create_quota(api, elastic_quota("quota-a", a, {GPU: 4}, {GPU: 6}))
    await create_quota(api, elastic_quota("quota-b", b, {GPU: 6}, {GPU: 8}))
    scheduler = kubesched.scheduler_name
    await testing.create_pods(api, [gpu_pod("b0", b, scheduler, 3, selector)])
    await wait_bound(api, b, 1)
    await testing.create_pods(api, [gpu_pod(f"a{i}", a, scheduler, 2, selector) for i in range(3)])
    await wait_bound(api, a, 3)
    await testing.create_pods(api, [gpu_pod("a3", a, scheduler, 2, selector)])
    await wait_refused(api, a, "a3", f"ElasticQuota {a}/quota-a: over max: {GPU} 8 > 6")
    pods = await pods_by_name(api, a)
    assert not node_of(pods["a3"]), pods["a3"]
    await wait_used(api, a, "quota-a", {GPU: "6"})
    await wait_used(api, b, "quota-b", {GPU: "3"})

    # Deleting one of A's pods makes room: the waiting pod is tried again and bound.
    status, reply = await request(
        api, "DELETE", f"/api/v1/namespaces/{a}/pods/a0", query=[("gracePeriodSeconds", "0")]
    )
    assert status == 200, reply
    await wait_for(lambda: _bound(api, a, "a3"), timeout=60, interval=0.3, message="a3 bound once a0 is gone")
    await wait_used(api, a, "quota-a", {GPU: "6"})

    # A second quota in the namespace is ignored, and says so once.
    await create_quota(api, elastic_quota("quota-a2", a, {GPU: 1}, {GPU: 1}))

    async def ignored() -> list[dict[str, Any]]:
        status, body = await request(
            api,
            "GET",
            f"/api/v1/namespaces/{a}/events",
            query=[("fieldSelector", "involvedObject.name=quota-a2")],
        )
        assert status == 200, body
        return [e for e in body["items"] if e["reason"] == "IgnoredQuota"]

    (event,) = await wait_for(ignored, timeout=30, interval=0.3, message="IgnoredQuota event")
    print(f"IgnoredQuota: {event['message']}")
    assert event["type"] == "Warning" and "quota-a, older, is in force" in event["message"]
    assert event["involvedObject"]["kind"] == "ElasticQuota"


async def _bound(api: ApiClient, namespace: str, name: str) -> bool:
    return bool(node_of((await pods_by_name(api, namespace)).get(name, {"spec": {}})))


async def test_a_gang_its_quota_cannot_hold_binds_nothing(
    api: ApiClient, kubesched: KubeschedProcess, namespaces: list[str]
) -> None:
    namespace = await new_namespace(api, namespaces, "gang")
    selector = await gpu_node(api, f"{namespace}-node")
    await create_quota(api, elastic_quota("quota", namespace, {GPU: 3}, {GPU: 3}))
    await create_object(api, pod_group("g", namespace, 4))
    for i in range(4):
        manifest = member(
            f"m{i}", namespace, "g", kubesched.scheduler_name, cpu="100m", node_selector=selector
        )
        await create_object(api, with_gpus(manifest, 1))
    for i in range(4):
        await wait_refused(api, namespace, f"m{i}", f"ElasticQuota {namespace}/quota refuses its 4 members")
    await wait_used(api, namespace, "quota", {GPU: "0"})
    pods = await pods_by_name(api, namespace)
    assert not [name for name, p in pods.items() if node_of(p)], pods


async def test_under_scheduler_plugins_crd_quotas_admit_and_status_is_written(
    api: ApiClient, kubesched: KubeschedProcess, namespaces: list[str]
) -> None:
    theirs = yaml.safe_load(THEIRS.read_text())
    try:
        status, current = await request(api, "GET", f"{CRD_PATH}/{CRD_NAME}")
        assert status == 200, current
        theirs["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
        status, reply = await request(api, "PUT", f"{CRD_PATH}/{CRD_NAME}", theirs)
        assert status == 200, reply

        async def in_force() -> bool:
            status, crd = await request(api, "GET", f"{CRD_PATH}/{CRD_NAME}")
            columns = crd["spec"]["versions"][0].get("additionalPrinterColumns")
            return status == 200 and not columns  # theirs has none

        await wait_for(in_force, timeout=30, message="their CRD in force")
        namespace = await new_namespace(api, namespaces, "theirs")
        selector = await gpu_node(api, f"{namespace}-node")
        await create_quota(api, elastic_quota("quota", namespace, {GPU: 2}, {GPU: 2}))
        pods = [gpu_pod(f"p{i}", namespace, kubesched.scheduler_name, 2, selector) for i in range(2)]
        await testing.create_pods(api, pods)
        await wait_bound(api, namespace, 1)
        refused = "p1" if node_of((await pods_by_name(api, namespace))["p0"]) else "p0"
        await wait_refused(api, namespace, refused, f"ElasticQuota {namespace}/quota: over max: {GPU} 4 > 2")
        await wait_used(api, namespace, "quota", {GPU: "2"})
    finally:
        await install_crds(api, REPO / "crds")


# --------------------------------------------------------------------------- reclaim by preemption

HIGH, MID, LOW = 1000, 100, 10


def held_pod(
    name: str, namespace: str, scheduler: str, gpus: int, selector: Mapping[str, str], priority: int = 0
) -> dict[str, Any]:
    """A pod of `gpus` that goes at once when evicted (no kubelet here to wait for)."""
    manifest = with_gpus(
        make_pod(name, namespace, scheduler, node_selector=selector, priority=priority), gpus
    )
    manifest["spec"]["terminationGracePeriodSeconds"] = 0
    return manifest


def running(name: str, namespace: str, node: str, priority: int, **requests: str) -> dict[str, Any]:
    """A pod already on `node` (upstream's existPods), going at once when evicted."""
    manifest = make_pod(name, namespace, "default-scheduler", priority=priority, node_name=node, **requests)
    manifest["spec"]["terminationGracePeriodSeconds"] = 0
    return manifest


async def preempted(api: ApiClient, namespace: str) -> dict[str, list[str]]:
    """The Preempted events' messages in `namespace`, by pod."""
    status, body = await request(api, "GET", f"/api/v1/namespaces/{namespace}/events")
    assert status == 200, body
    found: dict[str, list[str]] = {}
    for event in body["items"]:
        if event["reason"] == "Preempted":
            found.setdefault(event["involvedObject"]["name"], []).append(event["message"])
    return found


async def wait_bound_pod(api: ApiClient, namespace: str, name: str, timeout: float = 60) -> str:
    await wait_for(
        lambda: _bound(api, namespace, name), timeout=timeout, interval=0.3, message=f"{name} bound"
    )
    node = node_of((await pods_by_name(api, namespace))[name])
    print(f"{namespace}/{name} bound to {node}")
    return node


async def wait_names(api: ApiClient, namespace: str, expected: set[str], timeout: float = 60) -> None:
    """Until exactly `expected` pods exist in `namespace` (the victims gone)."""
    seen: list[set[str]] = []

    async def settled() -> bool:
        seen.append(set(await pods_by_name(api, namespace)))
        return seen[-1] == expected

    await wait_for(settled, timeout=timeout, interval=0.3, message=f"{namespace} pods {sorted(expected)}")


async def kep_story(
    api: ApiClient, kubesched: KubeschedProcess, namespaces: list[str]
) -> tuple[str, str, dict[str, str]]:
    """KEP 9 story 1 on one 10-GPU node: A (min 4, max 6) borrowed up to 6 in 2-GPU pods while B
    (min 6, max 8) used 3."""
    a, b = [await new_namespace(api, namespaces, x) for x in "ab"]
    selector = await gpu_node(api, f"{a}-node")
    await create_quota(api, elastic_quota("quota-a", a, {GPU: 4}, {GPU: 6}))
    await create_quota(api, elastic_quota("quota-b", b, {GPU: 6}, {GPU: 8}))
    scheduler = kubesched.scheduler_name
    await testing.create_pods(api, [held_pod("b0", b, scheduler, 3, selector)])
    await wait_bound(api, b, 1)
    await testing.create_pods(api, [held_pod(f"a{i}", a, scheduler, 2, selector) for i in range(3)])
    await wait_bound(api, a, 3)
    await wait_used(api, a, "quota-a", {GPU: "6"})
    return a, b, selector


async def test_reclaim_takes_back_to_the_min_and_no_further(
    api: ApiClient, kubesched: KubeschedProcess, namespaces: list[str]
) -> None:
    """(3) B, under its min, asks for 3 more: exactly one of A's pods goes, B reaches 6 and A its
    min of 4. (4) B, at its min, asks for one more: A lends nothing, B's pod waits naming its quota."""
    a, b, selector = await kep_story(api, kubesched, namespaces)
    await testing.create_pods(api, [held_pod("b1", b, kubesched.scheduler_name, 3, selector)])
    await wait_bound_pod(api, b, "b1")
    left = set(await pods_by_name(api, a))
    print(f"{a} pods left: {sorted(left)}")
    assert len(left) == 2 and left < {"a0", "a1", "a2"}, left
    (victim,) = {"a0", "a1", "a2"} - left
    events = await preempted(api, a)
    print(f"Preempted: {events}")
    node = f"{a}-node"
    assert events == {
        victim: [
            f"Preempted by {b}/b1 on node {node}: ElasticQuota {a}/quota-a over its min, reclaimed by "
            f"{b}/quota-b within its min"
        ]
    }
    await wait_used(api, a, "quota-a", {GPU: "4"})
    await wait_used(api, b, "quota-b", {GPU: "6"})

    await testing.create_pods(api, [held_pod("b2", b, kubesched.scheduler_name, 1, selector)])
    await wait_refused(
        api, b, "b2", f"ElasticQuota {b}/quota-b: the quotas' total use would pass the sum of their mins"
    )
    assert set(await pods_by_name(api, a)) == left
    assert await preempted(api, a) == events
    assert not node_of((await pods_by_name(api, b))["b2"])


# ------------------------------------------------- scheduler-plugins' integration test, case by case

# kubernetes-sigs/scheduler-plugins, test/integration/capacity_scheduling_test.go (TestCapacityScheduling):
# its two nodes (cpu 100, memory 100 bytes, 32 pods), its quotas, its pods in their order, and the
# pods it expects bound. Its priorities (test/integration/utils.go): low 0, mid 100, high 1000.
UP_LOW, UP_MID, UP_HIGH = 0, 100, 1000


@dataclass(frozen=True)
class UpstreamPod:
    """util.MakePod(name, namespace, memReq, cpuReq (milli), priority, uid, nodeName)."""

    name: str
    ns: int  # 1 for upstream's ns1, ...
    memory: int
    milli_cpu: int
    priority: int
    node: int = 0  # 1 for fake-node-1, 2 for fake-node-2; 0: added, for the scheduler to place


@dataclass(frozen=True)
class UpstreamCase:
    name: str  # upstream's, verbatim
    quotas: tuple[tuple[int, Mapping[str, str], Mapping[str, str]], ...]  # (ns, min, max), named eq<ns>
    exist: tuple[UpstreamPod, ...]
    add: tuple[UpstreamPod, ...]
    expected: frozenset[str]  # upstream's expectedPods
    refused: Mapping[str, str] = field(default_factory=dict)  # pod -> what its FailedScheduling says


def _pods(*specs: tuple[str, int, int, int, int, int]) -> tuple[UpstreamPod, ...]:
    return tuple(UpstreamPod(*spec) for spec in specs)


_EQ = ({"memory": "100", "cpu": "100m"}, {"memory": "200", "cpu": "200m"})
TOTAL = "the quotas' total use would pass the sum of their mins"
UPSTREAM_CASES = (
    UpstreamCase(
        "cross-namespace preemption",
        ((1, *_EQ), (2, *_EQ)),
        _pods(
            ("t1-p1", 1, 50, 10, UP_MID, 1), ("t1-p2", 1, 50, 10, UP_MID, 1), ("t1-p3", 1, 50, 10, UP_LOW, 2)
        ),
        _pods(
            ("t1-p4", 2, 50, 10, UP_MID, 0), ("t1-p5", 2, 50, 10, UP_MID, 0), ("t1-p6", 2, 50, 10, UP_LOW, 0)
        ),
        frozenset({"t1-p1", "t1-p2", "t1-p4", "t1-p5"}),
        {"t1-p6": TOTAL},
    ),
    UpstreamCase(
        "in-namespace preemption",
        ((1, *_EQ), (2, *_EQ)),
        _pods(
            ("t2-p1", 1, 50, 10, UP_MID, 1),
            ("t2-p2", 1, 50, 10, UP_LOW, 1),
            ("t2-p3", 2, 50, 10, UP_MID, 2),
            ("t2-p4", 2, 50, 10, UP_LOW, 2),
        ),
        _pods(("t2-p5", 1, 50, 10, UP_MID, 0), ("t2-p6", 2, 50, 10, UP_MID, 0)),
        frozenset({"t2-p1", "t2-p3", "t2-p5", "t2-p6"}),
    ),
    UpstreamCase(
        "regular preemption without Elastic Quota",
        (),
        _pods(
            ("t3-p1", 1, 50, 10, UP_HIGH, 1),
            ("t3-p2", 1, 50, 10, UP_LOW, 1),
            ("t3-p3", 2, 50, 10, UP_HIGH, 2),
            ("t3-p4", 2, 50, 10, UP_LOW, 2),
        ),
        _pods(("t3-p5", 1, 50, 10, UP_MID, 0), ("t3-p6", 2, 50, 10, UP_MID, 0)),
        frozenset({"t3-p1", "t3-p3", "t3-p5", "t3-p6"}),
    ),
    UpstreamCase(
        "in-namespace preemption failed because it can't find node which is suitable for preemption",
        ((1, *_EQ), (2, *_EQ)),
        _pods(
            ("t4-p1", 1, 50, 10, UP_MID, 1),
            ("t4-p2", 1, 50, 10, UP_MID, 1),
            ("t4-p3", 1, 50, 10, UP_LOW, 2),
            ("t4-p4", 2, 50, 10, UP_MID, 2),
        ),
        _pods(("t4-p5", 1, 150, 10, UP_HIGH, 0), ("t4-p6", 2, 150, 10, UP_HIGH, 0)),
        frozenset({"t4-p1", "t4-p2", "t4-p3", "t4-p4"}),
        {"t4-p5": "over max: memory 300 > 200", "t4-p6": TOTAL},
    ),
    UpstreamCase(
        "pod subjects to overused quota can't preempt pods subjects to other quotas",
        ((1, *_EQ), (2, *_EQ)),
        _pods(
            ("t5-p1", 1, 50, 10, UP_MID, 1),
            ("t5-p2", 2, 50, 10, UP_HIGH, 1),
            ("t5-p3", 2, 50, 10, UP_HIGH, 2),
            ("t5-p4", 2, 50, 10, UP_HIGH, 2),
        ),
        _pods(("t5-p5", 2, 50, 10, UP_HIGH, 0)),
        frozenset({"t5-p1", "t5-p2", "t5-p3", "t5-p4"}),
        {"t5-p5": TOTAL},
    ),
    UpstreamCase(
        "cross-node preemption isn't supported",
        ((1, *_EQ), (2, *_EQ)),
        _pods(
            ("t6-p1", 1, 50, 10, UP_LOW, 1),
            ("t6-p2", 1, 50, 10, UP_LOW, 2),
            ("t6-p3", 2, 50, 10, UP_MID, 1),
            ("t6-p4", 2, 50, 10, UP_MID, 2),
        ),
        _pods(("t6-p5", 1, 100, 20, UP_HIGH, 0), ("t6-p6", 2, 100, 20, UP_HIGH, 0)),
        frozenset({"t6-p1", "t6-p2", "t6-p3", "t6-p4"}),
        {"t6-p5": TOTAL, "t6-p6": TOTAL},
    ),
    UpstreamCase(
        "cross-namespace preemption with three elasticquota",
        (
            (1, {"memory": "100", "cpu": "1m"}, {"memory": "200", "cpu": "3m"}),
            (2, {"memory": "100", "cpu": "3m"}, {"memory": "200", "cpu": "3m"}),
            (3, {"memory": "100", "cpu": "3m"}, {"memory": "200", "cpu": "4m"}),
        ),
        _pods(
            ("t7-p1", 1, 0, 1, UP_HIGH, 1),
            ("t7-p2", 1, 0, 1, UP_MID, 2),
            ("t7-p3", 1, 0, 1, UP_MID, 2),
            ("t7-p5", 2, 0, 1, UP_MID, 2),
            ("t7-p6", 2, 0, 1, UP_MID, 1),
            ("t7-p7", 2, 0, 1, UP_MID, 2),
        ),
        _pods(
            ("t7-p9", 3, 0, 1, UP_MID, 0),
            ("t7-p10", 3, 0, 1, UP_MID, 0),
            ("t7-p11", 3, 0, 1, UP_MID, 0),
            ("t7-p12", 3, 0, 1, UP_MID, 0),
        ),
        frozenset({"t7-p1", "t7-p5", "t7-p6", "t7-p7", "t7-p9", "t7-p10", "t7-p11"}),
        {"t7-p12": TOTAL},
    ),
)


@pytest.mark.parametrize("case", UPSTREAM_CASES, ids=lambda c: c.exist[0].name[:2])
async def test_scheduler_plugins_integration_case(
    api: ApiClient, kubesched: KubeschedProcess, namespaces: list[str], case: UpstreamCase
) -> None:
    """Each case of upstream's TestCapacityScheduling binds the pods it expects. Upstream only waits
    for those; here nothing else may be bound either: the existing pods it does not expect are
    evicted (one Preempted event each), the added ones wait with their quota's rule named. Case t5
    is issue 36's acceptance case 5 (a borrowing quota cannot evict another quota's pods)."""
    count = max(p.ns for p in case.exist + case.add)
    ns = {i: await new_namespace(api, namespaces, f"ns{i}") for i in range(1, count + 1)}
    selector = {"quota-test": ns[1]}
    nodes = {i: f"{ns[1]}-fake-node-{i}" for i in (1, 2)}
    await create_nodes(
        api, [make_node(n, cpu="100", memory="100", pods="32", labels=selector) for n in nodes.values()]
    )
    for i, low, high in case.quotas:
        await create_quota(api, elastic_quota(f"eq{i}", ns[i], low, high))

    def manifest(pod: UpstreamPod) -> dict[str, Any]:
        requests = {"memory": str(pod.memory), "cpu": f"{pod.milli_cpu}m"}
        if pod.node:
            return running(pod.name, ns[pod.ns], nodes[pod.node], pod.priority, **requests)
        made = make_pod(
            pod.name,
            ns[pod.ns],
            kubesched.scheduler_name,
            node_selector=selector,
            priority=pod.priority,
            **requests,
        )
        made["spec"]["terminationGracePeriodSeconds"] = 0
        return made

    await testing.create_pods(api, [manifest(p) for p in case.exist])
    for i, _, _ in case.quotas:  # the scheduler counts the existing pods before any is added
        mine = [p for p in case.exist if p.ns == i]
        await wait_used(
            api,
            ns[i],
            f"eq{i}",
            {
                "cpu": in_one_unit("cpu", sum(p.milli_cpu for p in mine))[0],
                "memory": in_one_unit("memory", sum(p.memory for p in mine))[0],
            },
        )
    for pod in case.add:  # one by one, in upstream's order
        await testing.create_pods(api, [manifest(pod)])

    every = {p.name: p for p in case.exist + case.add}
    seen: dict[str, str] = {}  # pod -> its node, or "" while pending, of the pods still there

    async def settled() -> bool:
        seen.clear()
        for namespace in ns.values():
            seen.update({name: node_of(p) for name, p in (await pods_by_name(api, namespace)).items()})
        return {name for name, node in seen.items() if node} == case.expected and not (
            set(seen) & {p.name for p in case.exist} - case.expected
        )

    try:
        await wait_for(settled, timeout=60, interval=0.3)
    except TimeoutError:
        raise AssertionError(
            f"{case.name}: pods and nodes {seen}, expected bound {sorted(case.expected)}"
        ) from None
    print(f"{case.name}: {seen}")
    pending = {p.name for p in case.add} - case.expected
    for name in sorted(pending):
        pod = every[name]
        needle = f"ElasticQuota {ns[pod.ns]}/eq{pod.ns}: {case.refused[name]}"
        await wait_refused(api, ns[pod.ns], name, needle)
    victims = {p.name for p in case.exist} - case.expected
    events: dict[str, list[str]] = {}
    for namespace in ns.values():
        events.update(await preempted(api, namespace))
    print(f"Preempted: {events}")
    assert set(events) == victims and all(len(m) == 1 for m in events.values()), events
    assert await settled(), f"{case.name}: it changed after the refusals: {seen}"


async def test_within_a_quota_only_its_lower_priority_pods_are_evicted(
    api: ApiClient, kubesched: KubeschedProcess, namespaces: list[str]
) -> None:
    """(6) A, over its min, preempts at priority 100: its own pod of priority 10 goes; its pod of
    priority 1000 and B's pod of priority 0 stay."""
    a, b = [await new_namespace(api, namespaces, x) for x in "ab"]
    selector = await gpu_node(api, f"{a}-node")
    node = f"{a}-node"
    await create_quota(api, elastic_quota("quota-a", a, {GPU: 2}, {GPU: 10}))
    await create_quota(api, elastic_quota("quota-b", b, {GPU: 8}, {GPU: 10}))
    await testing.create_pods(
        api,
        [
            with_gpus(running("a-low", a, node, LOW), 3),
            with_gpus(running("a-high", a, node, HIGH), 3),
            with_gpus(running("b0", b, node, 0), 4),
        ],
    )
    await wait_used(api, a, "quota-a", {GPU: "6"})
    await testing.create_pods(api, [held_pod("a-new", a, kubesched.scheduler_name, 3, selector, MID)])
    await wait_bound_pod(api, a, "a-new")
    await wait_names(api, a, {"a-high", "a-new"})
    assert set(await pods_by_name(api, b)) == {"b0"}
    events = await preempted(api, a)
    print(f"Preempted: {events}")
    assert events == {
        "a-low": [
            f"Preempted by {a}/a-new on node {node}: lower priority in ElasticQuota {a}/quota-a, "
            "which borrows beyond its min"
        ]
    }
    assert await preempted(api, b) == {}


async def test_issue_683_a_quota_under_its_min_gets_it_back_when_the_mins_fill_the_cluster(
    api: ApiClient, kubesched: KubeschedProcess, namespaces: list[str]
) -> None:
    """(7) scheduler-plugins issue 683: 5 GPUs; A (min 4, max 5) uses all 5, B (min 1) asks for
    one: B's pod binds after exactly one eviction from A."""
    a, b = [await new_namespace(api, namespaces, x) for x in "ab"]
    node = f"{a}-node"
    selector = {"quota-test": node}
    await create_nodes(api, [make_node(node, cpu="64", labels=selector, extended={GPU: "5"})])
    await create_quota(api, elastic_quota("quota-a", a, {GPU: 4}, {GPU: 5}))
    await create_quota(api, elastic_quota("quota-b", b, {GPU: 1}, {GPU: 5}))
    await testing.create_pods(api, [with_gpus(running(f"a{i}", a, node, 0), 1) for i in range(5)])
    await wait_used(api, a, "quota-a", {GPU: "5"})
    await testing.create_pods(api, [held_pod("b0", b, kubesched.scheduler_name, 1, selector)])
    assert await wait_bound_pod(api, b, "b0") == node
    left = set(await pods_by_name(api, a))
    events = await preempted(api, a)
    print(f"{a} pods left: {sorted(left)}; Preempted: {events}")
    assert len(left) == 4 and len(events) == 1 and set(events) == {f"a{i}" for i in range(5)} - left
    await wait_used(api, a, "quota-a", {GPU: "4"})
    await wait_used(api, b, "quota-b", {GPU: "1"})


async def gang_against_a(
    api: ApiClient, kubesched: KubeschedProcess, namespaces: list[str], a_min: int
) -> tuple[str, str]:
    """A (min `a_min`) uses 8 of a 10-GPU node in four 2-GPU pods; B (min 6) asks for a gang of
    three 2-GPU members. Returns the namespaces."""
    a, b = [await new_namespace(api, namespaces, x) for x in "ab"]
    selector = await gpu_node(api, f"{a}-node")
    node = f"{a}-node"
    await create_quota(api, elastic_quota("quota-a", a, {GPU: a_min}, {GPU: 10}))
    await create_quota(api, elastic_quota("quota-b", b, {GPU: 6}, {GPU: 10}))
    await testing.create_pods(api, [with_gpus(running(f"a{i}", a, node, 0), 2) for i in range(4)])
    await wait_used(api, a, "quota-a", {GPU: "8"})
    await create_object(api, pod_group("job", b, 3))
    for i in range(3):
        manifest = member(f"m{i}", b, "job", kubesched.scheduler_name, cpu=None, node_selector=selector)
        manifest["spec"]["terminationGracePeriodSeconds"] = 0
        await create_object(api, with_gpus(manifest, 2))
    return a, b


async def test_a_gang_that_cannot_fit_even_after_reclaim_evicts_nobody(
    api: ApiClient, kubesched: KubeschedProcess, namespaces: list[str]
) -> None:
    """(8b) A at min 6 lends only one pod's worth: reclaim would make room for two members of
    three, so nobody is evicted and the members wait naming B's quota."""
    a, b = await gang_against_a(api, kubesched, namespaces, a_min=6)
    for i in range(3):
        await wait_refused(
            api, b, f"m{i}", f"pod group {b}/job: ElasticQuota {b}/quota-b refuses its 3 members"
        )
    assert set(await pods_by_name(api, a)) == {f"a{i}" for i in range(4)}
    assert await preempted(api, a) == {}
    pods = await pods_by_name(api, b)
    assert not [name for name, p in pods.items() if node_of(p)], pods


async def test_a_gang_takes_back_its_min_as_a_unit(
    api: ApiClient, kubesched: KubeschedProcess, namespaces: list[str]
) -> None:
    """The same gang with A at min 4: two of A's pods go and the three members bind."""
    a, b = await gang_against_a(api, kubesched, namespaces, a_min=4)
    await wait_bound(api, b, 3)
    left = set(await pods_by_name(api, a))
    events = await preempted(api, a)
    print(f"{a} pods left: {sorted(left)}; Preempted: {events}")
    assert len(left) == 2 and set(events) == {f"a{i}" for i in range(4)} - left
    await wait_used(api, a, "quota-a", {GPU: "4"})
    await wait_used(api, b, "quota-b", {GPU: "6"})
