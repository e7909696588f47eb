"""Browser tests: the pages in Chromium (Playwright, sync API) against a live server.

Needs Debian's chromium (``apt-get install chromium``) at /usr/bin/chromium or at
``$TEXTFLIX_CHROMIUM``; without it these tests are skipped. Screenshots of every page,
with Analyze off and on, at desktop and phone width, go to test-artifacts/screenshots.

Over 400 lines: a test per page or control that only a browser can check.
"""

import asyncio
import os
import shutil
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from app.settings import Settings
from app.web.deps import database_engine
from app.web.main import create_app
from app.web.ready_analyzer import ReadyAnalyzer
from tests.conftest import serve_in_thread
from tests.web_fixtures import (  # noqa: F401
    DISTILL_RUN,
    PENDING_RUN,
    RUN,
    XSS_IMG,
    XSS_SCRIPT,
    FakeAnalyzer,
    add_word_shares,
    build_half_explained_database,
    build_web_database,
    labeled,
    set_run,
    stand_in_models,
    use_analyzer,
    web_database,
    web_facts,
    wrong,
)

CHROMIUM = Path(os.environ.get("TEXTFLIX_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SCREENSHOTS = Path(__file__).resolve().parent.parent / "test-artifacts" / "screenshots"
DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 360, "height": 740}

sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not CHROMIUM.exists(),
        reason=f"Chromium is not installed at {CHROMIUM} (apt-get install chromium, or set TEXTFLIX_CHROMIUM)",
    ),
]


@contextmanager
def served_with(web_database: str, analyzer):
    """The app on a free localhost port, in a thread, with ``analyzer`` for /analyze; yields its URL."""
    app = create_app(Settings(database_url=web_database))
    use_analyzer(app, analyzer)
    with serve_in_thread(app) as url:
        yield url


@pytest.fixture(scope="module")
def live_server(web_database):
    """The app with a stand-in analyzer for /analyze."""
    with served_with(web_database, FakeAnalyzer()) as url:
        yield url


@pytest.fixture(scope="module")
def browser(request):
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield browser
        browser.close()
    plugins = request.config.pluginmanager
    reporter, capture = plugins.get_plugin("terminalreporter"), plugins.get_plugin("capturemanager")
    if reporter is not None and capture is not None:
        with capture.global_and_fixture_disabled():
            reporter.write_line(f"\nBrowser screenshots: {SCREENSHOTS}")


def _page(browser, live_server, viewport):
    """A page that records every request and fails on script dialogs and errors."""
    context = browser.new_context(viewport=viewport, base_url=live_server)
    page = context.new_page()
    page.set_default_timeout(15_000)
    page.requests, page.problems = [], []
    page.on("request", lambda req: page.requests.append(req.url))
    page.on("dialog", lambda dialog: (page.problems.append(f"dialog: {dialog.message}"), dialog.dismiss()))
    page.on("pageerror", lambda error: page.problems.append(f"script error: {error}"))
    page.on("console", lambda message: csp_violation(message) and page.problems.append(f"CSP: {message.text}"))
    return context, page


def csp_violation(message) -> bool:
    """Whether a console message is Chromium refusing something the Content-Security-Policy forbids."""
    return message.type == "error" and "Content Security Policy" in message.text


def _check_and_close(context, page, live_server):
    try:
        assert page.problems == []
        foreign = [url for url in page.requests if not url.startswith(live_server + "/") and not url.startswith("data:")]
        assert foreign == [], "pages must load nothing from other hosts"
    finally:
        context.close()


@pytest.fixture
def page(browser, live_server):
    context, page = _page(browser, live_server, DESKTOP)
    yield page
    _check_and_close(context, page, live_server)


@pytest.fixture
def phone(browser, live_server):
    context, page = _page(browser, live_server, PHONE)
    yield page
    _check_and_close(context, page, live_server)


def shot(page, name: str) -> None:
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)


def shot_of(locator, name: str) -> None:
    """A screenshot of one part of a page, to look at it closely."""
    locator.screenshot(path=str(SCREENSHOTS / f"{name}.png"))


def switch(page, name):
    return page.locator(f"[data-switch={name}]")


def test_switches_on_the_dashboard(page, web_facts):
    reviews = web_facts["reviews"]
    page.goto("/")
    assert page.locator(".card").count() == len(web_facts["by_title"])
    body = page.locator("body").inner_text().lower()
    assert "positive" not in body and "negative" not in body and "accuracy (" not in body
    assert page.locator(".bar-fill, .badge, .ticks").count() == 0
    assert switch(page, "accuracy").get_attribute("aria-disabled") == "true"
    shot(page, "dashboard-analyze-off")

    switch(page, "analyze").click()
    page.wait_for_url("**/?analyze=1")
    assert switch(page, "analyze").get_attribute("aria-checked") == "true"
    assert page.locator("#summary .bar-fill").is_visible()
    assert page.locator(".card .bar-fill").count() == len(web_facts["by_title"])
    assert page.locator(".tick").count() == 0
    assert "positive" in page.locator("#summary").inner_text()

    switch(page, "accuracy").click()
    page.wait_for_url("**/?analyze=1&accuracy=1")
    assert page.locator("#summary .tick").count() == len(wrong(reviews))
    assert f"({len(wrong(reviews))} wrong)" in page.locator("#summary").inner_text()
    assert page.locator(".sortbar a", has_text="inaccurate").is_visible()
    shot(page, "dashboard-analyze-on")

    switch(page, "compare").click()
    page.wait_for_url("**/?analyze=1&accuracy=1&compare=1")
    for card in page.locator(".card").all():
        assert card.locator(".model-bar").count() == 2
    assert page.locator("#summary .model-name").all_inner_texts() == ["NB-SVM", "BERT"]
    shot(page, "dashboard-compare")

    # Analyze off hides everything but keeps the other switches for later
    switch(page, "analyze").click()
    page.wait_for_url("**/?accuracy=1&compare=1")
    assert page.locator(".bar-fill, .tick, .model-bar").count() == 0
    assert switch(page, "compare").get_attribute("aria-disabled") == "true"
    switch(page, "analyze").click()
    page.wait_for_url("**/?analyze=1&accuracy=1&compare=1")
    assert page.locator("#summary .model-bar").count() == 2

    page.locator(".sortbar a", has_text="inaccurate").click()
    page.wait_for_url("**sort=inaccurate")
    assert page.locator(".sortbar a[aria-current=true]").inner_text() == "inaccurate"


def test_switches_work_from_the_keyboard(page):
    page.goto("/")
    for _ in range(12):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.dataset.switch") == "analyze":
            break
    else:
        pytest.fail("Tab never reached the Analyze switch")
    outline = page.evaluate("getComputedStyle(document.activeElement).outlineStyle")
    assert outline not in ("", "none")
    assert switch(page, "analyze").inner_text() == "Analyze"  # a visible label
    page.keyboard.press("Enter")
    page.wait_for_url("**/?analyze=1")
    switch(page, "accuracy").focus()
    page.keyboard.press(" ")  # a switch answers the space bar too
    page.wait_for_url("**/?analyze=1&accuracy=1")


def test_title_page_comparison_is_two_columns(page, web_facts):
    reviews = web_facts["by_title"]["tt0100001"]
    page.goto("/movies/tt0100001")
    assert page.locator(".badge, .hl, .highlights").count() == 0
    shot(page, "title-analyze-off")
    switch(page, "analyze").click()
    switch(page, "compare").click()
    page.wait_for_url("**/movies/tt0100001?analyze=1&compare=1")
    comparisons = page.locator(".review .compare")
    assert comparisons.count() == len(reviews)
    for comparison in comparisons.all():
        left, right = comparison.locator(".model-col").all()
        assert left.locator(".model-name").inner_text() == "NB-SVM"
        assert right.locator(".model-name").inner_text() == "BERT"
        a, b = left.bounding_box(), right.bounding_box()
        assert a["x"] + a["width"] <= b["x"] and abs(a["y"] - b["y"]) < 2  # side by side
    disagreements = [r for r in reviews if r["bert"] != r["nbsvm"]]
    assert page.locator(".disagree-mark").count() == len(disagreements)
    shot(page, "title-compare")
    switch(page, "compare").click()
    page.wait_for_url("**/movies/tt0100001?analyze=1")
    assert page.locator(".model-col").count() == 0
    assert page.locator(".review .badge").count() == len(reviews)


def test_wrong_marks_equal_the_database(page, web_facts):
    reviews = web_facts["by_title"]["tt0100001"]
    page.goto("/movies/tt0100001?analyze=1&accuracy=1")
    assert page.locator(".wrong-mark").count() == len(wrong(reviews))
    assert page.locator(".gold").count() == len(reviews)
    assert page.locator(".highlights li").count() > 0
    shot(page, "title-analyze-on")
    page.locator(".filter a", has_text="wrong").click()
    page.wait_for_url("**wrong=1")
    assert page.locator("article.review").count() == len(wrong(reviews))
    assert page.locator(".wrong-mark").count() == len(wrong(reviews))
    switch(page, "accuracy").click()  # the filter needs accuracy: all reviews again
    assert page.locator("article.review").count() == len(reviews)
    assert page.locator(".wrong-mark").count() == 0


def test_markup_in_reviews_shows_as_text(page):
    for path in ("/movies/tt0100002?analyze=1&compare=1", "/reviews/8?analyze=1", "/reviews/8", "/movies/tt0100003"):
        page.goto(path)
        text = page.locator("main").inner_text()
        assert page.locator("main img, main script, main i, main b").count() == 0
        if "tt0100003" in path:
            assert "Café <i>Noir</i> & Friends" in text and "<b>tags</b>" in text
        else:
            assert XSS_SCRIPT in text and XSS_IMG in text


def test_review_disagreements_about_and_analyze(page, web_facts):
    for mode, query in (("off", ""), ("on", "?analyze=1&accuracy=1")):
        page.goto(f"/reviews/4{query}")
        shot(page, f"review-analyze-{mode}")
    assert page.locator(".model-col").count() == 2
    assert page.locator(".word-view .hl").count() >= 3
    # BERT's explanation of review 4 is weak: marked, hatched, and each model has its trust panel
    bert = page.locator(".model-col[data-model=bert]")
    assert bert.locator(".weak-mark").is_visible() and bert.locator(".text.weak .hl").count() == 2
    hatched = bert.locator(".text.weak .hl").first.evaluate("e => getComputedStyle(e).backgroundImage")
    assert hatched.startswith("repeating-linear-gradient")
    assert page.locator(".model-col .trust").count() == 2
    assert "Removing the top sentence" in bert.locator(".trust").inner_text()
    shot_of(page.locator("section[aria-labelledby=both-h]"), "review-trust-panels")

    page.goto("/disagreements")
    expected = [r for r in web_facts["reviews"] if r["bert"] != r["nbsvm"]]
    assert page.locator("article.disagreement").count() == len(expected)
    page.locator("article.disagreement details summary").first.click()
    assert page.locator("article.disagreement details .text").first.is_visible()
    shot(page, "disagreements")

    page.goto("/about")
    assert page.locator("svg.chart").count() == 3 + 4  # calibration and learning curve, four trust histograms
    trust = page.locator("section[aria-labelledby=trust-h]")
    assert trust.locator(".least-faithful a").count() == 2 * 5
    shot(page, "about")
    shot_of(trust, "about-trust")
    shot_of(page.locator("section[aria-labelledby=curve-h]"), "about-curve")

    page.goto("/analyze")
    shot(page, "analyze-form")
    page.fill("textarea", "A great cast and a great score. But the plot is boring. Not bad overall.")
    page.click("button[type=submit]")
    page.wait_for_selector(".result")
    assert page.locator(".result .model-col").count() == 2
    assert page.locator(".result .hl.pos").count() >= 1 and page.locator(".result .hl.neg").count() >= 1
    assert "A great cast" in page.locator("textarea").input_value()  # ready to edit and run again
    shot(page, "analyze-result")


@pytest.fixture(scope="module")
def token_server(web_database):
    """The app with an API token (the /analyze form asks for it) and the stand-in analyzer."""
    app = create_app(Settings(database_url=web_database, api_token="the-token"))
    use_analyzer(app, FakeAnalyzer())
    with serve_in_thread(app) as url:
        yield url


def test_a_review_refused_for_its_token_is_kept_for_the_form(browser, token_server):
    """With a wrong token the server answers before it reads the review, so it cannot give it back:
    the tab keeps it (static/textflix.js) and the form, loaded again, has it, until it is analysed."""
    context, page = _page(browser, token_server, DESKTOP)
    review = "A great cast and a great score.\nBut the plot is boring. Not bad overall."
    try:
        page.goto("/analyze")
        page.fill("#api-token", "not-the-token")
        page.fill("textarea", review)
        page.click("button[type=submit]")
        page.wait_for_selector("h1:has-text('Not allowed')")
        assert "The API token is not valid." in page.locator("main").inner_text()
        page.goto("/analyze?text=From+a+link.")  # a form a link fills in keeps what the link says
        assert page.locator("textarea").input_value() == "From a link."
        page.get_by_role("link", name="Try it").click()  # a new GET of the form, not a step back in history
        page.wait_for_url("**/analyze")
        assert page.locator("textarea").input_value() == review
        page.fill("#api-token", "the-token")
        page.click("button[type=submit]")
        page.wait_for_selector(".result")
        page.goto("/analyze")
        assert page.locator("textarea").input_value() == ""  # analysed: no longer kept
    finally:
        _check_and_close(context, page, token_server)


@pytest.fixture(scope="module")
def whatif_server(web_database, real_reviews):
    """The app with real models behind /analyze (tests/test_whatif.py's: a sentence-pooled MiniLM that hands
    one-sentence texts to a whole-text one, and NB-SVM)."""
    from app.web.analysis import analyzer_of
    from tests.test_whatif import served_models

    settings = Settings(database_url=web_database, lime_samples=32)
    app = create_app(settings)
    use_analyzer(app, analyzer_of(served_models(real_reviews), settings))
    with serve_in_thread(app) as url:
        yield url


def test_analyze_updates_as_you_type_with_the_waterfall_and_the_flip_set(browser, whatif_server):
    """Typed from the keyboard, the review is analysed after a pause, in place (no navigation, one request
    for a whole burst of keys); editing it moves the prediction and the waterfall; axe finds no violation."""
    from axe_playwright_python.sync_playwright import Axe

    from tests.test_whatif import REVIEW

    context, page = _page(browser, whatif_server, DESKTOP)
    posts, navigations = [], []
    page.on("request", lambda request: request.method == "POST" and posts.append(request.url))
    try:
        page.goto("/analyze")
        page.set_default_timeout(60_000)  # an explanation on a busy CPU
        page.on("framenavigated", lambda frame: frame == page.main_frame and navigations.append(frame.url))
        started = time.monotonic()
        assert page.locator(".live-note").get_attribute("aria-live") == "polite"
        page.locator("textarea").focus()
        page.keyboard.type(REVIEW, delay=5)  # 270 keys in about 1.5 s: one burst
        page.wait_for_selector(".result .waterfall")
        bert = page.locator(".result .model-col[data-model=bert]")
        assert bert.locator(".waterfall tbody tr").count() == 1 + 6  # the start and six sentences
        total = bert.locator(".waterfall tfoot td.num").inner_text()
        nbsvm = page.locator(".result .model-col[data-model=nbsvm]")
        assert "LIME's fit" in nbsvm.locator(".fit-note").inner_text() and "R²" in nbsvm.locator(".fit-note").inner_text()
        assert bert.locator(".flip-note").count() == 1 and nbsvm.locator(".flip-note").count() == 1
        assert page.locator(".live-note").inner_text().startswith("Updated.")
        shot(page, "analyze-live-1")

        page.keyboard.press("Control+A")
        shorter = REVIEW.rsplit(" Still,", 1)[0]  # the last two sentences removed
        page.keyboard.type(shorter, delay=5)
        page.wait_for_function(
            "() => document.querySelectorAll('.result .model-col[data-model=bert] .waterfall tbody tr').length === 5"
        )
        assert bert.locator(".waterfall tfoot td.num").inner_text() != total  # the prediction moved
        assert page.locator("textarea").input_value() == shorter
        # not a request per key (540 typed): one at most per pause and per 1.5 s (static/analyze.js's MIN_GAP_MS)
        assert navigations == [] and 2 <= len(posts) <= min(20, 1 + (time.monotonic() - started) / 1.5), posts
        shot(page, "analyze-live-2")

        results = Axe().run(page)
        assert results.violations_count == 0, results.generate_snapshot()
    finally:
        _check_and_close(context, page, whatif_server)


class SlowFirstAnalyzer(FakeAnalyzer):
    """The stand-in analyzer, two seconds slow on a text that says "slowly"."""

    async def analyze(self, texts: list[str], explain: bool, words: bool = False) -> list[dict]:
        if any("slowly" in text for text in texts):
            await asyncio.sleep(2)
        return await super().analyze(texts, explain)


@pytest.fixture(scope="module")
def slow_server(web_database):
    with served_with(web_database, SlowFirstAnalyzer()) as url:
        yield url


def test_a_live_answer_for_text_since_changed_is_dropped(browser, slow_server):
    """Typed on while a request is in flight: its answer, for the older text, never shows; the newest text's does."""
    context, page = _page(browser, slow_server, DESKTOP)
    try:
        page.goto("/analyze")
        page.evaluate(
            "() => { window.shown = []; new MutationObserver(() => { const r = document.querySelector('.result');"
            " if (r && !r.dataset.seen) { r.dataset.seen = '1'; window.shown.push(r.querySelectorAll('tbody tr').length); } })"
            ".observe(document.querySelector('main'), {childList: true, subtree: true}); }"
        )
        page.locator("textarea").focus()
        page.keyboard.type("A great cast, slowly paced.")
        page.wait_for_selector("form.is-busy")  # the slow request is in flight
        page.keyboard.type(" But the plot is boring. The score is good.")
        page.wait_for_function("() => window.shown.length > 0 && !document.querySelector('form.is-busy')", timeout=20_000)
        page.wait_for_timeout(500)
        assert page.evaluate("window.shown") == [3]  # only the newest text's three sentences were ever shown
    finally:
        _check_and_close(context, page, slow_server)


def test_a_live_refusal_is_said_in_place_and_keeps_the_text(browser, token_server):
    context, page = _page(browser, token_server, DESKTOP)
    try:
        page.goto("/analyze")
        page.fill("#api-token", "not-the-token")
        page.locator("textarea").focus()
        page.keyboard.type("A great cast. A boring plot.")
        page.wait_for_selector(".live-note.error")
        assert "The API token is not valid." in page.locator(".live-note").inner_text()
        assert page.locator("textarea").input_value() == "A great cast. A boring plot." and page.url.endswith("/analyze")
    finally:
        _check_and_close(context, page, token_server)


def test_the_analyze_form_still_posts_without_javascript(browser, whatif_server):
    context = browser.new_context(viewport=DESKTOP, base_url=whatif_server, java_script_enabled=False)
    page = context.new_page()
    try:
        page.goto("/analyze")
        page.fill("textarea", "A wonderful cast. The plot is dull and slow. I loved the ending.")
        page.click("button[type=submit]")
        page.wait_for_selector(".result .waterfall")  # drawn by the server
        assert page.locator(".result .model-col").count() == 2 and page.locator(".live-note").inner_text() == ""
    finally:
        context.close()


@pytest.fixture(scope="module")
def distill_server(tmp_path_factory):
    """The app on a database whose run record is a distill build's."""
    url = build_web_database(tmp_path_factory.mktemp("distill") / "textflix.db", DISTILL_RUN)
    with serve_in_thread(create_app(Settings(database_url=url))) as server:
        yield server


@pytest.fixture(params=[("desktop", DESKTOP), ("phone", PHONE)], ids=["desktop", "phone"])
def distill_page(request, browser, distill_server):
    name, viewport = request.param
    context, page = _page(browser, distill_server, viewport)
    page.width_name = name
    yield page
    _check_and_close(context, page, distill_server)


def test_learning_curve_with_error_bars_and_the_distilled_models(distill_page):
    page = distill_page
    page.goto("/about")
    curve = page.locator("section[aria-labelledby=curve-h]")
    tooltips = curve.locator("svg g.point > title").all_text_contents()
    assert len(tooltips) == 6 + 3 + 2  # NB-SVM at six sizes, BERT at three, the distilled model and its teacher
    assert "BERT at 200 labels: 0.812 ± 0.011 over 3 seeds" in tooltips
    assert curve.locator("svg path.error").count() == 6 + 3 + 1  # a bar per point of the curve, and the legend's
    assert curve.locator("svg .m-distill").count() == curve.locator("svg .m-teacher").count() == 2  # point, legend
    assert curve.locator("table.curve tbody tr").count() == 6
    assert curve.locator("table.curve tfoot th").all_inner_texts() == [
        "BERT, distilled (500 labels + 4,000 teacher labels)",
        "teacher (all-mpnet-base-v2)",
    ]
    widths = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
    assert widths[0] <= widths[1], f"/about scrolls sideways: {widths}"
    shot_of(curve, f"about-curve-distill-{page.width_name}")


# The length table with every figure beside accuracy (a build since issue 53): nine columns.
LENGTHS = {
    "bands": ["1", "2–3", "4–6", "7+"], "n": [2000, 4000, 5500, 1500], "majority_baseline": [0.747, 0.75, 0.74, 0.73],
    "nbsvm": [0.6, 0.66, 0.71, 0.78], "bert": [0.695, 0.762, 0.803, 0.81],
    "balanced_accuracy": {"nbsvm": [0.58, 0.64, 0.7, 0.77], "bert": [0.69, 0.75, 0.8, 0.8]},
    "macro_f1": {"nbsvm": [0.57, 0.63, 0.69, 0.76], "bert": [0.68, 0.74, 0.79, 0.8]},
}  # fmt: skip


def test_the_length_table_fits_a_phone(browser, tmp_path):
    """/about's length table, its widest, at 390 px: the page does not scroll sideways."""
    url = build_web_database(tmp_path / "textflix.db", {**RUN, "metrics": {**RUN["metrics"], "lengths": LENGTHS}})
    with serve_in_thread(create_app(Settings(database_url=url))) as server:
        context, page = _page(browser, server, {"width": 390, "height": 844})
        try:
            page.goto("/about")
            table = page.locator("table.lengths")
            assert table.locator("thead th").count() == 9
            widths = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
            assert widths[0] <= widths[1], f"/about scrolls sideways at 390 px: {widths}"
            shot_of(table, "about-lengths-390")
            # its headings wrap: the table is the width of its figures, and scrolls inside its own box
            wrap = table.locator("xpath=..")
            assert wrap.evaluate("e => getComputedStyle(e).overflowX") == "auto"
            assert table.bounding_box()["width"] < 2 * 390
            shot(page, "about-390")
        finally:
            _check_and_close(context, page, server)


PHONE_PAGES = [
    ("dashboard-analyze-off", "/"),
    ("dashboard-analyze-on", "/?analyze=1&accuracy=1"),
    ("dashboard-compare", "/?analyze=1&accuracy=1&compare=1"),
    ("title-analyze-off", "/movies/tt0100001"),
    ("title-analyze-on", "/movies/tt0100001?analyze=1&accuracy=1"),
    ("title-compare", "/movies/tt0100002?analyze=1&accuracy=1&compare=1"),
    ("review-analyze-on", "/reviews/8?analyze=1&accuracy=1"),
    ("disagreements", "/disagreements"),
    ("about", "/about"),
    ("analyze", "/analyze?text=Great+fun.+Boring+ending."),
    ("not-found", "/movies/tt9999999"),
]


def test_phone_width_has_no_horizontal_scrolling(phone):
    for name, path in PHONE_PAGES:
        phone.goto(path)
        widths = phone.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
        assert widths[0] <= widths[1], f"{path} scrolls sideways at 360 px: {widths}"
        shot(phone, f"phone-{name}")


def test_every_page_passes_its_content_security_policy(browser, live_server):
    """The pages run under the app's CSP with no violation (``_page`` fails on any CSP error in the
    console, for every test here); an inline script, as an injection would add, is refused."""
    context, page = _page(browser, live_server, DESKTOP)
    try:
        for _, path in PHONE_PAGES:
            response = page.goto(path)
            policy = response.headers["content-security-policy"]
            assert "script-src 'self';" in policy and "frame-ancestors 'none'" in policy
            assert response.headers["x-frame-options"] == "DENY"
            assert response.headers["x-content-type-options"] == "nosniff"
        assert page.problems == []
        page.evaluate(
            "() => { const s = document.createElement('script');"
            " s.textContent = \"document.body.dataset.injected = 'ran'\"; document.body.append(s); }"
        )
        page.wait_for_timeout(200)  # the console message arrives after the script is refused
        assert page.evaluate("document.body.dataset.injected") is None
        assert [p for p in page.problems if p.startswith("CSP: ") and "inline script" in p]
        page.problems.clear()
    finally:
        context.close()


# --- a bigger catalogue: pages of titles and the title search ----------------------------------


@pytest.fixture(scope="module")
def catalogue_server(tmp_path_factory):
    """A synthetic catalogue of 150 titles (``scripts/bench_pages.py``), 48 titles a page."""
    from scripts.bench_pages import build_database

    url = f"sqlite:///{tmp_path_factory.mktemp('catalogue') / 'textflix.db'}"
    build_database(url, titles=150, reviews=1500)
    with serve_in_thread(create_app(Settings(database_url=url))) as server:
        yield server


@pytest.fixture(params=[("desktop", DESKTOP), ("phone", PHONE)], ids=["desktop", "phone"])
def no_script_page(request, browser, catalogue_server):
    """A page of the big catalogue with JavaScript off, at desktop and phone width."""
    name, viewport = request.param
    context = browser.new_context(viewport=viewport, base_url=catalogue_server, java_script_enabled=False)
    page = context.new_page()
    page.set_default_timeout(15_000)
    page.width_name = name
    yield page
    context.close()


def test_search_and_page_links_work_without_javascript(no_script_page):
    page = no_script_page
    page.goto("/?analyze=1&accuracy=1&sort=inaccurate")
    assert page.locator("li.card").count() == 48
    page.get_by_label("Search titles").fill("TITLE 1")
    page.get_by_role("button", name="Search").click()
    page.wait_for_url("**q=TITLE+1**")
    assert "analyze=1" in page.url and "accuracy=1" in page.url and "sort=inaccurate" in page.url
    titles = page.locator("li.card h2").all_inner_texts()
    assert titles and all("title 1" in title.lower() for title in titles)
    # "Synthetic Title 1", 10-19 and 100-149, less the 3 without metadata (107, 124, 141)
    assert page.locator(".sorts span").inner_text().startswith("58 of 150 titles match “TITLE 1”")
    assert len(titles) == 48

    # 141 of 150 titles match (not the 9 without metadata, "Untitled (tt…)"): 3 pages
    page.goto("/?analyze=1&accuracy=1&q=synthetic")
    pager = page.get_by_role("navigation", name="Pages of titles")
    assert pager.locator("[aria-current=page]").inner_text() == "1"
    pager.get_by_role("link", name="next →").click()
    page.wait_for_url("**page=2**")
    assert "q=synthetic" in page.url and "analyze=1" in page.url
    assert page.get_by_role("navigation", name="Pages of titles").locator("[aria-current=page]").inner_text() == "2"
    assert page.locator(".pager-status").inner_text() == "Page 2 of 3 · titles 49–96 of 141"
    widths = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
    assert widths[0] <= widths[1], f"the dashboard scrolls sideways: {widths}"
    shot(page, f"dashboard-search-page-2-{page.width_name}")
    page.get_by_role("navigation", name="Pages of titles").get_by_role("link", name="3", exact=True).click()
    page.wait_for_url("**page=3**")
    assert page.locator("li.card").count() == 141 - 96
    assert page.get_by_role("navigation", name="Pages of titles").locator("span[aria-disabled=true]").inner_text() == "next →"

    page.get_by_label("Search titles").fill("no such film")
    page.get_by_role("button", name="Search").click()
    page.wait_for_url("**q=no+such+film**")
    assert "page=" not in page.url  # a new search starts at page 1
    assert page.locator("p.empty").inner_text().startswith("No titles match")
    shot(page, f"dashboard-search-nothing-{page.width_name}")


@pytest.fixture(scope="module")
def pending_server(tmp_path_factory):
    """The app over a build half way (``PENDING_RUN``: NB-SVM ready, BERT learning), its own analyzer
    loading stand-in models as the run record makes them ready; the URL, the app and the database."""
    url = build_web_database(tmp_path_factory.mktemp("pending") / "textflix.db", PENDING_RUN)
    settings = Settings(database_url=url, build_poll_s=3600)
    app = create_app(settings)
    app.state.analyzer = ReadyAnalyzer(
        settings, app.state.build, lambda: database_engine(app), app.state.write_lock, stand_in_models
    )
    with serve_in_thread(app) as base:
        yield base, app, url


def test_the_pending_dashboard_says_what_bert_waits_for_and_follows_the_build(browser, pending_server):
    base, app, url = pending_server
    context, page = _page(browser, base, DESKTOP)
    try:
        page.goto("/?analyze=1&accuracy=1")
        line = page.locator("#pending-line")
        assert line.inner_text() == (
            "BERT is still learning from the 500 reviews — teacher's labels 47 %, about 12 minutes left on this "
            "machine; the pages show NB-SVM's reading."
        )
        assert line.bounding_box()["y"] < 120  # one line near the top, under the header
        assert page.locator('#summary .model-bar[data-model="nbsvm"]').count() == 1
        assert page.locator('.model-bar[data-model="bert"]').count() == 0
        shot(page, "dashboard-pending")
        page.goto("/?analyze=1&compare=1")
        assert page.locator('.model-bar.is-pending[data-model="bert"]').count() == 5  # the summary's and each card's
        shot(page, "dashboard-compare-pending")
        page.goto("/movies/tt0100001?analyze=1&compare=1")
        pending = page.locator('.model-col.is-pending[data-model="bert"]')
        assert pending.count() == 5 and "Pending" in pending.first.inner_text()
        shot(page, "title-compare-pending")
        page.goto("/about")
        assert page.locator(".build-steps .is-running .step-name").inner_text() == "pseudo_label"
        shot(page, "about-pending")

        # the build goes on: the line follows without a reload (static/textflix.js)
        page.goto("/?analyze=1&accuracy=1")
        set_run(url, progress={**PENDING_RUN["progress"], "done": 80, "ready_in_s": {"bert": 400.0}})
        app.state.build.refresh(database_engine(app))
        sync_api.expect(page.locator("#pending-line")).to_contain_text("labels 80 %", timeout=40_000)
        # BERT is ready: the page reloads itself and shows BERT's reading
        set_run(url, steps=RUN["steps"], status="complete", progress="null")
        app.state.build.refresh(database_engine(app))
        page.wait_for_selector("#pending-line", state="detached", timeout=40_000)
        page.wait_for_load_state()
        assert page.locator('#summary .model-bar[data-model="bert"]').count() == 1
        shot(page, "dashboard-after")
    finally:
        _check_and_close(context, page, base)


def test_the_dashboard_shows_nbsvm_s_predictions_while_its_highlights_come_in(browser, tmp_path):
    """NB-SVM's predictions stored, its explain step half done (``build_half_explained_database``): the dashboard
    reads its bars and says its highlights are still being computed; a title shows the highlights written so
    far, and the line in place of the others."""
    url = build_half_explained_database(tmp_path / "textflix.db", "nbsvm")
    settings = Settings(database_url=url, build_poll_s=3600)
    app = create_app(settings)
    app.state.analyzer = ReadyAnalyzer(
        settings, app.state.build, lambda: database_engine(app), app.state.write_lock, stand_in_models
    )
    with serve_in_thread(app) as base:
        context, page = _page(browser, base, DESKTOP)
        try:
            page.goto("/?analyze=1&accuracy=1")
            line = page.locator("#pending-line").inner_text()
            assert line.startswith("BERT is still learning from the 500 reviews, no estimate of the time left yet;")
            assert "NB-SVM's highlights are still being computed — 26 % done, about 2 minutes left" in line
            assert page.locator('#summary .model-bar[data-model="nbsvm"]').count() == 1
            assert "13 total reviews · 6 positive" in page.locator("#summary").inner_text()
            shot(page, "dashboard-explaining")
            page.goto("/movies/tt0100002?analyze=1")
            notes = page.locator(".review .highlights-pending")
            assert notes.count() == 2 and notes.first.is_visible()
            assert page.locator("#r6 .hl").count() > 0 and page.locator("#r8 .hl").count() == 0
            shot(page, "title-explaining")
        finally:
            _check_and_close(context, page, base)


def test_a_review_page_with_stored_words_shows_bert_s_marks_in_its_sentences(browser, tmp_path):
    """BERT's words stored for one review (``add_word_shares``): its column marks them inside the sentences' shade,
    underlined by sign, each with its share in its label, above the legend; NB-SVM's column has no marks."""
    url = build_web_database(tmp_path / "textflix.db")
    review_id = add_word_shares(url)
    with served_with(url, FakeAnalyzer()) as base:
        context, page = _page(browser, base, DESKTOP)
        try:
            page.goto(f"/reviews/{review_id}?analyze=1")
            column = page.locator('section.model-col[data-model="bert"]')
            marks = column.locator("mark.word")
            assert marks.count() >= 2 and page.locator('section.model-col[data-model="nbsvm"] mark.word').count() == 0
            gripping = column.locator("mark.word.pos", has_text="gripping")
            assert gripping.get_attribute("aria-label").startswith("gripping: BERT word share +1.600 toward positive")
            underline = gripping.evaluate("mark => getComputedStyle(mark).textDecorationLine")
            assert underline == "underline" and column.locator("mark.word.neg", has_text="boring").is_visible()
            assert column.locator(".hl mark.word").count() == marks.count()  # inside the sentences' shade
            assert "add up to its log-odds of positive" in column.locator(".words-legend").inner_text()
            shot_of(column, "review-bert-words")
            shot(page, "review-with-bert-words")
        finally:
            _check_and_close(context, page, base)


def test_show_bert_s_words_fills_the_marks_in_place(browser, api_data_dir, tmp_path):
    """With JavaScript, "Show BERT's words" asks the API to compute them and fills BERT's column in place, without a
    page load."""
    from tests.test_api import api_settings

    shutil.copytree(api_data_dir / "models", tmp_path / "models")
    build_web_database(tmp_path / "textflix.db")
    with serve_in_thread(create_app(api_settings(tmp_path))) as base:
        context, page = _page(browser, base, DESKTOP)
        try:
            page.goto("/reviews/2?analyze=1")
            page.evaluate("window.notReloaded = true")
            page.click("form.words-form button")
            page.wait_for_selector('section.model-col[data-model="bert"] .words-legend', timeout=120_000)
            assert page.locator('section.model-col[data-model="bert"] mark.word').count() > 0
            assert page.evaluate("window.notReloaded") is True
        finally:
            _check_and_close(context, page, base)
