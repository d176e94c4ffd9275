"""HostName (nodename/node_name.go): a pod naming a node fits that node only."""

from __future__ import annotations

import pytest

from kubesched.plugins.node_name.filtering import ERR_REASON_HOSTNAME, HostName
from kubesched_dev.fixtures import model_node, model_pod, node_info, run_filter


@pytest.mark.parametrize(
    ("pod_node_name", "node_name", "expected"),
    [("", "a", ()), ("a", "a", ()), ("a", "b", (ERR_REASON_HOSTNAME,))],
)
def test_host_name(pod_node_name: str, node_name: str, expected: tuple[str, ...]) -> None:
    assert (
        run_filter(HostName(), model_pod(node_name=pod_node_name), node_info(model_node(node_name)))
        == expected
    )
