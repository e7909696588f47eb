"""The about page: the latest run's record (configuration, metrics, timings, learning curve),
how far the explanations can be trusted, and what a build still under way is doing."""

from collections import defaultdict
from statistics import fmean

from sqlalchemy import and_, func, select
from sqlalchemy.orm import Session

from app.db import Explanation, Review, Run, Sentence, SentenceWeight, latest_run, process_gone
from app.web.build_state import read_build_state, steps_table
from app.web.catalogue_cache import kept
from app.web.queries import rationales
from model.config import DISTILL, PLAIN
from model.curve import LEARNING_CURVE
from model.metrics import MAJORITY_BASELINE
from model.names import CATALOGUE, DISPLAY_NAMES, EVAL, LENGTHS, MODELS, SENTENCE, SST2, STUDENT, TEACHER, WORD_SHARES
from model.quality import LOG_ODDS, NO_FIT, QUALITY_FIELDS, UNSTABLE, is_empty, is_weak

HISTOGRAM_BINS = 10  # equal bins over [0, 1]; a value outside counts in the nearest end bin
DISTRIBUTED = ("score", "stability", "normalised_comprehensiveness", "normalised_sufficiency")
FAITHFULNESS = (
    "comprehensiveness", "random_comprehensiveness", "comprehensiveness_top", "random_comprehensiveness_top",
    "sufficiency", "random_sufficiency", "sufficiency_top", "random_sufficiency_top",
)  # fmt: skip
LEAST_FAITHFUL = 5


def _histogram(values: list[float]) -> list[int]:
    counts = [0] * HISTOGRAM_BINS
    for value in values:
        counts[min(HISTOGRAM_BINS - 1, max(0, int(value * HISTOGRAM_BINS)))] += 1
    return counts


def _mean(values: list[float]) -> float | None:
    return fmean(values) if values else None


def _model_quality(model: str, rows: list[dict]) -> dict:
    """One model's sentence explanations summed up (see ``explanation_quality``)."""
    present = {name: [row[name] for row in rows if row[name] is not None] for name in DISTRIBUTED + FAITHFULNESS}
    compared = [row for row in rows if row["normalised_comprehensiveness"] is not None]
    compared.sort(key=lambda row: (row["normalised_comprehensiveness"], row["comprehensiveness"], row["review_id"]))
    return {
        "model": model,
        "name": DISPLAY_NAMES[model],
        "explanations": len(rows),
        "single_sentence": len(rows) - len(compared),
        "weak": sum(is_weak(row["score"], row) for row in rows),
        "empty": sum(
            row["strongest"] is None or is_empty([row["strongest"]], row["target"] or LOG_ODDS) for row in rows
        ),
        "figures": {
            name: {"mean": _mean(present[name]), "histogram": _histogram(present[name])} for name in DISTRIBUTED
        },
        "faithfulness": {name: _mean(present[name]) for name in FAITHFULNESS},
        "least_faithful": [
            {name: row[name] for name in ("review_id", "normalised_comprehensiveness", "comprehensiveness", "score")}
            for row in compared[:LEAST_FAITHFUL]
        ],
    }


def explanation_quality(session: Session) -> dict:
    """``_explanation_quality``, kept while the catalogue is unchanged (``catalogue_cache``)."""
    return kept(session, ("explanation quality",), lambda: _explanation_quality(session))


def _explanation_quality(session: Session) -> dict:
    """Per model, the trust figures of its sentence explanations of the catalogue (user reviews
    included): means and histograms, raw faithfulness beside random sentences, the counts of
    weak and of empty explanations, and the reviews whose top sentence is the least faithful
    (lowest normalised comprehensiveness). One query; the sums are made here."""
    strongest = (
        select(
            Sentence.review_id,
            SentenceWeight.model,
            func.max(func.abs(SentenceWeight.weight)).label("strongest"),
        )
        .join(SentenceWeight, SentenceWeight.sentence_id == Sentence.id)
        .group_by(Sentence.review_id, SentenceWeight.model)
        .subquery()
    )
    stmt = (
        select(
            Explanation.model,
            Explanation.review_id,
            Explanation.score,
            *(getattr(Explanation, name) for name in QUALITY_FIELDS),
            strongest.c.strongest,
        )
        .join(Review, Review.id == Explanation.review_id)
        .outerjoin(
            strongest,
            and_(strongest.c.review_id == Explanation.review_id, strongest.c.model == Explanation.model),
        )
        .where(Review.split == CATALOGUE, Explanation.level == SENTENCE)
        .order_by(Explanation.review_id)
    )
    by_model: dict[str, list[dict]] = defaultdict(list)
    for row in session.execute(stmt).mappings():
        by_model[row["model"]].append(dict(row))
    return {
        "bins": [index / HISTOGRAM_BINS for index in range(HISTOGRAM_BINS + 1)],
        "weak_when": {"score_below": NO_FIT, "stability_below": UNSTABLE},
        "models": [_model_quality(model, by_model[model]) for model in MODELS if by_model[model]],
    }



def about(session: Session) -> dict:
    """The latest pipeline run: configuration, metrics of both models, timings; how far the
    explanations can be trusted."""
    counts = kept(
        session, ("reviews by split",), lambda: dict(session.execute(select(Review.split, func.count()).group_by(Review.split)).all())
    )
    page: dict = {"database_counts": counts, "run": None}
    run = latest_run(session)
    if run is None:
        return page
    record = run.record()
    metrics = record["metrics"]
    page["run"] = record
    page["recipe"] = recipe_of(run)
    page["models"] = [
        {
            "model": model,
            "name": DISPLAY_NAMES[model],
            "sets": {name: metrics[model][name] for name in (EVAL, CATALOGUE, SST2) if name in metrics.get(model, {})},
        }
        for model in MODELS
    ]
    # a record made before they were kept has accuracy alone: the page shows no empty rows for them
    page["skew_figures"] = any(MAJORITY_BASELINE in figures for m in page["models"] for figures in m["sets"].values())
    page["timings"] = [{"step": step, "seconds": seconds} for step, seconds in record["timings"].items()]
    page["total_seconds"] = sum(seconds or 0.0 for seconds in record["timings"].values())
    page["lengths"] = metrics.get(LENGTHS)
    page["learning_curve"] = learning_curve(record, run.steps or {})
    page["explanation_quality"] = explanation_quality(session)
    page["rationales"] = rationales.summary(run)
    page["word_shares"] = word_shares(run)
    page["build_progress"] = build_progress(run)
    page["build_steps"] = steps_table(read_build_state(session))
    return page


def word_shares(run: Run) -> dict:
    """What /about says of BERT's words checked on samples (``app.offline.steps.word_shares``): the build's
    figures, or why there are none (a build from before the step, finished, has none)."""
    figures = (run.metrics or {}).get(WORD_SHARES)
    if figures and "skipped" in figures:
        return {"state": "skipped", "reason": figures["skipped"]}
    if figures:
        return {"state": "measured", **figures}
    return {"state": "skipped" if run.status == "complete" else "not yet"}


def recipe_of(run: Run) -> str:
    """The recipe of the run's BERT (``model.config.RecipeConfig``): as its training step recorded it, and until
    that step is done, as the build config says, which the build writes before its first step. A record
    from before recipes existed (no recipe, or "auto") was built as plain."""
    trained = (run.steps or {}).get(STUDENT)
    recipe = trained.get("recipe") if trained is not None else (run.config or {}).get("recipe")
    return DISTILL if recipe == DISTILL else PLAIN


def build_progress(run: Run) -> str | None:
    """What the build is doing while it has not finished (say, in the background of ``textflix up``),
    in a sentence; None once it has. A step that failed says so; a build killed mid-step left its
    progress behind: once its process is gone, the sentence says it stopped."""
    if run.status == "complete":
        return None
    progress = run.progress
    if not progress:
        return "The build has not finished: what it has not computed yet is missing from this page."
    if failed := progress.get("failed"):
        return (
            f"The build's {progress['step']} step failed ({failed.rstrip('.')}): what it had not computed is missing "
            "from this page until `textflix build` or `textflix up` resumes it; the build's console has the whole error."
        )
    if process_gone(builder := progress.get("builder", {})):
        return (
            f"The build stopped before it had finished (its process, pid {builder['pid']}, has ended): what it had "
            "not computed yet is missing from this page until `textflix build` or `textflix up` resumes it."
        )
    doing = progress["doing"]
    if progress.get("total"):
        doing += f": {progress['done']:,} of {progress['total']:,} {progress['unit']}"
    return f"{doing[0].upper()}{doing[1:]}. This page shows the result once the build has finished."


def learning_curve(record: dict, steps: dict) -> dict | None:
    """The run's learning curve (``model.curve``) and its ``markers``: a distill build's served
    BERT and its teacher, single points beside the curve of BERT on labels alone
    (``charts.learning_curve_svg`` draws them all)."""
    curve = record["metrics"].get(LEARNING_CURVE)
    if not curve:
        return None
    return {**curve, "markers": distill_markers(record["metrics"], steps)}


def distill_markers(metrics: dict, steps: dict) -> list[dict]:
    """The served BERT of a distill build (labels plus teacher labels) and its teacher, each at
    the number of labelled reviews it was trained on; none for another recipe."""
    student = steps.get(STUDENT) or {}
    if student.get("recipe") != DISTILL:
        return []
    labelled = student["labelled"]
    unlabeled = student["teacher_labelled"]
    markers = [
        {
            "kind": DISTILL,
            "label": f"{DISPLAY_NAMES[STUDENT]}, distilled ({labelled:,} labels + {unlabeled:,} teacher labels)",
            "size": labelled,
            "accuracy": metrics[STUDENT][EVAL]["accuracy"],
        }
    ]
    if TEACHER in metrics:
        checkpoint = (steps.get(TEACHER) or {}).get("base_model")
        markers.append(
            {
                "kind": TEACHER,
                "label": f"teacher ({checkpoint.rsplit('/', 1)[-1]})" if checkpoint else "teacher",
                "size": labelled,
                "accuracy": metrics[TEACHER][EVAL]["accuracy"],
            }
        )
    return markers
