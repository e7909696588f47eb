"""Slow and huge clients against a real ``textflix serve``, with a heartbeat on GET /api/health.

Serves a SYNTHETIC database (scripts/bench_pages.py's, the default catalogue's size) or the one at
--database, without models (the probes need none), anonymous exports on. Each probe runs while
another client sends GET /api/health every 0.1 s; one line per probe: what the server answered
and when, and the heartbeat's worst latency meanwhile:

- one request whose one header line is 64 MiB; one of 128 MiB; four of 64 MiB at once (and the
  server's memory growth);
- a header line every 2 s; a POST that declares 100 bytes and sends 10; a connection that sends
  nothing; a connection left idle after an answer: how long each is kept open (--cap at most);
- an export (GET /api/export.jsonl) whose client reads nothing: how long until another export is
  let in (200 instead of 429).

    python scripts/bench_probes.py [--database URL] [--cap 40] [--checkout DIR]

``--checkout`` serves another checkout of Textflix (one from before a change) on the same database.
"""

import argparse
import socket
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import httpx
import psutil
from bench_api import ROOT, ms, textflix_server  # scripts/, beside this script
from bench_pages import build_database
from heartbeat import Heartbeat, connect

MIB = 1 << 20
AFTERMATH_S = 1.0  # the heartbeat goes on this long after a huge probe is answered


def answer_status(sock: socket.socket, timeout: float) -> str:
    """The status line the server sends on ``sock`` within ``timeout`` s, "closed" or "no answer"."""
    sock.settimeout(timeout)
    try:
        data = sock.recv(200)
    except TimeoutError:
        return "no answer"
    except OSError:
        return "closed (reset)"
    return data.split(b"\r\n")[0].decode("latin-1") if data else "closed"


def huge_header(port: int, request: bytes, cap: float) -> str:
    sock = connect(port)
    try:
        sock.sendall(request)
    except OSError:
        pass  # the server closed the connection before it was all sent
    status = answer_status(sock, cap)
    sock.close()
    return status


def open_for(sock: socket.socket, cap: float, trickle: bytes = b"", every: float = 0.0) -> float:
    """Seconds until the server closes ``sock`` (``cap`` at most), sending ``trickle`` every ``every`` s meanwhile."""
    start = time.perf_counter()
    sock.settimeout(every or cap)
    while time.perf_counter() - start < cap:
        try:
            if not sock.recv(65536):
                break
        except TimeoutError:
            try:
                sock.sendall(trickle)
            except OSError:
                break
        except OSError:
            break
    return time.perf_counter() - start


def probe_huge(server, heartbeat, size: int, clients: int, cap: float) -> None:
    process = psutil.Process(server.process.pid)
    before = process.memory_info().rss
    peak = [before]
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.05):
            peak[0] = max(peak[0], process.memory_info().rss)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    request = b"GET /api/health HTTP/1.1\r\nHost: x\r\nX: " + b"a" * size + b"\r\n\r\n"
    heartbeat.reset()
    start = time.perf_counter()
    statuses: list[str] = []
    threads = [
        threading.Thread(target=lambda: statuses.append(huge_header(server.port, request, cap))) for _ in range(clients)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - start
    time.sleep(AFTERMATH_S)
    done.set()
    sampler.join()
    print(
        f"{clients} × GET with a {size // MIB} MiB header: {', '.join(sorted(set(statuses)))} after {elapsed:.2f} s; "
        f"server RSS +{(peak[0] - before) / MIB:,.0f} MiB; /api/health worst {ms(heartbeat.worst)} "
        f"({heartbeat.beats} answers)",
        flush=True,
    )


def probe_open(label: str, heartbeat, cap: float, sock: socket.socket, trickle: bytes = b"", every: float = 0.0) -> None:
    heartbeat.reset()
    seconds = open_for(sock, cap, trickle, every)
    sock.close()
    verdict = f"still open at the cap of {cap:g} s" if seconds >= cap else f"closed after {seconds:.1f} s"
    print(f"{label}: {verdict}; /api/health worst {ms(heartbeat.worst)}", flush=True)


def probe_export(server, heartbeat, cap: float) -> None:
    heartbeat.reset()
    holder = connect(server.port, receive_buffer=4096)
    holder.sendall(b"GET /api/export.jsonl HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    time.sleep(1)
    start = time.perf_counter()
    status = None
    with httpx.Client(timeout=cap) as client:
        while time.perf_counter() - start < cap:
            with client.stream("GET", f"{server.url}/api/export.jsonl") as response:
                status = response.status_code
                if status == 200:
                    break
            time.sleep(1)
    waited = time.perf_counter() - start
    holder.close()
    verdict = f"another export answered 200 after {waited:.1f} s" if status == 200 else f"still {status} at the cap of {cap:g} s"
    print(f"an export whose client reads nothing: {verdict}; /api/health worst {ms(heartbeat.worst)}", flush=True)


@contextmanager
def served(url: str, scratch: Path, checkout: Path):
    server = textflix_server(
        scratch, url, 10, "cpu", scratch / "server.log", checkout, {"TEXTFLIX_ALLOW_ANONYMOUS_WRITES": "1"}
    )
    try:
        server.wait_ready(models=False)
        yield server
    finally:
        server.stop()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database", help="SQLAlchemy URL of a built database (default: build a synthetic one)")
    parser.add_argument("--cap", type=float, default=40, help="seconds a slow probe waits for the server at most")
    parser.add_argument("--checkout", type=Path, default=ROOT, help="the Textflix checkout to serve")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as directory:
        scratch = Path(directory)
        url = args.database
        if url is None:
            url = f"sqlite:///{scratch / 'bench.db'}"
            build_database(url)
        with served(url, scratch, args.checkout) as server, Heartbeat(server.url) as heartbeat:
            for size, clients in ((64 * MIB, 1), (128 * MIB, 1), (64 * MIB, 4)):
                probe_huge(server, heartbeat, size, clients, args.cap)
            slow_head = connect(server.port)
            slow_head.sendall(b"GET /api/health HTTP/1.1\r\nHost: x\r\n")
            probe_open("a header line every 2 s", heartbeat, args.cap, slow_head, b"X: y\r\n", 2.0)
            slow_body = connect(server.port)
            slow_body.sendall(
                b"POST /api/predict HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n"
                + b'{"texts": '
            )
            probe_open("a POST declaring 100 bytes that sends 10", heartbeat, args.cap, slow_body)
            probe_open("a connection that sends nothing", heartbeat, args.cap, connect(server.port))
            idle = connect(server.port)
            idle.sendall(b"GET /api/health HTTP/1.1\r\nHost: x\r\n\r\n")
            probe_open("a connection idle after an answer", heartbeat, args.cap, idle)
            probe_export(server, heartbeat, args.cap)


if __name__ == "__main__":
    main()
