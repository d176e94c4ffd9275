"""Start-up listings come a page at a time, from one snapshot of the API server."""

from __future__ import annotations

import dataclasses
import json
import threading
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes_asyncio.client import ApiClient

from kubesched.kube import client, early_listing, listing
from kubesched.model.kinds import NODES, PODS
from kubesched_dev.devcluster import LocalControlPlane
from kubesched_dev.fixtures import create_nodes, make_node


async def test_listings_are_fed_a_page_at_a_time_and_miss_nothing(
    api: ApiClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    await create_nodes(api, [make_node(f"page-{i}") for i in range(5)])
    monkeypatch.setattr(listing, "LIST_PAGE", 2)
    pages = [(page, version) async for page, version in listing.list_pages(api, "/api/v1/nodes")]
    assert [len(page) for page, _ in pages] == [2, 2, 1]
    assert len({version for _, version in pages}) == 1
    names = [n["metadata"]["name"] for page, _ in pages for n in page]
    assert sorted(names) == [f"page-{i}" for i in range(5)]
    items, version = await listing.list_versioned(api, "/api/v1/nodes")
    assert [n["metadata"]["name"] for n in items] == names and version == pages[0][1]


async def test_a_reply_over_the_big_body_size_is_decoded_off_the_loop_to_the_same_objects(
    api: ApiClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A listing from the watch cache comes whole (Kubernetes 1.20 ignores its limit).
    await create_nodes(api, [make_node(f"whole-{i}") for i in range(3)])
    on_loop, _ = await listing.list_versioned(api, "/api/v1/nodes")
    off_loop: list[str] = []
    loads = json.loads

    def counting(text: str) -> object:
        if threading.current_thread() is not threading.main_thread():
            off_loop.append(text)
        return loads(text)

    monkeypatch.setattr(client, "BIG_BODY", 0)
    monkeypatch.setattr(client.json, "loads", counting)
    pages = [page async for page, _ in listing.list_pages(api, "/api/v1/nodes", from_cache=True)]
    assert len(pages) == 1 and any("whole-0" in text for text in off_loop), "one piece, decoded off the loop"
    # In etcd's order, as a listing from etcd comes: the cache's node order decides ties.
    assert [n["metadata"]["name"] for n in pages[0]] == [n["metadata"]["name"] for n in on_loop]
    status, body = await client.request(api, "GET", "/api/v1/nodes/no-such-node")
    assert status == 404 and "not found" in body


async def test_an_early_listing_is_taken_in_place_of_the_same_request(
    api: ApiClient, control_plane: LocalControlPlane, monkeypatch: pytest.MonkeyPatch
) -> None:
    await create_nodes(api, [make_node(f"early-{i}") for i in range(3)])
    sent: list[str] = []
    send = client.request

    async def counting(api: ApiClient, method: str, path: str, *args: Any, **kwargs: Any) -> tuple[int, Any]:
        sent.append(path)
        return await send(api, method, path, *args, **kwargs)

    monkeypatch.setattr(listing, "request", counting)
    early = early_listing.start(str(control_plane.kubeconfig))
    assert early is not None, "the test control plane's kubeconfig (CA file, token) is one it reads"
    taken = [
        page
        async for page, _ in listing.list_pages(
            api, NODES.path, query=NODES.query, from_cache=True, early=early
        )
    ]
    assert sent == [], "the early reply stood in for the request"
    again = [
        page
        async for page, _ in listing.list_pages(
            api, NODES.path, query=NODES.query, from_cache=True, early=early
        )
    ]
    assert sent == [NODES.path], "a reply is taken once"
    names = [[n["metadata"]["name"] for n in page] for page in taken]
    assert names == [[n["metadata"]["name"] for n in page] for page in again]
    assert {"early-0", "early-1", "early-2"} <= set(names[0]), names
    # The same objects, but for managedFields: the early listing leaves them out.
    mine = {
        n["metadata"]["name"]: n for page in taken for n in page if n["metadata"]["name"].startswith("early-")
    }
    theirs = {n["metadata"]["name"]: n for page in again for n in page if n["metadata"]["name"] in mine}
    assert all("managedFields" in n["metadata"] for n in theirs.values()), "the server records them"
    for n in theirs.values():
        del n["metadata"]["managedFields"]
    assert mine == theirs
    # Another request than the one sent early (here, from etcd) is sent as usual.
    await listing.list_versioned(api, PODS.path, **PODS.query)
    assert (
        sent[-1] == PODS.path
        and early.take(PODS.path, early_listing.listing_query(PODS.query, from_cache=True)) is not None
    )


async def test_a_failed_early_listing_falls_back_to_the_request(
    api: ApiClient, control_plane: LocalControlPlane, tmp_path: Path
) -> None:
    await create_nodes(api, [make_node("fallback-0")])
    config = yaml.safe_load(control_plane.kubeconfig.read_text())
    config["users"][0]["user"]["token"] = "wrong-token"  # the early request gets 401
    wrong = tmp_path / "kubeconfig"
    wrong.write_text(yaml.safe_dump(config))
    early = early_listing.start(str(wrong))
    assert early is not None
    pages = [
        page
        async for page, _ in listing.list_pages(
            api, NODES.path, query=NODES.query, from_cache=True, early=early
        )
    ]
    assert "fallback-0" in [n["metadata"]["name"] for page in pages for n in page]
    target = early_listing.endpoint(str(control_plane.kubeconfig))
    assert target is not None
    closed = early_listing.EarlyListings(dataclasses.replace(target, port=1), early_listing.sync_requests())
    pages = [
        page
        async for page, _ in listing.list_pages(
            api, NODES.path, query=NODES.query, from_cache=True, early=closed
        )
    ]
    assert "fallback-0" in [n["metadata"]["name"] for page in pages for n in page]
