"""CheckNodeUnschedulable (nodeunschedulable/node_unschedulable.go): cordoned nodes, unless tolerated."""

from __future__ import annotations

import pytest

from kubesched.plugins.node_unschedulable.filtering import ERR_REASON_UNSCHEDULABLE, CheckNodeUnschedulable
from kubesched_dev.fixtures import model_node, model_pod, node_info, run_filter

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
    info = node_info(model_node("n", unschedulable=unschedulable))
    assert run_filter(CheckNodeUnschedulable(), model_pod(tolerations=tolerations), info) == expected
