"""The HTTP(S) transport of scheduler extenders (algorithm/extenders.py's ExtenderTransport), on aiohttp.

The algorithm calls an extender synchronously from its executor thread (a bindVerb from a binder
thread): `post` hands the exchange to one event loop of the extenders' own, run by a daemon thread
shared by every extender of every policy, and waits for its end. The operator's own loop never
carries an extender call, so a slow extender cannot stall the lease renewals or the watches, and a
busy operator loop cannot stretch an extender's deadline; the command-line tools, which have no
loop, call extenders the same way.

Each exchange is bounded by the extender's `httpTimeout` as a total deadline, whatever stage it is
at; when it passes the exchange is cancelled and its connection closed, so a server that sends a
byte now and then cannot stretch a call. At most MAX_REPLY_BYTES of a reply are read: a
Content-Length above it fails the call unread, a longer body once the cap is passed.

Connections are kept alive, a pool per extender; a kept connection that the server closed
meanwhile is retried once on a new one, as Go's client does for a request that got no reply byte.
TLS follows 1.20's makeTransport: client certificates and a CA from files or inline PEM,
`serverName`, and no verification with `insecure` or with `enableHTTPS` and no CA.

`HTTPTransport` is the factory the composition root hands to policy compilation
(`compile_policy(..., transport=HTTPTransport)`): one transport per configured extender.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import errno
import os
import re
import ssl
import tempfile
import threading
from collections.abc import Coroutine
from types import SimpleNamespace
from typing import Any, TypeVar
from urllib.parse import urlsplit

import aiohttp

from kubesched.algorithm.extender_wire import MAX_REPLY_BYTES, ExtenderError
from kubesched.algorithm.extenders import ExtenderConfig, TLSConfig

_CHUNK = 64 * 1024
_ERROR_BODY = 1024  # bytes of a non-200 reply read, to quote its start
_SHOWN = 200  # characters of the server's own text (status reason, error body) quoted
# How long a caller waits beyond the deadline for the loop to report it (it should never need to).
_GRACE = 1.0
# What ssl's messages say around OpenSSL's words: "[SSL: WRONG_VERSION_NUMBER] ... (_ssl.c:1006)".
_SSL_NOISE = re.compile(r"^\[SSL(?:: \w+)?\] *| *\(_ssl\.c:\d+\)$")
# OpenSSL's reasons when the server answered the TLS handshake with something else (plain HTTP).
_NOT_TLS = frozenset(
    {"WRONG_VERSION_NUMBER", "RECORD_LAYER_FAILURE", "HTTP_REQUEST", "PACKET_LENGTH_TOO_LONG"}
)

_T = TypeVar("_T")


def _ssl_context(config: ExtenderConfig) -> ssl.SSLContext:
    """makeTransport: HTTPS without a CA (or with `insecure`) does not verify the server."""
    tls = config.tls or TLSConfig()
    context = ssl.create_default_context()
    has_ca = bool(tls.ca_file or tls.ca_data)
    if tls.insecure or (config.enable_https and not has_ca):
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if tls.ca_file:
        context.load_verify_locations(cafile=tls.ca_file)
    if tls.ca_data:
        context.load_verify_locations(cadata=tls.ca_data.decode())
    if tls.cert_file or tls.cert_data:
        # load_cert_chain reads only files: inline PEM goes through a private temporary directory.
        with tempfile.TemporaryDirectory() as tmp:
            cert, key = tls.cert_file, tls.key_file
            if tls.cert_data:
                cert = os.path.join(tmp, "cert.pem")
                with open(cert, "wb") as f:
                    f.write(tls.cert_data)
            if tls.key_data:
                key = os.path.join(tmp, "key.pem")
                with open(key, "wb") as f:
                    f.write(tls.key_data)
            context.load_cert_chain(cert, key or None)
    return context


_LOOP: asyncio.AbstractEventLoop | None = None
_LOOP_LOCK = threading.Lock()


def _loop() -> asyncio.AbstractEventLoop:
    """The extenders' event loop, started on first use in a daemon thread."""
    global _LOOP
    with _LOOP_LOCK:
        if _LOOP is None:
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="extenders", daemon=True).start()
            _LOOP = loop
        return _LOOP


def _run(coroutine: Coroutine[Any, Any, _T], timeout: float) -> _T:
    """Run `coroutine` on the extenders' loop and wait for it, `timeout` at most."""
    future = asyncio.run_coroutine_threadsafe(coroutine, _loop())
    try:
        return future.result(timeout)
    except concurrent.futures.TimeoutError:
        future.cancel()
        raise TimeoutError from None


class _Stale(Exception):
    """A kept-alive connection was closed by the server before it replied: try a new one."""


async def _reused(session: aiohttp.ClientSession, ctx: SimpleNamespace, params: Any) -> None:
    ctx.trace_request_ctx.reused = True


class HTTPTransport:
    """One extender's HTTP(S) client: POSTs JSON to `urlPrefix/verb` within its httpTimeout."""

    def __init__(self, config: ExtenderConfig) -> None:
        """Raises ValueError when the TLS material cannot be loaded (nothing is sent yet)."""
        self._config = config
        self._prefix = config.url_prefix.rstrip("/")
        https = urlsplit(config.url_prefix).scheme == "https"
        try:
            self._context = _ssl_context(config) if https else None
        except (OSError, ValueError) as exc:  # ssl.SSLError is an OSError
            raise ValueError(f"cannot set up TLS: {exc}") from exc
        self._server_name = (config.tls or TLSConfig()).server_name or None
        self._session: aiohttp.ClientSession | None = None  # made on the extenders' loop

    def post(self, verb: str, body: bytes) -> bytes:
        """POST the JSON `body`; the whole exchange must finish within httpTimeout."""
        timeout = self._config.http_timeout
        try:
            return _run(self._exchange(verb, body), timeout + _GRACE)
        except TimeoutError:
            raise ExtenderError(f"no reply within {timeout:g}s") from None

    def close(self) -> None:
        """Close the idle keep-alive connections."""
        if self._session is not None:
            session, self._session = self._session, None
            _run(session.close(), _GRACE)

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None:
            trace = aiohttp.TraceConfig()
            trace.on_connection_reuseconn.append(_reused)
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(ssl=self._context or True), trace_configs=[trace]
            )
        return self._session

    async def _exchange(self, verb: str, body: bytes) -> bytes:
        timeout = self._config.http_timeout
        try:
            async with asyncio.timeout(timeout):
                try:
                    return await self._round_trip(verb, body)
                except _Stale:
                    return await self._round_trip(verb, body)
        except TimeoutError:
            raise ExtenderError(f"no reply within {timeout:g}s") from None
        except (OSError, aiohttp.ClientError) as exc:
            raise ExtenderError(_describe(exc)) from exc

    async def _round_trip(self, verb: str, body: bytes) -> bytes:
        """One request and its reply's body."""
        ctx = SimpleNamespace(reused=False)
        try:
            response = await self._client().post(
                f"{self._prefix}/{verb}",
                data=body,
                headers={"Content-Type": "application/json"},
                server_hostname=self._server_name,
                trace_request_ctx=ctx,
            )
        except (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError) as exc:
            if ctx.reused and _no_reply(exc):
                raise _Stale from exc
            raise
        async with response:
            if response.status != 200:
                start = await _read(response, _ERROR_BODY, cap=False)
                raise ExtenderError(_status_error(response, start))
            length = response.content_length
            if length is not None and length > MAX_REPLY_BYTES:
                raise ExtenderError(f"reply larger than {_size(MAX_REPLY_BYTES)} (Content-Length: {length})")
            return await _read(response, MAX_REPLY_BYTES, cap=True)


async def _read(response: aiohttp.ClientResponse, limit: int, cap: bool) -> bytes:
    """The body, in chunks: at most `limit` bytes; more is an error with `cap`, else left unread."""
    data = bytearray()
    while len(data) <= limit:
        chunk = await response.content.read(min(_CHUNK, limit + 1 - len(data)))
        if not chunk:
            return bytes(data)
        data += chunk
    if cap:
        raise ExtenderError(f"reply larger than {_size(limit)}")
    return bytes(data[:limit])


def _no_reply(exc: BaseException) -> bool:
    """The server closed the connection (or reset it) before a byte of the reply came."""
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        return True
    return isinstance(exc, OSError) and exc.errno in (errno.ECONNRESET, errno.EPIPE)


def _status_error(response: aiohttp.ClientResponse, start: bytes) -> str:
    """A non-200 reply, with the start of what it said."""
    said = " ".join(start.decode("utf-8", "replace").split())
    reason = _cut(str(response.reason or ""))
    message = f"HTTP status {response.status}{f' {reason}' if reason else ''} (expected 200)"
    return f"{message}: {_cut(said)}" if said else message


def _describe(exc: BaseException) -> str:
    """What went wrong in an exchange, for a person reading an event."""
    if isinstance(exc, aiohttp.ClientConnectorCertificateError):
        cert = exc.certificate_error
        said = cert.verify_message if isinstance(cert, ssl.SSLCertVerificationError) else None
        return f"TLS: certificate verify failed: {said or getattr(cert, 'reason', None) or cert}"
    if isinstance(exc, aiohttp.ClientConnectorError):
        exc = exc.os_error
    if isinstance(exc, ssl.SSLError):
        said = _SSL_NOISE.sub("", str(exc.strerror or exc)) or str(exc.reason)
        hint = " (is the server speaking plain HTTP?)" if exc.reason in _NOT_TLS else ""
        return f"TLS: {_cut(said)}{hint}"
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if _no_reply(exc):
        return "the server closed the connection without a reply"
    if isinstance(exc, aiohttp.ClientPayloadError):
        return f"reply cut short: {_cut(str(exc))}"
    if isinstance(exc, aiohttp.ClientResponseError):
        return f"not a valid HTTP reply: {_cut(exc.message)}"
    if isinstance(exc, OSError) and exc.strerror:
        return f"connection failed: {exc.strerror}"
    return f"connection failed: {_cut(repr(exc))}"


def _cut(text: str) -> str:
    return text if len(text) <= _SHOWN else f"{text[:_SHOWN]}..."


def _size(count: int) -> str:
    return f"{count / (1024 * 1024):g} MiB" if count % (1024 * 1024) == 0 else f"{count} bytes"


__all__ = ["HTTPTransport"]
