"""PolicyStore: which SchedulerPolicy drives each scheduler name, and the status each one shows."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubesched.policy.compile import PolicyError, compile_policy, default_algorithm
from kubesched.policy.store import (
    ACCEPTED,
    ACTIVE,
    MAX_SPEC_BYTES,
    STATUS_COPY_BUDGET,
    PolicyStore,
    compile_spec,
    merge_patch,
    policy_manifest,
)
from kubesched_dev.fixtures import label_preference_policy

OWN = "kubesched"
T0 = "2024-01-01T00:00:00Z"
T1 = "2024-01-01T00:01:00Z"
LEAST = {"priorities": [{"name": "LeastRequestedPriority", "weight": 1}]}
BALANCED = {"priorities": [{"name": "BalancedResourceAllocation", "weight": 3}]}
TYPO = {"priorities": [{"name": "LeastRequestedPriorty", "weight": 1}]}
ROOT = Path(__file__).parents[2]


def policy(
    name: str,
    spec: Mapping[str, Any],
    *,
    generation: int = 1,
    created: str = T0,
    uid: str | None = None,
    status: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "apiVersion": "kubesched.io/v1alpha1",
        "kind": "SchedulerPolicy",
        "metadata": {
            "name": name,
            "uid": uid or f"uid-{name}",
            "generation": generation,
            "creationTimestamp": created,
        },
        "spec": dict(spec),
    }
    if status is not None:
        raw["status"] = dict(status)
    return raw


def weights(store: PolicyStore, scheduler_name: str) -> dict[str, int]:
    algorithm = store.profiles()[scheduler_name]
    return {w.priority.name: w.weight for w in algorithm.priorities}


def condition(status: Mapping[str, Any], kind: str) -> Mapping[str, Any]:
    (found,) = [c for c in status["conditions"] if c["type"] == kind]
    return found


def brief(status: Mapping[str, Any]) -> tuple[str, str, str, str]:
    """(Accepted status, its reason, Active status, its reason)."""
    accepted, active = condition(status, ACCEPTED), condition(status, ACTIVE)
    return accepted["status"], accepted["reason"], active["status"], active["reason"]


# --------------------------------------------------------------------------------- who drives what


@dataclass(frozen=True)
class Case:
    name: str
    events: Sequence[tuple[str, dict[str, Any]]]  # ("upsert" | "delete", object)
    profiles: Mapping[str, Mapping[str, int]]  # scheduler name -> priority weights
    statuses: Mapping[str, tuple[str, str, str, str]] = field(default_factory=dict)


CASES = [
    Case(
        "a valid policy drives the operator's own name by default",
        [("upsert", policy("p", LEAST))],
        {OWN: {"LeastRequestedPriority": 1}},
        {"p": ("True", "Valid", "True", "InForce")},
    ),
    Case(
        "schedulerName picks another profile",
        [("upsert", policy("p", {"schedulerName": "batch", **BALANCED}))],
        {"batch": {"BalancedResourceAllocation": 3}},
        {"p": ("True", "Valid", "True", "InForce")},
    ),
    Case(
        "an invalid policy drives nothing",
        [("upsert", policy("p", TYPO))],
        {},
        {"p": ("False", "Invalid", "False", "NotAccepted")},
    ),
    Case(
        "an invalid edit leaves the previous generation in force",
        [("upsert", policy("p", LEAST)), ("upsert", policy("p", TYPO, generation=2))],
        {OWN: {"LeastRequestedPriority": 1}},
        {"p": ("False", "Invalid", "True", "PreviousGenerationInForce")},
    ),
    Case(
        "a valid edit replaces the previous generation",
        [("upsert", policy("p", LEAST)), ("upsert", policy("p", BALANCED, generation=2))],
        {OWN: {"BalancedResourceAllocation": 3}},
        {"p": ("True", "Valid", "True", "InForce")},
    ),
    Case(
        "an invalid edit cannot move a policy to another scheduler name",
        [
            ("upsert", policy("p", LEAST)),
            ("upsert", policy("p", {"schedulerName": "batch", **TYPO}, generation=2)),
        ],
        {OWN: {"LeastRequestedPriority": 1}},
        {"p": ("False", "Invalid", "True", "PreviousGenerationInForce")},
    ),
    Case(
        "the oldest of two policies for one scheduler name wins",
        [
            ("upsert", policy("young", BALANCED, created=T1)),
            ("upsert", policy("old", LEAST, created=T0)),
        ],
        {OWN: {"LeastRequestedPriority": 1}},
        {"old": ("True", "Valid", "True", "InForce"), "young": ("True", "Valid", "False", "Superseded")},
    ),
    Case(
        "same creation second: the name decides",
        [("upsert", policy("b", BALANCED)), ("upsert", policy("a", LEAST))],
        {OWN: {"LeastRequestedPriority": 1}},
        {"a": ("True", "Valid", "True", "InForce"), "b": ("True", "Valid", "False", "Superseded")},
    ),
    Case(
        "an older policy that was never valid does not block a younger valid one",
        [("upsert", policy("old", TYPO, created=T0)), ("upsert", policy("young", BALANCED, created=T1))],
        {OWN: {"BalancedResourceAllocation": 3}},
        {"old": ("False", "Invalid", "False", "NotAccepted"), "young": ("True", "Valid", "True", "InForce")},
    ),
    Case(
        "deleting the active policy hands its scheduler name to the next oldest",
        [
            ("upsert", policy("old", LEAST, created=T0)),
            ("upsert", policy("young", BALANCED, created=T1)),
            ("delete", policy("old", LEAST, created=T0)),
        ],
        {OWN: {"BalancedResourceAllocation": 3}},
        {"young": ("True", "Valid", "True", "InForce")},
    ),
    Case(
        "deleting the only policy leaves its scheduler name to the operator's base algorithm",
        [("upsert", policy("p", LEAST)), ("delete", policy("p", LEAST))],
        {},
    ),
    Case(
        "two scheduler names, one policy each",
        [
            ("upsert", policy("spread", LEAST)),
            ("upsert", policy("pack", {"schedulerName": "batch", **BALANCED})),
        ],
        {OWN: {"LeastRequestedPriority": 1}, "batch": {"BalancedResourceAllocation": 3}},
        {"spread": ("True", "Valid", "True", "InForce"), "pack": ("True", "Valid", "True", "InForce")},
    ),
    Case(
        "recreated under the same name: the old object's accepted generation does not carry over",
        [("upsert", policy("p", LEAST, uid="first")), ("upsert", policy("p", TYPO, uid="second"))],
        {},
        {"p": ("False", "Invalid", "False", "NotAccepted")},
    ),
    Case(
        "a status update of an invalid generation changes nothing",
        [
            ("upsert", policy("p", LEAST)),
            ("upsert", policy("p", TYPO, generation=2)),
            ("upsert", policy("p", TYPO, generation=2, status={"observedGeneration": 2})),
        ],
        {OWN: {"LeastRequestedPriority": 1}},
        {"p": ("False", "Invalid", "True", "PreviousGenerationInForce")},
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_store(case: Case) -> None:
    store = PolicyStore(OWN)
    for action, raw in case.events:
        if action == "upsert":
            store.upsert(raw)
        else:
            assert store.delete(raw)
    assert {name: weights(store, name) for name in store.profiles()} == case.profiles
    for name, expected in case.statuses.items():
        assert brief(store.desired_status(name, T0)) == expected, name


# ----------------------------------------------------------------------------------- status details


def test_rejection_names_the_field_and_keeps_the_accepted_spec() -> None:
    store = PolicyStore(OWN)
    store.upsert(policy("p", LEAST))
    error = store.upsert(policy("p", TYPO, generation=2))
    assert error is not None and error.field == "spec.priorities[0].name"
    status = store.desired_status("p", T1)
    message = condition(status, ACCEPTED)["message"]
    assert message.startswith('spec.priorities[0].name: unknown priority "LeastRequestedPriorty"')
    assert condition(status, ACTIVE)["message"] == (
        'generation 1 drives scheduler "kubesched"; generation 2 was rejected (see Accepted)'
    )
    assert status["observedGeneration"] == 2
    assert status["acceptedGeneration"] == 1
    assert status["acceptedSpec"] == LEAST
    assert status["schedulerName"] == OWN


def test_superseded_names_the_winner() -> None:
    store = PolicyStore(OWN)
    store.upsert(policy("old", LEAST, created=T0))
    store.upsert(policy("young", BALANCED, created=T1))
    message = condition(store.desired_status("young", T1), ACTIVE)["message"]
    assert message == 'SchedulerPolicy "old" is older and drives scheduler "kubesched"'
    assert "activeSince" not in store.desired_status("young", T1)


def test_transition_times_and_active_since_move_only_on_transitions() -> None:
    store = PolicyStore(OWN)
    store.upsert(policy("p", LEAST))
    first = store.desired_status("p", T0)
    assert first["activeSince"] == T0
    assert {c["lastTransitionTime"] for c in first["conditions"]} == {T0}
    # The leader wrote it; an invalid edit comes later: Accepted flips, Active does not.
    store.upsert(policy("p", TYPO, generation=2, status=first))
    second = store.desired_status("p", T1)
    assert condition(second, ACCEPTED)["lastTransitionTime"] == T1
    assert condition(second, ACTIVE)["lastTransitionTime"] == T0
    assert second["activeSince"] == T0
    assert condition(second, ACTIVE)["observedGeneration"] == 2


def test_status_patches_converge_to_nothing() -> None:
    store = PolicyStore(OWN)
    store.upsert(policy("old", LEAST, created=T0))
    store.upsert(policy("young", BALANCED, created=T1))
    patches = dict(store.status_patches(T0))
    assert set(patches) == {"old", "young"}
    for name, patch in patches.items():
        store.record_status(name, patch)  # from no status, the patch is the whole status
    assert list(store.status_patches(T1)) == []
    # "old" goes: "young" takes over, and its patch says only what changed.
    assert store.delete(policy("old", LEAST))
    ((name, patch),) = store.status_patches(T1)
    assert name == "young"
    assert patch["activeSince"] == T1
    assert [c["type"] for c in patch["conditions"]] == [ACCEPTED, ACTIVE]  # lists are replaced whole
    assert set(patch) == {"activeSince", "conditions"}


def test_a_replica_that_starts_later_keeps_the_accepted_generation_from_status() -> None:
    leader = PolicyStore(OWN)
    leader.upsert(policy("p", BALANCED))
    written = leader.desired_status("p", T0)
    leader.upsert(policy("p", TYPO, generation=2, status=written))
    written = leader.desired_status("p", T1)

    fresh = PolicyStore(OWN)  # saw generation 2 only, with the leader's status
    fresh.upsert(policy("p", TYPO, generation=2, status=written))
    assert weights(fresh, OWN) == {"BalancedResourceAllocation": 3}
    assert brief(fresh.desired_status("p", T1)) == ("False", "Invalid", "True", "PreviousGenerationInForce")
    assert list(fresh.status_patches(T1)) == []  # it agrees with the leader


def test_an_accepted_spec_this_version_cannot_compile_is_ignored() -> None:
    store = PolicyStore(OWN)
    status = {"acceptedGeneration": 1, "acceptedSpec": TYPO}
    store.upsert(policy("p", TYPO, generation=2, status=status))
    assert store.profiles() == {}


def test_nulls_in_the_spec_are_not_written_into_the_accepted_spec() -> None:
    # A merge patch drops nulls; writing them would make the status differ forever.
    store = PolicyStore(OWN)
    store.upsert(policy("p", {"predicates": [{"name": "PodFitsResources", "argument": None}]}))
    store.upsert(policy("p", TYPO, generation=2))
    assert store.desired_status("p", T0)["acceptedSpec"] == {"predicates": [{"name": "PodFitsResources"}]}


# ------------------------------------------------------------------------------------------- size


def json_size(spec: Mapping[str, Any]) -> int:
    return len(json.dumps(spec, separators=(",", ":")))


def test_a_spec_over_the_size_limit_is_refused_and_the_previous_generation_stays() -> None:
    store = PolicyStore(OWN)
    store.upsert(policy("p", LEAST))
    huge = label_preference_policy(1000, label_length=300)
    assert json_size(huge) > MAX_SPEC_BYTES
    error = store.upsert(policy("p", huge, generation=2))
    assert error is not None and error.field == "spec"
    assert error.message == f"is {json_size(huge)} bytes as JSON; the limit is {MAX_SPEC_BYTES}"
    assert weights(store, OWN) == {"LeastRequestedPriority": 1}
    status = store.desired_status("p", T1)
    assert brief(status) == ("False", "Invalid", "True", "PreviousGenerationInForce")
    assert status["acceptedSpec"] == LEAST


def test_the_status_does_not_copy_the_spec_in_force() -> None:
    # Only a rejected generation needs the accepted spec beside it; a copy of the one in the
    # object would double it, and a policy near the limit would then not fit in etcd.
    store = PolicyStore(OWN)
    near = label_preference_policy(1000, label_length=160)
    assert MAX_SPEC_BYTES * 0.9 < json_size(near) <= MAX_SPEC_BYTES
    assert store.upsert(policy("p", near)) is None
    status = store.desired_status("p", T0)
    assert brief(status) == ("True", "Valid", "True", "InForce")
    assert status["acceptedGeneration"] == 1 and "acceptedSpec" not in status
    store.record_status("p", {**status, "acceptedSpec": near})  # written by an older version
    assert dict(store.status_patches(T0)) == {"p": {"acceptedSpec": None}}


def test_no_copy_beside_a_refused_spec_that_would_not_leave_room_for_it() -> None:
    store = PolicyStore(OWN)
    near = label_preference_policy(1000, label_length=160)
    store.upsert(policy("p", near))
    huge = label_preference_policy(4000, label_length=200)
    assert json_size(near) + json_size(huge) > STATUS_COPY_BUDGET
    store.upsert(policy("p", huge, generation=2))
    status = store.desired_status("p", T1)
    assert brief(status) == ("False", "Invalid", "True", "PreviousGenerationInForce")
    assert status["acceptedGeneration"] == 1 and "acceptedSpec" not in status


# ------------------------------------------------------------------------------------ compile_spec


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"schedulerName": ""}, "spec.schedulerName"),
        ({"schedulerName": 7}, "spec.schedulerName"),
        ({"priorities": [{"name": "LeastRequestedPriority", "weight": 0}]}, "spec.priorities[0].weight"),
        ({"priorities": [{"name": "LeastRequestedPriority", "wieght": 1}]}, "spec.priorities[0].wieght"),
        ({"predicates": [{"name": "PodFitsResources"}, {"name": "NoSuch"}]}, "spec.predicates[1].name"),
        ({"prioritis": []}, "spec.prioritis"),
        ({"extenders": [{}]}, "spec.extenders[0].urlPrefix"),
        ({"percentageOfNodesToScore": 101}, "spec.percentageOfNodesToScore"),
        ([], "spec"),
    ],
)
def test_compile_spec_errors_name_the_field(spec: Any, field: str) -> None:
    with pytest.raises(PolicyError) as caught:
        compile_spec(spec, OWN)
    assert caught.value.field == field


def test_compile_spec_without_scheduler_name_is_the_legacy_body() -> None:
    name, algorithm = compile_spec({}, OWN)
    assert name == OWN
    assert algorithm.describe() == default_algorithm().describe()


# ------------------------------------------------------------------------------------- merge_patch


@pytest.mark.parametrize(
    ("old", "new", "patch"),
    [
        ({}, {"a": 1}, {"a": 1}),
        ({"a": 1}, {"a": 1}, {}),
        ({"a": 1, "b": 2}, {"a": 1}, {"b": None}),
        ({"s": {"x": 1, "y": 2}}, {"s": {"x": 1}}, {"s": {"y": None}}),
        ({"s": {"x": 1}}, {"s": {"x": 2}}, {"s": {"x": 2}}),
        ({"l": [1, 2]}, {"l": [1]}, {"l": [1]}),
        ({"s": 1}, {"s": {"x": 1}}, {"s": {"x": 1}}),
    ],
)
def test_merge_patch(old: dict[str, Any], new: dict[str, Any], patch: dict[str, Any]) -> None:
    assert merge_patch(old, new) == patch


# --------------------------------------------------------------------- manifests, CRD and conversion


def test_policy_manifest_drops_the_legacy_header() -> None:
    document = {"kind": "Policy", "apiVersion": "v1", **LEAST, "alwaysCheckAllPredicates": True}
    manifest = policy_manifest(document, "batch", "batch")
    assert manifest == {
        "apiVersion": "kubesched.io/v1alpha1",
        "kind": "SchedulerPolicy",
        "metadata": {"name": "batch"},
        "spec": {"schedulerName": "batch", **LEAST, "alwaysCheckAllPredicates": True},
    }
    assert next(iter(manifest["spec"])) == "schedulerName"  # first, where a reader looks


def test_the_shipped_default_policy_is_the_built_in_default() -> None:
    manifest = yaml.safe_load((ROOT / "manifests" / "schedulerpolicy.yaml").read_text())
    assert manifest["kind"] == "SchedulerPolicy"
    name, algorithm = compile_spec(manifest["spec"], "unused")
    assert name == OWN
    assert algorithm.describe() == default_algorithm().describe()
    assert "schedulerpolicy.yaml" in (ROOT / "manifests" / "kustomization.yaml").read_text()


def test_the_crd_schema_knows_every_policy_field() -> None:
    crd = yaml.safe_load((ROOT / "crds" / "kubesched.io_schedulerpolicies.yaml").read_text())
    (version,) = crd["spec"]["versions"]
    spec_schema = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    legacy_body = {"predicates", "priorities", "extenders", "hardPodAffinitySymmetricWeight"}
    legacy_body |= {"alwaysCheckAllPredicates", "percentageOfNodesToScore"}
    # Fields of their own for knobs the legacy body has no home for.
    modern = {"nodeResourcesScoring", "podTopologySpreadDefaultConstraints", "quotas"}
    assert set(spec_schema["properties"]) == legacy_body | modern | {"schedulerName", "mode", "shadow"}
    # Every field the schema allows is one compile_policy understands.
    compile_policy({field: None for field in legacy_body})
    assert version["subresources"] == {"status": {}}
    assert crd["spec"]["scope"] == "Cluster"
