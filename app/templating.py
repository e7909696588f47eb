"""The Jinja2 templates of the pages and the error pages, with their filters and globals."""

import math
from pathlib import Path

from fastapi.templating import Jinja2Templates

import app as app_package
from app import render
from app.view import View
from model.names import DISPLAY_NAMES, MAIN_MODEL, MODELS, WORD_LEVEL_MODEL, short_label

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


def _pct(value: float | None, digits: int = 0) -> str:
    return "–" if value is None or not math.isfinite(value) else f"{value:.{digits}%}"


templates.env.filters.update(
    num=lambda value: "–" if value is None else f"{value:,}",
    pct=_pct,
    signed=lambda value: "–" if value is None else f"{value:+.3f}",
    duration=_duration,
    side=short_label,
)
templates.env.globals.update(
    highlight=render.highlight,
    sentence_mark=render.sentence_mark,
    word_highlight=render.word_highlight,
    bar_svg=render.bar_svg,
    ticks_svg=render.ticks_svg,
    calibration_svg=render.calibration_svg,
    learning_curve_svg=render.learning_curve_svg,
    DISPLAY_NAMES=DISPLAY_NAMES,
    MODELS=MODELS,
    MAIN_MODEL=MAIN_MODEL,
    WORD_LEVEL_MODEL=WORD_LEVEL_MODEL,
    ANALYSIS_VIEW=View(analyze=True, accuracy=True, compare=True),
)
