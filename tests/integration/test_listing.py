"""Start-up listings come a page at a time, from one snapshot of the API server."""

from __future__ import annotations

import json
import threading

import pytest
from kubernetes_asyncio.client import ApiClient

from kubesched.kube import client, listing
from kubesched.model.kinds import NODES
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


async def test_a_lean_listing_holds_the_same_objects_less_managed_fields(api: ApiClient) -> None:
    """Nodes and pods are listed lean (listing.decode_listing); from the server as a whole, too."""
    await create_nodes(api, [make_node(f"lean-{i}") for i in range(3)])
    lean = [
        n async for page, _ in listing.list_pages(api, NODES.path, from_cache=True, lean=True) for n in page
    ]
    whole = [n async for page, _ in listing.list_pages(api, NODES.path, from_cache=True) for n in page]
    mine = {n["metadata"]["name"]: n for n in lean if n["metadata"]["name"].startswith("lean-")}
    theirs = {n["metadata"]["name"]: n for n in whole if n["metadata"]["name"] in mine}
    assert sorted(mine) == ["lean-0", "lean-1", "lean-2"]
    assert all("managedFields" in n["metadata"] for n in theirs.values()), "the server records them"
    for n in theirs.values():
        del n["metadata"]["managedFields"]
    assert mine == theirs
    with pytest.raises(listing.NotServed):
        [page async for page in listing.list_pages(api, "/apis/no.such/v1/things", lean=True)]
