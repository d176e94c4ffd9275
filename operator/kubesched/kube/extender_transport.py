"""The HTTP(S) transport of scheduler extenders (algorithm/extenders.py's ExtenderTransport).

Calls are plain blocking HTTP made from the algorithm's executor thread (the event loop never
waits on them), or from a binder thread for a bindVerb. Each exchange runs on a shared worker
thread so that the caller can give up at the extender's `httpTimeout` as a total deadline,
whatever stage the exchange is at; when it does, it shuts the exchange's socket down, so that the
worker stops there too instead of holding its thread. The worker keeps to the same deadline on its
own: each socket operation gets the time left, so a server that sends a byte now and then cannot
stretch a call either. At most MAX_REPLY_BYTES of a reply are read: a Content-Length above it
fails the call unread, a longer body once the cap is passed (it is read in chunks).

Connections are kept alive, a small pool per extender; a kept connection that the server closed
meanwhile is retried once on a new one, as Go's client does for a request that got no reply byte.
TLS follows 1.20's makeTransport: client certificates and a CA from files or inline PEM,
`serverName`, and no verification with `insecure` or with `enableHTTPS` and no CA.

`HTTPTransport` is the factory the composition root hands to policy compilation
(`compile_policy(..., transport=HTTPTransport)`): one transport per configured extender.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import queue
import re
import socket
import ssl
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from urllib.parse import urlsplit

from kubesched.algorithm.extender_wire import MAX_REPLY_BYTES, ExtenderError
from kubesched.algorithm.extenders import ExtenderConfig, TLSConfig

MAX_WORKERS = 16
_CHUNK = 64 * 1024
_ERROR_BODY = 1024  # bytes of a non-200 reply read, to quote its start
_SHOWN = 200  # characters of the server's own text (status reason, error body) quoted
# What ssl's messages say around OpenSSL's words: "[SSL: WRONG_VERSION_NUMBER] ... (_ssl.c:1006)".
_SSL_NOISE = re.compile(r"^\[SSL(?:: \w+)?\] *| *\(_ssl\.c:\d+\)$")
# OpenSSL's reasons when the server answered the TLS handshake with something else (plain HTTP).
_NOT_TLS = frozenset(
    {"WRONG_VERSION_NUMBER", "RECORD_LAYER_FAILURE", "HTTP_REQUEST", "PACKET_LENGTH_TOO_LONG"}
)


class _HTTPSConnection(http.client.HTTPSConnection):
    """An HTTPS connection that can verify (and send SNI for) a name other than the URL's host."""

    def __init__(
        self, host: str, port: int | None, timeout: float, context: ssl.SSLContext, server_name: str
    ):
        super().__init__(host, port, timeout=timeout, context=context)
        self._context = context
        self._server_name = server_name or host

    def connect(self) -> None:
        sock = socket.create_connection((self.host, self.port), self.timeout)
        try:
            self.sock = self._context.wrap_socket(sock, server_hostname=self._server_name)
        except BaseException:
            sock.close()
            raise


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


_WORKERS: ThreadPoolExecutor | None = None
_WORKERS_LOCK = threading.Lock()


def _workers() -> ThreadPoolExecutor:
    """The threads that make the HTTP calls, shared by every extender of every policy (a policy
    reload must not leave threads behind); a call that hangs holds one until its deadline."""
    global _WORKERS
    with _WORKERS_LOCK:
        if _WORKERS is None:
            _WORKERS = ThreadPoolExecutor(max_workers=MAX_WORKERS, thread_name_prefix="extender")
        return _WORKERS


class _Call:
    """One call's deadline and socket, shared by the caller and the worker making it."""

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self.deadline = time.monotonic() + timeout
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None
        self._aborted = False

    def time_left(self) -> float:
        """Seconds left before the deadline; TimeoutError once it has passed (or the caller left)."""
        left = self.deadline - time.monotonic()
        if left <= 0 or self._aborted:
            raise TimeoutError
        return left

    def attach(self, sock: socket.socket) -> None:
        """The worker reads from `sock`, until the deadline."""
        with self._lock:
            self._sock = sock
            if self._aborted:
                self._shut()
        sock.settimeout(self.time_left())

    def detach(self) -> bool:
        """The worker is done with the socket: False when the caller gave up meanwhile (the socket
        may have been shut down: not to be kept)."""
        with self._lock:
            self._sock = None
            return not self._aborted

    def abort(self) -> None:
        """The caller gives up: a worker blocked on the socket wakes up to an error and stops."""
        with self._lock:
            self._aborted = True
            self._shut()

    def _shut(self) -> None:
        if self._sock is not None:
            with contextlib.suppress(OSError):  # closed already
                self._sock.shutdown(socket.SHUT_RDWR)


class _Stale(Exception):
    """A kept-alive connection was closed by the server before it replied: try a new one."""


class HTTPTransport:
    """One extender's HTTP(S) client: POSTs JSON to `urlPrefix/verb` within its httpTimeout."""

    def __init__(self, config: ExtenderConfig) -> None:
        """Raises ValueError when the TLS material cannot be loaded (nothing is sent yet)."""
        self._config = config
        parts = urlsplit(config.url_prefix)
        self._https = parts.scheme == "https"
        self._host = parts.hostname or ""
        self._port = parts.port
        self._path = parts.path.rstrip("/")
        try:
            self._context = _ssl_context(config) if self._https else None
        except (OSError, ValueError) as exc:  # ssl.SSLError is an OSError
            raise ValueError(f"cannot set up TLS: {exc}") from exc
        self._idle: queue.SimpleQueue[http.client.HTTPConnection] = queue.SimpleQueue()

    def post(self, verb: str, body: bytes) -> bytes:
        """POST the JSON `body`; the whole exchange must finish within httpTimeout."""
        call = _Call(self._config.http_timeout)
        future = _workers().submit(self._exchange, verb, body, call)
        try:
            return future.result(timeout=call.timeout)
        except FutureTimeout:
            future.cancel()  # still queued behind busy workers: never sent
            call.abort()
            raise ExtenderError(f"no reply within {call.timeout:g}s") from None

    def close(self) -> None:
        """Close the idle keep-alive connections."""
        while True:
            try:
                self._idle.get_nowait().close()
            except queue.Empty:
                break

    def _new_connection(self, timeout: float) -> http.client.HTTPConnection:
        if self._https:
            assert self._context is not None
            tls = self._config.tls or TLSConfig()
            return _HTTPSConnection(self._host, self._port, timeout, self._context, tls.server_name)
        return http.client.HTTPConnection(self._host, self._port, timeout=timeout)

    def _exchange(self, verb: str, body: bytes, call: _Call) -> bytes:
        try:
            try:
                kept = self._idle.get_nowait()
            except queue.Empty:
                pass
            else:
                try:
                    return self._round_trip(kept, verb, body, call, kept=True)
                except _Stale:
                    pass
            return self._round_trip(self._new_connection(call.time_left()), verb, body, call, kept=False)
        except (OSError, http.client.HTTPException) as exc:
            raise ExtenderError(_describe(exc, call.timeout)) from exc

    def _round_trip(
        self, conn: http.client.HTTPConnection, verb: str, body: bytes, call: _Call, *, kept: bool
    ) -> bytes:
        """One request on `conn` and its reply's body; closes `conn` unless it is kept for the next."""
        response: http.client.HTTPResponse | None = None
        try:
            if conn.sock is not None:
                call.attach(conn.sock)
            try:
                # A new connection connects here, within the time left when it was made.
                conn.request(
                    "POST", f"{self._path}/{verb}", body=body, headers={"Content-Type": "application/json"}
                )
                # The socket, held on to: http.client lets go of it once a reply says it closes the
                # connection, but the reply is read from it all the same.
                sock = conn.sock
                call.attach(sock)
                response = conn.getresponse()
            except (ConnectionResetError, BrokenPipeError):  # http.client.RemoteDisconnected included
                if kept:
                    raise _Stale from None
                raise
            if response.status != 200:
                start = _read(sock, response, call, _ERROR_BODY, cap=False)
                raise ExtenderError(_status_error(response, start))
            if response.length is not None and response.length > MAX_REPLY_BYTES:
                raise ExtenderError(
                    f"reply larger than {_size(MAX_REPLY_BYTES)} (Content-Length: {response.length})"
                )
            data = _read(sock, response, call, MAX_REPLY_BYTES, cap=True)
        except BaseException:
            call.detach()
            conn.close()
            if response is not None:
                response.close()  # it holds the socket when the reply said the connection closes
            raise
        if call.detach() and not response.will_close:
            self._idle.put(conn)
        else:
            conn.close()
        return data


def _read(
    sock: socket.socket, response: http.client.HTTPResponse, call: _Call, limit: int, cap: bool
) -> bytes:
    """The body, in chunks, each within the time left: at most `limit` bytes; more is an error
    with `cap`, else the rest is left unread."""
    data = bytearray()
    while len(data) <= limit:
        if response.isclosed():  # read to its end (and the socket closed, when the reply said so)
            return bytes(data)
        sock.settimeout(call.time_left())
        chunk = response.read(min(_CHUNK, limit + 1 - len(data)))
        if not chunk:
            return bytes(data)
        data += chunk
    if cap:
        raise ExtenderError(f"reply larger than {_size(limit)}")
    return bytes(data[:limit])


def _status_error(response: http.client.HTTPResponse, start: bytes) -> str:
    """A non-200 reply, with the start of what it said."""
    said = " ".join(start.decode("utf-8", "replace").split())
    reason = _cut(str(response.reason or ""))
    message = f"HTTP status {response.status}{f' {reason}' if reason else ''} (expected 200)"
    return f"{message}: {_cut(said)}" if said else message


def _describe(exc: BaseException, timeout: float) -> str:
    """What went wrong in an exchange, for a person reading an event."""
    if isinstance(exc, TimeoutError):  # socket.timeout included
        return f"no reply within {timeout:g}s"
    if isinstance(exc, ssl.SSLCertVerificationError):
        return f"TLS: certificate verify failed: {exc.verify_message or exc.reason}"
    if isinstance(exc, ssl.SSLError):
        said = _SSL_NOISE.sub("", str(exc.strerror or exc)) or str(exc.reason)
        hint = " (is the server speaking plain HTTP?)" if exc.reason in _NOT_TLS else ""
        return f"TLS: {_cut(said)}{hint}"
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, http.client.RemoteDisconnected):
        return "the server closed the connection without a reply"
    if isinstance(exc, http.client.IncompleteRead):
        return f"reply cut short: {exc.expected} more bytes were announced"
    if isinstance(exc, http.client.HTTPException):
        return f"not a valid HTTP reply: {type(exc).__name__}: {_cut(str(exc))}"
    if isinstance(exc, OSError) and exc.strerror:
        return f"connection failed: {exc.strerror}"
    return f"connection failed: {_cut(repr(exc))}"


def _cut(text: str) -> str:
    return text if len(text) <= _SHOWN else f"{text[:_SHOWN]}..."


def _size(count: int) -> str:
    return f"{count / (1024 * 1024):g} MiB" if count % (1024 * 1024) == 0 else f"{count} bytes"


__all__ = ["HTTPTransport"]
