"""SchedulingGates' PreEnqueue, ported from kube-scheduler 1.32
`pkg/scheduler/framework/plugins/schedulinggates/scheduling_gates_test.go` (TestPreEnqueue)."""

from __future__ import annotations

from typing import Any

import pytest

from kubesched.model.objects import pod_from_dict
from kubesched.plugins.scheduling_gates import pre_enqueue


def pod(**spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "p", "uid": "uid-p"}, "spec": {"containers": [{"name": "c"}], **spec}}


@pytest.mark.parametrize(
    ("name", "raw", "want"),
    [
        ("pod does not carry scheduling gates", pod(), None),
        (
            "pod carries scheduling gates",
            pod(schedulingGates=[{"name": "foo"}, {"name": "bar"}]),
            "waiting for scheduling gates: [foo bar]",
        ),
        ("an empty list gates nothing", pod(schedulingGates=[]), None),
    ],
)
def test_pre_enqueue(name: str, raw: dict[str, Any], want: str | None) -> None:
    assert pre_enqueue(pod_from_dict(raw)) == want, name


def test_gate_names_keep_their_order_and_a_malformed_list_is_a_parse_error() -> None:
    parsed = pod_from_dict(pod(schedulingGates=[{"name": "example.com/b"}, {"name": "example.com/a"}]))
    assert parsed.scheduling_gates == ("example.com/b", "example.com/a")
    bad = pod_from_dict(pod(schedulingGates=["not-an-object"]))
    assert bad.scheduling_gates == () and bad.parse_error is not None
