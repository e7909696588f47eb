"""What the pages call the catalogue's items (movies, games, hotels: the ``item_noun`` setting) and where
each item's page is.

IMDB's catalogue keeps the words and links its pages have always had: "titles", ``/movies/{id}``. A build
on a file of reviews says "items", or the noun its user gives, and links ``/items/{id}``; both routes
answer for any build, so a link kept from either works.
"""

from dataclasses import dataclass
from urllib.parse import quote

IMDB_CORPUS = "IMDB"  # the run record's counts["corpus"] of a build on the IMDB archive (absent before issue 53)
IMDB_NOUN = "title"  # IMDb's word for its entries, which the pages have always used
FILE_NOUN = "item"
MOVIE_ROUTE, ITEM_ROUTE = "/movies", "/items"


def plural(noun: str) -> str:
    """English's regular plural of ``noun``: box → boxes, city → cities, game → games."""
    if noun.endswith(("s", "x", "z", "ch", "sh")):
        return noun + "es"
    if noun.endswith("y") and noun[-2:-1] not in ("", *"aeiou"):
        return noun[:-1] + "ies"
    return noun + "s"


@dataclass(frozen=True)
class Items:
    """The catalogue's items as the pages speak of them: ``noun`` and ``plural``, and their corpus."""

    corpus: str
    noun: str
    plural: str

    @classmethod
    def of(cls, corpus: str, item_noun: str | None) -> "Items":
        """The items of ``corpus``, called ``item_noun`` ("game", or "singular/plural"), else by the corpus's default."""
        singular, _, given_plural = (item_noun or (IMDB_NOUN if corpus == IMDB_CORPUS else FILE_NOUN)).partition("/")
        return cls(corpus, singular, given_plural or plural(singular))

    @property
    def imdb(self) -> bool:
        return self.corpus == IMDB_CORPUS

    @property
    def capital(self) -> str:
        """The noun at the start of a sentence (only its first letter raised: "BnB" stays "BnB")."""
        return self.noun[:1].upper() + self.noun[1:]

    def url(self, item_id: str) -> str:
        """The path of an item's page; every character of its id that a path could read otherwise escaped."""
        return f"{MOVIE_ROUTE if self.imdb else ITEM_ROUTE}/{quote(item_id, safe='')}"
