"""PodToleratesNodeTaints and TaintTolerationPriority (tainttoleration/taint_toleration.go), and
PodToleratesNodeNoExecuteTaints (1.17's algorithm/predicates/predicates.go). Rows marked
"1.20 table" are cases of the 1.20 Go tests with their expected scores."""

from __future__ import annotations

from typing import Any

import pytest

from kubesched.plugins.taint_toleration.filtering import (
    ERR_REASON_NOT_MATCH_1_17,
    PodToleratesNodeNoExecuteTaints,
    PodToleratesNodeTaints,
)
from kubesched.plugins.taint_toleration.scoring import TaintTolerationPriority
from kubesched_dev.fixtures import model_node, model_pod, node_info, run_filter, run_priority

DEDICATED = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}


@pytest.mark.parametrize(
    ("taints", "tolerations", "expected"),
    [
        ([], [], ()),
        ([DEDICATED], [], ("node(s) had taint {dedicated: gpu}, that the pod didn't tolerate",)),
        ([DEDICATED], [{"key": "dedicated", "operator": "Equal", "value": "gpu"}], ()),
        (
            [DEDICATED],
            [{"key": "dedicated", "value": "cpu"}],
            ("node(s) had taint {dedicated: gpu}, that the pod didn't tolerate",),
        ),
        ([DEDICATED], [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}], ()),
        (
            [DEDICATED],
            [{"key": "dedicated", "operator": "Exists", "effect": "NoExecute"}],
            ("node(s) had taint {dedicated: gpu}, that the pod didn't tolerate",),
        ),
        ([{"key": "soft", "value": "", "effect": "PreferNoSchedule"}], [], ()),  # not a filter's business
        (
            [{"key": "gone", "value": "", "effect": "NoExecute"}],
            [],
            ("node(s) had taint {gone: }, that the pod didn't tolerate",),
        ),
        (
            # The first untolerated taint is named.
            [DEDICATED, {"key": "b", "value": "2", "effect": "NoSchedule"}],
            [{"key": "dedicated", "operator": "Exists"}],
            ("node(s) had taint {b: 2}, that the pod didn't tolerate",),
        ),
        ([DEDICATED, {"key": "b", "value": "2", "effect": "NoExecute"}], [{"operator": "Exists"}], ()),
    ],
)
def test_taints(taints: list[dict], tolerations: list[dict], expected: tuple[str, ...]) -> None:
    info = node_info(model_node("n", taints=taints))
    assert run_filter(PodToleratesNodeTaints(), model_pod(tolerations=tolerations), info) == expected


@pytest.mark.parametrize(
    ("taints", "tolerations", "fits"),
    [
        ([{"key": "k", "value": "v", "effect": "NoSchedule"}], [], True),  # not this predicate's business
        ([{"key": "k", "value": "v", "effect": "NoExecute"}], [], False),
        ([{"key": "k", "value": "v", "effect": "NoExecute"}], [{"key": "k", "operator": "Exists"}], True),
        (
            [{"key": "k", "value": "v", "effect": "NoExecute"}],
            [{"key": "k", "value": "v", "effect": "NoSchedule"}],
            False,
        ),
    ],
)
def test_pod_tolerates_node_no_execute_taints(taints: list[Any], tolerations: list[Any], fits: bool) -> None:
    """PodToleratesNodeNoExecuteTaints (1.17): only NoExecute taints, 1.17's reason."""
    info = node_info(model_node("n", taints=taints))
    expected = () if fits else (ERR_REASON_NOT_MATCH_1_17,)
    assert run_filter(PodToleratesNodeNoExecuteTaints(), model_pod(tolerations=tolerations), info) == expected


def soft(key: str, value: str) -> dict[str, str]:
    return {"key": key, "value": value, "effect": "PreferNoSchedule"}


def tolerate(key: str, value: str, effect: str = "PreferNoSchedule") -> dict[str, str]:
    return {"key": key, "operator": "Equal", "value": value, "effect": effect}


@pytest.mark.parametrize(
    ("tolerations", "taints", "expected"),
    [
        pytest.param(
            [tolerate("foo", "bar")],
            [[soft("foo", "bar")], [soft("foo", "blah")]],
            [100, 0],
            id="1.20 table: tolerated taints score higher than intolerable ones",
        ),
        pytest.param(
            [tolerate("cpu-type", "arm64"), tolerate("disk-type", "ssd")],
            [[], [soft("cpu-type", "arm64")], [soft("cpu-type", "arm64"), soft("disk-type", "ssd")]],
            [100, 100, 100],
            id="1.20 table: all taints tolerated, same score whatever their number",
        ),
        pytest.param(
            [tolerate("foo", "bar")],
            [[], [soft("cpu-type", "arm64")], [soft("cpu-type", "arm64"), soft("disk-type", "ssd")]],
            [100, 50, 0],
            id="1.20 table: the more intolerable taints, the lower the score",
        ),
        pytest.param(
            [tolerate("cpu-type", "arm64", "NoSchedule"), tolerate("disk-type", "ssd", "NoSchedule")],
            [[], [{"key": "cpu-type", "value": "arm64", "effect": "NoSchedule"}], [soft("disk-type", "ssd")]],
            [100, 100, 0],
            id="1.20 table: only PreferNoSchedule taints and tolerations count",
        ),
        pytest.param([], [[], [soft("cpu-type", "arm64")]], [100, 0], id="1.20 table: no tolerations"),
    ],
)
def test_taint_toleration_priority(tolerations: list[Any], taints: list[Any], expected: list[int]) -> None:
    infos = [node_info(model_node(f"n{i}", taints=t)) for i, t in enumerate(taints)]
    assert run_priority(TaintTolerationPriority(), model_pod(tolerations=tolerations), infos) == expected
