"""Serving speed of POST /api/predict against a baseline, measured side by side.

Starts three servers (or more, below) on localhost, each in its own subprocess (scripts/bench_api.py's
``Server``): Textflix with request batching (``--window-ms``), Textflix without it
(TEXTFLIX_BATCH_WINDOW_MS=0), and the baseline, a plain FastAPI handler calling a Hugging
Face ``pipeline("text-classification")`` on the same fine-tuned BERT
(scripts/pipeline_server.py). First it checks that the baseline's BERT answers as
Textflix's does; then it measures in rounds, each round every server in turn (the order
rotating), so that the machine's noise hits them alike: one text per request, short
catalogue reviews that fit BERT's window, the median latency of ``--requests`` requests
at 1 client (and of as many of one short review) and the server's CPU time per request, and the texts per second of 16 clients
over ``--seconds`` and per CPU second of the server (CPU time says what a request costs,
wall time how much of a shared machine a server got). Prints one line per figure, the
median over ``--rounds`` rounds, with ratios to the baseline and to batching off, and the
machine's load average; then a profile of one text (each step timed in this process beside
the same text served) and BERT's batching ceiling (one text per call against 16).

    python scripts/bench_serving.py --data-dir data [--rounds 5] [--requests 60] [--seconds 10]

    python scripts/bench_serving.py --data-dir data --compare-with /tmp/textflix-before

``--compare-with`` adds a fourth server, Textflix with batching on from another checkout
(an earlier commit: ``git worktree add /tmp/textflix-before <commit>``), measured in the
same rounds: before and after side by side; ``--threads-variant 1`` adds a batched Textflix
with TEXTFLIX_INFERENCE_THREADS=1, ``--int8-variant`` one with BERT's linear layers in int8
(TEXTFLIX_CPU_INT8=1). Textflix answers with both models (NB-SVM and BERT),
the baseline with BERT alone.
"""

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx
from transformers import AutoTokenizer

from bench_api import catalogue_texts, database_copy, load, run, Server, textflix_server  # scripts/, beside this script

CLIENTS = 16
BASELINE = "baseline pipeline"
BATCHED, UNBATCHED = "Textflix, batching on", "Textflix, batching off"
INT8 = "Textflix, batching on, BERT in int8"
# The "one short review" (92 characters, 23 tokens), timed apart from the catalogue texts.
SHORT = {"texts": ["A wonderful, moving film. The acting was superb and the ending made me cry all the way home."]}


def fitting_texts(texts: list[str], model_dir: Path, window: int = 256) -> list[str]:
    """The texts whose tokens fit BERT's window (``max_length``, as the baseline truncates), so
    that head-and-tail truncation and the baseline's head-only truncation change nothing."""
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    return [text for text in texts if len(tokenizer(text)["input_ids"]) <= window]


def check_agreement(textflix: str, baseline: str, texts: list[str]) -> None:
    """Both servers' BERT probabilities of the same texts, compared; stops when they disagree."""
    ours = [r["predictions"]["bert"]["p_positive"] for r in predict(textflix, texts)]
    theirs = [r["bert"]["p_positive"] for r in predict(baseline, texts)]
    gap = max(abs(a - b) for a, b in zip(ours, theirs))
    print(f"Baseline check: BERT's positive probability of {len(texts)} texts differs by at most {gap:.1e}", flush=True)
    if gap > 1e-3:
        raise SystemExit("The baseline does not answer as Textflix's BERT does; the comparison would be unfair.")


def predict(url: str, texts: list[str]) -> list[dict]:
    response = httpx.post(f"{url}/api/predict", json={"texts": texts}, timeout=120)
    response.raise_for_status()
    return response.json()["results"]


def cpu_seconds(server: Server) -> float:
    """CPU time the server process has used so far, all its threads (Linux /proc)."""
    fields = Path(f"/proc/{server.process.pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def one_round(servers: dict[str, Server], bodies: list[dict], args, shift: int) -> dict[str, dict[str, float]]:
    """Each server's figures (FIGURES), the servers in rotated order."""
    names = list(servers)
    names = names[shift % len(names) :] + names[: shift % len(names)]
    figures: dict[str, dict[str, float]] = {name: {} for name in servers}
    errors = 0
    for clients in (1, CLIENTS):
        for name in names:
            cpu = cpu_seconds(servers[name])
            requests = args.requests if clients == 1 else 10**9
            latencies, wall, failed = run(load(servers[name].url, "/api/predict", bodies, clients, requests, args.seconds, {}))
            cpu = cpu_seconds(servers[name]) - cpu
            errors += failed
            if clients == 1:
                figures[name] |= {"latency": statistics.median(latencies) * 1000, "cpu": cpu * 1000 / len(latencies)}
                short, _, failed = run(load(servers[name].url, "/api/predict", [SHORT], 1, args.requests, args.seconds, {}))
                errors += failed
                figures[name]["short"] = statistics.median(short) * 1000
            else:
                figures[name] |= {"rate": len(latencies) / wall, "per_cpu": len(latencies) / cpu}
    if errors:
        raise SystemExit(f"{errors} requests failed in round {shift + 1}: the figures would not be comparable.")
    return figures


# What one_round measures, and how report names it. CPU time counts all of a server's threads: on
# a shared machine it says what a request costs, where wall time says how much of the cores it got.
FIGURES = {
    "short": ("POST /api/predict, 1 short review, 1 client: median latency", "ms"),
    "latency": ("POST /api/predict, 1 text, 1 client: median latency", "ms"),
    "cpu": ("POST /api/predict, 1 text, 1 client: server CPU time per request", "ms"),
    "rate": (f"POST /api/predict, 1 text, {CLIENTS} clients: throughput", "texts/s"),
    "per_cpu": (f"POST /api/predict, 1 text, {CLIENTS} clients: texts per CPU second of the server", "texts"),
}


def report(rounds: list[dict[str, dict[str, float]]]) -> None:
    """One line per figure and server: the median over the rounds, and its ratio to the baseline
    (and, for the batched Textflix, to batching off)."""
    for key, (what, unit) in FIGURES.items():
        median = {name: statistics.median(r[name][key] for r in rounds) for name in rounds[0]}
        for name, value in median.items():
            versus = [f"baseline {median[BASELINE]:.1f}: {value / median[BASELINE]:.2f}x"] if name != BASELINE else []
            if name == BATCHED:
                versus.append(f"batching off {median[UNBATCHED]:.1f}: {value / median[UNBATCHED]:.2f}x")
            versus_text = f" ({'; '.join(versus)})" if versus else ""
            print(f"{what} [{name}]: {value:.1f} {unit}{versus_text}, median of {len(rounds)} rounds")


def load_models(data_dir: Path) -> dict:
    import torch

    from model.names import MODELS
    from model.trained import load_trained

    return {name: load_trained(name, data_dir / "models", torch.device("cpu")) for name in MODELS}


def model_ceiling(models: dict, texts: list[str], rounds: int) -> None:
    """BERT alone, in this process: texts/s one text per call and 16 per call (as the batched
    server calls it at 16 clients), interleaved, with torch's default threads and with 1; the
    ratio bounds what batching can gain here."""
    import torch

    bert = models["bert"]
    default = torch.get_num_threads()
    for threads in dict.fromkeys((default, 1)):
        torch.set_num_threads(threads)
        bert.predict_proba(texts[:CLIENTS])  # warm-up
        rates: dict[int, list[float]] = {1: [], CLIENTS: []}
        for _ in range(rounds):
            for size in rates:
                started = time.perf_counter()
                for start in range(0, 2 * CLIENTS, size):
                    bert.predict_proba(texts[start : start + size])
                rates[size].append(2 * CLIENTS / (time.perf_counter() - started))
        one, many = (statistics.median(rates[size]) for size in rates)
        print(
            f"BERT alone (no server, {threads} torch thread{'s' if threads > 1 else ''}): {one:.1f} texts/s one text "
            f"per call, {many:.1f} texts/s {CLIENTS} per call: {many / one:.2f}x, the most batching can gain here; "
            f"median of {rounds} rounds"
        )
    torch.set_num_threads(default)


def request_profile(models: dict, data_dir: Path, texts: list[str], url: str) -> None:
    """Where one text's time goes at 1 client: each step timed in this process, then the same
    text sent to the server at ``url``, one after another (medians over the texts); what the
    served request takes beyond the analysis is HTTP, the guard, FastAPI and pydantic, and
    whatever makes the server's own model calls slower than this process's."""
    import torch

    from app.web.analysis import analyzer_of
    from app.settings import Settings

    nbsvm, bert = models["nbsvm"], models["bert"]
    analyzer = analyzer_of(models, Settings(data_dir=data_dir))

    def forward(text: str) -> None:
        with torch.inference_mode():
            bert.model(**bert.encoder.pad(bert.encoder.ids([text]), bert.device))

    steps = {
        "NB-SVM, whole predict_proba": lambda text: nbsvm.predict_proba([text]),
        "NB-SVM through scikit-learn's pipeline, as before StackedScorer": lambda text: nbsvm.pipeline.predict_proba([text]),
        "BERT tokenizing (Encoder.ids)": lambda text: bert.encoder.ids([text]),
        "BERT forward pass, with padding": forward,
        "BERT, whole predict_proba": lambda text: bert.predict_proba([text]),
    }
    spent: dict[str, list[float]] = {name: [] for name in [*steps, "analyze", "served"]}

    async def measure() -> None:
        await analyzer.start()
        for text in texts[:40]:
            for name, step in steps.items():
                started = time.perf_counter()
                step(text)
                spent[name].append(time.perf_counter() - started)
            started = time.perf_counter()
            await analyzer.analyze([text], explain=False)
            spent["analyze"].append(time.perf_counter() - started)
            started = time.perf_counter()
            predict(url, [text])
            spent["served"].append(time.perf_counter() - started)
        await analyzer.stop()

    asyncio.run(measure())
    median = {name: statistics.median(times) * 1000 for name, times in spent.items()}
    for name in steps:
        print(f"Profile of one text: {name}: {median[name]:.2f} ms")
    print(
        f"Profile of one text: ModelAnalyzer.analyze (both models side by side, their batchers and thread hops): "
        f"{median['analyze']:.2f} ms, {median['analyze'] - median['BERT, whole predict_proba']:+.2f} ms over BERT alone"
    )
    print(
        f"Profile of one text: POST /api/predict: {median['served']:.2f} ms, {median['served'] - median['analyze']:.2f} ms "
        "over the analysis in this process: HTTP, guard, FastAPI, pydantic, JSON, and the server's model calls "
        "being slower than this process's (its torch threads wake from sleep for each request)"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, default=Path("data"), help="Built data dir (models and database).")
    parser.add_argument("--window-ms", type=float, default=10.0, help="Batch window of the batched Textflix (ms).")
    parser.add_argument("--rounds", type=int, default=5, help="Rounds; each measures every server once.")
    parser.add_argument("--requests", type=int, default=60, help="Requests per server and round at 1 client.")
    parser.add_argument("--seconds", type=float, default=10.0, help="Seconds per server and round at 16 clients.")
    parser.add_argument("--compare-with", type=Path, help="Another Textflix checkout to measure beside this one.")
    parser.add_argument("--threads-variant", type=int, help="Add a batched Textflix with this many torch threads.")
    parser.add_argument("--int8-variant", action="store_true", help="Add a batched Textflix with BERT in int8.")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    db, bert = args.data_dir / "textflix.db", args.data_dir / "models" / "bert"
    if not db.is_file() or not bert.is_dir():
        raise SystemExit(f"No built database and models in {args.data_dir}: run `textflix build` first.")
    texts = fitting_texts(catalogue_texts(db, 400, args.seed)[0], bert)[:200]
    bodies = [{"texts": [text]} for text in texts]
    with tempfile.TemporaryDirectory(prefix="textflix-bench-") as tmp:
        url, logs = database_copy(db, Path(tmp)), Path(tmp)
        servers = {
            BATCHED: textflix_server(args.data_dir, url, args.window_ms, "cpu", logs / "batched.log"),
            UNBATCHED: textflix_server(args.data_dir, url, 0.0, "cpu", logs / "unbatched.log"),
            BASELINE: Server([sys.executable, "scripts/pipeline_server.py", "--model", str(bert)], logs / "baseline.log"),
        }
        if args.threads_variant:
            threads = {"TEXTFLIX_INFERENCE_THREADS": str(args.threads_variant)}
            servers[f"Textflix, batching on, {args.threads_variant} torch threads"] = textflix_server(
                args.data_dir, url, args.window_ms, "cpu", logs / "threads.log", env=threads
            )
        if args.int8_variant:
            servers[INT8] = textflix_server(
                args.data_dir, url, args.window_ms, "cpu", logs / "int8.log", env={"TEXTFLIX_CPU_INT8": "1"}
            )
        if args.compare_with:
            before = f"Textflix at {args.compare_with}, batching on"
            servers[before] = textflix_server(
                args.data_dir, url, args.window_ms, "cpu", logs / "before.log", args.compare_with.resolve()
            )
        try:
            for server in servers.values():
                server.wait_ready()
            print(
                f"{len(texts)} catalogue texts of {min(map(len, texts))}-{max(map(len, texts))} characters, one per request; "
                f"{os.cpu_count()} CPU cores shared by the servers and this client; load average {os.getloadavg()[0]:.1f}",
                flush=True,
            )
            check_agreement(servers[BATCHED].url, servers[BASELINE].url, texts[:32])
            for server in servers.values():  # warm-up
                run(load(server.url, "/api/predict", bodies, 4, 16, args.seconds, {}))
            rounds = []
            for index in range(args.rounds):
                started = time.perf_counter()
                rounds.append(one_round(servers, bodies, args, index))
                figures = "; ".join(
                    f"{name}: {f['latency']:.1f} ms, {f['rate']:.1f} texts/s" for name, f in rounds[-1].items()
                )
                print(f"  round {index + 1} ({time.perf_counter() - started:.0f} s, load {os.getloadavg()[0]:.1f}): {figures}", flush=True)
            models = load_models(args.data_dir)
            request_profile(models, args.data_dir, texts, servers[BATCHED].url)
        finally:
            for server in servers.values():
                server.stop()
    report(rounds)
    model_ceiling(models, texts, args.rounds)
    print(f"Load average at the end: {os.getloadavg()[0]:.1f} (1 min), {os.getloadavg()[1]:.1f} (5 min)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
