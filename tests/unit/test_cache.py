from __future__ import annotations

from typing import Any

from kubesched.model.objects import Pod, node_from_dict, pod_from_dict
from kubesched.runtime.cache import SchedulerCache


def node(name: str, cpu: str = "4") -> Any:
    return node_from_dict(
        {"metadata": {"name": name}, "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"}}}
    )


def pod(name: str, cpu: str = "1", node_name: str = "", port: int = 0) -> Pod:
    container: dict[str, Any] = {"name": "c", "resources": {"requests": {"cpu": cpu}}}
    if port:
        container["ports"] = [{"containerPort": port, "hostPort": port}]
    return pod_from_dict(
        {
            "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}"},
            "spec": {"nodeName": node_name, "containers": [container]},
        }
    )


def requested_cpu(cache: SchedulerCache, name: str) -> int:
    info = cache.node_info(name)
    assert info is not None
    return info.requested.milli_cpu


def test_assume_counts_immediately_and_forget_undoes_it() -> None:
    cache = SchedulerCache()
    cache.set_node(node("n1"))
    cache.assume(pod("a", "1500m", port=80), "n1")
    assert requested_cpu(cache, "n1") == 1500
    info = cache.node_info("n1")
    assert info is not None and [p.port for p in info.used_ports] == [80]
    cache.forget("uid-a")
    info = cache.node_info("n1")
    assert info is not None and info.requested.milli_cpu == 0 and info.used_ports == ()


def test_confirmed_pod_survives_a_late_forget() -> None:
    cache = SchedulerCache()
    cache.set_node(node("n1"))
    cache.assume(pod("a"), "n1")
    cache.set_pod(pod("a", node_name="n1"))  # the watch saw the binding first
    cache.forget("uid-a")  # then the bind reply said 409
    assert requested_cpu(cache, "n1") == 1000


def test_pod_moved_between_nodes_is_counted_once() -> None:
    cache = SchedulerCache()
    cache.set_node(node("n1"))
    cache.set_node(node("n2"))
    cache.assume(pod("a"), "n1")
    cache.set_pod(pod("a", node_name="n2"))  # someone else bound it elsewhere
    assert requested_cpu(cache, "n1") == 0
    assert requested_cpu(cache, "n2") == 1000


def test_snapshot_is_not_changed_by_later_events() -> None:
    cache = SchedulerCache()
    cache.set_node(node("n1"))
    snap = cache.snapshot()
    cache.set_pod(pod("a", node_name="n1"))
    cache.set_node(node("n2"))
    assert [n.name for n in snap.nodes] == ["n1"]
    assert snap.nodes[0].requested.milli_cpu == 0
    assert snap.get("n2") is None
    assert cache.snapshot().get("n2") is not None


def test_pods_of_an_unknown_node_are_kept_until_it_appears() -> None:
    cache = SchedulerCache()
    cache.set_pod(pod("a", node_name="late"))
    cache.set_node(node("late"))
    assert requested_cpu(cache, "late") == 1000
    cache.remove_node("late")
    cache.set_node(node("late"))
    assert requested_cpu(cache, "late") == 1000
    cache.remove_pod("uid-a")
    assert requested_cpu(cache, "late") == 0


def test_node_update_keeps_its_pods() -> None:
    cache = SchedulerCache()
    cache.set_node(node("n1", cpu="4"))
    cache.set_pod(pod("a", node_name="n1"))
    cache.set_node(node("n1", cpu="8"))
    info = cache.node_info("n1")
    assert info is not None and info.node.allocatable.milli_cpu == 8000 and info.requested.milli_cpu == 1000


def test_remove_node_keeps_others_addressable() -> None:
    cache = SchedulerCache()
    for n in ("a", "b", "c"):
        cache.set_node(node(n))
    cache.remove_node("b")
    snap = cache.snapshot()
    assert [n.name for n in snap.nodes] == ["a", "c"]
    assert snap.get("c") is snap.nodes[1]


def test_objects_are_frozen_per_snapshot() -> None:
    cache = SchedulerCache()
    cache.set_object("Service", "ns/web", {"spec": {"selector": {"app": "web"}}})
    snap = cache.snapshot()
    cache.set_object("Service", "ns/web", None)
    assert "ns/web" in snap.objects.services
    assert "ns/web" not in cache.snapshot().objects.services


def test_a_snapshot_keeps_its_node_index_while_the_cache_adds_and_removes_nodes() -> None:
    # The cache fills its index in place until a snapshot holds it, then copies before changing it.
    cache = SchedulerCache()
    for name in ("a", "b"):
        cache.set_node(node(name))
    first = cache.snapshot()
    cache.set_node(node("c"))
    second = cache.snapshot()
    cache.remove_node("a")
    cache.set_node(node("d"))
    assert dict(first.index) == {"a": 0, "b": 1}
    assert dict(second.index) == {"a": 0, "b": 1, "c": 2}
    assert dict(cache.snapshot().index) == {"b": 0, "c": 1, "d": 2}
    assert [info.name for info in first.nodes] == ["a", "b"]
