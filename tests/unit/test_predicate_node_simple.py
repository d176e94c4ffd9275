"""HostName, CheckNodeUnschedulable and PodToleratesNodeTaints: small filters, exact reasons."""

from __future__ import annotations

import pytest

from kubesched.plugins.node_name.filtering import ERR_REASON_HOSTNAME, HostName
from kubesched.plugins.node_unschedulable.filtering import ERR_REASON_UNSCHEDULABLE, CheckNodeUnschedulable
from kubesched.plugins.taint_toleration.filtering import PodToleratesNodeTaints

from .algofixtures import make_node, make_pod, node_info, run_filter


@pytest.mark.parametrize(
    ("pod_node_name", "node_name", "expected"),
    [("", "a", ()), ("a", "a", ()), ("a", "b", (ERR_REASON_HOSTNAME,))],
)
def test_host_name(pod_node_name: str, node_name: str, expected: tuple[str, ...]) -> None:
    assert (
        run_filter(HostName(), make_pod(node_name=pod_node_name), node_info(make_node(node_name))) == expected
    )


UNSCHEDULABLE_TOLERATION = {
    "key": "node.kubernetes.io/unschedulable",
    "operator": "Exists",
    "effect": "NoSchedule",
}


@pytest.mark.parametrize(
    ("unschedulable", "tolerations", "expected"),
    [
        (False, [], ()),
        (True, [], (ERR_REASON_UNSCHEDULABLE,)),
        (True, [UNSCHEDULABLE_TOLERATION], ()),
        (True, [{"operator": "Exists"}], ()),  # tolerates everything
        (True, [{**UNSCHEDULABLE_TOLERATION, "effect": "NoExecute"}], (ERR_REASON_UNSCHEDULABLE,)),
        (True, [{"key": "node.kubernetes.io/unschedulable", "value": "x"}], (ERR_REASON_UNSCHEDULABLE,)),
    ],
)
def test_node_unschedulable(unschedulable: bool, tolerations: list[dict], expected: tuple[str, ...]) -> None:
    info = node_info(make_node("n", unschedulable=unschedulable))
    assert run_filter(CheckNodeUnschedulable(), make_pod(tolerations=tolerations), info) == expected


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
    info = node_info(make_node("n", taints=taints))
    assert run_filter(PodToleratesNodeTaints(), make_pod(tolerations=tolerations), info) == expected
