"""Load test: the worst requests the server allows, alone and from several clients at once.

Starts ``textflix serve`` on a copy of DATA_DIR's database (as scripts/bench_api.py does). The
requests are the most expensive the limits allow, in 4-byte characters (letters from Unicode's
mathematical alphanumerics: such a text takes 4 bytes a character in memory):

- explained: one text of up to TEXTFLIX_MAX_TEXT_CHARS characters with as many sentences as one
  request may have explained, charged as near the largest request the server takes as can be (what
  GET /api/health's ``limits`` say, sized from the machine's measured speed; what the server
  charges: ``app.web.costs.request_cost``, with the readers the built BERT would give the texts);
- explained, many: as many such texts as TEXTFLIX_MAX_EXPLAIN_CHARS allows, each with as many
  sentences as keep the request's charge within the limit;
- TEXTFLIX_MAX_TEXTS texts of TEXTFLIX_MAX_TEXT_CHARS characters, not explained;
- the explained text to POST /api/reviews and to /analyze.

First the explained request alone: its time and the server's memory meanwhile; then again, while
one client sends a short POST /api/predict every 0.2 s beside it. Then for
--seconds, --clients clients that never pause send these requests in turn, while another
client sends one short POST /api/predict every 0.2 s; then as long again, the clients send only
the ordinary request (TEXTFLIX_MAX_TEXTS texts, not explained). Prints the CPU, and one line per
figure: the short request's median, p99 and worst latency under each load, the answers by status
(429s are refusals with Retry-After, 5xx must be zero), and the server's memory.

    python scripts/bench_load.py [--data-dir data] [--clients 7] [--seconds 60]
"""

import argparse
import asyncio
import collections
import itertools
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

from app.settings import Settings
from app.web.costs import request_cost
from model.artifacts import read_meta
from model.bert import ONE_SENTENCE_READER, network_reading
from model.config import LimeConfig
from model.names import BERT
from model.sentences import sentence_spans
from model.trained import model_dir

from bench_api import database_copy, ms, percentile, textflix_server  # scripts/, beside this script

WORDS = (
    "film story acting plot great boring wonderful awful slow funny sad music scenes director cast "
    "ending script characters beautiful terrible brilliant dull moving long predictable charming clever"
).split()
PROBE = {"texts": ["A warm, funny film with a weak ending."]}


# ASCII letters to Unicode's mathematical bold ones, 4 bytes each in UTF-8 and in a Python string
LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
WIDE = str.maketrans({c: chr(0x1D400 + i) for i, c in enumerate(LETTERS)})


def long_text(seed: int, sentences: int, chars: int) -> str:
    """A text of ``sentences`` sentences of random words, about ``chars`` characters, in 4-byte letters."""
    rng = random.Random(seed)
    per_sentence = max(8, chars // sentences - 1)
    parts = []
    for _ in range(sentences):
        words, length = [], 0
        while length < per_sentence - 8:
            word = rng.choice(WORDS)
            words.append(word)
            length += len(word) + 1
        parts.append(" ".join(words).capitalize() + ".")
    return " ".join(parts)[:chars].translate(WIDE)


def served_readers(data_dir: Path):
    """What the server reports and charges as each text's reader (``read_by``, by model), from its sentences:
    the built BERT's choice, without loading it (its facts file says whether it hands texts of one sentence
    to another network)."""
    hands_over = bool(read_meta(model_dir(data_dir / "models", BERT)).get(ONE_SENTENCE_READER))
    return lambda spans: {BERT: network_reading(spans, hands_over)} if hands_over else {}


def charge(settings: Settings, readers, texts: list[str], explain: bool) -> tuple[list, int]:
    """The sentences of ``texts`` and the model passes the server charges for them (``request_cost``)."""
    spans = [sentence_spans(t) for t in texts]
    return spans, request_cost(texts, spans, [readers(s) for s in spans], explain, settings.group(LimeConfig))


def most_sentences(settings: Settings, readers, texts: int, seed: int, largest: int) -> list[str]:
    """``texts`` texts of ``max_text_chars`` characters, with as many sentences each (the same
    number) as keep their explanation within ``largest`` passes and ``max_explain_sentences``."""
    chars = settings.max_text_chars

    def made(sentences: int) -> tuple[list[str], int]:
        made_texts = [long_text(seed + i, sentences, chars) for i in range(texts)]
        return made_texts, charge(settings, readers, made_texts, True)[1]

    most = max(1, settings.max_explain_sentences // texts)
    return made(most_that_fit(lambda sentences: made(sentences)[1], most, largest))[0]


def most_that_fit(charged, high: int, largest: int) -> int:
    """The most of 1 … ``high`` whose charge, ``charged(n)`` (growing with n), is within ``largest`` (1 if none is)."""
    low = 1
    while low < high:
        middle = (low + high + 1) // 2
        if charged(middle) <= largest:
            low = middle
        else:
            high = middle - 1
    return low


def at_the_limit(settings: Settings, readers, seed: int, largest: int) -> str:
    """A text whose explanation is charged as near ``largest`` passes as can be (issue 52's worst request took
    them all): with more sentences than ``most_sentences`` allows, in as many characters as keep it within."""
    [text] = most_sentences(settings, readers, 1, seed, largest)
    best = (charge(settings, readers, [text], True)[1], text)
    for sentences in range(len(sentence_spans(text)) + 1, len(sentence_spans(text)) + 11):
        if best[0] == largest:
            break

        def made(chars: int) -> tuple[int, str]:
            made_text = long_text(seed, sentences, chars)
            return charge(settings, readers, [made_text], True)[1], made_text

        best = max(best, made(most_that_fit(lambda chars: made(chars)[0], settings.max_text_chars, largest)))
    return best[1]


def worst_requests(settings: Settings, readers, seed: int, largest: int) -> list[tuple[str, str, dict]]:
    """(path, body kind, body) of the most expensive requests the settings allow, one explanation at most ``largest`` passes."""
    explained = at_the_limit(settings, readers, seed, largest)
    most_texts = max(1, min(settings.max_texts, settings.max_explain_chars // settings.max_text_chars))
    many = most_sentences(settings, readers, most_texts, seed, largest)
    plain = [long_text(seed + i, 200, settings.max_text_chars) for i in range(settings.max_texts)]
    return [
        ("/api/predict", "json", {"texts": [explained], "explain": True}),
        ("/api/predict", "json", {"texts": many, "explain": True}),
        ("/api/predict", "json", {"texts": plain}),
        ("/api/reviews", "json", {"text": explained}),
        ("/analyze", "form", {"text": explained}),
    ]


def describe(settings: Settings, readers, path: str, body: dict, largest: int) -> str:
    texts = body.get("texts") or [body["text"]]
    explain = body.get("explain", path != "/api/predict")
    spans, cost = charge(settings, readers, texts, explain)
    return (
        f"{path} {'explained' if explain else 'not explained'}: {len(texts)} texts, "
        f"{sum(map(len, texts)):,} characters, "
        f"{sum(map(len, spans)):,} sentences, a body of {len(json.dumps(body, ensure_ascii=False).encode()):,} bytes, "
        f"{cost:,} model passes of the {largest:,} one request may take"
    )


def cpu_name() -> str:
    """This machine's CPU as /proc/cpuinfo names it, its cores, and whether it has native bfloat16."""
    info = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    name = next((line.split(":", 1)[1].strip() for line in info.splitlines() if line.startswith("model name")), "unknown")
    bf16 = "native bfloat16" if "avx512_bf16" in info or "amx_bf16" in info else "no native bfloat16"
    return f"{name}, {os.cpu_count()} cores, {bf16}"


def latency_line(what: str, latencies: list[float]) -> str:
    """The latencies of the short predictions answered beside ``what``."""
    if not latencies:
        return f"short POST /api/predict under {what}: none answered"
    return (
        f"short POST /api/predict under {what}: median {ms(statistics.median(latencies))}, "
        f"p99 {ms(percentile(latencies, 99))}, worst {ms(max(latencies))} ({len(latencies)} requests)"
    )


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


async def probe(url: str, seconds: float, latencies: list[float], statuses: collections.Counter, done=None) -> None:
    """A short POST /api/predict every 0.2 s for ``seconds``, or until the future ``done`` is: the latencies of
    those answered, the statuses of all."""
    deadline = time.monotonic() + seconds
    async with httpx.AsyncClient(base_url=url, timeout=120) as http:
        while time.monotonic() < deadline and not (done and done.done()):
            sent = time.perf_counter()
            response = await http.post("/api/predict", json=PROBE)
            if response.status_code == 200:  # a refusal's latency says nothing of the wait for an answer
                latencies.append(time.perf_counter() - sent)
            statuses[("probe", response.status_code)] += 1
            await asyncio.sleep(0.2)


async def watch_memory(pid: int, seconds: float, samples: list[float]) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        samples.append(rss_mib(pid))
        await asyncio.sleep(0.5)


async def alone(url: str, pid: int, request: tuple[str, str, dict]) -> tuple[int, float, float]:
    """``request`` on its own: its status, seconds, and the most memory the server held meanwhile."""
    path, _, body = request
    memory: list[float] = []
    async with httpx.AsyncClient(base_url=url, timeout=None) as http:
        sent = time.perf_counter()
        watcher = asyncio.ensure_future(watch_memory(pid, 1e9, memory))
        response = await http.post(path, json=body)
        seconds = time.perf_counter() - sent
        watcher.cancel()
    return response.status_code, seconds, max(memory + [rss_mib(pid)])


async def beside(url: str, request: tuple[str, str, dict]) -> tuple[int, float, list[float], collections.Counter]:
    """``request`` with a short prediction every 0.2 s beside it: its status and seconds, the short ones' latencies and statuses."""
    path, _, body = request
    latencies: list[float] = []
    statuses: collections.Counter = collections.Counter()
    async with httpx.AsyncClient(base_url=url, timeout=None) as http:
        sent = time.perf_counter()
        worst = asyncio.ensure_future(http.post(path, json=body))
        await asyncio.sleep(0.5)  # the worst request is admitted first
        await probe(url, 1e9, latencies, statuses, worst)
        response = await worst
    return response.status_code, time.perf_counter() - sent, latencies, statuses


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
    parser.add_argument("--clients", type=int, default=7)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    db = args.data_dir / "textflix.db"
    if not db.is_file() or not (args.data_dir / "models" / "bert").is_dir():
        raise SystemExit(f"No built database and models in {args.data_dir}: run `textflix build` first.")
    settings = Settings()
    print(f"CPU: {cpu_name()}", flush=True)
    readers = served_readers(args.data_dir)
    with tempfile.TemporaryDirectory(prefix="textflix-load-") as tmp:
        url = database_copy(db, Path(tmp))
        server = textflix_server(args.data_dir, url, settings.batch_window_ms, args.device, Path(tmp) / "server.log")
        try:
            health = server.wait_ready()
            limits = health.get("limits", {})  # a server from before issue 52 takes max_work_in_flight of any request
            print(f"the server's limits: {json.dumps(limits) if limits else 'not reported'}", flush=True)
            largest = limits.get("largest_request_passes", settings.max_work_in_flight)
            requests = worst_requests(settings, readers, args.seed, largest)
            ordinary = [request for request in requests if request[0] == "/api/predict" and not request[2].get("explain")]
            for path, _, body in requests:
                print(f"request {describe(settings, readers, path, body, largest)}", flush=True)
            httpx.post(f"{server.url}/api/predict", json=PROBE, timeout=60)  # warm-up
            pid = server.process.pid
            loaded = rss_mib(pid)
            print(f"Server on {health.get('device')}, {loaded:,.0f} MiB (RSS) once its models are loaded", flush=True)
            status, seconds, most = asyncio.run(alone(server.url, pid, requests[0]))
            print(f"the explained request alone: {status} in {seconds:,.1f} s", flush=True)
            print(f"server memory (RSS) meanwhile: at most {most:,.0f} MiB ({most - loaded:,.0f} over the models)", flush=True)
            status, seconds, short, short_statuses = asyncio.run(beside(server.url, requests[0]))
            print(f"the explained request with a short prediction every 0.2 s beside it: {status} in {seconds:,.1f} s", flush=True)
            print(f"{latency_line('the explained request', short)}; answers {dict(sorted(short_statuses.items()))}", flush=True)
            print(
                f"{args.clients} clients sending the worst allowed requests for {args.seconds:.0f} s, "
                "one client sending a short POST /api/predict every 0.2 s",
                flush=True,
            )
            statuses, latencies, memory = asyncio.run(load_test(server.url, pid, requests, args.clients, args.seconds))
            print(f"{args.clients} clients sending the ordinary request for {args.seconds:.0f} s", flush=True)
            _, ordinary_latencies, _ = asyncio.run(load_test(server.url, pid, ordinary, args.clients, args.seconds))
            time.sleep(10)
            after = httpx.get(f"{server.url}/api/health", timeout=60).json()
            memory.append(rss_mib(pid))
        finally:
            server.stop()
    print(latency_line(f"{args.clients} clients of the worst requests", latencies))
    print(latency_line(f"{args.clients} clients of the ordinary request", ordinary_latencies))
    for (path, status), count in sorted(statuses.items()):
        print(f"answers {path} {status}: {count}")
    errors = sum(count for (_, status), count in statuses.items() if status >= 500)
    print(f"5xx answers: {errors}")
    print(f"analysis work in flight 10 s after the clients hung up: {after.get('work_in_flight')} model passes")
    quarters = " / ".join(f"{memory[min(len(memory) - 1, len(memory) * q // 4)]:,.0f}" for q in range(5))
    print(f"server memory (RSS) at the start, each quarter of the run and 10 s after: {quarters} MiB (most {max(memory):,.0f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
