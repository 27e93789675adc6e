"""The view's web app: Starlette routes over :class:`Pages`, behind :class:`Guard`.

Endpoints are plain functions: Starlette runs them in its thread pool, so reading the journal
or the index never blocks the event loop. The routes mirror the exported site's file names
(``index.html``, ``entries/<id>.html`` …) so one set of relative links serves both.
"""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl

from journal_agent.errors import UserError
from journal_agent.view.files import Missing, Refused
from journal_agent.view.guard import Guard
from journal_agent.view.pages import Mode, NotFound, Pages
from journal_agent.view.site import Site, entry_path

if TYPE_CHECKING:
    from collections.abc import Callable

    from starlette.requests import Request
    from starlette.responses import Response

    from journal_agent.workspace import Workspace

STATIC = Path(__file__).parent / "static"
SEARCH_LIMIT = 10  # as `journal search` shows by default: the list a keystroke replaces


def create_app(ws: Workspace, *, token: str, hosts: set[str], port: int) -> Guard:
    """The ASGI app for one workspace; ``hosts`` are the ``Host`` values it answers to."""
    from starlette.applications import Starlette
    from starlette.routing import Mount, Route
    from starlette.staticfiles import StaticFiles

    csrf = secrets.token_urlsafe(24)
    pages = Pages(Site(ws), Mode(live=True, csrf=csrf))
    views = _Views(pages)
    routes = [
        Route("/", views.home),
        Route("/index.html", views.journal),
        Route("/pages/{number:int}.html", views.journal),
        Route("/tags/{tag}.html", views.tag),
        Route("/entries/{entry:path}", views.entry),
        Route("/records.html", views.records_list),
        Route("/records/{record}.html", views.record),
        Route("/code/{path:path}", views.code),
        Route("/ledger.html", views.ledger),
        Route("/review.html", views.review),
        Route("/inbox.html", views.inbox),
        Route("/api/search", views.search),
        Route("/api/stamp", views.stamp),
        Route("/api/related", views.related),
        Route("/api/disagreements", views.disagreements),
        Route("/api/review", views.rate, methods=["POST"]),
        Route("/api/review/check", views.check_number, methods=["POST"]),
        Route("/api/review/code", views.code_action, methods=["POST"]),
        Route("/api/inbox", views.moment, methods=["POST"]),
        Route("/api/drafts", views.draft, methods=["POST"]),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
    ]
    handlers = {404: views.failed, 405: views.failed, 500: views.crashed}
    app = Starlette(routes=routes, exception_handlers=handlers)
    return Guard(app, token=token, csrf=csrf, hosts=hosts, port=port)


class _Views:
    def __init__(self, pages: Pages) -> None:
        self.pages = pages
        self.site = pages.site

    def _page(self, request: Request, make: Callable[..., str], *args: object) -> Response:
        from starlette.responses import HTMLResponse

        try:
            return HTMLResponse(make(*args))
        except (NotFound, Missing) as exc:
            return self._error(request, 404, _sentence(exc))
        except Refused as exc:
            return self._error(request, 403, _sentence(exc))
        except UserError as exc:
            return self._error(request, 400, exc.message)

    def _error(self, request: Request, status: int, message: str) -> Response:
        """The error page, its links relative to the address asked for (so that its style
        sheet and menu work at any depth)."""
        from starlette.responses import HTMLResponse

        page = request.url.path.lstrip("/") or "index.html"
        return HTMLResponse(self.pages.error(status, message, page), status_code=status)

    def failed(self, request: Request, exc: Exception) -> Response:
        """No such page, or a method the page does not take: the view's own error page."""
        status = getattr(exc, "status_code", 404)
        message = (
            f"there is no page {request.url.path}; the journal's pages start at index.html."
            if status == 404
            else f"{request.url.path} does not take a {request.method} request."
        )
        return self._error(request, status, message)

    def crashed(self, request: Request, exc: Exception) -> Response:
        """A bug of ours: one sentence on the page, the traceback on the server's stderr."""
        message = (
            f"the view failed to show {request.url.path} ({type(exc).__name__}); the "
            "terminal running journal-agent view shows the details."
        )
        return self._error(request, 500, message)

    def home(self, request: Request) -> Response:
        from starlette.responses import RedirectResponse

        return RedirectResponse("/index.html", status_code=303)

    def journal(self, request: Request) -> Response:
        return self._page(request, self.pages.journal, request.path_params.get("number", 1))

    def tag(self, request: Request) -> Response:
        return self._page(request, self.pages.tag, request.path_params["tag"])

    def entry(self, request: Request) -> Response:
        name = request.path_params["entry"]
        return self._page(request, self.pages.entry, name.removesuffix(".html"))

    def record(self, request: Request) -> Response:
        return self._page(request, self.pages.record, request.path_params["record"])

    def records_list(self, request: Request) -> Response:
        return self._page(request, self.pages.records_list)

    def code(self, request: Request) -> Response:
        rel = request.path_params["path"].removesuffix(".html")
        return self._page(request, self.pages.code, rel)

    def ledger(self, request: Request) -> Response:
        return self._page(request, self.pages.ledger)

    def review(self, request: Request) -> Response:
        return self._page(request, self.pages.review)

    def inbox(self, request: Request) -> Response:
        return self._page(request, self.pages.inbox)

    def stamp(self, request: Request) -> Response:
        from starlette.responses import JSONResponse

        files = request.query_params.getlist("file")
        return JSONResponse({"stamp": self.site.stamp(files)})

    def related(self, request: Request) -> Response:
        """The entries like this one (the journal's ``related``), for the entry page."""
        from starlette.responses import JSONResponse

        entry = self.site.entry(request.query_params.get("id", ""))
        if entry is None:
            return JSONResponse({"error": "no such entry."}, status_code=404)
        hits = self.site.related(entry)
        return JSONResponse({"hits": [{**h.to_dict(), "href": entry_path(h.id)} for h in hits]})

    def disagreements(self, request: Request) -> Response:
        """The entries that disagree (all, or those of ``id``), for the journal and entry
        pages."""
        from starlette.responses import JSONResponse

        return JSONResponse({"pairs": self.site.disagreements(request.query_params.get("id"))})

    def search(self, request: Request) -> Response:
        """The CLI's search (words and meaning; ``#tag`` words filter) as JSON hits; with
        ``words=1``, by words alone: the page shows those at once, then the CLI's list."""
        from starlette.responses import JSONResponse

        from journal_agent.journal import api
        from journal_agent.journal.limits import check_query

        words = request.query_params.get("q", "").split()
        tags = [w for w in words if w.startswith("#") and len(w) > 1]
        text = " ".join(w for w in words if w not in tags)
        try:
            check_query(text)
            meaning = request.query_params.get("words") != "1"
            hits, note = api.search_with_note(
                self.site.ws, text, tags, SEARCH_LIMIT, cached=True, meaning=meaning
            )
        except UserError as exc:
            return JSONResponse({"error": exc.message}, status_code=400)
        return JSONResponse(
            {
                "hits": [{**h.to_dict(), "href": entry_path(h.id)} for h in hits],
                "note": note,
            }
        )

    async def rate(self, request: Request) -> Response:
        """A rating from the review page into the same FSRS store as `journal-agent review`."""
        from starlette.concurrency import run_in_threadpool
        from starlette.responses import JSONResponse

        from journal_agent.learning import review

        form = await _form(request)
        try:
            done = await run_in_threadpool(
                review.rate, self.site.ws, form.get("id", ""), form.get("rating", "")
            )
        except UserError as exc:
            return JSONResponse({"error": exc.message}, status_code=400)
        return JSONResponse({k: done[k] for k in ("id", "rating", "due", "state")})

    async def check_number(self, request: Request) -> Response:
        """A number card's answer, checked against the record's value."""
        from journal_agent.view import learning

        form = await _form(request)
        return await self._json(learning.check_number, form.get("id", ""), form.get("answer", ""))

    async def code_action(self, request: Request) -> Response:
        """An entry card whose code changed: the explanation still holds (record the code as
        it is now), or the entry needs revising (a moment in the inbox)."""
        from journal_agent.view import learning

        form = await _form(request)
        return await self._json(learning.code_action, form.get("id", ""), form.get("action", ""))

    async def _json(self, act: Callable[..., dict], *args: str) -> Response:
        from starlette.concurrency import run_in_threadpool
        from starlette.responses import JSONResponse

        try:
            done = await run_in_threadpool(act, self.site, *args)
        except UserError as exc:
            return JSONResponse({"error": exc.message}, status_code=400)
        return JSONResponse(done)

    async def moment(self, request: Request) -> Response:
        """Accept (start /learn on it) or dismiss a captured moment."""
        from starlette.concurrency import run_in_threadpool
        from starlette.responses import JSONResponse

        from journal_agent.view import inbox

        form = await _form(request)
        act = {"accept": inbox.accept, "dismiss": inbox.dismiss}.get(form.get("action", ""))
        if act is None:
            return JSONResponse({"error": "the action must be accept or dismiss."}, 400)
        try:
            done = await run_in_threadpool(act, self.site, form.get("id", ""))
        except UserError as exc:
            return JSONResponse({"error": exc.message}, status_code=400)
        return JSONResponse(done)

    async def draft(self, request: Request) -> Response:
        """Accept (append to the journal, checked) or reject (delete) a draft, as
        `inbox accept-draft` / `reject-draft` do."""
        from starlette.concurrency import run_in_threadpool
        from starlette.responses import JSONResponse

        from journal_agent.view import drafts

        form = await _form(request)
        act = {"accept": drafts.accept, "reject": drafts.reject}.get(form.get("action", ""))
        if act is None:
            return JSONResponse({"error": "the action must be accept or reject."}, 400)
        try:
            status, done = await run_in_threadpool(act, self.site, form.get("id", ""))
        except UserError as exc:
            return JSONResponse({"error": exc.message}, status_code=400)
        return JSONResponse(done, status_code=status)


def _sentence(exc: Exception) -> str:
    return str(exc).rstrip(".") + "."


async def _form(request: Request) -> dict[str, str]:
    return dict(parse_qsl((await request.body()).decode("utf-8", "replace")))
