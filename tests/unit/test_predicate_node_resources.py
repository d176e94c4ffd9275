"""PodFitsResources (noderesources/fit.go): every shortfall is a reason, pod count included."""

from __future__ import annotations

import pytest

from kubesched.plugins.node_resources.fit import (
    ERR_REASON_CPU,
    ERR_REASON_EPHEMERAL_STORAGE,
    ERR_REASON_MEMORY,
    ERR_REASON_TOO_MANY_PODS,
    PodFitsResources,
)

from .algofixtures import container, make_node, make_pod, node_info, run_filter

NODE = make_node(
    "n", cpu="1", memory="1Gi", pods="3", extra={"ephemeral-storage": "10Gi", "example.com/gpu": "2"}
)


@pytest.mark.parametrize(
    ("name", "pod_kwargs", "existing", "reasons"),
    [
        ("fits exactly", {"cpu": "600m", "memory": "512Mi"}, [{"cpu": "400m", "memory": "512Mi"}], ()),
        ("cpu one milli over", {"cpu": "601m"}, [{"cpu": "400m"}], (ERR_REASON_CPU,)),
        ("memory one byte over", {"memory": str(2**30 - 99)}, [{"memory": "100"}], (ERR_REASON_MEMORY,)),
        (
            "cpu and memory both reported, in fit.go's order",
            {"cpu": "2", "memory": "2Gi"},
            [],
            (ERR_REASON_CPU, ERR_REASON_MEMORY),
        ),
        ("ephemeral storage", {"extra": {"ephemeral-storage": "11Gi"}}, [], (ERR_REASON_EPHEMERAL_STORAGE,)),
        (
            "extended resource fits",
            {"extra": {"example.com/gpu": "1"}},
            [{"extra": {"example.com/gpu": "1"}}],
            (),
        ),
        (
            "extended resource short",
            {"extra": {"example.com/gpu": "1"}},
            [{"extra": {"example.com/gpu": "2"}}],
            ("Insufficient example.com/gpu",),
        ),
        (
            "extended resource the node lacks",
            {"extra": {"example.com/fpga": "1"}},
            [],
            ("Insufficient example.com/fpga",),
        ),
        (
            "hugepages are scalar too",
            {"extra": {"hugepages-2Mi": "2Mi"}},
            [],
            ("Insufficient hugepages-2Mi",),
        ),
        ("pod count: 2 running + 1 fits in 3", {}, [{}, {}], ()),
        ("pod count: 3 running + 1 > 3", {}, [{}, {}, {}], (ERR_REASON_TOO_MANY_PODS,)),
        (
            "too many pods is checked even for a pod requesting nothing, and first",
            {"cpu": "2"},
            [{}, {}, {}],
            (ERR_REASON_TOO_MANY_PODS, ERR_REASON_CPU),
        ),
        # A zero-request pod returns before cpu is compared, even on an overcommitted node.
        ("zero request on an overcommitted node", {}, [{"cpu": "2"}], ()),
    ],
)
def test_fit(name: str, pod_kwargs: dict, existing: list[dict], reasons: tuple[str, ...]) -> None:
    info = node_info(NODE, [make_pod(f"e{i}", **kw) for i, kw in enumerate(existing)])
    assert run_filter(PodFitsResources(), make_pod(**pod_kwargs), info) == reasons


def test_init_containers_count_as_their_maximum_and_overhead_is_added() -> None:
    # containers 300m + 300m = 600m; init 800m wins as the max; overhead +250m -> 1050m > 1000m.
    pod = make_pod(
        containers=[container("300m"), container("300m")],
        init_containers=[container("800m"), container("100m")],
        overhead={"cpu": "250m"},
    )
    assert pod.requests.milli_cpu == 1050
    assert run_filter(PodFitsResources(), pod, node_info(NODE)) == (ERR_REASON_CPU,)
    without_overhead = make_pod(containers=[container("300m")], init_containers=[container("1")])
    assert run_filter(PodFitsResources(), without_overhead, node_info(NODE)) == ()


def test_ignored_extended_resources_and_groups() -> None:
    pod = make_pod(extra={"example.com/gpu": "5", "other.io/x": "1"})
    info = node_info(NODE)
    assert run_filter(PodFitsResources(), pod, info) == (
        "Insufficient example.com/gpu",
        "Insufficient other.io/x",
    )
    ignoring = PodFitsResources(frozenset({"example.com/gpu"}), frozenset({"other.io"}))
    assert run_filter(ignoring, pod, info) == ()
