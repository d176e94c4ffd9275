"""Extenders (core/extender.go, core/generic_scheduler.go findNodesThatPassExtenders and
prioritizeNodes) against a real extender process (tests/extender_server.py), through the HTTP
transport the scheduler injects: what the scheduler sends, how answers change the decision, and
that a slow or failing extender costs at most its httpTimeout."""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kubesched.algorithm.extenders import NoTransportError
from kubesched.algorithm.generic import Algorithm, ExtenderFailure, FitError
from kubesched.algorithm.preemption import MSG_NO_CANDIDATE, Preemption, PreemptionOutcome, attempt
from kubesched.kube.extender_transport import HTTPTransport
from kubesched.model.objects import Pod
from kubesched.policy.compile import compile_policy
from kubesched_dev.fixtures import model_node, model_pod, node_info, snapshot

from ..extender_server import extender_processes

SNAP = snapshot(model_node("n1"), model_node("n2"), model_node("n3"))
RNG = random.Random(0)


@pytest.fixture
def start(tmp_path: Path) -> Iterator[Any]:
    with extender_processes(tmp_path) as start_one:
        yield start_one


def policy(*extenders: dict[str, Any], priorities: list[Any] | None = None) -> Algorithm:
    spec = {"predicates": [], "priorities": priorities or [], "extenders": list(extenders)}
    return compile_policy(spec, transport=HTTPTransport)


def test_filter_and_prioritize_decide_among_the_feasible_nodes(start: Any) -> None:
    ext = start(
        {"filter": {"reject": {"n1": "no license here"}}, "prioritize": {"scores": {"n2": 1, "n3": 7}}}
    )
    algorithm = policy(
        {"urlPrefix": ext.url, "filterVerb": "filter", "prioritizeVerb": "prioritize", "weight": 2}
    )
    result = algorithm.schedule(model_pod("web"), SNAP, RNG)
    assert result.node_name == "n3"
    # Extender scores (0..10) times weight 2, scaled by MaxNodeScore / MaxExtenderPriority = 10.
    assert result.scores == {"n2": 20, "n3": 140}
    assert result.failed_nodes == {"n1": ("no license here",)}
    filter_call, prioritize_call = ext.requests()
    assert filter_call["verb"] == "filter"
    sent = filter_call["body"]
    assert sent["NodeNames"] is None and [n["metadata"]["name"] for n in sent["Nodes"]["items"]] == [
        "n1",
        "n2",
        "n3",
    ]
    assert sent["Pod"]["metadata"]["name"] == "web" and sent["Pod"]["spec"]["containers"]
    assert [n["metadata"]["name"] for n in prioritize_call["body"]["Nodes"]["items"]] == ["n2", "n3"]


def test_node_cache_capable_extenders_get_names_only(start: Any) -> None:
    ext = start({"filter": {"reject": {"n2": "busy"}}})
    algorithm = policy({"urlPrefix": ext.url, "filterVerb": "filter", "nodeCacheCapable": True})
    with pytest.raises(FitError) as caught:
        algorithm.schedule(model_pod(), snapshot(model_node("n2")), RNG)
    assert str(caught.value) == "0/1 nodes are available: 1 busy."
    (call,) = ext.requests()
    assert call["body"]["NodeNames"] == ["n2"] and call["body"]["Nodes"] is None


def test_a_failing_extender_that_is_not_ignorable_makes_the_pod_unschedulable(start: Any) -> None:
    ext = start({"filter": {"status": 500}})
    algorithm = policy({"urlPrefix": ext.url, "filterVerb": "filter"})
    with pytest.raises(ExtenderFailure) as caught:
        algorithm.schedule(model_pod(), SNAP, RNG)
    assert str(caught.value) == (
        f"extender {ext.url}/filter: HTTP status 500 Internal Server Error (expected 200): "
        '{"error": "configured failure"}'
    )


def test_an_extender_error_answer_is_a_failure_too(start: Any) -> None:
    ext = start({"filter": {"error": "database down"}})
    with pytest.raises(ExtenderFailure, match="database down"):
        policy({"urlPrefix": ext.url, "filterVerb": "filter"}).schedule(model_pod(), SNAP, RNG)


def test_a_slow_ignorable_extender_costs_at_most_its_timeout(start: Any) -> None:
    slow = start({"filter": {"delay": 5, "reject": {"n1": "x", "n2": "x", "n3": "x"}}})
    algorithm = policy(
        {"urlPrefix": slow.url, "filterVerb": "filter", "ignorable": True, "httpTimeout": "300ms"}
    )
    began = time.monotonic()
    result = algorithm.schedule(model_pod(), SNAP, RNG)
    assert time.monotonic() - began < 2.5  # well under the extender's 5 s
    assert result.node_name in ("n1", "n2", "n3")  # its verdict never arrived: it was skipped


def test_a_slow_extender_that_is_not_ignorable_fails_the_pod_after_its_timeout(start: Any) -> None:
    slow = start({"filter": {"delay": 5}})
    algorithm = policy({"urlPrefix": slow.url, "filterVerb": "filter", "httpTimeout": 300_000_000})
    began = time.monotonic()
    with pytest.raises(ExtenderFailure, match=rf"^extender {slow.url}/filter: no reply within 0\.3s$"):
        algorithm.schedule(model_pod(), SNAP, RNG)
    assert time.monotonic() - began < 2.5


def test_prioritize_failures_are_ignored(start: Any) -> None:
    ext = start({"prioritize": {"status": 503}})
    algorithm = policy(
        {"urlPrefix": ext.url, "prioritizeVerb": "prioritize", "weight": 5},
        priorities=[{"name": "LeastRequestedPriority", "weight": 1}],
    )
    busy = snapshot(model_node("big", cpu="8"), model_node("small", cpu="1"))
    assert algorithm.schedule(model_pod(cpu="500m"), busy, RNG).node_name == "big"


def test_an_extender_only_sees_pods_with_its_managed_resources(start: Any) -> None:
    ext = start({"filter": {"reject": {"n1": "x", "n2": "x", "n3": "x", "g1": "x"}}})
    algorithm = policy(
        {"urlPrefix": ext.url, "filterVerb": "filter", "managedResources": [{"name": "example.com/gpu"}]}
    )
    assert algorithm.schedule(model_pod(), SNAP, RNG).node_name in ("n1", "n2", "n3")
    assert ext.requests() == []
    gpu_pod: Pod = model_pod(extra={"example.com/gpu": "1"})
    gpu_nodes = snapshot(model_node("g1", extra={"example.com/gpu": "2"}))
    with pytest.raises(FitError):
        algorithm.schedule(gpu_pod, gpu_nodes, RNG)
    assert [r["verb"] for r in ext.requests()] == ["filter"]


def test_a_policy_compiled_without_a_transport_cannot_call_its_extenders(start: Any) -> None:
    """Validation alone (policy convert, pure tests) needs no transport; calling does, and its absence
    is a wiring mistake, not an extender failure that `ignorable` would swallow."""
    ext = start({"filter": {}})
    entry = {"urlPrefix": ext.url, "filterVerb": "filter", "ignorable": True}
    algorithm = compile_policy({"predicates": [], "priorities": [], "extenders": [entry]})
    with pytest.raises(NoTransportError, match=f"extender {ext.url} cannot be called"):
        algorithm.schedule(model_pod(), SNAP, RNG)
    assert ext.requests() == []


def test_bind_through_the_extender(start: Any) -> None:
    ext = start({"bind": {}})
    algorithm = policy({"urlPrefix": ext.url, "bindVerb": "bind"})
    pod = model_pod("web")
    binder = algorithm.binder_for(pod)
    assert binder is not None
    binder.bind(pod, "n2")
    assert ext.requests() == [
        {
            "verb": "bind",
            "body": {"PodName": "web", "PodNamespace": "default", "PodUID": pod.uid, "Node": "n2"},
        }
    ]


# ------------------------------------------------------------------------------- preemptVerb


def crowded() -> tuple[Pod, Any]:
    """n1 holds one low-priority pod and n2 two: evicting on n1 costs least, without extenders."""
    n1 = node_info(model_node("n1", cpu="2"), [model_pod("v1", cpu="2")])
    n2 = node_info(model_node("n2", cpu="2"), [model_pod("v2a", cpu="1"), model_pod("v2b", cpu="1")])
    return model_pod("urgent", cpu="2", priority=100), snapshot(n1, n2)


def preempt_with(*extenders: dict[str, Any]) -> Preemption:
    algorithm = compile_policy(
        {"predicates": [{"name": "PodFitsResources"}], "priorities": [], "extenders": list(extenders)},
        transport=HTTPTransport,
    )
    pod, snap = crowded()
    with pytest.raises(FitError) as caught:
        algorithm.schedule(pod, snap, RNG)
    outcome = attempt(caught.value, snap, algorithm.predicates, (), random.Random(0), "", algorithm.extenders)
    assert isinstance(outcome, PreemptionOutcome)
    return outcome.preemption


def test_preempt_sends_whole_victims_and_the_extender_narrows_the_candidates(start: Any) -> None:
    assert preempt_with().node_name == "n1"
    ext = start({"preempt": {"drop": ["n1"]}})
    chosen = preempt_with({"urlPrefix": ext.url, "preemptVerb": "preempt"})
    assert chosen.node_name == "n2" and sorted(p.name for p in chosen.victims) == ["v2a", "v2b"]
    (call,) = ext.requests()
    assert call["verb"] == "preempt" and call["body"]["Pod"]["metadata"]["name"] == "urgent"
    assert call["body"]["NodeNameToMetaVictims"] is None
    sent = call["body"]["NodeNameToVictims"]
    assert {node: sorted(p["metadata"]["name"] for p in v["Pods"]) for node, v in sent.items()} == {
        "n1": ["v1"],
        "n2": ["v2a", "v2b"],
    }
    assert sent["n1"]["NumPDBViolations"] == 0


def test_a_node_cache_capable_extender_gets_uids_and_may_spare_victims(start: Any) -> None:
    ext = start({"preempt": {"drop": ["n1"], "max_victims": 1}})
    chosen = preempt_with({"urlPrefix": ext.url, "preemptVerb": "preempt", "nodeCacheCapable": True})
    assert chosen.node_name == "n2" and len(chosen.victims) == 1
    (call,) = ext.requests()
    sent = call["body"]["NodeNameToMetaVictims"]
    assert call["body"]["NodeNameToVictims"] is None
    _, snap = crowded()
    uids = {n.name: sorted(p.uid for p in n.pods.values()) for n in snap.nodes}
    # Fresh pods each time: compare the shape, and the uids of the victims chosen against the reply.
    assert {node: len(v["Pods"]) for node, v in sent.items()} == {node: len(u) for node, u in uids.items()}
    assert all(set(p) == {"UID"} for v in sent.values() for p in v["Pods"])
    assert chosen.victims[0].uid == sent["n2"]["Pods"][0]["UID"]


def test_a_failing_preempt_call_stops_preemption_unless_the_extender_is_ignorable(start: Any) -> None:
    broken = start({"preempt": {"status": 500}})
    failed = preempt_with({"urlPrefix": broken.url, "preemptVerb": "preempt"})
    assert failed.node_name == ""
    assert failed.message.startswith(f"extender {broken.url}/preempt: HTTP status 500")
    skipped = preempt_with({"urlPrefix": broken.url, "preemptVerb": "preempt", "ignorable": True})
    assert skipped.node_name == "n1"


def test_extenders_without_a_preempt_verb_or_interest_are_not_asked(start: Any) -> None:
    ext = start({"preempt": {"drop": ["n1", "n2"]}})
    chosen = preempt_with(
        {"urlPrefix": ext.url, "filterVerb": "filter"},
        {"urlPrefix": ext.url, "preemptVerb": "preempt", "managedResources": [{"name": "example.com/gpu"}]},
    )
    assert chosen.node_name == "n1"
    assert [r["verb"] for r in ext.requests()] == []


def test_an_extender_accepting_no_candidate_leaves_the_pod_without_a_node(start: Any) -> None:
    ext = start({"preempt": {"drop": ["n1", "n2"]}})
    chosen = preempt_with({"urlPrefix": ext.url, "preemptVerb": "preempt"})
    assert chosen.node_name == "" and chosen.message == MSG_NO_CANDIDATE and chosen.clear_nomination
