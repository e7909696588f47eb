"""The Jinja2 templates of the pages and the error pages, with their filters and globals."""

from pathlib import Path

from fastapi.templating import Jinja2Templates

import app as app_package
from app.web import cards, charts, render, whatif
from app.web.view import View
from model.config import SENTENCE_WINDOWS
from model.curve import point_text
from model.names import BERT, DISPLAY_NAMES, MAIN_MODEL, MODELS, SENTENCE, WORD_LEVEL_MODEL, short_label
from model.quality import stability_reading

ROOT = Path(app_package.__file__).resolve().parent.parent
TEMPLATES_DIR = ROOT / "templates"
STATIC_DIR = ROOT / "static"

templates = Jinja2Templates(directory=TEMPLATES_DIR)


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "–"
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, seconds = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {seconds} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min"


def _points(drop: float) -> str:
    """A change in probability as percentage points, without its sign: 0.123 → "12 points"."""
    points = abs(drop) * 100
    number = f"{points:.0f}" if points >= 10 else f"{points:.1f}".removesuffix(".0")
    return f"{number} point{'' if number == '1' else 's'}"


def _times(ratio: float) -> str:
    return f"{ratio:.0f}×" if ratio >= 10 else f"{ratio:.1f}".removesuffix(".0") + "×"


templates.env.filters.update(
    num=render.number,
    pct=render.percent,
    signed=lambda value: "–" if value is None else f"{value:+.3f}",
    points=_points,
    times=_times,
    duration=_duration,
    side=short_label,
    log_odds=whatif.logit,
    spread=point_text,
    sentence_intercepts=lambda explanations: {
        e["model"]: e["intercept"] for e in explanations or () if e["level"] == SENTENCE
    },
)
templates.env.globals.update(
    title_card=cards.title_card,
    meta_line=cards.meta_line,
    review_card=cards.review_card,
    model_column=cards.model_column,
    cut=render.cut,
    evidence_highlight=render.evidence_highlight,
    prediction=cards.prediction,
    explanation_note=cards.explanation_note,
    gold=cards.gold,
    sentence_mark=render.sentence_mark,
    word_highlight=render.word_highlight,
    words_legend=render.words_legend,
    model_bars=render.model_bars,
    calibration_svg=charts.calibration_svg,
    learning_curve_svg=charts.learning_curve_svg,
    histogram_svg=charts.histogram_svg,
    stability_reading=stability_reading,
    DISPLAY_NAMES=DISPLAY_NAMES,
    SENTENCE_WINDOWS=SENTENCE_WINDOWS,
    MODELS=MODELS,
    MAIN_MODEL=MAIN_MODEL,
    BERT=BERT,
    WORD_LEVEL_MODEL=WORD_LEVEL_MODEL,
    ANALYSIS_VIEW=View(analyze=True, accuracy=True, compare=True),
)
