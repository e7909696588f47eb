"""A heartbeat beside a probe: ``GET /api/health`` every 0.1 s in a thread, and the slowest answer; shared
by ``scripts/bench_probes.py`` and ``tests/test_http_limits.py``. Run alone, it watches a running server:

    python scripts/heartbeat.py http://127.0.0.1:8000 --seconds 60
"""

import argparse
import socket
import threading
import time

import httpx


class Heartbeat:
    """``GET /api/health`` every 0.1 s for as long as the block runs: ``worst`` is the slowest of the ``beats``
    answers since the last ``reset``, ``failures`` those that were not 200 or no answer at all."""

    def __init__(self, url: str):
        self.url = url
        self.worst, self.beats, self.failures = 0.0, 0, 0
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self.beat, daemon=True)

    def beat(self) -> None:
        with httpx.Client(timeout=120) as client:
            while not self.stopped.is_set():
                start = time.perf_counter()
                try:
                    ok = client.get(f"{self.url}/api/health").status_code == 200
                except httpx.HTTPError:  # refused, reset, timed out: a failed beat, and the watch goes on
                    ok = False
                self.worst, self.beats = max(self.worst, time.perf_counter() - start), self.beats + 1
                self.failures += not ok
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


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description="GET /api/health every 0.1 s: each second, the slowest answer.")
    parser.add_argument("url", help="the server, e.g. http://127.0.0.1:8000")
    parser.add_argument("--seconds", type=int, default=60, help="how long to watch")
    args = parser.parse_args(argv)
    with Heartbeat(args.url.rstrip("/")) as heartbeat:
        for second in range(1, args.seconds + 1):
            time.sleep(1)
            print(f"{second} s: {heartbeat.beats} beats, slowest {heartbeat.worst * 1000:.0f} ms, "
                  f"{heartbeat.failures} failed", flush=True)  # fmt: skip
            heartbeat.reset()


if __name__ == "__main__":
    main()
