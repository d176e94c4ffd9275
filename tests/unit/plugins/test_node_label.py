"""CheckNodeLabelPresence and NodeLabel (nodelabel/node_label.go). Rows marked "1.20 table" are
the Go tests' cases (TestNodeLabelFilter, TestNodeLabelScore) with their expected results."""

from __future__ import annotations

import pytest

from kubesched.plugins.node_label.filtering import ERR_REASON_PRESENCE_VIOLATED, CheckNodeLabelPresence
from kubesched.plugins.node_label.scoring import NodeLabelPriority
from kubesched.policy.compile import compile_policy
from kubesched_dev.fixtures import model_node, model_pod, node_info, run_filter, run_priority, snapshot

NODE_LABELS = {"foo": "any value", "bar": ""}


@pytest.mark.parametrize(
    ("present", "absent", "fits"),
    [
        pytest.param(["baz"], [], False, id="1.20 table: present label does not match"),
        pytest.param([], ["baz"], True, id="1.20 table: absent label does not match"),
        pytest.param(["foo", "baz"], [], False, id="1.20 table: one of two present labels matches"),
        pytest.param([], ["foo", "baz"], False, id="1.20 table: one of two absent labels matches"),
        pytest.param(["foo", "bar"], [], True, id="1.20 table: all present labels match"),
        pytest.param([], ["foo", "bar"], False, id="1.20 table: all absent labels match"),
        pytest.param(["foo"], ["bar"], False, id="1.20 table: both present and absent label matches"),
        pytest.param(["foz"], ["baz"], False, id="1.20 table: neither present nor absent label matches"),
        pytest.param(["foo"], ["baz"], True, id="1.20 table: present matches and absent doesn't match"),
        pytest.param(["foz"], ["bar"], False, id="1.20 table: present doesn't match and absent matches"),
    ],
)
def test_check_node_label_presence(present: list[str], absent: list[str], fits: bool) -> None:
    info = node_info(model_node("n", labels=NODE_LABELS))
    expected = () if fits else (ERR_REASON_PRESENCE_VIOLATED,)
    assert run_filter(CheckNodeLabelPresence(present, absent), model_pod(), info) == expected


@pytest.mark.parametrize(
    ("present", "absent", "expected"),
    [
        pytest.param(["foo"], [], 100, id="1.20 table: one present label match"),
        pytest.param(["somelabel"], [], 0, id="1.20 table: one present label mismatch"),
        pytest.param(["foo", "bar"], [], 100, id="1.20 table: two present labels match"),
        pytest.param(["somelabel1", "somelabel2"], [], 0, id="1.20 table: two present labels mismatch"),
        pytest.param(["foo", "somelabel"], [], 50, id="1.20 table: two present labels only one matches"),
        pytest.param([], ["foo"], 0, id="1.20 table: one absent label match"),
        pytest.param([], ["somelabel"], 100, id="1.20 table: one absent label mismatch"),
        pytest.param(["foo"], ["somelabel"], 100, id="1.20 table: one present match, one absent mismatch"),
        pytest.param(["foo", "bar"], ["somelabel1", "somelabel2"], 100, id="four preferences all met"),
        pytest.param(["foo", "x", "y"], [], 33, id="one of three: 100 / 3 truncated"),
    ],
)
def test_node_label_priority(present: list[str], absent: list[str], expected: int) -> None:
    info = node_info(model_node("n", labels=NODE_LABELS))
    assert run_priority(NodeLabelPriority(present, absent), model_pod(), [info]) == [expected]


def test_label_preferences_of_a_policy_make_one_priority_with_the_summed_weight() -> None:
    """legacy_registry.go: n NodeLabel entries -> one plugin, weight n * w, score averaged."""
    spec = {
        "predicates": [],
        "priorities": [
            {"name": "ssd", "weight": 3, "argument": {"labelPreference": {"label": "ssd", "presence": True}}},
            {
                "name": "old",
                "weight": 3,
                "argument": {"labelPreference": {"label": "old", "presence": False}},
            },
        ],
    }
    algorithm = compile_policy(spec)
    snap = snapshot(
        model_node("ssd-new", labels={"ssd": "1"}),
        model_node("ssd-old", labels={"ssd": "1", "old": "1"}),
        model_node("hdd-old", labels={"old": "1"}),
    )
    assert algorithm.prioritize(model_pod(), snap, snap.nodes) == [600, 300, 0]
