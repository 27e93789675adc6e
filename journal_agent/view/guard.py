"""Every request to the view passes here first (an ASGI middleware around the app).

- the ``Host`` header must name the address we listen on (a page of another site that
  resolves its own name to 127.0.0.1 — DNS rebinding — sends its own name and is refused);
- the token: ``?token=`` from the URL the browser was opened with (then kept in a
  ``SameSite=Strict``, ``HttpOnly`` cookie for this port, and dropped from the address bar by a
  redirect), or that cookie; anything else is refused;
- a write (any method but GET/HEAD) also needs an ``Origin`` that is ours and the page's CSRF
  token in ``X-CSRF-Token``;
- every response says: scripts and styles from this server only, no framing, no referrer.
"""

from __future__ import annotations

import hmac
import json
from http.cookies import SimpleCookie
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl, urlencode

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

SECURITY_HEADERS = [
    (
        b"content-security-policy",
        b"default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        b"connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; "
        b"frame-ancestors 'none'",
    ),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"cache-control", b"no-store"),
]


class Guard:
    def __init__(self, app: ASGIApp, *, token: str, csrf: str, hosts: set[str], port: int) -> None:
        self.app = app
        self.token = token
        self.csrf = csrf
        self.hosts = {h.lower() for h in hosts}
        self.origins = {f"http://{h}" for h in self.hosts}
        self.cookie = f"journal_agent_view_{port}"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        refusal = self._refusal(scope, headers)
        if refusal is not None:
            if scope["method"] in ("GET", "HEAD") and not scope["path"].startswith("/api/"):
                await _refuse_page(send, refusal)  # a person at a browser: a page, not JSON
            else:
                await _respond(send, 403, {"error": refusal})
            return
        query = parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
        if any(k == "token" for k, _ in query):
            await self._enter(scope, send, query)
            return

        async def secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *SECURITY_HEADERS]
            await send(message)

        await self.app(scope, receive, secured)

    def _refusal(self, scope: Scope, headers: dict[str, str]) -> str | None:
        """Why this request is refused, or None."""
        if headers.get("host", "").lower() not in self.hosts:
            return "this server answers only to its own address (the Host header is foreign)"
        if not (self._query_token(scope) or self._cookie_token(headers)):
            return "wrong or missing token; open the address `journal-agent view` printed"
        if scope["method"] not in ("GET", "HEAD"):
            if headers.get("origin", "").lower() not in self.origins:
                return "a write must come from this server's own pages (the Origin is foreign)"
            if not hmac.compare_digest(headers.get("x-csrf-token", ""), self.csrf):
                return "the CSRF token is missing or wrong; reload the page and try again"
        return None

    def _query_token(self, scope: Scope) -> bool:
        query = parse_qsl(scope.get("query_string", b"").decode("latin-1"))
        given = [v for k, v in query if k == "token"]
        return len(given) == 1 and hmac.compare_digest(given[0], self.token)

    def _cookie_token(self, headers: dict[str, str]) -> bool:
        cookie = SimpleCookie()
        try:
            cookie.load(headers.get("cookie", ""))
        except Exception:  # a malformed Cookie header: no token
            return False
        morsel = cookie.get(self.cookie)
        return morsel is not None and hmac.compare_digest(morsel.value, self.token)

    async def _enter(self, scope: Scope, send: Send, query: list[tuple[str, str]]) -> None:
        """The opening URL: keep the token in a cookie and drop it from the address bar."""
        rest = urlencode([(k, v) for k, v in query if k != "token"])
        location = scope.get("root_path", "") + scope["path"] + (f"?{rest}" if rest else "")
        cookie = f"{self.cookie}={self.token}; Path=/; HttpOnly; SameSite=Strict"
        await send(
            {
                "type": "http.response.start",
                "status": 303,
                "headers": [
                    (b"location", location.encode("latin-1", "replace")),
                    (b"set-cookie", cookie.encode()),
                    *SECURITY_HEADERS,
                ],
            }
        )
        await send({"type": "http.response.body", "body": b""})


async def _respond(send: Send, status: int, body: dict[str, str]) -> None:
    data = json.dumps(body).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(data)).encode()),
                *SECURITY_HEADERS,
            ],
        }
    )
    await send({"type": "http.response.body", "body": data})


_PAGE = (
    "<!doctype html><html lang=en><head><meta charset=utf-8><title>journal-agent view: not "
    "allowed</title></head><body><h1>journal-agent view</h1><p>{message}.</p><p>The view opens "
    "from the address <code>journal-agent view</code> printed in its terminal (it carries a "
    "one-time token, then kept in a cookie for this port); open that address again, or start "
    "<code>journal-agent view</code> and use the address it prints.</p></body></html>"
)


async def _refuse_page(send: Send, refusal: str) -> None:
    from html import escape

    message = escape(refusal[:1].upper() + refusal[1:])
    data = _PAGE.format(message=message).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 403,
            "headers": [
                (b"content-type", b"text/html; charset=utf-8"),
                (b"content-length", str(len(data)).encode()),
                *SECURITY_HEADERS,
            ],
        }
    )
    await send({"type": "http.response.body", "body": data})
