"""Checks of the API's input against the limits in the settings, and the documented auth."""

from fastapi.security import HTTPBearer

from app.api.errors import ApiError, problem
from app.settings import Settings

IDENTIFIER_MAX_CHARS = 64  # title ids and other short string fields

# Documents the bearer token in OpenAPI (/docs has an "Authorize" button). The check itself
# is done by ``app.api.guard.ApiGuard`` before the body is read, so this never refuses.
bearer = HTTPBearer(
    auto_error=False,
    description="Needed on every POST when the server sets TEXTFLIX_API_TOKEN.",
)


def text_problems(field: str, text: str, settings: Settings) -> list[dict]:
    """What is wrong with one review text, as error items naming ``field``."""
    limit = settings.max_text_chars
    if not text.strip():
        return [problem(field, "The text is empty or only whitespace; it needs at least 1 non-space character.", 1)]
    if len(text) > limit:
        return [problem(field, f"The text is {len(text):,} characters long; the limit is {limit:,}.", limit)]
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        return [problem(field, f"The text holds invalid Unicode (a lone surrogate at character {error.start}).")]
    return []


def check_texts(texts: list[str], settings: Settings) -> None:
    most = settings.max_texts
    if not texts:
        raise ApiError.one(422, "texts", "Send at least 1 text.", 1)
    if len(texts) > most:
        raise ApiError.one(422, "texts", f"At most {most} texts per request; got {len(texts)}.", most)
    problems = [p for i, text in enumerate(texts) for p in text_problems(f"texts[{i}]", text, settings)]
    if problems:
        raise ApiError(422, problems)


def check_string(field: str, value: str | None, max_chars: int = IDENTIFIER_MAX_CHARS) -> None:
    """Short identifier fields: a sane length and valid Unicode."""
    if value is None:
        return
    if len(value) > max_chars:
        raise ApiError.one(422, field, f"At most {max_chars} characters; got {len(value):,}.", max_chars)
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ApiError.one(422, field, "Invalid Unicode (a lone surrogate).") from None


def check_page_size(per_page: int, settings: Settings) -> None:
    limit = settings.max_per_page
    if per_page > limit:
        raise ApiError.one(422, "per_page", f"At most {limit} items per page; got {per_page:,}.", limit)
