"""ERASER's annotated reviews (``--rationales``): what /about shows of how far the models' highlights
agree with the passages people marked, and the page of one such review (``/rationales/{doc}``)."""

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.db import Evidence, Prediction, Review, Run, Sentence, SentenceWeight
from model.names import DISPLAY_NAMES, MODELS, POSITIVE, RATIONALES, label_of
from model.rationales import RANDOM_DRAWS, RationaleReview, plausibility, source_key, top_k
from model.sentences import Span

DOC_CHARS = 16  # ERASER's document names: "negR_800"
# Published figures on ERASER's movies test set, from DeYoung et al. 2020 ("ERASER", ACL 2020): token-level
# scores of other models, so a bearing only (ours score these models' sentences).
PUBLISHED = (
    "DeYoung et al. 2020 (ERASER, ACL 2020) on the movies test set, token by token and with other models: "
    "Table 4, BERT+LSTM's AUPRC with attention 0.417, gradients 0.385, LIME 0.280, random 0.259; Table 3, "
    "rationale models trained on people's passages, token F1 0.285 and IOU F1 0.124 (Lei et al. 2016), "
    "0.145 and 0.075 (BERT-to-BERT); Table 2, one annotator against the majority, token F1 0.799."
)


def summary(run: Run) -> dict:
    """What /about says of the comparison with people's rationales: the build's figures, or why there are none."""
    figures = (run.metrics or {}).get(RATIONALES)
    step = (run.steps or {}).get(RATIONALES)
    if figures:
        rows = [{"model": model, "name": DISPLAY_NAMES[model], **figures["models"][model]} for model in MODELS]
        return {
            "state": "measured", **figures, "models": rows, "random_draws": RANDOM_DRAWS, "reading": reading(figures),
            "published": PUBLISHED,
        }  # fmt: skip
    if (step and step.get("skipped")) or run.status == "complete":  # a build from before the step: not measured
        return {"state": "skipped"}
    return {"state": "not yet"}


def reading(figures: dict) -> str:
    """The figures in one plain sentence: whether each model's highlights find people's reasons more
    often than random sentences do (by sentence AUPRC, beyond twice the random draws' spread)."""
    chance = figures["random"]["auprc"]
    said = []
    for model in MODELS:
        mine = figures["models"][model]["auprc"]
        if mine is None:
            continue
        verdict = "more often than" if mine > chance["mean"] + 2 * chance["std"] else "no more often than"
        said.append(f"{DISPLAY_NAMES[model]}'s highlights point to the passages people marked {verdict} random "
                    f"sentences do (sentence AUPRC {mine:.2f} against {chance['mean']:.2f})")  # fmt: skip
    return "; ".join(said) + "." if said else ""


def rationale_page(session: Session, doc: str) -> dict | None:
    """One of ERASER's annotated reviews with the annotators' passages and both models' highlights;
    None if the database has no such review."""
    if len(doc) > DOC_CHARS:
        return None
    review = session.execute(
        select(Review.id, Review.text, Review.label).where(Review.source_key == source_key(doc), Review.split == RATIONALES)
    ).one_or_none()
    if review is None:
        return None
    rows = session.execute(
        select(Sentence.id, Sentence.start, Sentence.end, Sentence.text).where(Sentence.review_id == review.id).order_by(Sentence.position)
    ).all()
    weights = {row.id: {} for row in rows}
    for sentence_id, model, weight in session.execute(
        select(SentenceWeight.sentence_id, SentenceWeight.model, SentenceWeight.weight).where(SentenceWeight.sentence_id.in_(weights))
    ):
        weights[sentence_id][model] = weight
    evidence = [tuple(row) for row in session.execute(
        select(Evidence.start_token, Evidence.end_token).where(Evidence.review_id == review.id).order_by(Evidence.start_token)
    )]  # fmt: skip
    predictions = dict(
        session.execute(select(Prediction.model, Prediction.p_positive).where(Prediction.review_id == review.id)).all()
    )
    annotated = RationaleReview(doc, review.label, review.text, [Span(r.start, r.end, r.text) for r in rows], evidence)
    tokens = annotated.token_spans()
    passages = [{"start": tokens[start][0], "end": tokens[end - 1][1]} for start, end in evidence if 0 <= start < end <= len(tokens)]
    for passage in passages:
        passage["text"] = review.text[passage["start"] : passage["end"]]
    is_evidence = annotated.evidence_sentences()
    sentences = [
        {"position": i, "start": r.start, "end": r.end, "text": r.text, "weights": weights[r.id], "evidence": is_evidence[i]}
        for i, r in enumerate(rows)
    ]
    return {
        "doc": doc,
        "label": review.label,
        "text": review.text,
        "sentences": sentences,
        "passages": passages,
        "evidence_sentences": sum(is_evidence),
        "models": [model_reading(model, annotated, sentences, predictions.get(model)) for model in MODELS],
    }


def model_reading(model: str, annotated: RationaleReview, sentences: list[dict], p_positive: float | None) -> dict:
    """One model's prediction of the review and how far its top sentences agree with the annotators'."""
    reading = {"model": model, "name": DISPLAY_NAMES[model], "label": None, "p_positive": p_positive}
    if p_positive is None or any(model not in s["weights"] for s in sentences):
        return reading
    label = label_of(p_positive)
    toward = [s["weights"][model] * (1 if label == POSITIVE else -1) for s in sentences]
    top = top_k(toward, max(1, sum(s["evidence"] for s in sentences)))
    return {
        **reading,
        "label": label,
        "top": top,
        "top_evidence": sum(sentences[i]["evidence"] for i in top),
        **plausibility([annotated], [toward]),
    }
