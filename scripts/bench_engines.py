"""Reviews per second of the per-review build steps under each engine, and the database write rate.

    python scripts/bench_engines.py --data-dir DIR [--postgres URL] [--repeats 3] [--json OUT]

DIR is a finished build's data directory (its trained models and its SQLite database). For
each engine (in-process, and a local Ray started for each measurement) and each task
(predict with each model; explain: sentence LIME of each model, word LIME of NB-SVM), the
pending rows of a sample of reviews are computed and written into a scratch copy of the
database through ``app.offline.work_engines.run_tasks``, the code ``textflix build`` runs, and timed:

- reviews per second, from the call to its return (for Ray: starting Ray, the actors and
  their models included, as a build step does);
- for Ray, also after its start: the start is timed as a run of one review, and taken off;
- this process's CPU seconds per review (user and system, all its threads): for the
  in-process engine, the core-seconds a review costs, which other work on the machine does
  not inflate the way it inflates wall time; for Ray, the driver's own share (reading,
  serialising, writing).

``--engines`` may also name ``local1``: the in-process engine with torch on one thread, as in
a Ray actor (one CPU, one thread). The capacity model takes a review's cost on one core from
its CPU time, which scales out with the actors.

Predict units are ``--predict-chunk`` reviews here (the build's: 256), so that a sample of a
few hundred reviews still makes a unit per actor.

Each figure is the median of ``--repeats`` runs. Explain uses the LIME settings given here
(default: the build defaults, 512 samples per sentence run, 300 per word run). Then the rows
per second written to SQLite and to PostgreSQL (``--postgres``, default
TEXTFLIX_TEST_POSTGRES_URL; a database whose Textflix tables are dropped and made again), in
the batches the build writes (``app.offline.review_work.write_results``, one transaction per batch).
Finally the per-review costs are printed as a capacity model (see docs/benchmarks/scaling-out.md).
"""

import argparse
import json
import logging
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # before transformers is imported (through model.bert)

from sqlalchemy import delete, func, select, text  # noqa: E402

from app.db import (  # noqa: E402
    Base,
    Explanation,
    Movie,
    Prediction,
    Review,
    Run,
    Sentence,
    SentenceWeight,
    WordWeight,
    make_engine,
    migrate,
    session_scope,
)
from app.offline import review_work, work_engines  # noqa: E402
from app.offline.pipeline import Pipeline  # noqa: E402
from app.offline.review_work import PREDICT_CHUNK, Task, write_results  # noqa: E402
from app.settings import Settings  # noqa: E402
from model.names import BERT, NBSVM, SENTENCE, WORD  # noqa: E402

OUTPUT_TABLES = (SentenceWeight, WordWeight, Explanation, Prediction)
ONE_THREAD = "local1"  # --engines: the in-process engine with torch on one thread, as in a Ray actor
EXPLAIN_BLOCK = 4  # app.offline.steps.scoring.EXPLAIN_BLOCK


def scratch_pipeline(data_dir: Path, database: Path, engine: str, lime: dict) -> Pipeline:
    """A pipeline on ``database`` (a copy of the build's) with the build's settings, ``lime`` and ``engine``."""
    source = make_engine(f"sqlite:///{data_dir / 'textflix.db'}")
    with session_scope(source) as session:
        config = session.scalars(select(Run.config).order_by(Run.id.desc())).first()
    source.dispose()
    settings = Settings(**{**config, **lime, "data_dir": data_dir, "database_url": f"sqlite:///{database}", "engine": engine})
    build = Pipeline(settings, [], progress=False)
    build.engine = make_engine(settings.database)  # the run record is not touched: only run_tasks is timed
    return build


def clear(build: Pipeline) -> None:
    with session_scope(build.engine) as session:
        for table in OUTPUT_TABLES:
            session.execute(delete(table))


def sample(build: Pipeline, task: Task, count: int) -> list[int]:
    with session_scope(build.engine) as session:
        return task.pending(session)[:count]


def timed_run(build: Pipeline, task: Task, ids: list[int]) -> dict:
    """One run of ``task`` on ``ids`` through ``run_tasks`` (the rows cleared first): seconds,
    and CPU seconds of this process per review."""
    clear(build)
    started, cpu = time.perf_counter(), time.process_time()
    facts = work_engines.run_tasks(build, [(task, ids)], per_block=1 if task.level is None else EXPLAIN_BLOCK)
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    return {"seconds": seconds, "cpu_per_review": cpu / len(ids), "facts": facts}


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def measure_engines(args, lime: dict) -> dict:
    tasks = {
        "predict nbsvm": (Task(NBSVM), args.predict_reviews),
        "predict bert": (Task(BERT), args.predict_reviews),
        "explain nbsvm sentences": (Task(NBSVM, SENTENCE), args.explain_reviews),
        "explain bert sentences": (Task(BERT, SENTENCE), args.bert_explain_reviews),
        "explain nbsvm words": (Task(NBSVM, WORD), args.explain_reviews),
    }
    results = {}
    with tempfile.TemporaryDirectory(prefix="textflix-bench-") as folder:
        database = Path(folder) / "scratch.db"
        shutil.copy(args.data_dir / "textflix.db", database)
        for name, (task, count) in tasks.items():
            for engine in args.engines:
                threads = torch.get_num_threads()
                if engine == ONE_THREAD:  # the in-process engine as an actor runs: torch on one thread
                    torch.set_num_threads(1)
                build = scratch_pipeline(args.data_dir, database, "local" if engine == ONE_THREAD else engine, lime)
                clear(build)
                ids = sample(build, task, count)
                # the in-process engine loads its model once per build: a first run loads it;
                # Ray starts (Ray, actors, models) on every step: a run of one review times that
                starts = [timed_run(build, task, ids[:1])["seconds"] for _ in range(args.repeats if engine == "ray" else 1)]
                runs = [timed_run(build, task, ids) for _ in range(args.repeats)]
                wall = median(r["seconds"] for r in runs)
                start = median(starts) if engine == "ray" else 0.0
                results.setdefault(name, {})[engine] = line = {
                    "reviews": len(ids),
                    "wall": len(ids) / wall,
                    "start_s": start,
                    "net": len(ids) / max(wall - start, 1e-9),
                    "runs": [round(r["seconds"], 2) for r in runs],
                    "starts": [round(s_, 2) for s_ in starts],
                    "actors": runs[0]["facts"].get("actors", 1),
                    "cpu_per_review": median(r["cpu_per_review"] for r in runs),
                }
                print(f"{name:24} {engine:5} {len(ids):4} reviews: {line['wall']:7.2f} reviews/s, "
                      f"{line['net']:7.2f} after a start of {start:5.1f} s; this process's CPU "
                      f"{line['cpu_per_review'] * 1000:6.1f} ms/review (runs {line['runs']} s)", flush=True)  # fmt: skip
                build.engine.dispose()
                torch.set_num_threads(threads)
            local, ray = (results[name].get(e) for e in ("local", "ray"))
            if local and ray:
                print(f"{name:24} ray/local: {ray['wall'] / local['wall']:.2f} (with its start), "
                      f"{ray['net'] / local['wall']:.2f} (started)", flush=True)  # fmt: skip
    return results


def texts_per_explanation(args, lime: dict) -> float:
    """Distinct texts BERT scores per sentence explanation (both LIME runs and the faithfulness
    checks share them): what a GPU would score per review."""
    from app.offline.review_work import units
    from app.offline.work_engines import settings_worker

    with tempfile.TemporaryDirectory(prefix="textflix-bench-") as folder:
        database = Path(folder) / "scratch.db"
        shutil.copy(args.data_dir / "textflix.db", database)
        build = scratch_pipeline(args.data_dir, database, "local", lime)
        clear(build)
        task = Task(NBSVM, SENTENCE)  # NB-SVM: the same texts, counted fast
        ids = sample(build, task, args.explain_reviews)
        scored = []
        model = build.model(NBSVM)

        def load(name):
            class Counting:
                def predict_proba(self, texts):
                    scored.append(len(texts))
                    return model.predict_proba(texts)

            return Counting()

        worker = settings_worker(build, load)
        for unit in units(build.engine, task, ids):
            worker([unit])
        build.engine.dispose()
    return sum(scored) / len(ids)


def write_rate(url: str, source_db: Path, reviews: int, models: int, repeats: int) -> dict:
    """Rows per second of ``write_results`` into ``url``: predictions in batches of PREDICT_CHUNK
    reviews, sentence explanations (an explanation row and a weight per sentence) in batches of
    EXPLAIN_BLOCK reviews (a write per Ray block; the in-process engine writes one review per
    transaction). The build's reviews are written under ``models`` model names, for more rows."""
    source = make_engine(f"sqlite:///{source_db}")
    with session_scope(source) as session:
        review_rows = session.scalars(select(Review).order_by(Review.id).limit(reviews)).all()
        ids = [r.id for r in review_rows]
        titles = {r.title_id for r in review_rows}
        movies = [columns(m) for m in session.scalars(select(Movie)) if m.title_id in titles]
        sentence_rows = session.scalars(select(Sentence).where(Sentence.review_id.in_(ids)).order_by(Sentence.id)).all()
        review_data, sentence_data = [columns(r) for r in review_rows], [columns(s) for s in sentence_rows]
    source.dispose()
    engine = make_engine(url)
    with engine.begin() as connection:
        Base.metadata.drop_all(connection)
        connection.execute(text("DROP TABLE IF EXISTS alembic_version"))
    migrate(engine)
    with engine.begin() as connection:
        connection.execute(Movie.__table__.insert(), movies)
        connection.execute(Review.__table__.insert(), review_data)
        connection.execute(Sentence.__table__.insert(), sentence_data)
    per_review = {i: [] for i in ids}
    for sentence in sentence_data:
        per_review[sentence["review_id"]].append(sentence["id"])
    names = [f"bench{m}" for m in range(models)]
    quality = {"target": "log_odds", "stability": 0.5, "top_k": 1, "comprehensiveness": 0.1, "sufficiency": 0.05}

    def prediction_batches():
        for model in names:
            for start in range(0, len(ids), PREDICT_CHUNK):
                chunk = ids[start : start + PREDICT_CHUNK]
                yield [{"model": model, "level": None, "ids": chunk, "p_positive": [0.25] * len(chunk)}]

    def explanation_batches():
        for model in names:
            results = [{"model": model, "level": SENTENCE, "review_id": i, "sentence_ids": per_review[i],
                        "explanation": {"weights": [0.01] * len(per_review[i]), "samples": 512, "intercept": 0.0,
                                        "score": 0.5, "quality": quality}}
                       for i in ids]  # fmt: skip
            for start in range(0, len(results), EXPLAIN_BLOCK):
                yield results[start : start + EXPLAIN_BLOCK]

    rates = {}
    for name, batches, rows_of, batch in (
        ("predictions", prediction_batches, lambda r: len(r["ids"]), f"{PREDICT_CHUNK} reviews"),
        ("explanations", explanation_batches, lambda r: 1 + len(r["sentence_ids"]), f"{EXPLAIN_BLOCK} reviews"),
    ):
        seconds, rows = [], 0
        for _ in range(repeats):
            with session_scope(engine) as session:
                for table in OUTPUT_TABLES:
                    session.execute(delete(table))
            rows = 0
            started = time.perf_counter()
            for results in batches():
                with session_scope(engine) as session:
                    write_results(session, results)
                rows += sum(rows_of(r) for r in results)
            seconds.append(time.perf_counter() - started)
        with session_scope(engine) as session:
            written = session.scalar(select(func.count()).select_from(Prediction if name == "predictions" else SentenceWeight))
        assert written > 0
        rates[name] = {"rows": rows, "rows_per_s": rows / statistics.median(seconds), "batch": batch}
    with session_scope(engine) as session:
        for table in OUTPUT_TABLES:
            session.execute(delete(table))
    engine.dispose()
    return rates


def columns(row) -> dict:
    return {c.name: getattr(row, c.name) for c in type(row).__table__.columns}


CORPUS = 100_000  # reviews in the capacity model: each predicted by both models and explained three ways
# Unmeasured (no GPU here): distinct texts per second MiniLM-L6 scores at up to 256 tokens in
# float16 on one datacenter GPU (A100/H100 class), batches of a few hundred texts.
GPU_TEXTS_PER_S = 3000
CORE_COUNTS, GPU_COUNTS = (1, 8, 64), (1, 8)
PREDICT_NAMES = ("predict nbsvm", "predict bert")
EXPLAIN_NAMES = ("explain nbsvm sentences", "explain bert sentences", "explain nbsvm words")


def rows_per_review(data_dir: Path) -> dict:
    """Rows the build writes per review: predictions (one per model) and explanations (a row per
    explanation, a weight per sentence and model, a weight per distinct word for NB-SVM)."""
    from lime.lime_text import IndexedString

    engine = make_engine(f"sqlite:///{data_dir / 'textflix.db'}")
    with session_scope(engine) as session:
        texts = session.scalars(select(Review.text).where(Review.split == "catalogue")).all()
        sentences = session.scalar(select(func.count(Sentence.id)))
    engine.dispose()
    words = statistics.fmean(IndexedString(t).num_words() for t in texts)
    return {"predict": 2.0, "explain": 3 + 2 * sentences / len(texts) + words, "sentences": sentences / len(texts),
            "words": words}  # fmt: skip


def capacity(report: dict, rows: dict) -> list[str]:
    """The capacity model: hours for CORPUS reviews on CPU cores and GPUs, and the writes' share."""
    engines_ = report["engines"]
    # core-seconds per review: the CPU time of the in-process engine with torch on one thread, as
    # in a Ray actor (one core, one thread); CPU time, unlike wall time, is not inflated by other
    # work on the machine
    core_s = {name: engines_[name][ONE_THREAD]["cpu_per_review"] for name in (*PREDICT_NAMES, *EXPLAIN_NAMES)}
    compute = sum(core_s.values())
    # Ray, its actors and their models, per step (two steps)
    startup = 2 * statistics.median(engines_[name]["ray"]["start_s"] for name in engines_ if "ray" in engines_[name])
    texts = report["texts_per_sentence_explanation"]
    # On a GPU actor (1 GPU, 1 CPU): NB-SVM's work and LIME's own work stay on the CPU (LIME's
    # share of a BERT explanation ~ a whole NB-SVM one), BERT's forward passes go to the GPU.
    gpu_review = (core_s["predict nbsvm"] + core_s["explain nbsvm sentences"] + core_s["explain nbsvm words"]
                  + core_s["explain nbsvm sentences"] + (texts + 1) / GPU_TEXTS_PER_S)  # fmt: skip
    lines = [
        f"capacity model: {CORPUS:,} reviews, each predicted by both models and explained three ways "
        f"({rows['explain'] + rows['predict']:.0f} rows: {rows['sentences']:.1f} sentences, {rows['words']:.0f} distinct words)",
        "  core-seconds per review: " + ", ".join(f"{name} {seconds:.3f}" for name, seconds in core_s.items())
        + f"; total {compute:.2f}",
        f"  {'where':22} {'compute h':>10} {'SQLite writes h':>20} {'share':>6} {'PostgreSQL writes h':>20} {'share':>6}",
    ]
    write_s = {}
    for database, rates in report["writes"].items():
        write_s[database] = CORPUS * (rows["predict"] / rates["predictions"]["rows_per_s"]
                                      + rows["explain"] / rates["explanations"]["rows_per_s"])  # fmt: skip
    settings = [(f"{k} CPU core{'s' if k > 1 else ''}", CORPUS * compute / k + (startup if k > 1 else 0), k > 1)
                for k in CORE_COUNTS]  # fmt: skip
    settings += [(f"{g} GPU{'s' if g > 1 else ''} (assumed)", CORPUS * gpu_review / g + startup, True) for g in GPU_COUNTS]
    for where, seconds, overlapped in settings:
        cells = []
        for database in ("sqlite", "postgresql"):
            if database not in write_s:
                cells.append(f"{'-':>20} {'-':>6}")
                continue
            writes = write_s[database]
            # Ray: the driver writes while the actors compute, so the step takes the longer of the two;
            # in-process (1 core): one after the other.
            total = max(seconds, writes) if overlapped else seconds + writes
            cells.append(f"{writes / 3600:20.2f} {writes / total:6.0%}")
        lines.append(f"  {where:22} {seconds / 3600:10.2f} " + " ".join(cells))
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--engines", default=f"local,ray,{ONE_THREAD}")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--predict-reviews", type=int, default=512)
    parser.add_argument("--predict-chunk", type=int, default=128, help="reviews per predict unit (the build's: 256)")
    parser.add_argument("--explain-reviews", type=int, default=40, help="for the NB-SVM explanations")
    parser.add_argument("--bert-explain-reviews", type=int, default=12)
    parser.add_argument("--lime-samples", type=int, default=512)
    parser.add_argument("--word-lime-samples", type=int, default=300)
    parser.add_argument("--write-reviews", type=int, default=1000)
    parser.add_argument("--write-models", type=int, default=8, help="model names the reviews are written under")
    parser.add_argument("--postgres", default=os.environ.get("TEXTFLIX_TEST_POSTGRES_URL"))
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--skip-engines", action="store_true", help="measure the write rates only")
    parser.add_argument("--capacity-from", type=Path, nargs="+",
                        help="print the capacity model of earlier --json files (merged), measure nothing")
    args = parser.parse_args()
    if args.capacity_from:
        report = {}
        for path in args.capacity_from:
            earlier = json.loads(path.read_text())
            for name, by_engine in earlier.pop("engines", {}).items():
                report.setdefault("engines", {}).setdefault(name, {}).update(by_engine)
            report.update({key: value for key, value in earlier.items() if key != "writes" or value})
        print("\n".join(capacity(report, rows_per_review(args.data_dir))))
        return 0
    args.engines = args.engines.split(",")
    review_work.PREDICT_CHUNK = args.predict_chunk  # read where the driver cuts the units
    logging.basicConfig(level=logging.WARNING)
    lime = {"lime_samples": args.lime_samples, "word_lime_samples": args.word_lime_samples}
    print(f"{os.cpu_count()} CPU cores, load average {os.getloadavg()[0]:.1f}; LIME {args.lime_samples} samples "
          f"per sentence run (two runs), {args.word_lime_samples} per word run; predict units of {args.predict_chunk} "
          f"reviews; median of {args.repeats} runs.")  # fmt: skip
    report = {"cores": os.cpu_count(), "lime": lime, "repeats": args.repeats}
    if not args.skip_engines:
        report["engines"] = measure_engines(args, lime)
        report["texts_per_sentence_explanation"] = texts_per_explanation(args, lime)
        print(f"texts scored per sentence explanation: {report['texts_per_sentence_explanation']:.0f}")
    report["writes"] = {}
    with tempfile.TemporaryDirectory(prefix="textflix-bench-") as folder:
        targets = {"sqlite": f"sqlite:///{Path(folder) / 'writes.db'}"}
        if args.postgres:
            targets["postgresql"] = args.postgres
        for name, url in targets.items():
            report["writes"][name] = write_rate(
                url, args.data_dir / "textflix.db", args.write_reviews, args.write_models, args.repeats
            )
            for kind, figures in report["writes"][name].items():
                print(f"write {name:10} {kind:12} {figures['rows_per_s']:9.0f} rows/s "
                      f"({figures['rows']} rows in batches of {figures['batch']})")  # fmt: skip
    report["load_average_after"] = os.getloadavg()[0]
    print(f"load average at the end: {report['load_average_after']:.1f}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    if all(ONE_THREAD in by_engine and "ray" in by_engine for by_engine in report.get("engines", {}).values()):
        print("\n".join(capacity(report, rows_per_review(args.data_dir))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
