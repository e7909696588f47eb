"""The security headers of every answer, set with the ``secure`` package.

Pages load their script and styles from /static only, so the Content-Security-Policy allows
scripts from this origin alone (no inline script, no ``on...=`` attribute), forbids framing
(``frame-ancestors 'none'`` and ``X-Frame-Options: DENY``), forms posting elsewhere, plugins
and ``<base>``. Style attributes stay allowed: the highlights carry their strength as
``style="--a:0.42"`` (``app.web.render``), and a style attribute runs no script.

FastAPI's /docs and /redoc are pages of Swagger UI and ReDoc, their files served from this origin
(``app.web.api.install_docs``), with an inline script that starts them and inline styles (ReDoc
writes its own): they get inline scripts and styles, and ReDoc its worker, nothing more.
HSTS is left to the proxy that terminates TLS: the app itself may be served over plain HTTP.
"""

from secure import (
    ContentSecurityPolicy,
    CrossOriginOpenerPolicy,
    PermissionsPolicy,
    ReferrerPolicy,
    Secure,
    XContentTypeOptions,
    XFrameOptions,
)
from secure.middleware import SecureASGIMiddleware
from starlette.types import ASGIApp, Receive, Scope, Send

from app.web.errors import route_path

DOCS_PATHS = {"/docs", "/docs/oauth2-redirect", "/redoc"}


def content_security_policy(docs: bool = False) -> ContentSecurityPolicy:
    policy = ContentSecurityPolicy().default_src("'self'")
    if docs:
        policy.script_src("'self'", "'unsafe-inline'").style_src("'self'", "'unsafe-inline'").img_src("'self'", "data:")
        policy.worker_src("'self'", "blob:")  # ReDoc
    else:
        policy.script_src("'self'").style_src("'self'").img_src("'self'", "data:")
    return (
        policy.style_src_attr("'unsafe-inline'")
        .object_src("'none'")
        .base_uri("'none'")
        .form_action("'self'")
        .frame_ancestors("'none'")
    )


def security_headers(docs: bool = False) -> Secure:
    return Secure(
        csp=content_security_policy(docs),
        xcto=XContentTypeOptions(),
        xfo=XFrameOptions().deny(),
        referrer=ReferrerPolicy().strict_origin_when_cross_origin(),
        coop=CrossOriginOpenerPolicy().same_origin(),
        permissions=PermissionsPolicy().geolocation().microphone().camera(),
    )


class SecurityHeaders:
    """Sets ``security_headers`` on every HTTP answer, the docs' on the docs pages."""

    def __init__(self, app: ASGIApp):
        self.pages = SecureASGIMiddleware(app, secure=security_headers())
        self.docs = SecureASGIMiddleware(app, secure=security_headers(docs=True))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        docs = scope["type"] == "http" and route_path(scope) in DOCS_PATHS
        await (self.docs if docs else self.pages)(scope, receive, send)
