"""What /analyze's live "what if" costs: one live request, and the requests a minute of typing makes.

Starts ``textflix serve`` on DATA_DIR (its models, a copy of its database; no rate limit) like
``scripts/bench_api.py``, or measures --url, and prints one line per figure (medians):

* POST /analyze (the form, as static/analyze.js posts it on a pause in typing) of a 10-sentence
  review, both models explained with the exact shares and flip sets: median and p90 latency;
* POST /api/predict with "explain": true of the same review: median latency;
* in this process, an explained analysis and the part of it the "what if" takes (with --data-dir);
* requests per minute of typing under static/analyze.js's rule (a request DEBOUNCE_S after the
  last key, one at a time and 1.5 s apart at least, the newest text next) for a typist at 300 characters a minute who
  pauses a second after each sentence, and at most, for one who pauses just past DEBOUNCE_S
  after every key, with the measured latency.

    python scripts/bench_whatif.py [--data-dir data] [--requests 15]
    python scripts/bench_whatif.py --url http://127.0.0.1:8000
"""

import argparse
import asyncio
import math
import statistics
import tempfile
import time
from pathlib import Path

import httpx

from bench_api import FALLBACK_SENTENCES, catalogue_texts, database_copy, ms, percentile, textflix_server  # scripts/, beside this script

DEBOUNCE_S, MIN_GAP_S = 0.4, 1.5  # static/analyze.js's DEBOUNCE_MS and MIN_GAP_MS
KEY_S, SENTENCE_PAUSE_S = 0.2, 1.0  # a typist at 300 characters a minute, who pauses after each sentence


def edits(review: str) -> list[str]:
    """The review and three edits of it: a sentence negated, a sentence removed, a sentence added."""
    sentences = review.split(". ")
    negate = next((i for i, s in enumerate(sentences) if " is " in s), 0)
    negated = [s.replace(" is ", " is not ", 1) if i == negate else s for i, s in enumerate(sentences)]
    return [review, ". ".join(negated), ". ".join(sentences[:2] + sentences[3:]), review + " I would not see it twice."]


def requests_while_typing(key_times: list[float], latency_s: float) -> int:
    """The requests static/analyze.js sends for keys at ``key_times`` (seconds), each answered after
    ``latency_s``: one ``DEBOUNCE_S`` after a key with no key after it sooner, but none while one is
    in flight nor sooner than ``MIN_GAP_S`` after the last; a later pause's request, which carries
    newer text, replaces one still waiting."""
    fires = [t + DEBOUNCE_S for t, later in zip(key_times, key_times[1:] + [math.inf]) if later - t >= DEBOUNCE_S]
    sent, last, busy_until = 0, -math.inf, -math.inf
    for fire, next_fire in zip(fires, fires[1:] + [math.inf]):
        start = max(fire, busy_until, last + MIN_GAP_S)
        if next_fire <= start:  # still waiting when the next pause comes: that one goes instead
            continue
        sent, last, busy_until = sent + 1, start, start + latency_s
    return sent


def typing_minute(sentence_chars: int = 60) -> list[float]:
    """Key times of a minute at ``KEY_S`` a key with a ``SENTENCE_PAUSE_S`` pause after each sentence."""
    times, t, typed = [], 0.0, 0
    while t < 60:
        times.append(t)
        typed += 1
        t += KEY_S + (SENTENCE_PAUSE_S if typed % sentence_chars == 0 else 0)
    return times


async def timed_posts(url: str, requests: list[dict]) -> list[float]:
    latencies = []
    async with httpx.AsyncClient(base_url=url, timeout=300) as client:
        for request in requests:
            started = time.perf_counter()
            response = await client.post(**request)
            response.raise_for_status()
            latencies.append(time.perf_counter() - started)
    return latencies


def measure(url: str, review: str, count: int) -> None:
    versions = edits(review)
    forms = [{"url": "/analyze", "data": {"text": versions[i % len(versions)]}} for i in range(count)]
    asyncio.run(timed_posts(url, forms[:1]))  # warm-up
    live = asyncio.run(timed_posts(url, forms))
    api = asyncio.run(
        timed_posts(url, [{"url": "/api/predict", "json": {"texts": [v], "explain": True}} for v in versions[: max(3, count // 3)]])
    )
    median = statistics.median(live)
    print(f"POST /analyze (live, both models explained, exact shares and flips), 10-sentence review: "
          f"median {ms(median)}, p90 {ms(percentile(live, 90))} ({len(live)} requests)", flush=True)  # fmt: skip
    print(f"POST /api/predict explain=true, the same review: median {ms(statistics.median(api))} ({len(api)} requests)", flush=True)
    typical = requests_while_typing(typing_minute(), median)
    print(f"Requests in a minute of typing (300 characters a minute, a {SENTENCE_PAUSE_S:.0f} s pause after each "
          f"sentence of 60): {typical}", flush=True)  # fmt: skip
    worst = requests_while_typing([i * (DEBOUNCE_S + 0.01) for i in range(int(60 / (DEBOUNCE_S + 0.01)))], median)
    fast = requests_while_typing([i * (DEBOUNCE_S + 0.01) for i in range(int(60 / (DEBOUNCE_S + 0.01)))], 0.0)
    print(f"Requests in a minute of typing at most (a pause just past {DEBOUNCE_S * 1000:.0f} ms after every key): "
          f"{worst}; with instant answers {fast}", flush=True)  # fmt: skip


def what_if_share(data_dir: Path, review: str, count: int) -> None:
    """In this process, on DATA_DIR's models: an explained analysis of the review's versions, and the
    part of it that the "what if" (exact shares, flip sets; ``ModelAnalyzer._what_ifs``) takes."""
    from app.settings import Settings
    from app.web.analysis import load_analyzer

    analyzer = load_analyzer(Settings(data_dir=data_dir, database_url="sqlite://"))
    whole, spent = [], []
    what_ifs = analyzer._what_ifs

    async def timed(*args):
        started = time.perf_counter()
        await what_ifs(*args)
        spent.append(time.perf_counter() - started)

    analyzer._what_ifs = timed

    async def run() -> None:
        versions = edits(review)
        for i in range(count + 1):  # the first warms up
            started = time.perf_counter()
            await analyzer.analyze([versions[i % len(versions)]], True)
            whole.append(time.perf_counter() - started)
        await analyzer.stop()

    asyncio.run(run())
    print(f"Explained analysis in-process, 10-sentence review: median {ms(statistics.median(whole[1:]))}, of which "
          f"the what-if {ms(statistics.median(spent[1:]))} ({count} analyses)", flush=True)  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, default=Path("data"), help="Built data dir (models and database).")
    parser.add_argument("--url", help="Measure this running server (without a rate limit) instead of starting one.")
    parser.add_argument("--device", default="auto", help="Device of the started server.")
    parser.add_argument("--requests", type=int, default=15, help="Live requests timed.")
    args = parser.parse_args(argv)
    db = args.data_dir / "textflix.db"
    _, ten = catalogue_texts(db if db.is_file() else None, 1, 0)
    review = ten[0][0] if ten else " ".join(FALLBACK_SENTENCES)
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")), "?")
    print(f"CPU: {cpu}", flush=True)
    if args.url:
        measure(args.url, review, args.requests)
        return 0
    with tempfile.TemporaryDirectory(prefix="textflix-bench-") as tmp:
        server = textflix_server(args.data_dir, database_copy(db, Path(tmp)), 10.0, args.device, Path(tmp) / "server.log")
        try:
            health = server.wait_ready()
            print(f"Server on {health.get('device')}, models from {args.data_dir / 'models'}", flush=True)
            measure(server.url, review, args.requests)
        finally:
            server.stop()
    what_if_share(args.data_dir, review, args.requests)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
