"""The benchmark's audit (bench/kubebench/audit.py): a run that placed pods wrongly must fail it."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from kubebench.audit import audit
from kubebench.workload import make_nodes, make_pods, parse_cpu, parse_memory, round_robin_fits

from kubesched_dev.fixtures import make_node, make_pod

SMALL = make_node("small", cpu="1", memory="1Gi", pods="2", labels={"disktype": "hdd"})
LARGE = make_node("large", cpu="8", memory="32Gi", pods="110", labels={"disktype": "ssd"})


def pod(name: str, node: str | None, cpu: str = "500m", memory: str = "256Mi", **kw: Any) -> dict[str, Any]:
    return make_pod(name, "bench", "s", cpu=cpu, memory=memory, node_name=node, **kw)


CASES = [
    # name, pods, rebound, check selectors, expected problem (None: audit passes)
    ("all bound within capacity", [pod("a", "small"), pod("b", "large")], {}, True, None),
    ("a pod left unbound", [pod("a", "small"), pod("b", None)], {}, True, "1 pods not bound"),
    ("a pod on a node that does not exist", [pod("a", "gone")], {}, True, "node that does not exist"),
    (
        "cpu overcommitted",
        [pod("a", "small"), pod("b", "small", cpu="600m")],
        {},
        True,
        "small (cpu 1100>1000)",
    ),
    (
        "memory overcommitted",
        [pod("a", "small", memory="1Gi"), pod("b", "small", memory="1Mi")],
        {},
        True,
        "nodes overcommitted",
    ),
    (
        "pod count overcommitted",
        [pod(n, "small", cpu="1m", memory="1Mi") for n in "abc"],
        {},
        True,
        "pods 3>2",
    ),
    ("a pod bound twice", [pod("a", "large")], {"a": ["small", "large"]}, True, "bound to a second node"),
    (
        "nodeSelector not honoured",
        [pod("a", "small", node_selector={"disktype": "ssd"})],
        {},
        True,
        "nodeSelector excludes",
    ),
    (
        "the null binder is not held to nodeSelectors",
        [pod("a", "small", node_selector={"disktype": "ssd"})],
        {},
        False,
        None,
    ),
]


@pytest.mark.parametrize(
    ("pods", "rebound", "selectors", "problem"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_audit(
    pods: list[dict[str, Any]], rebound: dict[str, list[str]], selectors: bool, problem: str | None
) -> None:
    names = {p["metadata"]["name"] for p in pods}
    result = audit(pods, pods, [SMALL, LARGE], names, rebound, check_selectors=selectors)
    if problem is None:
        assert result.ok, result.problems()
    else:
        assert not result.ok
        assert any(problem in line for line in result.problems()), result.problems()


def test_a_missing_pod_fails_the_audit() -> None:
    result = audit([pod("a", "large")], [pod("a", "large")], [LARGE], {"a", "b"}, {})
    assert result.problems() == ["1 pods missing (e.g. b)"]


def test_other_namespaces_count_towards_node_usage() -> None:
    mine = [pod("a", "small", cpu="600m")]
    theirs = make_pod("x", "other", "s", cpu="600m", node_name="small")
    result = audit(mine, [*mine, theirs], [SMALL], {"a"}, {})
    assert any("small (cpu 1200>1000)" in line for line in result.problems())


def test_the_workload_fits_a_capacity_blind_binder_at_the_default_sizes() -> None:
    # Otherwise the null binder's audit fails by design and the ceiling is missing from the results.
    for nodes, pods in ((1000, 2000), (5000, 5000), (1000, 3000), (200, 400), (200, 500)):
        assert round_robin_fits(nodes, pods)
    assert not round_robin_fits(10, 1000)


def test_every_pod_of_the_workload_fits_round_robin_on_the_generated_nodes() -> None:
    nodes = make_nodes(50, seed=3)
    pods = make_pods(150, "bench", "s", seed=3)
    for i, p in enumerate(pods):
        p["spec"]["nodeName"] = nodes[i % len(nodes)]["metadata"]["name"]
    result = audit(pods, pods, nodes, {p["metadata"]["name"] for p in pods}, {}, check_selectors=False)
    assert result.ok, result.problems()
    assert len({n["metadata"]["labels"]["topology.kubernetes.io/zone"] for n in nodes}) == 5


@pytest.mark.parametrize(
    ("text", "milli"), [("250m", 250), ("1", 1000), ("3920m", 3920), ("0.5", 500), ("1.0001", 1001)]
)
def test_parse_cpu(text: str, milli: int) -> None:
    assert parse_cpu(text) == milli


@pytest.mark.parametrize(
    ("text", "size"), [("128Mi", 128 * 2**20), ("2Gi", 2 * 2**30), ("1G", 10**9), ("512", 512)]
)
def test_parse_memory(text: str, size: int) -> None:
    assert parse_memory(text) == size
