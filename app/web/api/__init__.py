"""The JSON API under /api/ (OpenAPI at /docs): catalogue, reviews, live analysis, export, metrics, health.

Routes live in small modules (``movies``, ``reviews``, ``predict``, ``export``, ``metrics``, ``health``); the
request and answer schemas in ``app.web.schemas``; the models behind the analysis in
``app.web.analysis``. The guard in front of the POST routes (``app.web.guard``) and the
error answers (``app.web.errors``) are the app's, shared with the pages.
"""

from pathlib import Path

import fastapi_offline
from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from fastapi.openapi.utils import get_openapi
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from app.settings import Settings
from app.web.api import export, health, metrics, movies, predict, reviews
from app.web.schemas import ExportRow

REF_TEMPLATE = "#/components/schemas/{model}"
# Swagger UI's and ReDoc's files, served from here (/docs-assets/) so that /docs and /redoc work offline and
# under the pages' policy without a CDN: the fastapi-offline package ships them (its static folder).
DOCS_ASSETS = Path(fastapi_offline.__file__).parent / "static"


def install(app: FastAPI) -> None:
    """Add the API's routes to ``app``, and its OpenAPI schema with the limits of its settings."""
    settings = app.state.settings
    for module in (health, movies, reviews, predict, export, metrics):
        app.include_router(module.router)

    def openapi() -> dict:
        """The generated schema, with the limits of these settings written in."""
        if app.openapi_schema is None:
            schema = get_openapi(
                title=app.title, version=app.version, description=app.description, routes=app.routes
            )
            summaries_from_docstrings(schema)
            add_schemas(schema, ExportRow)
            document_limits(schema, settings)
            document_token(schema, settings)
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi
    install_docs(app)


def install_docs(app: FastAPI) -> None:
    """/docs (Swagger UI) and /redoc (ReDoc) on the files of ``DOCS_ASSETS``; ``create_app`` turns FastAPI's own off."""
    app.mount("/docs-assets", StaticFiles(directory=DOCS_ASSETS), name="docs-assets")

    def asset(request: Request, name: str) -> str:
        return f"{request.scope.get('root_path', '')}/docs-assets/{name}"

    @app.get("/docs", include_in_schema=False)
    async def swagger_ui(request: Request) -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=f"{request.scope.get('root_path', '')}{app.openapi_url}", title=f"{app.title} - Swagger UI",
            oauth2_redirect_url=f"{request.scope.get('root_path', '')}/docs/oauth2-redirect",
            swagger_js_url=asset(request, "swagger-ui-bundle.js"), swagger_css_url=asset(request, "swagger-ui.css"),
            swagger_favicon_url=asset(request, "favicon.png"),
        )  # fmt: skip

    @app.get("/docs/oauth2-redirect", include_in_schema=False)
    async def swagger_ui_redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()

    @app.get("/redoc", include_in_schema=False)
    async def redoc(request: Request) -> HTMLResponse:
        return get_redoc_html(
            openapi_url=f"{request.scope.get('root_path', '')}{app.openapi_url}", title=f"{app.title} - ReDoc",
            redoc_js_url=asset(request, "redoc.standalone.js"), redoc_favicon_url=asset(request, "favicon.png"),
            with_google_fonts=False,
        )  # fmt: skip


def summaries_from_docstrings(schema: dict) -> None:
    """Each operation's summary is the first paragraph of its route's docstring, the rest its description."""
    for path in schema.get("paths", {}).values():
        for operation in path.values():
            summary, _, description = operation.get("description", "").partition("\n\n")
            if summary:
                operation["summary"] = summary.rstrip(".")
                operation["description"] = description


def add_schemas(schema: dict, *models: type[BaseModel]) -> None:
    """Put ``models`` in the schema's components: answers that no route returns as its model,
    like the lines of the export, which the route streams as text."""
    _, definitions = models_json_schema([(model, "serialization") for model in models], ref_template=REF_TEMPLATE)
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    for name, definition in definitions.get("$defs", {}).items():
        components.setdefault(name, definition)


def document_limits(schema: dict, settings: Settings) -> None:
    """Write the size limits of ``settings`` into the OpenAPI ``schema``: bounds and descriptions."""
    chars, most = settings.max_text_chars, settings.max_texts
    components = schema.get("components", {}).get("schemas", {})
    if texts := components.get("PredictRequest", {}).get("properties", {}).get("texts"):
        texts.update(minItems=1, maxItems=most)
        texts.setdefault("items", {}).update(minLength=1, maxLength=chars)
        texts["description"] = (
            f"Review texts, 1 to {most:,} (TEXTFLIX_MAX_TEXTS), each non-blank and at most "
            f"{chars:,} characters (TEXTFLIX_MAX_TEXT_CHARS)."
        )
    if text := components.get("ReviewRequest", {}).get("properties", {}).get("text"):
        text.update(minLength=1, maxLength=chars)
        text["description"] = f"The review, non-blank, at most {chars:,} characters (TEXTFLIX_MAX_TEXT_CHARS)."
    for path in schema.get("paths", {}).values():
        for operation in path.values():
            for parameter in operation.get("parameters", ()):
                if parameter.get("name") == "per_page":
                    parameter["schema"]["maximum"] = settings.max_per_page
                    parameter["description"] = f"Items per page, at most {settings.max_per_page:,}."


def document_token(schema: dict, settings: Settings) -> None:
    """Without TEXTFLIX_API_TOKEN the routes that document the bearer token take a request without it:
    their ``security`` gets OpenAPI's empty alternative, "no credentials"."""
    if settings.api_token is not None:
        return
    for path in schema.get("paths", {}).values():
        for operation in path.values():
            if operation.get("security") and {} not in operation["security"]:
                operation["security"].append({})
