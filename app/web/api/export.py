"""GET /api/export.jsonl: every catalogue review with its predictions, explanations and their trust figures."""

import threading
from collections.abc import Callable, Iterator
from itertools import chain

from fastapi import APIRouter, Depends, Request
from fastapi.responses import StreamingResponse
from sqlalchemy.engine import Engine
from starlette.types import Receive, Scope, Send

from app.web import export
from app.web.deps import get_engine
from app.web.errors import ServerBusy, error_responses
from app.web.guard import require_token

router = APIRouter(prefix="/api", tags=["export"])


class JsonLinesResponse(StreamingResponse):
    media_type = "application/x-ndjson"


class ExportResponse(JsonLinesResponse):
    """The export's lines; ``done`` is called once the response ends, sent whole or not (its client left)."""

    def __init__(self, content: Iterator[str], done: Callable[[], None]):
        super().__init__(content)
        self.done = done

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:  # no thread reads the lines any more: a read in flight was awaited, or it failed
            self.done()


def json_errors(*statuses: int) -> dict:
    """``error_responses`` for a route whose own answer is not JSON: its errors still are."""
    schema = {"$ref": "#/components/schemas/ErrorResponse"}
    return {
        status: {"description": doc["description"], "content": {"application/json": {"schema": schema}}}
        for status, doc in error_responses(*statuses).items()
    }


@router.get(
    "/export.jsonl",
    response_class=JsonLinesResponse,
    dependencies=[Depends(require_token)],
    responses={
        200: {
            "description": "JSON Lines: one `ExportRow` object per line, in review id order.",
            "content": {JsonLinesResponse.media_type: {"itemSchema": {"$ref": "#/components/schemas/ExportRow"}}},
        },
        **json_errors(401, 403, 429, 503),
    },
)
def export_jsonl(request: Request, engine: Engine = Depends(get_engine)) -> JsonLinesResponse:
    """Export the catalogue as JSON Lines.

    Every catalogue review (IMDB and user reviews; no training or evaluation reviews), one
    JSON object per line: gold and user labels, each model's prediction, the sentences with
    their LIME weights, NB-SVM's word weights, and each model's explanation with its trust
    figures. Streamed a chunk of reviews at a time. Needs the bearer token when the server
    sets TEXTFLIX_API_TOKEN (without one, it is open as writes are: to this machine only). One export
    at a time per server process: another gets 429. `pandas.read_json(url, lines=True)` reads it."""
    lock: threading.Lock = request.app.state.export_lock
    if not lock.acquire(blocking=False):
        raise ServerBusy("This server is streaming another export; it streams one at a time. Retry when it is done.", 10)
    try:
        chunks = export.jsonl_chunks(engine)
        first = next(chunks, "")  # read here, so that an unreadable database is a 503, not a cut-off stream
    except BaseException:
        lock.release()
        raise

    def done() -> None:
        """Close the database reading, and let the next export begin: at the end, or when the client left
        (a stream that is merely dropped would wait for the garbage collector, which may not come)."""
        try:
            chunks.close()
        finally:
            lock.release()

    return ExportResponse(chain([first], chunks), done)
