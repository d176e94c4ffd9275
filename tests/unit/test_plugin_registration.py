"""A plugin registers itself by being imported: a throw-away plugin, written to a module of its own,
is then known to the Policy compiler, to `explain` and to the KubeSchedulerConfiguration converter,
and to preemption and the queue through the traits it declares; once withdrawn, it is gone."""

from __future__ import annotations

import importlib
import json
import random
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from kubesched.algorithm.generic import FitError
from kubesched.plugins import registry
from kubesched.plugins.declare import PredicateSpec, predicate, register, scoped_registrations
from kubesched.plugins.node_name import HostName
from kubesched.policy.compile import PolicyError, compile_policy
from kubesched.policy.kubescheduler_config import convert_configuration
from kubesched.policy.store import compile_spec
from kubesched.tools.explain import explain_snapshot
from kubesched.tools.snapshot import ClusterState
from kubesched_dev.fixtures import make_node, make_pod, model_node, model_pod, snapshot

MODULE = "throwaway_plugin"
REASON = "node(s) were thrown away"
SOURCE = f'''
from __future__ import annotations

from kubesched.plugins.declare import predicate, priority, register
from kubesched.plugins.framework import Predicate, Priority


class Throwaway(Predicate):
    name = "Throwaway"
    unresolvable_reasons = frozenset({{"{REASON}"}})
    requeue_on = frozenset({{"ConfigMap"}})

    def filter(self, pod, state, node):
        return ("{REASON}",) if node.node.labels.get("throwaway") == "yes" else ()


class ThrowawayPriority(Priority):
    name = "ThrowawayPriority"

    def score(self, pod, state, node):
        return 100 if node.node.labels.get("favourite") == "yes" else 0


register(
    predicate(Throwaway, order=None, framework="Throwaway"),
    priority(ThrowawayPriority, framework="Throwaway"),
)
'''
POLICY = {"predicates": [{"name": "Throwaway"}], "priorities": [{"name": "ThrowawayPriority", "weight": 5}]}
LABELS = {
    "thrown": {"throwaway": "yes", "favourite": "yes"},
    "plain": {},
    "favourite": {"favourite": "yes"},
}


@pytest.fixture
def throwaway(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    """The throw-away plugin, imported (and so registered) for one test, withdrawn after it."""
    (tmp_path / f"{MODULE}.py").write_text(SOURCE)
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        with scoped_registrations():
            yield importlib.import_module(MODULE)
    finally:
        sys.modules.pop(MODULE, None)


def test_unknown_until_imported() -> None:
    with pytest.raises(PolicyError, match='unknown predicate "Throwaway"'):
        compile_policy(POLICY)
    assert not registry.is_unresolvable(REASON)  # cached now: the registration must clear it


def test_the_compiler_builds_a_policy_naming_it_and_the_plugin_runs(throwaway: ModuleType) -> None:
    algorithm = compile_policy(POLICY)
    assert algorithm.predicate_names == ("CheckNodeUnschedulable", "PodToleratesNodeTaints", "Throwaway")
    assert [(w.label, w.weight) for w in algorithm.priorities] == [("ThrowawayPriority", 5)]
    cluster = snapshot(*(model_node(name, labels=labels) for name, labels in LABELS.items()))
    result = algorithm.schedule(model_pod("web"), cluster, random.Random(0))
    assert result.node_name == "favourite"
    assert result.failed_nodes == {"thrown": (REASON,)}

    only_thrown = snapshot(model_node("thrown", labels=LABELS["thrown"]))
    with pytest.raises(FitError) as caught:
        algorithm.schedule(model_pod("web"), only_thrown, random.Random(0))
    assert str(caught.value) == f"0/1 nodes are available: 1 {REASON}."


def test_explain_lists_it(throwaway: ModuleType, tmp_path: Path) -> None:
    policy_file = tmp_path / "policy.json"
    policy_file.write_text(json.dumps(POLICY))
    nodes = [make_node(name, labels=labels) for name, labels in LABELS.items()]
    state = ClusterState(nodes, [make_pod("web")], {}, [])
    result = explain_snapshot(state, "default", "web", None, policy_file)
    assert [(r.node, r.reasons) for r in result.rejected] == [("thrown", (("Throwaway", REASON),))]
    assert [(s.node, [(p.priority, p.score, p.weight) for p in s.priorities]) for s in result.feasible] == [
        ("favourite", [("ThrowawayPriority", 100, 5)]),
        ("plain", [("ThrowawayPriority", 0, 5)]),
    ]
    assert result.message == "would be scheduled on favourite"


def test_a_kubescheduler_configuration_enabling_it_converts(throwaway: ModuleType) -> None:
    document = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": [
            {
                "schedulerName": "kubesched",
                "plugins": {"multiPoint": {"enabled": [{"name": "Throwaway", "weight": 3}]}},
            }
        ],
    }
    [profile], unconverted = convert_configuration(document)
    assert {"name": "Throwaway"} in profile.spec["predicates"]
    assert {"name": "ThrowawayPriority", "weight": 3} in profile.spec["priorities"]
    assert not [entry for entry in unconverted if "Throwaway" in str(entry)]
    assert "Throwaway" in compile_spec(profile.spec, "kubesched")[1].predicate_names


def test_preemption_and_the_queue_read_its_traits(throwaway: ModuleType) -> None:
    assert registry.is_unresolvable(REASON)
    assert "ConfigMap" in registry.REQUEUE_KINDS


def test_withdrawn_it_is_gone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    before = (dict(registry.PREDICATES), dict(registry.PRIORITIES), set(registry.REQUEUE_KINDS))
    (tmp_path / f"{MODULE}.py").write_text(SOURCE)
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        with scoped_registrations():
            importlib.import_module(MODULE)
            assert "Throwaway" in registry.PREDICATES and registry.is_unresolvable(REASON)
    finally:
        sys.modules.pop(MODULE, None)
    assert (dict(registry.PREDICATES), dict(registry.PRIORITIES), set(registry.REQUEUE_KINDS)) == before
    assert not registry.is_unresolvable(REASON)
    with pytest.raises(PolicyError, match='unknown priority "ThrowawayPriority"'):
        compile_policy({"priorities": [{"name": "ThrowawayPriority", "weight": 1}]})


@pytest.mark.parametrize(
    ("declaration", "clash"),
    [
        (predicate(HostName, order=None), "HostName declares the name HostName of HostName again"),
        (predicate(HostName, order=None, name="Mine", aliases=("PodFitsPorts",)), "name PodFitsPorts"),
        (predicate(HostName, order=3, name="Mine"), "order 3 of HostName"),
        (predicate(HostName, order=None, name="Mine", framework="NodeName"), "framework plugin NodeName"),
        (predicate(HostName, order=None, name="Mine", argument_key="labelsPresence"), "argument key"),
    ],
)
def test_a_declaration_that_repeats_another_is_refused(declaration: PredicateSpec, clash: str) -> None:
    with scoped_registrations(), pytest.raises(ValueError, match=clash):
        register(declaration)
