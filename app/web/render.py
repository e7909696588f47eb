"""HTML fragments built on the server: highlighted review text, and each model's bar of
predictions with its ticks (the charts of the about page are ``app.web.charts``).

Everything that comes from the database or a user goes through ``markupsafe.escape``;
the fragments are returned as ``Markup`` so that the templates insert them as they are.
Colours come from CSS classes (``static/textflix.css``), intensities from ``--a``: a
weight's share of ``model.quality.FULL_COLOUR_WEIGHT``, one scale for every review and
model, so the same weight looks the same everywhere.
"""

import math
import re
from collections import Counter

from jinja2 import Undefined
from markupsafe import Markup, escape

from app.web.view import View
from model.names import DISPLAY_NAMES, NEGATIVE, POSITIVE, WORD_LEVEL_MODEL, short_label
from model.quality import FULL_COLOUR_WEIGHT, LOG_ODDS

MIN_ALPHA = 0.04  # weaker highlights are not drawn
TICK_COLUMNS = 400  # most wrong-review ticks under a bar: 2 px each on a bar 800 px wide
# The column drawings of big catalogues' ticks, by the ticks list they were drawn from (kept with
# it, so that its id is not reused): that list is the same object from request to request while
# the catalogue is unchanged (``app.web.catalogue_cache``), and drawing it costs milliseconds.
_drawn: dict[int, tuple[list, Markup]] = {}
KEPT_DRAWINGS = 16


def percent(value: float | None, digits: int = 0) -> str:
    return "–" if value is None or not math.isfinite(value) else f"{value:.{digits}%}"


def _full_colour(target: str | None) -> float:
    """The weight drawn in full colour in the space ``target`` (log-odds by default)."""
    return FULL_COLOUR_WEIGHT.get(target, FULL_COLOUR_WEIGHT[LOG_ODDS])


def _what(model: str | None, level: str) -> str:
    """The start of a highlight's tooltip, escaped: "BERT sentence weight"."""
    return str(escape(f"{DISPLAY_NAMES.get(model, model)} {level} weight"))


_SIDES = {True: ("pos", POSITIVE), False: ("neg", NEGATIVE)}  # a weight > 0: its class and label


def _mark(escaped: str, weight: float | None, full_colour: float, what: str) -> str:
    """``escaped`` text in a highlight of strength |weight| / ``full_colour``, unless that is too faint to draw."""
    strength = 0.0 if weight is None else abs(weight) / full_colour
    if strength < MIN_ALPHA:
        return escaped
    side, toward = _SIDES[weight > 0]
    return (
        f'<span class="hl {side}" style="--a:{min(1.0, strength):.2f}" '
        f'title="{what} {weight:+.3f} toward {toward}">{escaped}</span>'
    )


Pieces = list[tuple[str, dict | None]]


def cut(text: str, sentences: list[dict]) -> Pieces:
    """The text cut at its sentences' spans, each piece escaped and paired with its sentence
    (None between sentences); where the spans do not fit the text, the sentences themselves.
    Cut once, a text is highlighted for each model (``highlight``)."""
    pieces = _pieces(text, sorted(sentences, key=lambda s: s.get("start") or 0))
    if pieces is None:
        pieces = []
        for sentence in sentences:
            pieces += [(sentence["text"], sentence), (" ", None)]
    return [(piece if piece.isspace() else str(escape(piece)), sentence) for piece, sentence in pieces]


def _pieces(text: str, sentences: list[dict]) -> Pieces | None:
    """The text cut at the sentence spans, or None if the spans do not fit the text."""
    pieces: Pieces = []
    position = 0
    for sentence in sentences:
        start, end = sentence.get("start"), sentence.get("end")
        if start is None or end is None or not position <= start <= end <= len(text):
            return None
        if start > position:
            pieces.append((text[position:start], None))
        pieces.append((text[start:end], sentence))
        position = end
    if position < len(text):
        pieces.append((text[position:], None))
    return pieces


def highlight(pieces: Pieces, model: str | None, target: str | None = None) -> Markup:
    """A review text, ``cut`` into its sentences, with each sentence's background coloured by
    ``model``'s LIME weight, and its strongest words marked where it has ``model``'s word shares
    (``words``, as ``word_marks``).

    ``target`` is the space of the weights (``Explanation.target``); green pushes toward
    positive, orange toward negative. Without a model, the plain escaped text.
    """
    if model is None:
        return Markup("".join(piece for piece, _ in pieces))
    full_colour, what = _full_colour(target), _what(model, "sentence")
    return Markup(
        "".join(
            _mark(_with_words(piece, sentence, model), sentence["weights"].get(model), full_colour, what)
            if sentence
            else piece
            for piece, sentence in pieces
        )
    )


def sentence_mark(sentence: dict, model: str, target: str | None = None) -> Markup:
    """One sentence (``text`` and ``weight``; ``start`` and ``words`` where its words are known) highlighted alone."""
    inner = _with_words(str(escape(sentence["text"])), sentence, model)
    return Markup(_mark(inner, sentence["weight"], _full_colour(target), _what(model, "sentence")))


# A sentence's strongest words: the fewest, largest |share| first, that hold MARKED_SHARE of its words' total
# |share|, at most MARKED_WORDS (in a long sentence whose shares are spread, a few marks still point somewhere).
MARKED_SHARE = 0.5
MARKED_WORDS = 4
def strongest_words(words: list[dict]) -> list[dict]:
    """The words of one sentence (each with its ``share``) that ``word_marks`` marks, strongest first."""
    total = sum(abs(word["share"]) for word in words)
    marked, held = [], 0.0
    for word in sorted(words, key=lambda word: -abs(word["share"])):
        if held >= MARKED_SHARE * total or len(marked) == MARKED_WORDS or not word["share"]:
            break
        marked.append(word)
        held += abs(word["share"])
    return marked


def _with_words(escaped: str, sentence: dict, model: str) -> str:
    """``escaped`` (the sentence's text) with its strongest words marked, where it has ``model``'s words."""
    words = (sentence.get("words") or {}).get(model)
    return word_marks(sentence["text"], sentence["start"], words, model) if words else escaped


def word_marks(text: str, start: int, words: list[dict], model: str) -> str:
    """``text`` (a sentence starting at ``start`` in its review), escaped, with its ``strongest_words`` marked by
    sign: each ``words`` entry has ``start`` and ``end`` (character offsets in the review) and ``share`` (of the
    log-odds of positive); a mark's title and label give its share and the sentence's, which its words add up to.
    Words whose spans do not fit the text, or overlap, leave it unmarked."""
    spans = [(word["start"] - start, word["end"] - start) for word in words]
    if any(not 0 <= left <= right <= len(text) for left, right in spans) or any(
        right > left for (_, right), (left, _) in zip(spans, spans[1:])
    ):
        return str(escape(text))
    sentence_share = sum(word["share"] for word in words)
    name = escape(DISPLAY_NAMES.get(model, model))
    parts, position = [], 0
    for word in sorted(strongest_words(words), key=lambda word: word["start"]):
        left, right = word["start"] - start, word["end"] - start
        side, toward = _SIDES[word["share"] > 0]
        said = f"{name} word share {word['share']:+.3f} toward {toward}, of the sentence's {sentence_share:+.3f}"
        parts.append(str(escape(text[position:left])))
        parts.append(
            f'<mark class="word {side}" title="{said}" aria-label="{escape(text[left:right])}: {said}">'
            f"{escape(text[left:right])}</mark>"
        )
        position = right
    parts.append(str(escape(text[position:])))
    return "".join(parts)


def words_legend(model: str, sentences: list[dict], log_odds: float | None, start: float | None = None) -> Markup:
    """What ``model``'s word marks in ``sentences`` mean, and that their numbers add up: each sentence's words to
    its share, and the sentences' shares from ``start`` (the model's reading of the empty text) to ``log_odds``.
    Without ``start`` (a stored review's), it is what the log-odds hold beyond the shares: for an exact model, that
    reading (0 when its calibration's offset is added per sentence), up to the words' residual."""
    name = escape(DISPLAY_NAMES.get(model, model))
    said = (
        f"{name}'s words: in each sentence, the strongest words (at most {MARKED_WORDS}, those holding half its "
        "words' weight) are marked, solid green underline toward positive, wavy orange toward negative; a mark's "
        "label gives its share. A sentence's words add up to its share of the log-odds"
    )
    shares = [sum(word["share"] for word in (s.get("words") or {}).get(model, ())) for s in sentences]
    if log_odds is not None and all((s.get("words") or {}).get(model) for s in sentences) and shares:
        start = log_odds - sum(shares) if start is None else start
        said += (
            f", and the {len(shares)} sentence{'' if len(shares) == 1 else 's'}' shares, {sum(shares):+.3f} in all, "
            f"from {name}'s start, {start:+.3f} (its reading of the empty text), add up to its log-odds of positive, "
            f"{log_odds:+.3f}"
        )
    return Markup(f'<p class="words-legend">{said}.</p>')


def word_highlight(text: str, words: list[dict], target: str | None = None) -> Markup:
    """The text with every case-insensitive, whole-word occurrence of each weighted word marked."""
    weights = {entry["word"].lower(): entry["weight"] for entry in words if entry["word"]}
    if not weights:
        return Markup(escape(text))
    pattern = re.compile(
        r"(?<!\w)(?:" + "|".join(re.escape(word) for word in sorted(weights, key=len, reverse=True)) + r")(?!\w)",
        re.IGNORECASE,
    )
    full_colour, what = _full_colour(target), _what(WORD_LEVEL_MODEL, "word")
    parts, position = [], 0
    for match in pattern.finditer(text):
        parts.append(str(escape(text[position : match.start()])))
        parts.append(_mark(str(escape(match.group(0))), weights.get(match.group(0).lower()), full_colour, what))
        position = match.end()
    parts.append(str(escape(text[position:])))
    return Markup("".join(parts))


def underlined(text: str, start: int, end: int, passages: list[dict]) -> str:
    """``text[start:end]`` escaped, with the parts inside ``passages`` (character spans of ``text``,
    in order) underlined as the annotators' evidence."""
    parts, position = [], start
    for passage in passages:
        left, right = max(passage["start"], position), min(passage["end"], end)
        if left >= right:
            continue
        parts.append(str(escape(text[position:left])))
        parts.append(f'<u class="evidence">{escape(text[left:right])}</u>')
        position = right
    parts.append(str(escape(text[position:end])))
    return "".join(parts)


def evidence_highlight(text: str, sentences: list[dict], passages: list[dict], model: str, top=()) -> Markup:
    """A review text with each sentence coloured by ``model``'s weight (in log-odds, as ``highlight``)
    and the annotators' ``passages`` underlined; the sentences at the positions ``top`` are outlined."""
    full_colour, what, top = _full_colour(LOG_ODDS), _what(model, "sentence"), set(top)
    parts, position = [], 0
    for sentence in sentences:
        parts.append(str(escape(text[position : sentence["start"]])))
        marked = _mark(underlined(text, sentence["start"], sentence["end"], passages), sentence["weights"].get(model), full_colour, what)
        parts.append(f'<span class="top-sentence">{marked}</span>' if sentence["position"] in top else marked)
        position = sentence["end"]
    parts.append(str(escape(text[position:])))
    return Markup("".join(parts))


# --- bars --------------------------------------------------------------------------------


def number(value: int | None | Undefined) -> str:
    """``value`` with thousands separators; a dash for a figure not known: None, or missing from the run
    record (its counts are empty while a new build's first step runs)."""
    return "–" if value is None or isinstance(value, Undefined) else f"{value:,}"


def model_bars(summary: dict, view: View, noun: str = "reviews") -> Markup:
    """The bar of each model the view shows (``summary["models"]``, as ``queries.summaries.in_view`` makes
    them), named when it shows both."""
    named = view.show_compare or bool(view.pending)  # while one is pending, the bar says whose it is
    return Markup(
        "".join(
            pending_bar(model) if model in view.pending else model_bar(summary["models"][model], view, noun, named)
            for model in view.models
        )
    )


def pending_bar(model: str) -> str:
    """The place of the bar of a model the build has not made ready yet (``app.web.build_state``)."""
    name = escape(DISPLAY_NAMES[model])
    return (
        f'<div class="model-bar is-pending" data-model="{escape(model)}"><p class="model-name">{name}</p>\n'
        f'  <p class="pending">Pending: not ready yet</p>\n</div>'
    )


def model_bar(s: dict, view: View, noun: str = "reviews", named: bool = False) -> str:
    """One model's sentiment over some reviews: bar, and with accuracy on, the wrong-review
    ticks and the accuracy line."""
    name = f'<p class="model-name">{escape(s["name"])}</p>' if named else ""
    text = f'{number(s["reviews"])} {escape(noun)} · {number(s["positive"])} positive ({percent(s["positive_share"])})'
    accuracy = ""
    if view.show_accuracy:
        said = "No gold labels" if s["accuracy"] is None else f'{percent(s["accuracy"])} accuracy'
        if s["accuracy"] is not None and s["wrong"]:
            said += f' ({number(s["wrong"])} wrong)'
        if s["user_labeled"]:
            said += (
                f' · {number(s["user_labeled"])} labelled by their writers, not counted ({number(s["user_agree"])} agree)'
            )
        accuracy = f'\n  {ticks_svg(s)}\n  <p class="accuracy-text">{said}</p>'
    return (
        f'<div class="model-bar" data-model="{escape(s["model"])}">{name}\n  <div class="bar">{bar_svg(s)}'
        f'<span class="bar-text">{text}</span>\n  </div>{accuracy}\n</div>'
    )


def bar_svg(summary: dict) -> Markup:
    """A model's reviews as one bar, ordered by positive probability (see queries.summaries.model_summary)."""
    total = summary["scored"]
    if not total:
        return Markup("")
    rects, x = [], 0
    for run in summary["bar"]:
        rects.append(f'<rect class="{run["level"]}" x="{x}" y="0" width="{run["count"]}" height="1"/>')
        x += run["count"]
    return Markup(
        f'<svg class="bar-fill" viewBox="0 0 {total} 1" preserveAspectRatio="none" '
        f'shape-rendering="crispEdges" aria-hidden="true" focusable="false">{"".join(rects)}</svg>'
    )


def ticks_svg(summary: dict) -> Markup:
    """A tick under the bar at each wrong review, coloured by its gold label. Over more than
    ``TICK_COLUMNS`` reviews (a big catalogue, where 2 px ticks would merge into a band) the bar
    is cut into that many columns, and a column's tick is as opaque as its share of the most
    wrong reviews any column has."""
    total = summary["scored"]
    if not total:
        return Markup("")
    ticks = summary.get("ticks", ())
    if total <= TICK_COLUMNS:
        return _ticks_svg(total, "".join(_tick(tick["gold"], tick["index"] + 0.5) for tick in ticks))
    found = _drawn.get(id(ticks))
    if found is not None and found[0] is ticks:
        return found[1]
    width = total / TICK_COLUMNS
    columns = Counter((int(tick["index"] / width), tick["gold"]) for tick in ticks)
    most = max(columns.values(), default=1)
    drawing = _ticks_svg(
        total, "".join(_tick(gold, (column + 0.5) * width, count / most) for (column, gold), count in sorted(columns.items()))
    )
    if len(_drawn) >= KEPT_DRAWINGS:
        _drawn.clear()
    _drawn[id(ticks)] = (ticks, drawing)
    return drawing


def _ticks_svg(total: int, lines: str) -> Markup:
    return Markup(
        f'<svg class="ticks" viewBox="0 0 {total} 1" preserveAspectRatio="none" '
        f'aria-hidden="true" focusable="false">{lines}</svg>'
    )


def _tick(gold: str, x: float, opacity: float = 1.0) -> str:
    shade = "" if opacity == 1.0 else f' stroke-opacity="{max(0.15, opacity):.2f}"'
    return f'<line class="tick gold-{short_label(gold)}" x1="{x:g}" x2="{x:g}" y1="0" y2="1"{shade}/>'
