"""Latency and throughput of the JSON API's live analysis, over HTTP on localhost.

Starts the server itself (``textflix serve`` in a subprocess on a free localhost port,
models from DATA_DIR/models, on a copy of DATA_DIR/textflix.db so that the stored
benchmark reviews never touch the real database), once with batching on and once with
it off (TEXTFLIX_BATCH_WINDOW_MS=0), or measures a server that is already running
(--url; batching on/off then needs --url-unbatched). Prints one line per figure:

* POST /api/predict with one text: median and p99 latency at 1 and at 16 concurrent clients;
* texts per second at 16 clients with batching on and off, and their ratio;
* POST /api/reviews (with explanations) of a 10-sentence review: median latency.

    python scripts/bench_api.py [--data-dir data] [--requests 200] [--seconds 60]
    python scripts/bench_api.py --url http://127.0.0.1:8000 [--url-unbatched http://127.0.0.1:8001]

Request counts and time per phase are bounded (--requests, --reviews, --seconds); only
localhost is contacted when the script starts the server.
"""

import argparse
import asyncio
import math
import os
import random
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
FALLBACK_SENTENCES = [
    "I went in expecting very little from this film.",
    "The opening twenty minutes are slow and a little confusing.",
    "Then the story finds its feet and never lets go.",
    "The lead gives a warm, funny and completely believable performance.",
    "Some of the supporting cast are wooden, sadly.",
    "The score is lovely and never gets in the way.",
    "A subplot about the brother goes nowhere at all.",
    "The photography of the coast is beautiful.",
    "The ending is predictable but earned.",
    "Overall I enjoyed it a lot and would watch it again.",
]


# --- texts ------------------------------------------------------------------------------------


def catalogue_texts(db: Path | None, count: int, seed: int) -> tuple[list[str], list[tuple[str, str]]]:
    """Short review texts for /api/predict, and (text, title_id) pairs of 10-sentence reviews."""
    if db is None or not db.is_file():
        return [" ".join(FALLBACK_SENTENCES[: 3 + i % 7]) for i in range(count)], [
            (" ".join(FALLBACK_SENTENCES), "")
        ]
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as connection:
        texts = [t for (t,) in connection.execute("SELECT text FROM reviews WHERE split = 'catalogue' ORDER BY id")]
        ten = connection.execute(
            """
            SELECT r.text, r.title_id FROM reviews r JOIN sentences s ON s.review_id = r.id
            WHERE r.split = 'catalogue' GROUP BY r.id HAVING COUNT(*) = 10 ORDER BY r.id LIMIT 50
            """
        ).fetchall()
    rng = random.Random(seed)
    rng.shuffle(texts)
    texts = texts[:count] or [" ".join(FALLBACK_SENTENCES[:4])]
    return texts, [tuple(row) for row in ten] or [(" ".join(FALLBACK_SENTENCES), "")]


# --- server -----------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Server:
    """A web server in a subprocess on a free localhost port (``command`` gets ``--host`` and
    ``--port``), run in the checkout ``root``, until ``stop``; ready once GET /api/health
    reports its models loaded."""

    def __init__(self, command: list[str], log: Path, env: dict | None = None, root: Path = ROOT):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {
            "TEXTFLIX_RATE_LIMIT": "",  # a benchmark's clients share one address: no per-client limit
            **os.environ,
            "PYTHONPATH": str(root) + os.pathsep + os.environ.get("PYTHONPATH", ""),
            "HF_HUB_OFFLINE": "1",
            **(env or {}),
        }
        self.log = log
        self._log_file = log.open("w")
        command = [*command, "--host", "127.0.0.1", "--port", str(self.port)]
        self.process = subprocess.Popen(command, cwd=root, env=env, stdout=self._log_file, stderr=subprocess.STDOUT)

    def wait_ready(self, timeout: float = 300, models: bool = True) -> dict:
        """The health answer once the server answers, with its models loaded unless ``models`` is False."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise SystemExit(f"The server exited ({self.process.returncode}):\n{self.log.read_text()[-3000:]}")
            try:
                health = httpx.get(f"{self.url}/api/health", timeout=5).json()
                if not models or (all(health.get("models", {}).values()) and health.get("models")):
                    return health
                if health.get("models_problem"):
                    raise SystemExit(f"The server has no models: {health['models_problem']}")
            except httpx.HTTPError:
                pass
            time.sleep(0.3)
        raise SystemExit(f"The server did not start in {timeout:.0f} s; log: {self.log}")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log_file.close()


def textflix_server(
    data_dir: Path, database_url: str, window_ms: float, device: str, log: Path, root: Path = ROOT, env: dict | None = None
) -> Server:
    """``textflix serve`` of the checkout ``root``, its models from ``data_dir``, batch window ``window_ms`` (0: off),
    more settings in ``env``."""
    command = [
        sys.executable, "-m", "app.cli", "serve", "--data-dir", str(data_dir), "--database", database_url, "--device", device,
    ]  # fmt: skip
    return Server(command, log, {"TEXTFLIX_BATCH_WINDOW_MS": str(window_ms), **(env or {})}, root)


def database_copy(db: Path, directory: Path) -> str:
    """The URL of a consistent copy of ``db`` (WAL included) in ``directory``, so that the
    benchmark's writes stay out of the real one."""
    copy = directory / "textflix.db"
    with sqlite3.connect(db) as source, sqlite3.connect(copy) as target:
        source.backup(target)
    return f"sqlite:///{copy}"


# --- load -------------------------------------------------------------------------------------


async def load(url: str, path: str, bodies: list[dict], clients: int, requests: int, seconds: float, headers: dict):
    """``requests`` POSTs (cycling through ``bodies``) from ``clients`` concurrent clients, or
    as many as fit in ``seconds``; returns (latencies in s, wall time in s, error count)."""
    latencies: list[float] = []
    errors = 0
    issued = 0
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(base_url=url, timeout=300, limits=limits, headers=headers) as http:
        started = time.perf_counter()

        async def client() -> None:
            nonlocal issued, errors
            while issued < requests and time.perf_counter() - started < seconds:
                body = bodies[issued % len(bodies)]
                issued += 1
                sent = time.perf_counter()
                response = await http.post(path, json=body)
                if response.status_code >= 300:
                    errors += 1
                    if errors <= 3:
                        print(f"  ! {path} answered {response.status_code}: {response.text[:200]}", file=sys.stderr)
                latencies.append(time.perf_counter() - sent)

        await asyncio.gather(*(client() for _ in range(clients)))
        wall = time.perf_counter() - started
    return latencies, wall, errors


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q / 100 * len(ordered)) - 1))]


def ms(seconds: float) -> str:
    return f"{seconds * 1000:,.1f} ms"


def run(coro):
    return asyncio.run(coro)


def bench_predict(url: str, texts: list[str], args, headers: dict, label: str) -> dict:
    bodies = [{"texts": [text]} for text in texts]
    run(load(url, "/api/predict", bodies, 4, 8, args.seconds, headers))  # warm-up
    figures = {}
    for clients, requests in ((1, args.requests), (16, args.requests * 2)):
        latencies, wall, errors = run(load(url, "/api/predict", bodies, clients, requests, args.seconds, headers))
        figures[clients] = (latencies, wall)
        print(
            f"POST /api/predict, 1 text, {clients:>2} client{'s' if clients > 1 else ' '} [{label}]: "
            f"median {ms(statistics.median(latencies))}, p99 {ms(percentile(latencies, 99))} "
            f"({len(latencies)} requests, {len(latencies) / wall:,.1f} texts/s"
            + (f", {errors} errors" if errors else "")
            + ")",
            flush=True,
        )
    return figures


def bench_reviews(url: str, reviews: list[tuple[str, str]], args, headers: dict, store: bool) -> None:
    bodies = [{"text": text, **({"title_id": title} if store and title else {})} for text, title in reviews]
    run(load(url, "/api/reviews", bodies[:1], 1, 1, args.seconds, headers))  # warm-up
    latencies, wall, errors = run(load(url, "/api/reviews", bodies, 1, args.reviews, args.seconds, headers))
    what = "stored" if store and reviews[0][1] else "not stored"
    print(
        f"POST /api/reviews, 10-sentence review with explanations ({what}), 1 client: "
        f"median {ms(statistics.median(latencies))}, p99 {ms(percentile(latencies, 99))} ({len(latencies)} requests"
        + (f", {errors} errors" if errors else "")
        + ")",
        flush=True,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, default=Path("data"), help="Built data dir (models and database).")
    parser.add_argument("--url", help="Measure this running server instead of starting one.")
    parser.add_argument("--url-unbatched", help="With --url: the same server started with TEXTFLIX_BATCH_WINDOW_MS=0.")
    parser.add_argument("--token", default=os.environ.get("TEXTFLIX_API_TOKEN"), help="Bearer token, if the server needs one.")
    parser.add_argument("--window-ms", type=float, default=10.0, help="Batch window of the batched server (ms).")
    parser.add_argument("--device", default="auto", help="Device of the started server.")
    parser.add_argument("--requests", type=int, default=100, help="Requests at 1 client (twice as many at 16).")
    parser.add_argument("--reviews", type=int, default=20, help="POST /api/reviews requests.")
    parser.add_argument("--seconds", type=float, default=60.0, help="Most seconds per measurement.")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    headers = {"Authorization": f"Bearer {args.token}"} if args.token else {}
    db = args.data_dir / "textflix.db"
    texts, ten_sentence = catalogue_texts(db if db.is_file() else None, 200, args.seed)

    if args.url:
        health = httpx.get(f"{args.url}/api/health", timeout=10).json()
        print(f"Server {args.url}: device {health.get('device')}, batch window {health.get('batch_window_ms')} ms")
        on = bench_predict(args.url, texts, args, headers, "as configured")
        if args.url_unbatched:
            off = bench_predict(args.url_unbatched, texts, args, headers, "batching off")
            report_ratio(on, off)
        bench_reviews(args.url, ten_sentence, args, headers, store=False)
        return 0

    if not db.is_file() or not (args.data_dir / "models" / "bert").is_dir():
        raise SystemExit(f"No built database and models in {args.data_dir}: run `textflix build` first, or pass --url.")
    with tempfile.TemporaryDirectory(prefix="textflix-bench-") as tmp:
        url = database_copy(db, Path(tmp))
        results = {}
        for name, window in (("batching on", args.window_ms), ("batching off", 0.0)):
            server = textflix_server(args.data_dir, url, window, args.device, Path(tmp) / f"server-{window}.log")
            try:
                health = server.wait_ready()
                if name == "batching on":
                    print(
                        f"Server on {health.get('device')}, models from {args.data_dir / 'models'}, "
                        f"{len(texts)} catalogue texts, {os.cpu_count()} CPU cores (shared with this client)",
                        flush=True,
                    )
                label = f"{name}, window {window:g} ms" if window else name
                results[name] = bench_predict(server.url, texts, args, headers, label)
                if name == "batching on":
                    bench_reviews(server.url, ten_sentence, args, headers, store=True)
            finally:
                server.stop()
        report_ratio(results["batching on"], results["batching off"])
    return 0


def report_ratio(on: dict, off: dict) -> None:
    on_rate = len(on[16][0]) / on[16][1]
    off_rate = len(off[16][0]) / off[16][1]
    print(f"POST /api/predict, 16 clients, batching on:  {on_rate:,.1f} texts/s")
    print(f"POST /api/predict, 16 clients, batching off: {off_rate:,.1f} texts/s")
    print(f"batching on/off throughput ratio at 16 clients: {on_rate / off_rate:.2f}x")


if __name__ == "__main__":
    sys.exit(main())
