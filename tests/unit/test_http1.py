"""kube/http1.py: replies read by length, by chunks or to the end; a pool that reuses only what is
still open; every broken reply an OSError, as a refused connection is."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
import pytest_asyncio
from hypothesis import given
from hypothesis import strategies as st

from kubesched.kube.client import ApiClient, Configuration, request
from kubesched.kube.http1 import LARGE_REPLY, Broken, Pool, read_reply
from kubesched.kube.kubeconfig import Endpoint

REQUEST = b"POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\n{}"


def reader_of(data: bytes) -> asyncio.StreamReader:
    reader = asyncio.StreamReader()
    reader.feed_data(data)
    reader.feed_eof()
    return reader


def chunked(parts: list[bytes], trailer: bytes = b"") -> bytes:
    body = b"".join(b"%x;ext=1\r\n%s\r\n" % (len(p), p) for p in parts if p)
    return b"HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n" + body + b"0\r\n" + trailer + b"\r\n"


async def test_a_reply_is_read_by_its_content_length_and_the_connection_kept() -> None:
    head = b"HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nContent-Length: 7\r\n\r\n"
    reply = head + b'{"a":1}NEXT'
    assert await read_reply(reader_of(reply)) == (404, b'{"a":1}', True)


@given(st.lists(st.binary(max_size=40), max_size=6), st.sampled_from([b"", b"X-Trailer: 1\r\n"]))
def test_a_chunked_reply_is_its_chunks_joined(parts: list[bytes], trailer: bytes) -> None:
    async def read() -> tuple[int, bytes, bool]:
        return await read_reply(reader_of(chunked(parts, trailer)))

    assert asyncio.run(read()) == (201, b"".join(parts), True)


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        (b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok", (200, b"ok", False)),
        (b"HTTP/1.1 200 OK\r\n\r\nto the end", (200, b"to the end", False)),
        (b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok", (200, b"ok", False)),
        (b"HTTP/1.1 204 No Content\r\n\r\n", (204, b"", True)),
    ],
)
async def test_when_a_connection_may_carry_another_request(
    reply: bytes, expected: tuple[int, bytes, bool]
) -> None:
    assert await read_reply(reader_of(reply)) == expected


@pytest.mark.parametrize(
    "reply",
    [
        b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort",  # cut off in the body
        b"HTTP/1.1 200 OK\r\nContent-Le",  # cut off in the head
        b"",  # closed before any reply
        b"HTTP/1.1 abc OK\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    ],
)
async def test_a_broken_reply_is_an_os_error(reply: bytes) -> None:
    with pytest.raises(Broken) as caught:
        await read_reply(reader_of(reply))
    assert isinstance(caught.value, OSError)


Answer = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


class Server:
    """A local HTTP/1.1 server answering each request with `answer`, counting its connections."""

    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.connections = 0
        self.open = 0
        self.most_open = 0

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.open += 1
        self.most_open = max(self.most_open, self.open)
        try:
            while True:
                try:
                    await reader.readuntil(b"\r\n\r\n")
                    await reader.readexactly(2)
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                await self.answer(reader, writer)
                if writer.is_closing():
                    return
        finally:
            self.open -= 1
            writer.close()


async def ok(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
    await writer.drain()


@pytest_asyncio.fixture
async def serve() -> AsyncIterator[Callable[[Server], Awaitable[Pool]]]:
    servers: list[asyncio.Server] = []
    pools: list[Pool] = []

    async def start(server: Server) -> Pool:
        listening = await asyncio.start_server(server.serve, "127.0.0.1", 0)
        servers.append(listening)
        pool = Pool("127.0.0.1", listening.sockets[0].getsockname()[1], None, None, limit=4)
        pools.append(pool)
        return pool

    yield start
    for pool in pools:
        pool.close()
    for listening in servers:
        listening.close()


async def test_requests_in_turn_share_one_connection(serve: Callable[[Server], Awaitable[Pool]]) -> None:
    server = Server(ok)
    pool = await serve(server)
    for _ in range(5):
        assert await pool.send(REQUEST, timeout=5) == (200, b"ok")
    assert server.connections == 1


async def test_a_large_reply_closes_its_connection(serve: Callable[[Server], Awaitable[Pool]]) -> None:
    # Its buffers, written through, would stay resident for as long as the pool kept it.
    sizes = [2, LARGE_REPLY - 1, LARGE_REPLY, 2, 2]
    replies = iter(sizes)

    async def sized(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        size = next(replies)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % size + b"x" * size)
        await writer.drain()

    server = Server(sized)
    pool = await serve(server)
    for size in sizes:
        assert await pool.send(REQUEST, timeout=5) == (200, b"x" * size)
    # The first three on one connection, the two after the large reply on a second.
    await asyncio.wait_for(_until(lambda: server.open == 1), 5)
    assert server.connections == 2, server.connections


async def test_requests_at_once_open_at_most_the_limit(serve: Callable[[Server], Awaitable[Pool]]) -> None:
    async def slow(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(0.01)
        await ok(reader, writer)

    server = Server(slow)
    pool = await serve(server)
    replies = await asyncio.gather(*(pool.send(REQUEST, timeout=5) for _ in range(20)))
    assert replies == [(200, b"ok")] * 20
    assert server.most_open == 4, server.most_open


async def test_a_connection_the_server_closed_while_idle_is_not_reused(
    serve: Callable[[Server], Awaitable[Pool]],
) -> None:
    async def ok_then_close(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await ok(reader, writer)  # no "Connection: close": the pool learns of it only from the connection
        writer.close()

    server = Server(ok_then_close)
    pool = await serve(server)
    assert await pool.send(REQUEST, timeout=5) == (200, b"ok")
    # Once the connection's end has reached the idle connection's reader (the pool's own list).
    await asyncio.wait_for(_until(lambda: all(reader.at_eof() for _, (reader, _) in pool._idle)), 5)
    assert await pool.send(REQUEST, timeout=5) == (200, b"ok")
    assert server.connections == 2


async def test_a_reply_cut_off_breaks_that_connection_only(
    serve: Callable[[Server], Awaitable[Pool]],
) -> None:
    replies = iter([b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort", b""])

    async def cut(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        part = next(replies, b"")
        if part:
            writer.write(part)
            writer.close()
        else:
            await ok(reader, writer)

    server = Server(cut)
    pool = await serve(server)
    with pytest.raises(OSError):
        await pool.send(REQUEST, timeout=5)
    assert await pool.send(REQUEST, timeout=5) == (200, b"ok")
    assert server.connections == 2


async def test_no_reply_in_time_is_a_timeout_and_the_connection_is_dropped(
    serve: Callable[[Server], Awaitable[Pool]],
) -> None:
    calls = 0

    async def first_never(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal calls
        calls += 1
        if calls == 1:
            await reader.read()  # no reply, until the client gives up and closes the connection
            return
        await ok(reader, writer)

    server = Server(first_never)
    pool = await serve(server)
    with pytest.raises(TimeoutError):
        await pool.send(REQUEST, timeout=0.2)
    assert await pool.send(REQUEST, timeout=5) == (200, b"ok")
    assert server.connections == 2


async def _until(condition: Callable[[], bool]) -> None:
    while not condition():  # noqa: ASYNC110 (what it waits for is no event of ours)
        await asyncio.sleep(0.01)


async def test_closing_the_pool_fails_a_request_in_flight_and_closes_its_connection(
    serve: Callable[[Server], Awaitable[Pool]],
) -> None:
    async def never(reader: asyncio.StreamReader, _: asyncio.StreamWriter) -> None:
        await reader.read()

    server = Server(never)
    pool = await serve(server)
    sending = asyncio.create_task(pool.send(REQUEST, timeout=30))
    await asyncio.wait_for(_until(lambda: server.open == 1), 5)
    pool.close()
    with pytest.raises(OSError):
        await asyncio.wait_for(sending, 5)
    await asyncio.wait_for(_until(lambda: server.open == 0), 5)
    with pytest.raises(OSError):  # a closed pool stays closed
        await pool.send(REQUEST, timeout=5)


async def test_the_client_writes_path_prefix_query_host_and_credentials() -> None:
    heads: list[bytes] = []

    async def record(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        heads.append(head)
        length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
        heads.append(await reader.readexactly(length))
        writer.write(b'HTTP/1.1 409 Conflict\r\nContent-Length: 18\r\n\r\n{"message": "no!"}')
        await writer.drain()
        writer.close()

    listening = await asyncio.start_server(record, "127.0.0.1", 0)
    port = listening.sockets[0].getsockname()[1]

    async def token() -> str:
        return "Bearer t0k3n"

    target = Endpoint("http", "127.0.0.1", port, "/base", {"X-Extra": "1"})
    try:
        async with ApiClient(Configuration(target, authorization=token)) as api:
            status, message = await request(api, "POST", "/api/v1/x", {"a": 1}, query=[("limit", 1)])
    finally:
        listening.close()
    assert (status, message) == (409, "no!")
    head = heads[0].decode()
    assert head.startswith("POST /base/api/v1/x?limit=1 HTTP/1.1\r\n"), head
    for line in (
        f"Host: 127.0.0.1:{port}",
        "Authorization: Bearer t0k3n",
        "X-Extra: 1",
        "Content-Type: application/json",
    ):
        assert f"\r\n{line}\r\n" in head, head
    assert heads[1] == b'{"a":1}'


async def test_connections_idle_past_the_timeout_are_closed() -> None:
    async def slow(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(0.05)
        await ok(reader, writer)

    server = Server(slow)
    listening = await asyncio.start_server(server.serve, "127.0.0.1", 0)
    pool = Pool("127.0.0.1", listening.sockets[0].getsockname()[1], None, None, limit=4, idle_timeout=0.2)
    try:
        await asyncio.gather(*(pool.send(REQUEST, timeout=5) for _ in range(3)))
        assert server.open == 3
        await asyncio.sleep(0.3)  # past the idle timeout: closed at the next request's end
        assert await pool.send(REQUEST, timeout=5) == (200, b"ok")
        await asyncio.wait_for(_until(lambda: server.open == 1), 5)
    finally:
        pool.close()
        listening.close()
