"""Nothing lost on bad input: hypothesis throws malformed pods, nodes, SchedulerPolicies and legacy
Policy files at the scheduler, and each must meet a clear outcome, never a crash.

- a pod: placed where it fits, or unschedulable with a message (the FailedScheduling event); the
  loop goes on with the next pod;
- a node: never chosen when its status is missing or malformed, and the cache takes it in stride;
- a SchedulerPolicy: rejected with an error naming the field, the active policy unchanged;
- a legacy Policy file: a clear error and a non-zero exit from `policy convert` and `run`.

Each test prints how many inputs it tried and their outcomes (pytest -s), for the reliability note.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Callable
from typing import Any, cast

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubesched.cli import main
from kubesched.kube.binding import Binder, BindOutcome, BindResult
from kubesched.kube.events import Recorder
from kubesched.model.objects import Pod, node_from_dict, pod_from_dict
from kubesched.policy.compile import MAX_WEIGHT, default_algorithm
from kubesched.policy.controller import PolicyController
from kubesched.policy.store import PolicyStore
from kubesched.runtime.scheduler import Scheduler, SchedulerSettings
from kubesched_dev.fixtures import make_node, make_pod

NAME = "ks"
EXAMPLES = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# ------------------------------------------------------------------------------------- pods

QUANTITIES = st.one_of(
    st.sampled_from(
        ["-1", "-100m", "1e400", "9" * 60, "1.5.5", "", " ", "NaN", "inf", "1Ki1", "0x10", "1e-400"]
    ),
    st.text(max_size=12),
    st.integers(min_value=-(10**30), max_value=10**30).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(str),
    st.sampled_from([None, [], {}, True, 3.5, -7]),
)
OPERATORS = st.one_of(
    st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]), st.text(max_size=8)
)
SELECTOR_TERM = st.fixed_dictionaries(
    {
        "matchExpressions": st.lists(
            st.fixed_dictionaries(
                {
                    "key": st.one_of(st.text(max_size=70), st.none(), st.integers()),
                    "operator": st.one_of(OPERATORS, st.none()),
                    "values": st.one_of(
                        st.lists(st.one_of(st.text(max_size=5), st.integers())), st.none(), st.text()
                    ),
                }
            ),
            max_size=3,
        )
    }
)
AFFINITIES = st.one_of(
    st.builds(
        lambda t: {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": t}}
        },
        st.one_of(st.lists(SELECTOR_TERM, max_size=2), st.text(max_size=3), st.none()),
    ),
    st.builds(
        lambda s, key: {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [{"labelSelector": s, "topologyKey": key}]
            }
        },
        st.one_of(SELECTOR_TERM, st.text(max_size=3), st.integers()),
        st.one_of(st.text(max_size=10), st.none()),
    ),
    st.builds(
        lambda w: {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": w}]}},
        st.one_of(st.integers(), st.text(max_size=3), st.none()),
    ),
)
TOLERATION = st.fixed_dictionaries(
    {
        "key": st.text(max_size=10),
        "operator": st.one_of(st.sampled_from(["Equal", "Exists"]), st.text(max_size=5)),
        "effect": st.one_of(st.sampled_from(["NoSchedule", "NoExecute", ""]), st.text(max_size=5)),
    }
)


def _set_requests(pod: dict[str, Any], requests: dict[str, Any]) -> None:
    pod["spec"]["containers"][0]["resources"] = {"requests": requests}


def _mutations() -> st.SearchStrategy[tuple[str, Callable[[dict[str, Any]], None]]]:
    """(family, a change that spoils a well-formed pod)."""

    def family(
        name: str, strategy: st.SearchStrategy[Any], apply: Callable[[dict[str, Any], Any], None]
    ) -> Any:
        return strategy.map(lambda value: (name, lambda pod: apply(pod, value)))

    return st.one_of(
        family(
            "malformed or huge quantity",
            st.tuples(QUANTITIES, QUANTITIES),
            lambda p, v: _set_requests(p, {"cpu": v[0], "memory": v[1]}),
        ),
        family(
            "negative request", st.integers(max_value=-1), lambda p, v: _set_requests(p, {"cpu": f"{v}m"})
        ),
        family(
            "unknown extended resource",
            st.tuples(st.text(min_size=1, max_size=40), st.integers(0, 10**6)),
            lambda p, v: _set_requests(p, {f"example.com/{v[0]}": str(v[1])}),
        ),
        family("invalid affinity", AFFINITIES, lambda p, v: p["spec"].__setitem__("affinity", v)),
        family(
            "thousands of tolerations",
            st.lists(TOLERATION, min_size=1, max_size=3).map(lambda t: t * 1000),
            lambda p, v: p["spec"].__setitem__("tolerations", v),
        ),
        family(
            "name at the length limit",
            st.integers(250, 260),
            lambda p, v: p["metadata"].__setitem__("name", "p" * v),
        ),
        family(
            "resources not an object",
            st.one_of(st.text(max_size=3), st.integers(), st.lists(st.none())),
            lambda p, v: p["spec"]["containers"][0].__setitem__("resources", v),
        ),
        family(
            "node selector not a map",
            st.one_of(st.text(max_size=3), st.lists(st.integers()), st.integers()),
            lambda p, v: p["spec"].__setitem__("nodeSelector", v),
        ),
    )


class Recording:
    """Recorder and binder in one: what the scheduler told the user, and where it bound."""

    def __init__(self) -> None:
        self.messages: dict[str, str] = {}  # uid -> the FailedScheduling message
        self.bound: dict[str, str] = {}

    def event(self, *_: object) -> None:
        pass

    def unschedulable(self, pod: Pod, message: str) -> None:
        self.messages[pod.uid] = message

    async def bind(self, pod: Pod, node_name: str, extender: object = None, **_: object) -> BindResult:
        self.bound[pod.uid] = node_name
        return BindResult(BindOutcome.BOUND, "", 0.0)


def run_scheduler(nodes: list[dict[str, Any]], pods: list[dict[str, Any]]) -> tuple[Scheduler, Recording]:
    """A real Scheduler loop over these objects until every pod was placed or found unschedulable."""
    record = Recording()
    scheduler = Scheduler(
        SchedulerSettings(NAME, batch_size=4, seed=1),
        default_algorithm(),
        cast(Binder, record),
        cast(Recorder, record),
    )

    async def go() -> None:
        for node in nodes:
            scheduler.on_node(None, node)
        for pod in pods:
            scheduler.on_pod(None, pod)
        loop = asyncio.create_task(scheduler.run())
        uids = {(p.get("metadata") or {}).get("uid") for p in pods}
        for _ in range(2000):
            if uids <= record.bound.keys() | record.messages.keys():
                break
            await asyncio.sleep(0.005)
        scheduler.queue.close()
        await loop

    asyncio.run(go())
    return scheduler, record


def test_bad_pods_are_placed_correctly_or_unschedulable_with_a_message_and_the_loop_goes_on() -> None:
    tally: Counter[tuple[str, str]] = Counter()
    nodes = [make_node("small", cpu="1", memory="1Gi"), make_node("big", cpu="64", memory="256Gi")]

    @EXAMPLES
    @given(_mutations())
    def check(mutation: tuple[str, Callable[[dict[str, Any]], None]]) -> None:
        family, spoil = mutation
        bad = make_pod("bad", NAME, NAME, cpu="100m")
        spoil(bad)
        good = make_pod("good", NAME, NAME, cpu="100m")  # after the bad one: the loop must reach it
        scheduler, record = run_scheduler(nodes, [bad, good])
        uid = bad["metadata"]["uid"]
        assert record.bound.get(good["metadata"]["uid"]), "the next pod was scheduled"
        if uid in record.bound:
            pod = pod_from_dict(bad)
            info = scheduler.cache.node_info(record.bound[uid])
            assert info is not None and pod.parse_error is None
            assert min(pod.requests.milli_cpu, pod.requests.memory, *pod.requests.scalar.values(), 0) == 0
            assert info.requested.milli_cpu <= info.node.allocatable.milli_cpu, "placed where it fits"
            assert info.requested.memory <= info.node.allocatable.memory, "placed where it fits"
            tally[family, "placed"] += 1
        else:
            message = record.messages.get(uid, "")
            assert message.startswith("0/2 nodes are available") or "pod" in message.lower(), message
            assert "internal error" not in message, message
            tally[family, "unschedulable"] += 1

    check()
    _print_tally("pods", tally)


# ------------------------------------------------------------------------------------- nodes

STATUS_DAMAGE = st.one_of(
    st.just(("no status", lambda n: n.pop("status"))),
    st.just(("empty status", lambda n: n.__setitem__("status", {}))),
    st.just(("status not an object", lambda n: n.__setitem__("status", "broken"))),
    QUANTITIES.map(
        lambda q: (
            "malformed allocatable",
            lambda n: n["status"].__setitem__("allocatable", {"cpu": q, "memory": q, "pods": q}),
        )
    ),
    st.just(("allocatable not a map", lambda n: n["status"].__setitem__("allocatable", ["cpu"]))),
    st.just(
        (
            "no allocatable nor capacity",
            lambda n: [n["status"].pop(k, None) for k in ("allocatable", "capacity")],
        )
    ),
    st.sampled_from([None, "x", [1], {}]).map(
        lambda v: ("conditions malformed", lambda n: n["status"].__setitem__("conditions", v))
    ),
    st.sampled_from([None, "x", [{"effect": 3}], [{}]]).map(
        lambda v: ("taints malformed", lambda n: n["spec"].__setitem__("taints", v))
    ),
)


def test_nodes_with_a_missing_or_malformed_status_are_never_chosen_nor_crash_the_cache() -> None:
    tally: Counter[tuple[str, str]] = Counter()

    @EXAMPLES
    @given(st.lists(STATUS_DAMAGE, min_size=1, max_size=4))
    def check(damages: list[tuple[str, Callable[[dict[str, Any]], Any]]]) -> None:
        nodes = []
        for i, (_, damage) in enumerate(damages):
            node = make_node(f"bad{i}", cpu="64", memory="256Gi")
            damage(node)
            nodes.append(node)
        good = make_node("good", cpu="1", memory="1Gi")
        pods = [make_pod(f"p{i}", NAME, NAME, cpu="100m") for i in range(3)]
        scheduler, record = run_scheduler([*nodes, good], pods)
        parsed = [node_from_dict(n) for n in nodes]
        broken = {n.name for n in parsed if n.parse_error is not None}
        chosen = set(record.bound.values())
        assert not chosen & broken, f"a node with a malformed status was chosen: {chosen & broken}"
        assert len(record.bound) + len(record.messages) == len(pods)
        scheduler.cache.snapshot()
        for (family, _), node in zip(damages, parsed, strict=True):
            tally[family, "never chosen" if node.parse_error else "usable (status still valid)"] += 1

    check()
    _print_tally("nodes", tally)


# ------------------------------------------------------------------------------- SchedulerPolicies

GOOD_SPEC: dict[str, Any] = {
    "predicates": [{"name": "PodFitsResources"}, {"name": "MatchNodeSelector"}],
    "priorities": [{"name": "LeastRequestedPriority", "weight": 1}],
    "hardPodAffinitySymmetricWeight": 10,
    "alwaysCheckAllPredicates": False,
}
NOT_A_LIST = st.one_of(
    st.text(max_size=5), st.integers(), st.dictionaries(st.text(max_size=3), st.integers(), max_size=2)
)
NOT_A_BOOL = st.one_of(
    st.text(max_size=5), st.integers(), st.lists(st.booleans(), max_size=2), st.floats(allow_nan=False)
)
BAD_WEIGHT = st.one_of(
    st.integers(max_value=0),
    st.integers(min_value=MAX_WEIGHT),
    st.text(max_size=4),
    st.floats(allow_nan=False).filter(lambda f: not f.is_integer()),
    st.lists(st.integers(), max_size=1),
)
KNOWN_NAMES = {"PodFitsResources", "MatchNodeSelector", "LeastRequestedPriority"}
BAD_NAME = st.one_of(
    st.text(max_size=12).filter(lambda s: s not in KNOWN_NAMES),
    st.integers(),
    st.none(),
    st.lists(st.text(max_size=2), max_size=1),
)
OUT_OF_RANGE = st.one_of(st.integers(max_value=-1), st.integers(min_value=101), st.text(max_size=3))
SPEC_FIELDS = {
    "predicates", "priorities", "extenders", "mode", "shadow", "schedulerName", "kind", "apiVersion",
    "hardPodAffinitySymmetricWeight", "alwaysCheckAllPredicates", "percentageOfNodesToScore",
}  # fmt: skip


def spoiled(
    field: str, values: st.SearchStrategy[Any], change: Callable[[Any], dict[str, Any]]
) -> st.SearchStrategy[tuple[str, dict[str, Any]]]:
    """(the field the error must name, GOOD_SPEC with `change` applied)."""
    return values.map(lambda v: (field, {**GOOD_SPEC, **change(v)}))


SPOILED_SPECS = st.one_of(
    spoiled("spec.predicates", NOT_A_LIST, lambda v: {"predicates": v}),
    spoiled("spec.priorities", NOT_A_LIST, lambda v: {"priorities": v}),
    spoiled("spec.predicates[0]", BAD_NAME, lambda v: {"predicates": [{"name": v}]}),
    spoiled("spec.priorities[0]", BAD_NAME, lambda v: {"priorities": [{"name": v, "weight": 1}]}),
    spoiled(
        "spec.priorities[0].weight",
        BAD_WEIGHT,
        lambda v: {"priorities": [{"name": "LeastRequestedPriority", "weight": v}]},
    ),
    spoiled(
        "spec.hardPodAffinitySymmetricWeight", OUT_OF_RANGE, lambda v: {"hardPodAffinitySymmetricWeight": v}
    ),
    spoiled("spec.percentageOfNodesToScore", OUT_OF_RANGE, lambda v: {"percentageOfNodesToScore": v}),
    spoiled("spec.alwaysCheckAllPredicates", NOT_A_BOOL, lambda v: {"alwaysCheckAllPredicates": v}),
    spoiled(
        "spec.extenders",
        st.one_of(st.text(max_size=3), st.integers(), st.lists(st.integers(), min_size=1, max_size=2)),
        lambda v: {"extenders": v},
    ),
    spoiled(
        "spec.schedulerName",
        st.one_of(st.just(""), st.integers(), st.lists(st.none(), max_size=1)),
        lambda v: {"schedulerName": v},
    ),
    spoiled(
        "spec.mode",
        st.one_of(st.text(max_size=6).filter(lambda s: s not in ("Active", "Shadow", "")), st.integers()),
        lambda v: {"mode": v},
    ),
    st.text(min_size=1, max_size=8)
    .filter(lambda k: k not in SPEC_FIELDS)
    .map(lambda k: (f"spec.{k}", {**GOOD_SPEC, k: 1})),  # an unknown field, named
    spoiled(
        "spec.predicates[0].argument",
        st.one_of(st.text(max_size=3), st.integers()),
        lambda v: {"predicates": [{"name": "CheckServiceAffinity", "argument": v}]},
    ),
)


def test_every_wrong_policy_field_is_rejected_naming_it_and_the_active_policy_stays() -> None:
    tally: Counter[tuple[str, str]] = Counter()
    record = Recording()
    scheduler = Scheduler(
        SchedulerSettings(NAME), default_algorithm(), cast(Binder, record), cast(Recorder, record)
    )

    class Writer:
        async def write(self, name: str, patch: Any) -> Any:
            return patch

    controller = PolicyController(
        PolicyStore(NAME), scheduler, cast(Any, Writer()), clock=lambda: "2024-01-01T00:00:00Z"
    )
    asyncio.run(controller.on_event("ADDED", _policy(GOOD_SPEC, 1)))
    active = scheduler.profiles[NAME]
    generation = iter(range(2, 10**6))

    @EXAMPLES
    @given(SPOILED_SPECS)
    def check(case: tuple[str, dict[str, Any]]) -> None:
        field, spec = case
        error = PolicyStore(NAME).upsert(_policy(spec, 1))
        assert error is not None, f"accepted a spec wrong at {field}: {spec}"
        assert error.field.startswith(field), f"{error} does not name {field}"
        asyncio.run(controller.on_event("MODIFIED", _policy(spec, next(generation))))
        assert scheduler.profiles[NAME] is active, "the active policy is unchanged"
        known = field.removeprefix("spec.").split("[")[0] in SPEC_FIELDS
        tally[field.split("[")[0] if known else "spec.<unknown field>", "rejected, named"] += 1

    check()
    _print_tally("SchedulerPolicy fields", tally)


def _policy(spec: dict[str, Any], generation: int) -> dict[str, Any]:
    meta = {
        "name": "p",
        "uid": "uid-p",
        "generation": generation,
        "creationTimestamp": "2024-01-01T00:00:00Z",
    }
    return {"metadata": meta, "spec": spec}


# ------------------------------------------------------------------------------ legacy Policy files

POLICY_FILES = st.one_of(
    st.just(("malformed JSON", "p.json", '{"kind": "Policy", "apiVersion": "v1",')),
    st.just(("malformed YAML", "p.yaml", "kind: Policy\napiVersion: v1\npredicates: [\n")),
    st.text(max_size=30).map(lambda t: ("random text", "p.json", t)),
    st.sampled_from(["Pod", "SchedulerPolicy", "KubeSchedulerConfiguration", "", "policy"]).map(
        lambda k: ("wrong kind", "p.json", json.dumps({"kind": k, "apiVersion": "v1"}))
    ),
    st.sampled_from(["v2", "", "kubescheduler.config.k8s.io/v1beta1"]).map(
        lambda v: ("wrong apiVersion", "p.json", json.dumps({"kind": "Policy", "apiVersion": v}))
    ),
    st.sampled_from(["[]", "42", "null", '"Policy"', "- a\n- b\n"]).map(
        lambda t: ("not an object", "p.yaml", t)
    ),
    SPOILED_SPECS.map(
        lambda c: ("wrong field", "p.json", json.dumps({"kind": "Policy", "apiVersion": "v1", **c[1]}))
    ),
)


def test_bad_policy_files_fail_with_a_clear_error_and_a_non_zero_exit(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    tally: Counter[tuple[str, str]] = Counter()
    runner = CliRunner()

    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(POLICY_FILES)
    def check(case: tuple[str, str, str]) -> None:
        family, name, text = case
        path = tmp_path_factory.mktemp("policy") / name
        path.write_text(text)
        for args in (
            ["policy", "convert", str(path)],
            ["run", "--policy-config-file", str(path), "--kubeconfig", str(path.parent / "none")],
        ):
            result = runner.invoke(main, args)
            assert result.exit_code != 0, (args, text, result.output)
            assert "Traceback" not in result.output and "error:" in result.output, result.output
            assert path.name in result.output, f"the error names the file: {result.output}"
            assert not isinstance(result.exception, Exception) or isinstance(result.exception, SystemExit), (
                result.exception
            )
        tally[family, "non-zero exit, clear error"] += 1

    check()
    _print_tally("legacy Policy files", tally)


def _print_tally(what: str, tally: Counter[tuple[str, str]]) -> None:
    print(f"\nBAD INPUT | {what} | {sum(tally.values())} tried")
    for (family, outcome), n in sorted(tally.items()):
        print(f"BAD INPUT |   {family}: {n} -> {outcome}")
