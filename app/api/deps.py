"""What the API routes share: the analyzer, input limits, documented auth."""

import inspect

from fastapi import Request
from fastapi.security import HTTPBearer
from starlette.concurrency import run_in_threadpool

from app.api.errors import ApiError, problem
from app.settings import Settings

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


def check_string(field: str, value: str | None, max_chars: int = 64) -> None:
    """Short identifier fields: a sane length and valid Unicode."""
    if value is None:
        return
    if len(value) > max_chars:
        raise ApiError.one(422, field, f"At most {max_chars} characters; got {len(value):,}.", max_chars)
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ApiError.one(422, field, "Invalid Unicode (a lone surrogate).") from None


def require_analyzer(request: Request):
    analyzer = getattr(request.app.state, "analyzer", None)
    if analyzer is None:
        reason = getattr(request.app.state, "models_problem", None) or "The models are not loaded."
        raise ApiError.one(503, None, f"Live analysis is unavailable: {reason}")
    return analyzer


async def run_analysis(analyzer, texts: list[str], explain: bool) -> list[dict]:
    """``analyzer.analyze`` whether it is a coroutine or a plain (blocking) function."""
    if inspect.iscoroutinefunction(analyzer.analyze):
        return await analyzer.analyze(texts, explain)
    results = await run_in_threadpool(analyzer.analyze, texts, explain)
    if inspect.isawaitable(results):
        results = await results
    return results
