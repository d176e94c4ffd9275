"""ImageLocalityPriority (imagelocality/image_locality.go). Rows marked "1.20 table" are cases of
the 1.20 Go tests with their expected scores."""

from __future__ import annotations

from typing import Any

import pytest

from kubesched.plugins.image_locality.scoring import ImageLocalityPriority, normalized_image_name
from kubesched_dev.fixtures import model_node, model_pod, node_info, run_priority

MB = 1024 * 1024


def images_pod(*images: str) -> dict[str, Any]:
    return {"containers": [{"name": f"c{i}", "image": image} for i, image in enumerate(images)]}


NODE_40_300_2000 = [
    (["gcr.io/40:latest", "gcr.io/40:v1", "gcr.io/40:v1"], 40 * MB),
    (["gcr.io/300:latest", "gcr.io/300:v1"], 300 * MB),
    (["gcr.io/2000:latest"], 2000 * MB),
]
NODE_250_10 = [(["gcr.io/250:latest"], 250 * MB), (["gcr.io/10:latest", "gcr.io/10:v1"], 10 * MB)]
NODE_600_40_900 = [
    (["gcr.io/600:latest"], 600 * MB),
    (["gcr.io/40:latest"], 40 * MB),
    (["gcr.io/900:latest"], 900 * MB),
]
NODE_300_600_900 = [
    (["gcr.io/300:latest"], 300 * MB),
    (["gcr.io/600:latest"], 600 * MB),
    (["gcr.io/900:latest"], 900 * MB),
]
NODE_4000_30 = [(["gcr.io/4000:latest"], 4000 * MB), (["gcr.io/30:latest"], 30 * MB)]
NODE_20_30_40 = [
    (["gcr.io/20:latest"], 20 * MB),
    (["gcr.io/30:latest"], 30 * MB),
    (["gcr.io/40:latest"], 40 * MB),
]


@pytest.mark.parametrize(
    ("spec", "nodes", "expected"),
    [
        pytest.param(
            images_pod("gcr.io/40", "gcr.io/250"),
            [NODE_40_300_2000, NODE_250_10],
            [0, 5],
            id="1.20 table: two images spread on two nodes, prefer the larger image one",
        ),
        pytest.param(
            images_pod("gcr.io/40", "gcr.io/300"),
            [NODE_40_300_2000, NODE_250_10],
            [7, 0],
            id="1.20 table: two images on one node, prefer this node",
        ),
        pytest.param(
            images_pod("gcr.io/10", "gcr.io/4000"),
            [NODE_4000_30, NODE_250_10],
            [100, 0],
            id="1.20 table: if exceed limit, use limit",
        ),
        pytest.param(
            images_pod("gcr.io/10", "gcr.io/4000"),
            [NODE_4000_30, NODE_250_10, []],
            [66, 0, 0],
            id="1.20 table: if exceed limit, use limit (with node which has no images present)",
        ),
        pytest.param(
            images_pod("gcr.io/300", "gcr.io/600", "gcr.io/900"),
            [NODE_600_40_900, NODE_300_600_900, []],
            [32, 36, 0],
            id="1.20 table: pod with multiple large images, machine2 is preferred",
        ),
        pytest.param(
            images_pod("gcr.io/30", "gcr.io/40"),
            [NODE_20_30_40, NODE_4000_30],
            [1, 0],
            id="1.20 table: pod with multiple small images",
        ),
    ],
)
def test_image_locality(spec: dict[str, Any], nodes: list[Any], expected: list[int]) -> None:
    infos = [node_info(model_node(f"machine{i}", images=images)) for i, images in enumerate(nodes)]
    assert run_priority(ImageLocalityPriority(), model_pod(**spec), infos) == expected


@pytest.mark.parametrize(
    ("name", "normalized"),
    [
        ("root", "root:latest"),
        ("gcr.io:5000/root", "gcr.io:5000/root:latest"),
        ("root:tag", "root:tag"),
        ("root@sha256:abc", "root@sha256:abc"),
    ],
)
def test_normalized_image_name(name: str, normalized: str) -> None:
    """TestNormalizedImageName."""
    assert normalized_image_name(name) == normalized
