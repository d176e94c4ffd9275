"""One request, one reply: HTTP/1.1 over a pool of keep-alive connections to the API server.

Binds, events and status patches are small requests sent by the thousand. Through aiohttp's client
each cost 550-650 us of CPU here (its request and response objects, header multidicts, timers,
hooks), the largest part of what the scheduler spends per pod on a small cluster; written in one
piece and read by its Content-Length or chunks, the same request costs about 290 us
(docs/explanation/design.md, "Kept"). Watches stay on aiohttp: a stream pays that cost once.

A connection that breaks, or a reply that is cut off or malformed, raises `Broken`, an OSError as
a refused connection is: whether the request landed is unknown, as with any lost reply.
"""

from __future__ import annotations

import asyncio
import ssl
import time

HEAD_END = b"\r\n\r\n"
# Seconds a connection may sit idle before it is closed (aiohttp's keep-alive timeout): a burst of
# binds opens dozens, each holding TLS buffers, and a quiet cluster needs a few.
IDLE_TIMEOUT = 15.0
NO_BODY = frozenset((204, 304))
# A reply at least this large closes its connection rather than returning it to the pool: reading it
# wrote through the connection's TLS read buffer (256 KiB) and grew OpenSSL's input buffer, and both
# stay resident until the connection closes. The periodic reconcile's listings, each taken by whichever
# pooled connection was on top, made the RSS creep (docs/explanation/design.md, "Memory").
# Binds, events and patches are answered in a few KiB.
LARGE_REPLY = 64 * 1024


class Broken(ConnectionError):
    """No connection could be made, one broke, or a reply was cut off or not HTTP/1.1."""


Connection = tuple[asyncio.StreamReader, asyncio.StreamWriter]


class Pool:
    """Up to `limit` connections to one server, each carrying one request at a time."""

    def __init__(
        self,
        host: str,
        port: int,
        context: ssl.SSLContext | None,
        server_hostname: str | None,
        limit: int,
        idle_timeout: float = IDLE_TIMEOUT,
    ) -> None:
        self._host, self._port = host, port
        self._context = context
        self._server_hostname = (server_hostname or host) if context is not None else None
        self._limit = limit
        self._slots: asyncio.Semaphore | None = None  # made on the loop that sends
        self._idle_timeout = idle_timeout
        self._idle: list[tuple[float, Connection]] = []  # since when, oldest first
        self._open: set[Connection] = set()  # idle and busy
        self._closed = False

    async def send(self, request: bytes, timeout: float) -> tuple[int, bytes]:
        """Write `request` (head and body) and read its reply: (status, body)."""
        if self._closed:
            raise Broken("the client is closed")
        if self._slots is None:
            self._slots = asyncio.Semaphore(self._limit)
        async with self._slots:
            connection: Connection | None = None
            reusable = False
            try:
                async with asyncio.timeout(timeout):
                    connection = self._take() or await self._connect()
                    connection[1].write(request)
                    status, body, reusable = await read_reply(connection[0])
                reusable = reusable and len(body) < LARGE_REPLY
                return status, body
            finally:
                if connection is not None:
                    if reusable and connection in self._open:  # not closed meanwhile
                        self._idle.append((time.monotonic(), connection))
                    else:
                        self._drop(connection)
                    self._expire()

    def close(self) -> None:
        """Close every connection now: a request in flight fails with Broken, as on a closed session."""
        self._closed = True
        for connection in list(self._open):
            self._drop(connection)
        self._idle.clear()

    def _take(self) -> Connection | None:
        while self._idle:
            _, (reader, writer) = self._idle.pop()  # the most recently used
            if not reader.at_eof() and not writer.is_closing():  # the server may have closed it meanwhile
                return reader, writer
            self._drop((reader, writer))
        return None

    def _expire(self) -> None:
        """Close the connections idle for longer than the idle timeout."""
        since = time.monotonic() - self._idle_timeout
        while self._idle and self._idle[0][0] < since:
            self._drop(self._idle.pop(0)[1])

    async def _connect(self) -> Connection:
        try:
            connection = await asyncio.open_connection(
                self._host, self._port, ssl=self._context, server_hostname=self._server_hostname
            )
        except OSError as exc:  # refused, unreachable, TLS: the message says which server
            raise Broken(f"cannot connect to {self._host}:{self._port}: {exc.strerror or exc}") from exc
        if self._closed:  # while it connected
            connection[1].transport.abort()
            raise Broken("the client was closed")
        self._open.add(connection)
        return connection

    def _drop(self, connection: Connection) -> None:
        """Close at once: a TLS close would wait up to 30 s for the server's close_notify, which an
        idle or broken connection need not have."""
        self._open.discard(connection)
        connection[1].transport.abort()


async def read_reply(reader: asyncio.StreamReader) -> tuple[int, bytes, bool]:
    """A reply's status, its body, and whether the connection may carry another request."""
    try:
        head = await reader.readuntil(HEAD_END)
        lines = head[: -len(HEAD_END)].split(b"\r\n")
        version, status_text = lines[0].split(b" ", 2)[:2]
        status = int(status_text)
        headers: dict[bytes, bytes] = {}
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            headers[name.strip().lower()] = value.strip().lower()
        reusable = version == b"HTTP/1.1" and headers.get(b"connection") != b"close"
        if status in NO_BODY or status < 200:
            return status, b"", reusable
        if b"chunked" in headers.get(b"transfer-encoding", b""):
            return status, await _chunks(reader), reusable
        length = headers.get(b"content-length")
        if length is None:
            return status, await reader.read(), False  # delimited by the connection's end
        return status, await reader.readexactly(int(length)), reusable
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError) as exc:
        raise Broken(f"reply cut off or malformed: {exc!r}") from None


async def _chunks(reader: asyncio.StreamReader) -> bytes:
    parts: list[bytes] = []
    while True:
        size = int((await reader.readuntil(b"\r\n")).split(b";", 1)[0], 16)
        if size == 0:
            while await reader.readuntil(b"\r\n") != b"\r\n":  # trailers, then the empty line
                pass
            return b"".join(parts)
        parts.append(await reader.readexactly(size))
        await reader.readexactly(2)
