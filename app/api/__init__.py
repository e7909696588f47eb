"""The JSON API under /api/ (OpenAPI at /docs): catalogue, reviews, live analysis, health.

Routes live in small modules (``movies``, ``reviews``, ``predict``, ``health``); the
request and answer schemas in ``app.schemas``; the models behind the analysis in
``app.analysis``. ``install`` adds them to the app, with the guard middleware (token,
content type, body size) and the JSON error handlers (``app.api.errors``).
"""

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from app.api import health, movies, predict, reviews
from app.api.errors import install_error_handlers
from app.api.guard import ApiGuard


def install(app: FastAPI) -> None:
    """Add the API to ``app``; call it after ``app.pages.install`` (its error handlers wrap the pages')."""
    settings = app.state.settings
    for module in (health, movies, reviews, predict):
        app.include_router(module.router)
    install_error_handlers(app)
    app.add_middleware(ApiGuard, settings=settings)

    def openapi() -> dict:
        """The generated schema, with the limits of these settings written in."""
        if app.openapi_schema is None:
            schema = get_openapi(
                title=app.title, version=app.version, description=app.description, routes=app.routes
            )
            components = schema.get("components", {}).get("schemas", {})
            texts = components.get("PredictRequest", {}).get("properties", {}).get("texts")
            if texts is not None:
                texts.update(minItems=1, maxItems=settings.max_texts)
                texts.setdefault("items", {}).update(minLength=1, maxLength=settings.max_text_chars)
            text = components.get("ReviewRequest", {}).get("properties", {}).get("text")
            if text is not None:
                text.update(minLength=1, maxLength=settings.max_text_chars)
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi
