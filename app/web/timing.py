"""``Server-Timing``: how long the server took to make each answer, in the answer's headers.

A pure ASGI middleware, outermost, so the time covers everything the app does: from the
request reaching the app to the response's headers leaving it. The pages and JSON answers
are made whole before their headers go out, so for them it is the whole of the server's
work. Browsers' developer tools show the figure, and ``scripts/bench_pages.py`` reads it.
"""

import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send


class ServerTiming:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()

        async def send_timed(message: Message) -> None:
            if message["type"] == "http.response.start":
                took = (time.perf_counter() - start) * 1000
                message["headers"] = [*message.get("headers", ()), (b"server-timing", f"app;dur={took:.2f}".encode())]
            await send(message)

        await self.app(scope, receive, send_timed)
