"""The inline SVG charts of the about page: the reliability diagram, the learning curve and the
histograms of the explanations' trust figures.

Every text in them goes through ``markupsafe.escape``; colours come from CSS classes
(``static/textflix.css``), one per model.
"""

import math
from collections.abc import Callable

from markupsafe import Markup, escape

from model.config import DISTILL
from model.curve import point_text
from model.names import DISPLAY_NAMES, MODELS, NBSVM, TEACHER

_WIDTH, _HEIGHT = 360, 300
_LEFT, _RIGHT, _TOP, _BOTTOM = 52, 14, 14, 48
_LEGEND_ROW = 18


def _chart(chart_id: str, title: str, description: str, body: list[str], height: float = _HEIGHT) -> Markup:
    """``height``: more than the plot's when a legend goes under it."""
    return Markup(
        f'<svg class="chart" viewBox="0 0 {_WIDTH} {height:g}" role="img" '
        f'aria-labelledby="{chart_id}-t {chart_id}-d" xmlns="http://www.w3.org/2000/svg">'
        f'<title id="{chart_id}-t">{escape(title)}</title><desc id="{chart_id}-d">{escape(description)}</desc>'
        + "".join(body)
        + "</svg>"
    )


def _axes(x_ticks, y_ticks, x_label: str, y_label: str) -> list[str]:
    """Frame, grid and labels; ticks are (position in px, label)."""
    right, bottom = _WIDTH - _RIGHT, _HEIGHT - _BOTTOM
    out = [f'<rect class="frame" x="{_LEFT}" y="{_TOP}" width="{right - _LEFT}" height="{bottom - _TOP}"/>']
    for x, label in x_ticks:
        out.append(f'<line class="grid" x1="{x:.1f}" x2="{x:.1f}" y1="{_TOP}" y2="{bottom}"/>')
        out.append(f'<text class="tick-label" x="{x:.1f}" y="{bottom + 16}" text-anchor="middle">{escape(label)}</text>')
    for y, label in y_ticks:
        out.append(f'<line class="grid" x1="{_LEFT}" x2="{right}" y1="{y:.1f}" y2="{y:.1f}"/>')
        out.append(f'<text class="tick-label" x="{_LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{escape(label)}</text>')
    out.append(
        f'<text class="axis-label" x="{(_LEFT + right) / 2:.1f}" y="{_HEIGHT - 8}" text-anchor="middle">{escape(x_label)}</text>'
    )
    out.append(
        f'<text class="axis-label" transform="translate(14 {(_TOP + bottom) / 2:.1f}) rotate(-90)" '
        f'text-anchor="middle">{escape(y_label)}</text>'
    )
    return out


def _lines(model: str, points: list[tuple[float, float] | None]) -> list[str]:
    """A model's line through its points, broken where a point is missing."""
    out, run = [], []
    for point in [*points, None]:
        if point is None:
            if len(run) > 1:
                coords = " ".join(f"{x:.1f},{y:.1f}" for x, y in run)
                out.append(f'<polyline class="line m-{model}" points="{coords}"/>')
            run = []
        else:
            run.append(point)
    return out


def _marker(kind: str, x: float, y: float) -> str:
    """A point's symbol: squares for the baseline, circles for BERT; diamonds for a distilled
    model and triangles for its teacher (``queries.about.distill_markers``)."""
    if kind == NBSVM:
        return f'<rect class="marker m-{kind}" x="{x - 3.5:.1f}" y="{y - 3.5:.1f}" width="7" height="7"/>'
    if kind == DISTILL:
        corners = ((x, y - 5.5), (x + 5.5, y), (x, y + 5.5), (x - 5.5, y))
    elif kind == TEACHER:
        corners = ((x, y - 5.5), (x + 5, y + 4), (x - 5, y + 4))
    else:
        return f'<circle class="marker m-{kind}" cx="{x:.1f}" cy="{y:.1f}" r="4"/>'
    return f'<polygon class="marker m-{kind}" points="{" ".join(f"{cx:.1f},{cy:.1f}" for cx, cy in corners)}"/>'


def _series(model: str, points: list[tuple[float, float] | None]) -> list[str]:
    """A model's line (broken where a point is missing) with a marker at each point."""
    return _lines(model, points) + [_marker(model, *point) for point in points if point is not None]


def _legend(entries: list[tuple[str, str]], x: float, top: float) -> list[str]:
    """One row per entry from (``x``, ``top``) down: its key (drawn around 0,0, 22 px wide) and its label."""
    out = []
    for row, (key, label) in enumerate(entries):
        y = top + row * _LEGEND_ROW
        out.append(f'<g transform="translate({x} {y - 4})">{key}</g>')
        out.append(f'<text class="legend" x="{x + 28}" y="{y}">{escape(label)}</text>')
    return out


def _line_key(model: str) -> str:
    return f'<line class="line m-{model}" x1="0" x2="22" y1="0" y2="0"/>'


def calibration_svg(chart_id: str, curves: dict[str, dict], set_name: str) -> Markup:
    """Reliability diagram: predicted positive probability against the observed share positive."""
    right, bottom = _WIDTH - _RIGHT, _HEIGHT - _BOTTOM

    def px(value: float) -> float:
        return _LEFT + value * (right - _LEFT)

    def py(value: float) -> float:
        return bottom - value * (bottom - _TOP)

    steps = [0, 0.25, 0.5, 0.75, 1]
    body = _axes(
        [(px(v), f"{v:g}") for v in steps],
        [(py(v), f"{v:g}") for v in steps],
        "Predicted probability of positive",
        "Share actually positive",
    )
    body.append(f'<line class="diagonal" x1="{px(0)}" y1="{py(0)}" x2="{px(1)}" y2="{py(1)}"/>')
    drawn = []
    for model, curve in curves.items():
        predicted, observed = curve.get("prob_pred") or [], curve.get("prob_true") or []
        points = [(px(p), py(t)) for p, t in zip(predicted, observed, strict=False) if p is not None and t is not None]
        if points:
            body += _series(model, points)
            drawn.append(model)
    body += _legend([(_line_key(m), DISPLAY_NAMES.get(m, m)) for m in drawn], _LEFT + 10, _TOP + 16)
    description = "; ".join(
        f"{DISPLAY_NAMES.get(m, m)}: "
        + ", ".join(
            f"{p:.2f} predicted → {t:.2f} observed"
            for p, t in zip(curves[m].get("prob_pred") or [], curves[m].get("prob_true") or [], strict=False)
            if p is not None and t is not None
        )
        for m in drawn
    )
    return _chart(chart_id, f"Calibration on the {set_name} set", description or "No calibration data.", body)


def learning_curve_svg(chart_id: str, curve: dict) -> Markup:
    """Mean evaluation accuracy against the number of training examples (``queries.about.learning_curve``):
    a line per model with, at each point, a bar of one standard deviation either side over the
    seeds and a tooltip with the figures; the single points of ``curve["markers"]`` beside them.
    The legend goes under the plot, where its long labels fit."""
    sizes, markers = curve["sizes"], curve["markers"]
    models = [m for m in MODELS if any(mean is not None for mean in curve[m]["mean"])]
    if not sizes or not (models or markers):
        return Markup("")
    right, bottom = _WIDTH - _RIGHT, _HEIGHT - _BOTTOM
    every_size = sizes + [p["size"] for p in markers]
    low, high = min(every_size), max(every_size)
    logarithmic = high / low >= 10

    def px(size: float) -> float:
        if high == low:
            return (_LEFT + right) / 2
        if logarithmic:
            fraction = (math.log(size) - math.log(low)) / (math.log(high) - math.log(low))
        else:
            fraction = (size - low) / (high - low)
        return _LEFT + 12 + fraction * (right - _LEFT - 24)

    lowest = [
        mean - (std or 0) for m in models for mean, std in zip(curve[m]["mean"], curve[m]["std"]) if mean is not None
    ]
    floor = max(0.0, min(0.5, math.floor(min(lowest + [p["accuracy"] for p in markers]) * 10) / 10))

    def py(value: float) -> float:
        return bottom - (min(1.0, max(floor, value)) - floor) / (1 - floor) * (bottom - _TOP)

    y_steps = [floor + i * (1 - floor) / 5 for i in range(6)]
    body = _axes(
        [(px(s), f"{s:,}") for s in sizes],
        [(py(v), f"{v:.0%}") for v in y_steps],
        "Training examples" + (" (log scale)" if logarithmic else ""),
        "Accuracy",
    )
    for index, model in enumerate(models):
        dodge = (index - (len(models) - 1) / 2) * 6  # the models' bars side by side, not on top of each other
        body += _curve_series(model, curve, px, py, dodge)
    for index, marker in enumerate(markers):
        x, y = px(marker["size"]) + 9 * (index + 1), py(marker["accuracy"])
        body.append(_point(f"{marker['label']}: {marker['accuracy']:.3f}, one run", _marker(marker["kind"], x, y)))
    legend = _curve_legend(curve, models)
    body += _legend(legend, _LEFT - 30, _HEIGHT + 12)
    height = _HEIGHT + len(legend) * _LEGEND_ROW
    return _chart(chart_id, "Learning curve", _curve_description(curve, models), body, height)


def _curve_legend(curve: dict, models: list[str]) -> list[tuple[str, str]]:
    legend = [(_line_key(m) + _marker(m, 11, 0), DISPLAY_NAMES[m]) for m in models]
    legend += [(_marker(p["kind"], 11, 0), p["label"]) for p in curve["markers"]]
    if any(std is not None for m in models for std in curve[m]["std"]):
        legend.append((_error_bar(11, 7, -7), f"one standard deviation either side, {curve['seeds']} seeds"))
    return legend


def _curve_description(curve: dict, models: list[str]) -> str:
    lines = [
        f"{DISPLAY_NAMES[m]}: "
        + ", ".join(
            f"{size:,} labels {point_text(mean, std)}"
            for size, mean, std in zip(curve["sizes"], curve[m]["mean"], curve[m]["std"])
            if mean is not None
        )
        for m in models
    ]
    markers = [f"{p['label']}: {p['accuracy']:.3f} at {p['size']:,} labels" for p in curve["markers"]]
    return "; ".join(lines + markers)


def _curve_series(model: str, curve: dict, px: Callable, py: Callable, dodge: float) -> list[str]:
    """A model's line of the learning curve, ``dodge`` px aside, and at each point its bar and
    marker with a tooltip."""
    points = [
        None if mean is None else (px(size) + dodge, py(mean))
        for size, mean in zip(curve["sizes"], curve[model]["mean"])
    ]
    out = _lines(model, points)
    for size, point, mean, std, runs in zip(
        curve["sizes"], points, curve[model]["mean"], curve[model]["std"], curve[model]["runs"]
    ):
        if point is None:
            continue
        x, y = point
        bar = "" if std is None else _error_bar(x, py(mean - std), py(mean + std), model)
        seeds = f"{len(runs)} seed{'' if len(runs) == 1 else 's'}"
        title = f"{DISPLAY_NAMES[model]} at {size:,} labels: {point_text(mean, std)} over {seeds}"
        out.append(_point(title, bar, _marker(model, x, y)))
    return out


def _error_bar(x: float, y_low: float, y_high: float, model: str | None = None) -> str:
    """A vertical bar from ``y_low`` to ``y_high`` with a cap at each end, in ``model``'s colour (else ink)."""
    colour = f" m-{model}" if model else ""
    return (
        f'<path class="error{colour}" '
        f'd="M{x - 3:.1f},{y_low:.1f}h6M{x:.1f},{y_low:.1f}V{y_high:.1f}M{x - 3:.1f},{y_high:.1f}h6"/>'
    )


def _point(title: str, *shapes: str) -> str:
    """Shapes that draw one point, with its figures as the tooltip."""
    return f'<g class="point"><title>{escape(title)}</title>{"".join(shapes)}</g>'


def histogram_svg(chart_id: str, title: str, x_label: str, bins: list[float], counts: dict[str, list[int]]) -> Markup:
    """Distributions side by side: for each bin (``bins`` are its edges), each model's share of its values.

    No legend inside: bars may fill any corner, so the page names the colours once above the charts.
    """
    shares = {model: [c / sum(values) for c in values] for model, values in counts.items() if sum(values)}
    if not shares:
        return Markup("")
    right, bottom = _WIDTH - _RIGHT, _HEIGHT - _BOTTOM
    high = max(0.2, math.ceil(max(max(values) for values in shares.values()) * 5) / 5)

    def px(value: float) -> float:
        return _LEFT + (value - bins[0]) / (bins[-1] - bins[0]) * (right - _LEFT)

    def py(share: float) -> float:
        return bottom - share / high * (bottom - _TOP)

    body = _axes(
        [(px(edge), f"{edge:g}") for edge in bins[::2]],
        [(py(high * i / 4), f"{high * i / 4:.0%}") for i in range(5)],
        x_label,
        "Share of explanations",
    )
    width = (px(bins[1]) - px(bins[0]) - 2) / len(shares)
    for offset, (model, values) in enumerate(shares.items()):
        for index, share in enumerate(values):
            if share:
                x = px(bins[index]) + 1 + offset * width
                body.append(
                    f'<rect class="bar m-{model}" x="{x:.1f}" y="{py(share):.1f}" '
                    f'width="{width:.1f}" height="{bottom - py(share):.1f}"/>'
                )
    description = "; ".join(
        f"{DISPLAY_NAMES.get(model, model)}: "
        + ", ".join(
            f"{bins[i]:g} to {bins[i + 1]:g}: {share:.0%}" for i, share in enumerate(values) if share
        )
        for model, values in shares.items()
    )
    return _chart(chart_id, title, description, body)
