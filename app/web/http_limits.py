"""The bounds on a connection that uvicorn's httptools protocol lacks, in the protocol itself.

httptools sets no limit on a request's head, and uvicorn none on how long a head or a body may take to
arrive, nor on how long a client may leave an answer unread. The parser also gathers a header line by
joining its pieces, which costs by the square of its length: one 64 MiB header held the event loop
7.5 s. ``LimitedHttpToolsProtocol`` adds the ``Server`` settings' bounds:

* ``max_header_bytes``: a request line and headers over it are answered 431 before the parser sees
  more than that (and at most one read, 256 KiB, of what follows a head in the same packet);
* ``header_timeout_s``: a head, from its first byte (or from the connection, for a client that sends
  nothing), must have come whole within it; else 408 and the connection is closed;
* ``body_timeout_s``: a body must have come whole within it of its head; else 408 (or, once the answer
  has begun, the connection is closed) and the app reads a disconnect;
* ``send_timeout_s``: once the unsent bytes of an answer are over the transport's high-water mark,
  the client must read some of them within each such time; else the connection is closed, the app's
  ``send`` returns and it reads a disconnect, so a streamed export stops and lets the next one begin.

Between requests, uvicorn's own ``timeout_keep_alive`` (``keep_alive_s``) closes an idle connection.
Every way the server starts serves with it (``app.cli.uvicorn_options``).
"""

import asyncio
import json
import logging
from functools import partial
from typing import NamedTuple

from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from app.settings import Settings

log = logging.getLogger("textflix")


class HttpLimits(NamedTuple):
    max_header_bytes: int
    header_timeout_s: float
    body_timeout_s: float
    send_timeout_s: float

    @classmethod
    def of(cls, settings: Settings) -> "HttpLimits":
        return cls(*(getattr(settings, name) for name in cls._fields))


def limited_protocol(settings: Settings) -> partial:
    """The ``http`` protocol for uvicorn with the bounds of ``settings``, picklable for worker processes."""
    return partial(LimitedHttpToolsProtocol, limits=HttpLimits.of(settings))


class LimitedHttpToolsProtocol(HttpToolsProtocol):
    def __init__(self, *args, limits: HttpLimits, **kwargs):
        super().__init__(*args, **kwargs)
        self.limits = limits
        self.reading_head = True
        self.head_bytes = 0
        self.heads = 0  # heads parsed on this connection
        self.read_deadline: asyncio.TimerHandle | None = None  # of the head, or of the body
        self.send_deadline: asyncio.TimerHandle | None = None
        self.unsent = 0  # bytes the transport held at the send deadline's last look

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.await_head()

    def connection_lost(self, exc: Exception | None) -> None:
        self.stop_read_deadline()
        self.stop_send_deadline()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if not self.reading_head:
            super().data_received(data)
            return
        if self.read_deadline is None:
            self.await_head()
        room = self.limits.max_header_bytes - self.head_bytes
        if len(data) <= room:
            self.head_bytes += len(data)
            super().data_received(data)
            return
        heads = self.heads
        super().data_received(data[:room])
        if self.transport.is_closing():
            return
        if self.heads == heads:
            self.refuse(431, "headers", f"The request line and headers are over {self.limits.max_header_bytes:,} bytes.")
            return
        self.data_received(data[room:])  # what follows the head that ended within the room

    def on_headers_complete(self) -> None:
        self.reading_head, self.heads = False, self.heads + 1
        self.stop_read_deadline()
        self.read_deadline = self.loop.call_later(self.limits.body_timeout_s, self.body_too_slow)
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self.stop_read_deadline()  # the next head's begins with its first byte
        self.reading_head, self.head_bytes = True, 0
        super().on_message_complete()

    def pause_writing(self) -> None:
        super().pause_writing()
        if self.send_deadline is None:
            self.await_reading()

    def resume_writing(self) -> None:
        self.stop_send_deadline()
        super().resume_writing()

    # --- deadlines ------------------------------------------------------------------------

    def await_head(self) -> None:
        self.stop_read_deadline()
        self.read_deadline = self.loop.call_later(self.limits.header_timeout_s, self.head_too_slow)

    def await_reading(self) -> None:
        self.unsent = self.transport.get_write_buffer_size()
        self.send_deadline = self.loop.call_later(self.limits.send_timeout_s, self.check_reading)

    def stop_read_deadline(self) -> None:
        if self.read_deadline is not None:
            self.read_deadline.cancel()
            self.read_deadline = None

    def stop_send_deadline(self) -> None:
        if self.send_deadline is not None:
            self.send_deadline.cancel()
            self.send_deadline = None

    def head_too_slow(self) -> None:
        self.read_deadline = None
        if self.cycle is not None and not self.cycle.response_complete:
            return  # a pipelined head waits behind an answer under way, which keeps the connection
        self.refuse(408, "headers", f"The request line and headers did not come within {self.limits.header_timeout_s:g} s.")

    def body_too_slow(self) -> None:
        self.read_deadline = None
        started = self.cycle.response_started
        self.cycle.disconnected = True  # the app reads a disconnect, and sends nothing more
        self.cycle.message_event.set()
        if started:
            self.transport.close()
        else:
            self.refuse(408, "body", f"The body did not come within {self.limits.body_timeout_s:g} s of the headers.")

    def check_reading(self) -> None:
        """Wait on while the client has read some of the answer since the last look; else close."""
        if self.transport.get_write_buffer_size() < self.unsent:
            self.await_reading()
            return
        self.send_deadline = None
        log.info(
            "Closed the connection of %s: it read nothing of the answer for %g s (TEXTFLIX_SEND_TIMEOUT_S).",
            self.client[0] if self.client else "a client", self.limits.send_timeout_s,
        )  # fmt: skip
        self.transport.abort()  # close() would wait for the unsent bytes to go out

    def refuse(self, status: int, field: str, message: str) -> None:
        """Answer ``status`` with the API's error shape, outside any app, and close the connection."""
        body = json.dumps({"detail": [{"field": field, "message": message}]}).encode()
        head = b"content-type: application/json\r\ncontent-length: %d\r\nconnection: close\r\n\r\n" % len(body)
        self.transport.write(STATUS_LINE[status] + head + body)
        self.transport.close()
