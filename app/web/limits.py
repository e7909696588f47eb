"""What one request may ask for, checked against the settings: the API and /analyze alike (what it may
have explained, which its cost decides: ``app.web.costs``).

Each check raises ``AppError`` (422) naming the field and the limit, before any work is done.
"""

import asyncio
import ipaddress
import unicodedata
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from urllib.parse import urlsplit

from starlette.convertors import IntegerConvertor, register_url_convertor
from starlette.requests import Request

from app.settings import Settings
from app.web.errors import AppError, problem
from model.data import clean_text

# Cleaning and splitting posted texts (pure Python: a second or more for a request of long texts) run
# here, off the event loop, in two threads: each busy thread takes turns with the event loop for the
# interpreter, so that more of them would make every other request wait longer.
READING = ThreadPoolExecutor(2, thread_name_prefix="textflix-reading")
IDENTIFIER_MAX_CHARS = 64  # title ids and other short string fields
MAX_ID = 2**63 - 1  # the largest row id a database can hold
# Unicode's format characters (zero-width space, joiners, byte-order mark, …): a text of only these,
# and white space, has nothing to read (a zero-width space alone is not even a sentence).
INVISIBLE = "Cf"


class RowIdConvertor(IntegerConvertor):
    """``{name:row_id}`` in a route's path: digits, read as a row id. Digits beyond any row id read as
    ``MAX_ID + 1``, which no row has, without ``int()`` of them (Python refuses over 4,300 digits)."""

    def convert(self, value: str) -> int:
        digits = value.lstrip("0") or "0"
        return int(digits) if len(digits) <= len(str(MAX_ID)) else MAX_ID + 1


register_url_convertor("row_id", RowIdConvertor())


def text_problems(field: str, text: str, settings: Settings) -> list[dict]:
    """What is wrong with one review text, as error items naming ``field``."""
    limit = settings.max_text_chars
    if len(text) > limit:  # first: the next check reads every character of a blank text
        return [problem(field, f"The text is {len(text):,} characters long; the limit is {limit:,}.", limit)]
    if all(c.isspace() or unicodedata.category(c) == INVISIBLE for c in text):
        return [problem(field, "The text is empty or only whitespace or invisible characters; it needs at least 1 "
                        "visible character.", 1)]  # fmt: skip
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        return [problem(field, f"The text holds invalid Unicode (a lone surrogate at character {error.start}).")]
    return []


async def off_the_loop(function, *args):
    """``function(*args)`` in a ``READING`` thread: for work on posted texts that reads every character."""
    return await asyncio.get_running_loop().run_in_executor(READING, partial(function, *args))


def raw_length_problems(field: str, text: str, settings: Settings) -> list[dict]:
    """A text longer than the limit as it was posted: refused before it is cleaned, which reads every character."""
    limit = settings.max_text_chars
    if len(text) > limit:
        return [problem(field, f"The text is {len(text):,} characters long; the limit is {limit:,}.", limit)]
    return []


def posted_text(field: str, text: str, settings: Settings) -> str:
    """``text`` as posted, checked (its length first, as posted) and cleaned as the catalogue's reviews are
    (``model.data.clean_text``); ``AppError`` (422) naming ``field`` when it is not one to analyse.
    Reads every character: run it off the event loop (``off_the_loop``)."""
    if problems := raw_length_problems(field, text, settings):
        raise AppError(422, problems)
    text = clean_text(text)
    if problems := text_problems(field, text, settings):
        raise AppError(422, problems)
    return text


def posted_texts(texts: list[str], settings: Settings) -> list[str]:
    """``posted_text`` of each of a request's ``texts``, their number checked first; every problem at once."""
    most = settings.max_texts
    if not texts:
        raise AppError.one(422, "texts", "Send at least 1 text.", 1)
    if len(texts) > most:
        raise AppError.one(422, "texts", f"At most {most} texts per request; got {len(texts):,}.", most)
    problems = [p for i, text in enumerate(texts) for p in raw_length_problems(f"texts[{i}]", text, settings)]
    if problems:
        raise AppError(422, problems)
    texts = [clean_text(text) for text in texts]
    if problems := [p for i, text in enumerate(texts) for p in text_problems(f"texts[{i}]", text, settings)]:
        raise AppError(422, problems)
    return texts


def check_words(words: bool, explain: bool) -> None:
    """BERT's words are asked for with the explanation whose sentence shares they split: ``AppError`` (422) otherwise."""
    if words and not explain:
        raise AppError.one(422, "words", "`words` needs `explain`: a sentence's words share out its explained contribution.")


def check_identifier(field: str, value: str | None, max_chars: int = IDENTIFIER_MAX_CHARS) -> None:
    """Short identifier fields: a sane length and valid Unicode."""
    if value is None:
        return
    if len(value) > max_chars:
        raise AppError.one(422, field, f"At most {max_chars} characters; got {len(value):,}.", max_chars)
    if not plausible_identifier(value):
        raise AppError.one(422, field, "An identifier holds no control characters nor invalid Unicode.")


def plausible_identifier(value: str) -> bool:
    """Whether ``value`` could be a title id at all (short, printable, valid Unicode): others are not found."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return len(value) <= IDENTIFIER_MAX_CHARS and value.isprintable()


def check_page_size(per_page: int, settings: Settings) -> None:
    limit = settings.max_per_page
    if per_page > limit:
        raise AppError.one(422, "per_page", f"At most {limit} items per page; got {per_page:,}.", limit)


def on_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def foreign_host(request: Request) -> str | None:
    """Why the request's Host header does not name this machine (``localhost`` or a loopback address), or None."""
    host = request.headers.get("host", "")
    try:
        hostname = urlsplit(f"//{host}").hostname
    except ValueError:
        hostname = None
    if hostname is None or not on_loopback(hostname):
        return f"its Host header ({host!r}) does not name this machine"
    return None


def check_write_allowed(request: Request, settings: Settings, field: str = "title_id", what: str = "stores reviews") -> None:
    """Storing a review, or exporting the database, needs the token (checked by the guard, or by
    ``require_token``, when one is set) or ``allow_anonymous_writes``: where the request comes from cannot
    decide it, as a forwarder or proxy on this machine makes any client look local. A server that listens
    on the loopback, behind no proxy it trusts (``trusted_proxies``, whose Host is its own choice), takes
    anonymous writes only for a Host that names this machine, so that a page of another site whose name
    resolves to 127.0.0.1 (DNS rebinding) cannot write."""
    if settings.api_token is not None:
        return
    if not settings.allow_anonymous_writes:
        raise AppError.one(
            403, field,
            f"This server {what} only with its token: its operator can set TEXTFLIX_API_TOKEN (and you send the "
            "token), or TEXTFLIX_ALLOW_ANONYMOUS_WRITES=1 to take writes from anyone who reaches it.",
        )  # fmt: skip
    if on_loopback(settings.host) and not settings.trusted_proxies and (reason := foreign_host(request)):
        raise AppError.one(
            403, field, f"Without a token this server {what} only for a Host that names this machine, and {reason}; "
            "TEXTFLIX_API_TOKEN lets a client with the token write from anywhere.",
        )  # fmt: skip
