"""ValidNode: a node whose object does not parse fits no pod, whatever the policy."""

from __future__ import annotations

from kubesched.model.objects import node_from_dict
from kubesched.plugins.node_validity import ERR_REASON_INVALID_NODE, ValidNode
from kubesched_dev.fixtures import model_node, model_pod, node_info, run_filter


def test_a_node_that_does_not_parse_fits_nothing() -> None:
    broken = node_from_dict(
        {
            "metadata": {"name": "broken"},
            "spec": {"taints": ["not-a-taint"]},
            "status": {"allocatable": {"cpu": "64", "memory": "64Gi", "pods": "110"}},
        }
    )
    assert broken.parse_error is not None
    assert run_filter(ValidNode(), model_pod(), node_info(broken)) == (ERR_REASON_INVALID_NODE,)
    assert run_filter(ValidNode(), model_pod(), node_info(model_node("ok"))) == ()
