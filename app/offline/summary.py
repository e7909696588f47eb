"""A run record (``app.offline.pipeline.report``) as one screen of text: what was built, how well
each model does, how long each step took; ``textflix build``, ``up`` and ``report`` print it."""

from app.db import display_url
from app.settings import Settings
from model.config import DISTILL
from model.curve import LEARNING_CURVE, point_text
from model.metrics import MAJORITY_BASELINE, SKEW_FIGURES
from model.names import (
    CATALOGUE,
    DISPLAY_NAMES,
    EVAL,
    IMDB_CORPUS,
    LENGTHS,
    MAIN_MODEL,
    MODELS,
    RATIONALES,
    TEACHER,
    TRAIN,
    items_called,
)

FIGURE_HEADS = {"balanced_accuracy": "balanced", "macro_f1": "macro-F1"}


def recipe_line(record: dict) -> str:
    """How the served BERT was made, in a few words."""
    steps = record.get("steps", {})
    student, teacher = steps.get(MAIN_MODEL, {}), steps.get(TEACHER, {})
    if student.get("recipe") == DISTILL:
        made = (f"recipe distill: {student['labelled']:,} labels plus {student['teacher_labelled']:,} texts of "
                f"unlabeled reviews labelled by the teacher {teacher.get('base_model', '')}")  # fmt: skip
    else:
        made = "recipe plain (stronger, from the same labels: --set recipe=distill, see docs/studies/recipes.md)"
    calibration = steps.get("calibrate", {})
    offset, temperature = calibration.get("offset"), calibration.get("temperature")
    per = f" per {calibration['offset_per']}" if "offset_per" in calibration else ""
    made += f", offset {offset:+.2f}{per}" if offset else ""
    return made + (f", temperature {temperature:.2f}" if temperature else "")


def summary(record: dict, settings: Settings) -> str:
    """One screen: what was built, how well each model does, how long each step took."""
    counts = record["counts"]
    lines = [
        f"Textflix run {record['run_id']} ({record['status']}) in {display_url(settings.database)}",
        f"  base model {record['base_model']}, seed {record['seed']}, {recipe_line(record)}",
        f"  {counts.get(TRAIN, 0):,} training reviews · {counts.get(CATALOGUE, 0):,} catalogue reviews of "
        f"{items_called(counts.get('titles', 0), counts.get('corpus', IMDB_CORPUS), settings.item_noun)} · "
        f"{counts.get(EVAL, 0):,} evaluation reviews",
        "",
        f"  {'model':8} {'set':10} {'accuracy':>8} {'majority':>8} {'balanced':>8} {'macro-F1':>8} "
        f"{'F1':>6} {'ECE':>6}",
    ]
    metrics = record["metrics"]
    reports = [(model, split, m) for model in (*MODELS, TEACHER) for split, m in metrics.get(model, {}).items()]
    for model, split, m in reports:
        skewed = " ".join(figure_text(m.get(name), 8) for name in SKEW_FIGURES)
        lines.append(f"  {model:8} {split:10} {m['accuracy']:8.3f} {skewed} {m['f1']:6.3f} {m['ece']:6.3f}")
    older = any(MAJORITY_BASELINE not in m for _, _, m in reports)
    lines.append(
        "  majority: the accuracy of always saying the set's larger class; balanced: the mean of each class's "
        "recall; macro-F1: the mean of each class's F1" + (" (–: not in this build's record)" if older else "")
    )
    if lengths := metrics.get(LENGTHS):
        lines += ["", *length_lines(lengths)]
    if rationales := metrics.get(RATIONALES):
        lines += ["", *rationale_lines(rationales)]
    if curve := metrics.get(LEARNING_CURVE):
        lines += ["", *curve_lines(curve)]
    timings = record["timings"]
    lines += [
        "",
        "  " + " · ".join(f"{step} {seconds:,.0f} s" for step, seconds in timings.items())
        + f" · total {sum(timings.values()):,.0f} s",
    ]
    return "\n".join(lines)


def rationale_lines(rationales: dict) -> list[str]:
    """The highlights against people's (``app.offline.steps.rationales``): a row per model and baseline."""
    lines = [
        f"  highlights against people's, ERASER's {rationales['n']:,} annotated movie reviews",
        f"  {'':24} {'accuracy':>8} {'AUPRC':>7} {'token F1':>8} {'IOU F1':>7}",
    ]
    for model in MODELS:
        m = rationales["models"][model]
        auprc = "–" if m["auprc"] is None else f"{m['auprc']:.3f}"
        lines.append(f"  {model:24} {m['accuracy']:8.3f} {auprc:>7} {m['token_f1']:8.3f} {m['iou_f1']:7.3f}")
    random = {name: figure["mean"] for name, figure in rationales["random"].items()}
    for name, m in (("random sentences (mean)", random), ("first and last sentences", rationales["position"])):
        lines.append(f"  {name:24} {'':>8} {m['auprc']:7.3f} {m['token_f1']:8.3f} {m['iou_f1']:7.3f}")
    return lines


def length_lines(lengths: dict) -> list[str]:
    """The length table (``model.lengths``): a row per band of sentences, accuracy per model, and (in a
    record that keeps them) the band's majority baseline and each model's balanced accuracy and macro-F1."""
    majority = lengths.get(MAJORITY_BASELINE)
    skewed = [name for name in FIGURE_HEADS if name in lengths]
    lines = [
        "  accuracy by length, evaluation reviews whole and cut (sentences)"
        + ("" if majority is None else ", beside the majority baseline, each model's balanced accuracy and macro-F1"),
        f"  {'band':>8} {'texts':>7}" + ("" if majority is None else f" {'majority':>8}")
        + "".join(f" {DISPLAY_NAMES[model]:>8}" + "".join(f" {FIGURE_HEADS[name]:>8}" for name in skewed)
                  for model in MODELS),
    ]  # fmt: skip
    for i, band in enumerate(lengths["bands"]):
        values = [] if majority is None else [majority[i]]
        for model in MODELS:
            values += [lengths[model][i], *(lengths[name][model][i] for name in skewed)]
        lines.append(f"  {band:>8} {lengths['n'][i]:>7,} " + " ".join(figure_text(value, 8) for value in values))
    return lines


def figure_text(value: float | None, width: int) -> str:
    """A figure to 3 places in ``width`` characters; a dash where there is none."""
    return f"{'–':>{width}}" if value is None else f"{value:{width}.3f}"


def curve_lines(curve: dict) -> list[str]:
    """The learning curve as a table: a row per training-set size, mean ± std per model."""
    spread = f", mean ± std over {curve['seeds']} seeds" if curve["seeds"] > 1 else ""
    lines = [
        f"  learning curve, evaluation accuracy{spread} (–: not trained)",
        f"  {'reviews':>8} " + " ".join(f"{DISPLAY_NAMES[model]:>15}" for model in MODELS),
    ]
    for i, size in enumerate(curve["sizes"]):
        points = (point_text(curve[model]["mean"][i], curve[model]["std"][i]) for model in MODELS)
        lines.append(f"  {size:>8,} " + " ".join(f"{point:>15}" for point in points))
    return lines
