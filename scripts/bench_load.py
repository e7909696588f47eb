"""Load test: the worst requests the server allows, from many clients at once.

Starts ``textflix serve`` on a copy of DATA_DIR's database (as scripts/bench_api.py does),
then for --seconds sends, from --clients concurrent clients that never pause, the most
expensive requests the limits allow (TEXTFLIX_MAX_TEXTS texts, explained up to the
TEXTFLIX_MAX_EXPLAIN_CHARS and TEXTFLIX_MAX_EXPLAIN_SENTENCES budgets; as many texts of
TEXTFLIX_MAX_TEXT_CHARS characters without explanations; one review as long as the
budgets allow to POST /api/reviews and to /analyze). Meanwhile
another client sends one short POST /api/predict every 0.2 s. Prints one line per
figure: the short request's median, p99 and worst latency, the answers by status
(429s are refusals with Retry-After, 5xx must be zero), and the server's memory.

    python scripts/bench_load.py [--data-dir data] [--clients 32] [--seconds 60]
"""

import argparse
import asyncio
import collections
import itertools
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app.analysis import analysis_cost  # noqa: E402
from app.settings import Settings  # noqa: E402
from bench_api import Server, ms, percentile  # noqa: E402
from model.config import LimeConfig  # noqa: E402

WORDS = (
    "film story acting plot great boring wonderful awful slow funny sad music scenes director cast "
    "ending script characters beautiful terrible brilliant dull moving long predictable charming clever"
).split()
PROBE = {"texts": ["A warm, funny film with a weak ending."]}


def long_text(rng: random.Random, sentences: int, chars: int) -> str:
    """A text of ``sentences`` sentences and about ``chars`` characters (at most), all words random."""
    per_sentence = max(8, chars // sentences - 1)
    parts = []
    for _ in range(sentences):
        words, length = [], 0
        while length < per_sentence - 12:
            word = rng.choice(WORDS)
            words.append(word)
            length += len(word) + 1
        parts.append(" ".join(words).capitalize() + ".")
    return " ".join(parts)[:chars]


def worst_requests(settings: Settings, rng: random.Random) -> list[tuple[str, str, dict]]:
    """(path, body kind, body) of the most expensive requests the settings allow."""
    texts, chars = settings.max_texts, settings.max_text_chars
    sentences, explained_chars = settings.max_explain_sentences, min(chars, settings.max_explain_chars)
    # as many explained texts as one request may have: each reserves its LIME passes
    most_explained = settings.max_work_in_flight // analysis_cost(["any"], True, settings.group(LimeConfig))
    explained_texts = max(1, min(texts, most_explained))
    explained = [
        long_text(rng, max(1, sentences // explained_texts), explained_chars // explained_texts)
        for _ in range(explained_texts)
    ]
    plain = [long_text(rng, 200, chars) for _ in range(texts)]
    longest = long_text(rng, sentences, explained_chars)
    return [
        ("/api/predict", "json", {"texts": explained, "explain": True}),
        ("/api/predict", "json", {"texts": plain}),
        ("/api/reviews", "json", {"text": longest}),
        ("/analyze", "form", {"text": longest}),
    ]


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def hammer(url: str, requests: list, clients: int, seconds: float, statuses: collections.Counter) -> None:
    """``clients`` clients sending ``requests`` in turn without pause; at the end they hang up."""
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(base_url=url, timeout=None, limits=limits) as http:

        async def client(index: int) -> None:
            for turn in itertools.count(index):
                path, kind, body = requests[turn % len(requests)]
                response = await (http.post(path, data=body) if kind == "form" else http.post(path, json=body))
                statuses[(path, response.status_code)] += 1

        tasks = [asyncio.ensure_future(client(i)) for i in range(clients)]
        await asyncio.sleep(seconds)
        for task in tasks:  # requests still running are abandoned: the server must cancel their work
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def probe(url: str, seconds: float, latencies: list[float], statuses: collections.Counter) -> None:
    deadline = time.monotonic() + seconds
    async with httpx.AsyncClient(base_url=url, timeout=120) as http:
        while time.monotonic() < deadline:
            sent = time.perf_counter()
            response = await http.post("/api/predict", json=PROBE)
            latencies.append(time.perf_counter() - sent)
            statuses[("probe", response.status_code)] += 1
            await asyncio.sleep(0.2)


async def watch_memory(pid: int, seconds: float, samples: list[float]) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        samples.append(rss_mib(pid))
        await asyncio.sleep(1.0)


async def load_test(url: str, pid: int, requests: list, clients: int, seconds: float) -> tuple:
    statuses: collections.Counter = collections.Counter()
    latencies: list[float] = []
    memory: list[float] = []
    await asyncio.gather(
        hammer(url, requests, clients, seconds, statuses),
        probe(url, seconds, latencies, statuses),
        watch_memory(pid, seconds, memory),
    )
    return statuses, latencies, memory


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, default=Path("data"), help="Built data dir (models and database).")
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    db = args.data_dir / "textflix.db"
    if not db.is_file() or not (args.data_dir / "models" / "bert").is_dir():
        raise SystemExit(f"No built database and models in {args.data_dir}: run `textflix build` first.")
    requests = worst_requests(Settings(), random.Random(args.seed))
    with tempfile.TemporaryDirectory(prefix="textflix-load-") as tmp:
        copy = Path(tmp) / "textflix.db"
        with sqlite3.connect(db) as source, sqlite3.connect(copy) as target:
            source.backup(target)
        server = Server(args.data_dir, f"sqlite:///{copy}", Settings().batch_window_ms, args.device, Path(tmp) / "server.log")
        try:
            health = server.wait_ready()
            httpx.post(f"{server.url}/api/predict", json=PROBE, timeout=60)  # warm-up
            print(
                f"Server on {health.get('device')}; {args.clients} clients sending the worst allowed requests "
                f"for {args.seconds:.0f} s, one client sending a short POST /api/predict every 0.2 s",
                flush=True,
            )
            statuses, latencies, memory = asyncio.run(
                load_test(server.url, server.process.pid, requests, args.clients, args.seconds)
            )
            time.sleep(10)
            after = httpx.get(f"{server.url}/api/health", timeout=60).json()
            memory.append(rss_mib(server.process.pid))
        finally:
            server.stop()
    print(
        f"short POST /api/predict under load: median {ms(statistics.median(latencies))}, "
        f"p99 {ms(percentile(latencies, 99))}, worst {ms(max(latencies))} ({len(latencies)} requests)"
    )
    for (path, status), count in sorted(statuses.items()):
        print(f"answers {path} {status}: {count}")
    errors = sum(count for (_, status), count in statuses.items() if status >= 500)
    print(f"5xx answers: {errors}")
    print(f"analysis work in flight 10 s after the clients hung up: {after['work_in_flight']} model passes")
    quarters = " / ".join(f"{memory[min(len(memory) - 1, len(memory) * q // 4)]:,.0f}" for q in range(5))
    print(f"server memory (RSS) at the start, each quarter of the run and 10 s after: {quarters} MiB (most {max(memory):,.0f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
