"""The pieces that the pages repeat: a title's card on the dashboard, and a review as the
pages show it (gold label, each model's prediction, the note on a weak explanation and the
highlighted text, in one column per model).

Built in Python rather than as Jinja macros because a page draws dozens of them: a macro
call and each dict attribute it reads cost microseconds that added up to most of the
page's time (``scripts/bench_pages.py``). The templates call these functions as globals
(``app.web.templating``); everything from the database or a user goes through
``markupsafe.escape``.
"""

from markupsafe import Markup, escape

from app.web.render import Pieces, cut, highlight, model_bars, number, percent
from app.web.view import Items, View
from model.names import DISPLAY_NAMES, TEACHER, short_label


def meta_line(movie: dict) -> Markup:
    """Year, running time and rating, those known."""
    parts = [
        str(movie.get("year") or ""),
        f"{movie['runtime_min']} min" if movie.get("runtime_min") else "",
        movie.get("rated") or "",
    ]
    known = " · ".join(part for part in parts if part)
    return Markup(f'<p class="meta">{escape(known)}</p>' if known else "")


def title_card(t: dict, view: View, items: Items) -> Markup:
    """An item on the dashboard: name, the facts known, plot, and its reviews' bars as the view asks."""
    link = escape(f"{items.url(t['title_id'])}{view.link_query}")
    plot = f'\n    <p class="plot">{escape(t["plot"])}</p>' if t.get("plot") else ""
    foot = model_bars(t, view) if view.analyze else f'<p class="count">{number(t["reviews"])} reviews</p>'
    return Markup(
        f'<li class="card" data-title-id="{escape(t["title_id"])}">\n'
        f'    <h2><a href="{link}">{escape(t["title"])}</a></h2>\n    {meta_line(t)}{plot}\n'
        f'    <div class="card-foot">\n      {foot}\n    </div>\n  </li>'
    )


def label_badge(label: str) -> str:
    return f'<span class="badge {short_label(label)}">{escape(label.capitalize())}</span>'


def label_text(label: str) -> str:
    return f'<span class="label-text {short_label(label)}">{escape(label)}</span>'


# After a prediction, by ``correct``: None (accuracy off, or no gold label) says nothing.
_CORRECTNESS = {False: ' <strong class="wrong-mark">✗ wrong</strong>', True: ' <span class="right-mark">✓ right</span>'}
# Said of a prediction that BERT's teacher made (app.web.analysis: a text of one sentence).
_READ_BY = {TEACHER: '<br><span class="read-by">Read whole by the larger model BERT learnt from, as is every text of one sentence.</span>'}


def prediction(p: dict) -> Markup:
    """A model's prediction for one review: label, confidence, and right or wrong with accuracy on."""
    return Markup(
        f'<p class="prediction">{label_badge(p["label"])} <span class="confidence">{percent(p["confidence"])} confident</span>'
        f'{_CORRECTNESS.get(p.get("correct"), "")}{_READ_BY.get(p.get("read_by"), "")}</p>'
    )


def weak_note(trust: dict) -> Markup:
    """Said above a model's highlights when its explanation is weak; the highlights are hatched (CSS .weak)."""
    if not trust.get("weak"):
        return Markup("")
    reasons = escape("; ".join(trust["reasons"]))
    return Markup(
        f'\n<p class="weak-note"><strong class="weak-mark">Weak explanation</strong>: {reasons}. '
        "Read its highlights as a rough guide.</p>"
    )


def explanation_note(item: dict, model: str) -> Markup:
    """Said above ``model``'s highlights of ``item``: that they are still being computed (its prediction is in,
    the build has not explained the review yet), or that its explanation is weak (``weak_note``)."""
    if model in item.get("highlights_pending", ()):
        return Markup(
            f'\n<p class="highlights-pending">{escape(DISPLAY_NAMES[model])}\'s highlights of this review are still '
            "being computed: the build has not explained it yet.</p>"
        )
    return weak_note(item["trust"].get(model, {}))


def highlighted_text(item: dict, model: str, pieces: Pieces) -> Markup:
    """The review's text (``cut``) with ``model``'s sentence highlights, hatched when its explanation is weak."""
    trust = item["trust"].get(model, {})
    weak = " weak" if trust.get("weak") else ""
    return Markup(f'<div class="text{weak}">{highlight(pieces, model, trust.get("target"))}</div>')


def model_column(
    model: str, item: dict, pieces: Pieces, heading: str = "h4", extra: str = "", pending: bool = False
) -> Markup:
    """One model's prediction and sentence highlights of ``item`` (its text ``cut``), then ``extra`` (HTML);
    for a model still ``pending`` (the build has not made it ready), the plain text and a line saying so."""
    name = DISPLAY_NAMES[model]
    if pending:
        return Markup(
            f'\n<section class="model-col is-pending" data-model="{model}" aria-label="{name}">\n'
            f'  <{heading} class="model-name">{name}</{heading}>\n'
            f'  <p class="prediction pending">Pending: the build has not finished {name} yet</p>'
            f'\n  <div class="text">{highlight(pieces, None)}</div>\n</section>'
        )
    predicted = item["predictions"].get(model)
    said = prediction(predicted) if predicted else '<p class="prediction">No prediction</p>'
    return Markup(
        f'\n<section class="model-col" data-model="{model}" aria-label="{name}">\n'
        f'  <{heading} class="model-name">{name}</{heading}>\n  {said}{explanation_note(item, model)}'
        f"\n  {highlighted_text(item, model, pieces)}{extra}\n</section>"
    )


def gold(item: dict, items: Items) -> Markup:
    """The review's gold label (and its rating: IMDB's stars out of 10, a file's on the scale of its own), and
    the label its writer gave, which is not counted."""
    if item.get("gold"):
        stars = ""
        if item.get("rating"):
            stars = f" ({item['rating']}/10 stars)" if items.imdb else f" (rated {escape(item['rating'])})"
        known = f"{label_text(item['gold'])}{stars}"
    else:
        known = "unknown"
    writer = ""
    if item.get("user_label"):
        writer = f" · its writer says {label_text(item['user_label'])} (not counted)"
    return Markup(f'<span class="gold">Gold label: {known}{writer}</span>')


def review_card(r: dict, view: View, items: Items) -> Markup:
    """One review on a title page, as ``view`` asks: plain text, the main model's highlights,
    or both models side by side."""
    classes = "review" + (" is-wrong" if r.get("wrong") else "") + (" is-disagreement" if r.get("disagree") else "")
    link = escape(view.link(f"/reviews/{r['id']}"))
    head = f'<h3 id="r{r["id"]}-h"><a href="{link}">Review {r["id"]}</a></h3>'
    if r["source"] == "user":
        head += ' <span class="tag">posted by a user</span>'
    if view.show_accuracy:
        head += f" {gold(r, items)}"
    if view.show_compare and r.get("disagree"):
        head += ' <strong class="disagree-mark">⇄ models disagree</strong>'
    if view.show_compare:
        pieces = cut(r["text"], r["sentences"])  # once for both columns
        columns = (model_column(model, r, pieces, pending=model in view.pending) for model in view.models)
        body = '<div class="compare">' + "".join(columns) + "\n  </div>"
    elif view.analyze:
        predicted = r["predictions"].get(view.main)
        said = prediction(predicted) if predicted else '<p class="prediction">No prediction yet</p>'
        body = f"{said}{explanation_note(r, view.main)}\n  {highlighted_text(r, view.main, cut(r['text'], r['sentences']))}"
    else:
        body = f'<div class="text">{escape(r["text"])}</div>'
    return Markup(
        f'<article class="{classes}" id="r{r["id"]}" aria-labelledby="r{r["id"]}-h">\n'
        f'  <header class="review-head">\n    {head}\n  </header>\n  {body}\n</article>'
    )
