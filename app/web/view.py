"""The view state of the pages, carried in the query string so that every view is a link.

``?analyze=1&accuracy=1&compare=1&sort=positive&wrong=1&weak=1&q=alien&page=2``: *analyze* shows the
models' sentiment; *accuracy* and *compare* take effect only while analysing, but stay in
the links while Analyze is off, so turning it back on restores them. *sort* orders the
dashboard, *wrong* filters a title page to the wrong predictions (with accuracy on), *weak*
to the reviews whose explanation is weak (while analysing). *q* searches the dashboard's
titles and *page* pages through them (``app.web.pages.dashboard_view`` checks both).

Beside the view, what the pages call the catalogue's items and where each item's page is (``Items``): IMDB's
catalogue keeps the words and links its pages have always had ("titles", ``/movies/{id}``); a build on a file
of reviews says "items", or the noun its user gives (``item_noun``), and links ``/items/{id}``. Both routes
answer for any build, so a link kept from either works.
"""

from dataclasses import dataclass, replace
from functools import cached_property
from urllib.parse import quote, urlencode

from starlette.requests import Request

from model.names import IMDB_CORPUS, MAIN_MODEL, MODELS, item_nouns

# Dashboard sort orders ("sorted by most: ..."): two always, two with Analyze, two with accuracy.
DEFAULT_SORT = "reviews"
_PLAIN_SORTS = (DEFAULT_SORT, "title")
_ANALYZE_SORTS = ("positive", "negative")
_ACCURACY_SORTS = ("accurate", "inaccurate")
SORTS = _PLAIN_SORTS + _ANALYZE_SORTS + _ACCURACY_SORTS
# What a link to another page leaves out of the view: the title-page filters, the dashboard's search and page.
_NOT_LINKED = {"wrong": False, "weak": False, "q": "", "page": 1}


def pending_models(request: Request) -> tuple[str, ...]:
    """The models that the app's ``BuildWatch`` (``app.web.build_state``) last found not ready."""
    build = getattr(request.app.state, "build", None)
    return build.state.pending if build is not None else ()


def _flag(value: str | None) -> bool:
    return value is not None and value.strip().lower() in ("1", "true", "on", "yes")


@dataclass(frozen=True)
class View:
    analyze: bool = False
    accuracy: bool = False  # as requested; see show_accuracy
    compare: bool = False  # as requested; see show_compare
    sort: str = DEFAULT_SORT
    wrong: bool = False
    weak: bool = False
    q: str = ""  # dashboard: title search
    page: int = 1  # dashboard: page of titles
    pending: tuple[str, ...] = ()  # the models the build has not made ready yet (not in the query string)

    @classmethod
    def from_request(cls, request: Request) -> "View":
        query = request.query_params
        sort = query.get("sort") or DEFAULT_SORT
        return cls(
            analyze=_flag(query.get("analyze")),
            accuracy=_flag(query.get("accuracy")),
            compare=_flag(query.get("compare")),
            sort=sort if sort in SORTS else DEFAULT_SORT,
            wrong=_flag(query.get("wrong")),
            weak=_flag(query.get("weak")),
            pending=pending_models(request),
        )

    @property
    def show_accuracy(self) -> bool:
        return self.analyze and self.accuracy

    @property
    def show_compare(self) -> bool:
        return self.analyze and self.compare

    @property
    def only_wrong(self) -> bool:
        return self.show_accuracy and self.wrong

    @property
    def only_weak(self) -> bool:
        return self.analyze and self.weak

    @property
    def main(self) -> str:
        """The model the page shows when it shows one: the served BERT, or while it is pending, one that is ready."""
        if MAIN_MODEL not in self.pending:
            return MAIN_MODEL
        return next((model for model in MODELS if model not in self.pending), MAIN_MODEL)

    @property
    def models(self) -> tuple[str, ...]:
        """The models whose predictions the page shows, left to right."""
        if not self.analyze:
            return ()
        return MODELS if self.compare else (self.main,)

    @property
    def sorts(self) -> list[str]:
        """The sort orders on offer in this view."""
        names = list(_PLAIN_SORTS)
        if self.analyze:
            names += _ANALYZE_SORTS
        if self.show_accuracy:
            names += _ACCURACY_SORTS
        return names

    @property
    def effective_sort(self) -> str:
        return self.sort if self.sort in self.sorts else DEFAULT_SORT

    def query(self, **changes) -> str:
        """This view's query string (with a leading "?", or "" when all is default)."""
        view = replace(self, **changes)
        params = {name: "1" for name in ("analyze", "accuracy", "compare") if getattr(view, name)}
        if view.sort != DEFAULT_SORT:
            params["sort"] = view.sort
        for name in ("wrong", "weak"):
            if getattr(view, name):
                params[name] = "1"
        if view.q:
            params["q"] = view.q
        if view.page != 1:
            params["page"] = str(view.page)
        return "?" + urlencode(params) if params else ""

    def link(self, path: str, **changes) -> str:
        """A link to another page in the same view (the title-page filters, the dashboard's
        search and page are dropped)."""
        if not changes:
            return path + self.link_query
        return path + self.query(**{**_NOT_LINKED, **changes})

    @cached_property
    def link_query(self) -> str:
        """The query string of ``link`` without changes, made once per view: a page links every review it shows."""
        return self.query(**_NOT_LINKED)

    def toggle(self, path: str, name: str) -> str:
        """A link to this page with one switch flipped and everything else kept."""
        return path + self.query(**{name: not getattr(self, name)})

    def as_dict(self) -> dict:
        return {
            "analyze": self.analyze,
            "accuracy": self.show_accuracy,
            "compare": self.show_compare,
            "sort": self.effective_sort,
            "wrong_only": self.only_wrong,
            "weak_only": self.only_weak,
            "models": list(self.models),
            "pending": list(self.pending),
            "q": self.q,
            "page": self.page,
        }


MOVIE_ROUTE, ITEM_ROUTE = "/movies", "/items"


@dataclass(frozen=True)
class Items:
    """The catalogue's items as the pages speak of them: ``noun`` and ``plural``, and their corpus."""

    corpus: str
    noun: str
    plural: str

    @classmethod
    def of(cls, corpus: str, item_noun: str | None) -> "Items":
        """The items of ``corpus``, called ``item_noun`` ("game", or "singular/plural") or by its default."""
        return cls(corpus, *item_nouns(corpus, item_noun))

    @property
    def imdb(self) -> bool:
        return self.corpus == IMDB_CORPUS

    def called(self, count) -> str:
        """What ``count`` of the items are called: "1 game", "3 games"."""
        return self.noun if count == 1 else self.plural

    @property
    def capital(self) -> str:
        """The noun at the start of a sentence (only its first letter raised: "BnB" stays "BnB")."""
        return self.noun[:1].upper() + self.noun[1:]

    def url(self, item_id: str) -> str:
        """The path of an item's page; every character of its id that a path could read otherwise escaped."""
        return f"{MOVIE_ROUTE if self.imdb else ITEM_ROUTE}/{quote(item_id, safe='')}"
