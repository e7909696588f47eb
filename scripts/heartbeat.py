"""A heartbeat beside a probe: ``GET /api/health`` every 0.1 s in a thread, and the slowest answer; shared
by ``scripts/bench_probes.py`` and ``tests/test_http_limits.py``."""

import socket
import threading
import time

import httpx


class Heartbeat:
    """``GET /api/health`` every 0.1 s for as long as the block runs: ``worst`` is the slowest of the ``beats``
    answers since the last ``reset``, ``failures`` the answers that were not 200."""

    def __init__(self, url: str):
        self.url = url
        self.worst, self.beats, self.failures = 0.0, 0, 0
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self.beat, daemon=True)

    def beat(self) -> None:
        with httpx.Client(timeout=120) as client:
            while not self.stopped.is_set():
                start = time.perf_counter()
                status = client.get(f"{self.url}/api/health").status_code
                self.worst, self.beats = max(self.worst, time.perf_counter() - start), self.beats + 1
                self.failures += status != 200
                self.stopped.wait(0.1)

    def reset(self) -> None:
        self.worst, self.beats, self.failures = 0.0, 0, 0

    def __enter__(self) -> "Heartbeat":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stopped.set()
        self.thread.join(150)


def connect(port: int, receive_buffer: int | None = None) -> socket.socket:
    """A connection to the server on ``port``, with a receive buffer of ``receive_buffer`` bytes if given (a
    small one makes a client that stops reading fill the server's send buffer sooner)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if receive_buffer:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
    sock.connect(("127.0.0.1", port))
    return sock
