"""The aiohttp application: pages, ``/api``, server-sent events and ``/metrics``.

:func:`create_web_app` takes a :class:`~sift.web.state.WebState` (what to show)
and a :class:`Publisher` (where judgments and profile specs go), so tests run it
with a recording publisher and no broker; ``sift web`` gives it the Kafka feed
and producer of :mod:`sift.web.feed`.

Writes (``POST /api/judgments``, ``POST /api/profiles``,
``DELETE /api/profiles/{name}``) need ``Authorization: Bearer <SIFT_API_TOKEN>``;
the token is compared with :func:`hmac.compare_digest` before the body is even
read, and with no token configured every write is refused.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hmac
import logging
import re
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import orjson
from aiohttp import web

from sift.hosts import host_refused, refusal
from sift.observability import CONTENT_TYPE
from sift.settings import Settings
from sift.topics.codecs import dumps, loads
from sift.topics.errors import RecordError
from sift.topics.records import Judgment, ProfileSpec, clip
from sift.web import assets, pages
from sift.web.openapi import openapi
from sift.web.state import WebState

log = logging.getLogger("sift.web")

MAX_BODY = 256 * 1024
#: ``/api/pending``'s ``limit``: ASCII digits (at most four, and the range, checked after)
LIMIT = re.compile(r"[0-9]+")
EVENT_INTERVAL = 1.0
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
       "connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")


class Publisher(Protocol):
    """Where the web app's writes go (Kafka in production, a list in tests)."""

    async def send(self, topic: str, key: bytes, value: bytes) -> None:
        """Publish one message; raise on failure."""


class ApiError(Exception):
    """A request that cannot be served: answered as ``{"error": message}`` with ``status``."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


STATE = web.AppKey("state", WebState)
SETTINGS = web.AppKey("settings", Settings)
PUBLISHER = web.AppKey("publisher", Publisher)
STOPPING = web.AppKey("stopping", asyncio.Event)


def json_response(obj: Any, status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(obj), status=status, content_type="application/json")


def error(status: int, message: str, **headers: str) -> web.Response:
    resp = json_response({"error": message}, status)
    resp.headers.update(headers)
    return resp


def absent(state: WebState, what: str) -> web.Response:
    """404 for a name that is not there, or 503 (with ``Retry-After``) while the feed has
    not yet read what the topics held when ``sift web`` started: a profile is not known
    until its spec or state record is read, and a restarted web called a profile that
    exists "no profile" for as long as it took (forty-sixth session)."""
    if state.caught_up:
        return error(404, what)
    return error(503, not_yet(state, what), **{"Retry-After": "2"})


def not_yet(state: WebState, what: str) -> str:
    behind = "" if state.behind is None else f", {state.behind} messages to go"
    return f"{what} yet: sift web is still reading the topics{behind}; try again shortly"


def authorized(request: web.Request, token: str) -> bool:
    """Whether the request carries the API token (``Authorization: Bearer`` or ``X-Sift-Token``)."""
    if not token:
        return False
    header = request.headers.get("Authorization", "")
    given = header[7:].strip() if header[:7].lower() == "bearer " else request.headers.get(
        "X-Sift-Token", "")
    return hmac.compare_digest(given.encode("utf-8", "replace"), token.encode("utf-8"))


def requires_token(handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
                   ) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    """Refuse (401, nothing read, nothing changed) unless the request carries the token."""

    async def wrapped(request: web.Request) -> web.StreamResponse:
        settings = request.app[SETTINGS]
        if not authorized(request, settings.api_token):
            why = ("no API token is configured (set SIFT_API_TOKEN)" if not settings.api_token
                   else "missing or wrong API token")
            return error(401, why, **{"WWW-Authenticate": 'Bearer realm="sift"'})
        return await handler(request)

    wrapped.__name__ = handler.__name__
    wrapped.__doc__ = handler.__doc__
    return wrapped


async def read_json(request: web.Request) -> Any:
    # a declared length over the limit: refused before reading (aiohttp counts the bytes
    # read, and waited for ones a client declared and never sent; forty-ninth session)
    if request.content_length is not None and request.content_length > MAX_BODY:
        raise ApiError(413, f"request body is over {MAX_BODY} bytes")
    try:
        raw = await request.read()
    except web.HTTPRequestEntityTooLarge:
        raise ApiError(413, f"request body is over {MAX_BODY} bytes") from None
    except web.RequestPayloadError as exc:  # a Content-Encoding that does not decode: was a 500
        # its text is the parser error's "400, message:\n  <why>": the why, on one line
        why = str(getattr(exc.__cause__, "message", "") or exc)
        raise ApiError(400, f"cannot read the request body: {clip(' '.join(why.split()))}") from None
    try:
        return loads(raw)
    except RecordError as exc:
        raise ApiError(400, str(exc)) from None


async def publish(request: web.Request, topic: str, key: bytes, value: bytes) -> None:
    settings = request.app[SETTINGS]
    try:
        await request.app[PUBLISHER].send(settings.topic(topic), key, value)
    except Exception as exc:
        # a time-out (asyncio.wait_for) has no text: the 503 ended in ": "
        reason = clip(str(exc) or type(exc).__name__)
        log.warning("cannot publish to %s: %s", settings.topic(topic), reason)
        raise ApiError(503, f"cannot publish to {settings.topic(topic)}: {reason}") from None


# ----------------------------------------------------------------------------- pages
async def dashboard(request: web.Request) -> web.Response:
    return web.Response(text=pages.dashboard(request.app[STATE].snapshot()),
                        content_type="text/html")


async def judge(request: web.Request) -> web.Response:
    state = request.app[STATE]
    name = request.match_info["profile"]
    if state.is_review(name):
        return web.Response(text=pages.judge_page(name, state.pending(name, 100), None,
                                                  review=state.review_summary(name)),
                            content_type="text/html")
    view = state.shown(name)
    if view is None:
        if not state.caught_up:
            return web.Response(text=pages.not_found(not_yet(state, f"no profile {name!r}"),
                                                     title="Not yet"),
                                status=503, content_type="text/html",
                                headers={"Retry-After": "2"})
        return web.Response(text=pages.not_found(f"no profile {name!r}"), status=404,
                            content_type="text/html")
    state.refresh_states()
    return web.Response(text=pages.judge_page(name, state.pending(name, 100),
                                              state.profile_summary(view)),
                        content_type="text/html")


async def static(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    if name == "app.js":
        return web.Response(text=assets.JS, content_type="text/javascript")
    if name == "app.css":
        return web.Response(text=assets.CSS, content_type="text/css")
    raise web.HTTPNotFound()


# ----------------------------------------------------------------------------- API
async def list_profiles(request: web.Request) -> web.Response:
    state = request.app[STATE]
    state.refresh_states()
    return json_response({"profiles": [state.profile_summary(state.profiles[n])
                                       for n in state.shown_names()]})


async def get_profile(request: web.Request) -> web.Response:
    state = request.app[STATE]
    name = request.match_info["profile"]
    view = state.shown(name)
    if view is None:
        return absent(state, f"no profile {name!r}")
    state.refresh_states()
    return json_response(state.profile_summary(view))


#: the fields of a profile spec (what the OpenAPI ``ProfileSpec`` lists)
SPEC_FIELDS = tuple(f.name for f in dataclasses.fields(ProfileSpec))


@requires_token
async def put_profile(request: web.Request) -> web.Response:
    obj = await read_json(request)
    if isinstance(obj, dict) and "mode" in obj:
        # a review spec: published as a profile spec it lost its mode and made a standing
        # profile of the name (forty-fourth session)
        return error(400, "reviews are created with `sift review start` (a review spec on the "
                          "profiles topic), not POST /api/profiles: a profile spec has no 'mode'")
    unknown = sorted(k for k in obj if k not in SPEC_FIELDS) if isinstance(obj, dict) else []
    if unknown:
        named = ", ".join(repr(k[:40]) for k in unknown[:5]) + (", ..." if len(unknown) > 5 else "")
        return error(400, f"unknown field{'s' if len(unknown) > 1 else ''} {named} in a "
                          f"profile spec (its fields: {', '.join(SPEC_FIELDS)})")
    try:
        spec = ProfileSpec.from_obj(obj)
    except RecordError as exc:
        return error(400, str(exc))
    if spec.delete:
        return error(400, "use DELETE /api/profiles/{profile} to delete a profile")
    value = dumps(spec.to_obj())
    await publish(request, "profiles", spec.profile.encode(), value)
    request.app[STATE].on_profile_spec(value)
    log.info("profile %s published", spec.profile, extra={"profile": spec.profile})
    return json_response({"spec": spec.to_obj()}, 202)


@requires_token
async def delete_profile(request: web.Request) -> web.Response:
    name = request.match_info["profile"]
    state = request.app[STATE]
    if state.shown(name) is None:
        return absent(state, f"no profile {name!r}")
    value = dumps({"profile": name, "delete": True})
    await publish(request, "profiles", name.encode(), value)
    state.on_profile_spec(value)
    log.info("profile %s deletion published", name, extra={"profile": name})
    return json_response({"deleted": name}, 202)


async def pending(request: web.Request) -> web.Response:
    name = request.query.get("profile", "")
    if not name:
        return error(400, "query parameter 'profile' is required")
    raw = request.query.get("limit", "50")
    # ASCII digits only: int() took "1_0", " 2 " and other scripts' digits; at most four,
    # so int() never reads a long string
    if not LIMIT.fullmatch(raw) or len(raw) > 4 or not 1 <= int(raw) <= 1000:
        return error(400, "query parameter 'limit' must be an integer from 1 to 1000 (at most "
                          f"4 ASCII digits), got {raw[:20]!r}")
    limit = int(raw)
    state = request.app[STATE]
    if not state.is_review(name) and state.shown(name) is None:
        # "nothing awaiting judgment" for a misspelt name looked like an empty queue
        return absent(state, f"no profile or review {name!r}")
    return json_response({"profile": name, "items": state.pending(name, limit)})


@requires_token
async def post_judgment(request: web.Request) -> web.Response:
    obj = await read_json(request)
    if not isinstance(obj, dict):
        return error(400, "a judgment must be a JSON object")
    correct = obj.get("correct", False)
    if not isinstance(correct, bool):
        return error(400, f"judgment: 'correct' must be a boolean, got {clip(repr(correct))}")
    obj = {k: obj[k] for k in ("doc_id", "profile", "relevant", "judge", "id", "profile_epoch")
           if k in obj}
    for key, default in (("judge", "web"), ("id", f"web-{uuid.uuid4().hex}")):
        value = obj.get(key)
        if value is None or (isinstance(value, str) and not value.strip()):  # null or blank
            obj[key] = default
    obj["ts"] = time.time()
    try:
        j = Judgment.from_obj(obj)
    except RecordError as exc:
        return error(400, str(exc))
    state = request.app[STATE]
    if not (state.known(j.profile) or state.is_review(j.profile)):
        return absent(state, f"no profile or review {j.profile!r}")
    if j.profile_epoch is None:
        # meant for the life of the profile whose decision put the document in the queue:
        # a worker refuses it if the profile was deleted and created again since
        epoch = state.pending_epoch(j.profile, j.doc_id)
        if epoch is not None:
            j = dataclasses.replace(j, profile_epoch=epoch)
    refused = state.claim(j, correct)  # held across the publish: a second POST of it waits out
    if refused is not None:
        # the verdict that counts, when the document is judged: the page must not call a
        # click that changed nothing "saved" (forty-fourth session)
        verdict = state.verdict(j.profile, j.doc_id)
        body: dict[str, Any] = {"error": refused}
        if verdict is not None:
            body["relevant"] = verdict
        return json_response(body, 409)
    try:
        text = state.document_text(j.doc_id)
        if text is not None:
            j = dataclasses.replace(j, text=text)
        await publish(request, "judgments", j.profile.encode(), dumps(j.to_obj()))
        state.apply_judgment(j, j.ts or time.time())
    finally:
        state.release(j)
    log.info("judgment %s %s %s", j.profile, j.doc_id, j.relevant,
             extra={"profile": j.profile, "doc_id": j.doc_id, "relevant": j.relevant})
    out = j.to_obj()
    out.pop("text", None)
    return json_response({"judgment": out}, 202)


async def stats(request: web.Request) -> web.Response:
    return json_response(request.app[STATE].snapshot())


async def events(request: web.Request) -> web.StreamResponse:
    """Server-sent events: the stats snapshot every second until the client or server leaves."""
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream",
                                       "Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
    await resp.prepare(request)  # the security headers: security_headers, on prepare
    stopping = request.app[STOPPING]
    state = request.app[STATE]
    with contextlib.suppress(ConnectionResetError, asyncio.CancelledError):
        await resp.write(b"retry: 2000\n\n")
        while not stopping.is_set():
            await resp.write(b"event: stats\ndata: " + orjson.dumps(state.snapshot()) + b"\n\n")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stopping.wait(), EVENT_INTERVAL)
    return resp


async def openapi_json(request: web.Request) -> web.Response:
    return json_response(openapi())


async def metrics(request: web.Request) -> web.Response:
    resp = web.Response(text=request.app[STATE].metrics())
    resp.headers["Content-Type"] = CONTENT_TYPE
    return resp


@web.middleware
async def headers_mw(request: web.Request,
                     handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
                     ) -> web.StreamResponse:
    """Errors as one-line JSON under ``/api`` (the security headers: :func:`security_headers`)."""
    try:
        return await handler(request)
    except ApiError as exc:
        return error(exc.status, exc.message)
    except web.HTTPException as exc:
        if request.path.startswith("/api") and exc.content_type != "application/json":
            resp = error(exc.status, exc.text or exc.reason)
            if "Allow" in exc.headers:  # a 405 names the methods the path takes
                resp.headers["Allow"] = exc.headers["Allow"]
            return resp
        raise


@web.middleware
async def host_mw(request: web.Request,
                  handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
                  ) -> web.StreamResponse:
    """403 for a ``Host`` this server does not answer (:func:`sift.hosts.host_refused`)."""
    name = host_refused(request.headers.get("Host"), request.app[SETTINGS])
    if name is not None:
        return error(403, refusal(clip(name)))
    return await handler(request)


async def security_headers(request: web.Request, resp: web.StreamResponse) -> None:
    """Security headers on every response, set as it is prepared: a middleware sets them
    too late on a response its handler prepared itself (``/api/events`` had none;
    forty-fourth session) and not at all on an exception it lets through (a page's 404)."""
    resp.headers.setdefault("Content-Security-Policy", CSP)
    resp.headers.setdefault("X-Content-Type-Options", "nosniff")
    resp.headers.setdefault("Referrer-Policy", "no-referrer")
    resp.headers.setdefault("X-Frame-Options", "DENY")


ROUTES: list[tuple[str, str, Callable[[web.Request], Awaitable[web.StreamResponse]]]] = [
    ("GET", "/", dashboard),
    ("GET", "/judge/{profile:.+}", judge),
    ("GET", "/static/{name}", static),
    ("GET", "/api/profiles", list_profiles),
    ("POST", "/api/profiles", put_profile),
    ("GET", "/api/profiles/{profile:.+}", get_profile),
    ("DELETE", "/api/profiles/{profile:.+}", delete_profile),
    ("GET", "/api/pending", pending),
    ("POST", "/api/judgments", post_judgment),
    ("GET", "/api/stats", stats),
    ("GET", "/api/events", events),
    ("GET", "/api/openapi.json", openapi_json),
    ("GET", "/metrics", metrics),
]


def create_web_app(state: WebState, settings: Settings, publisher: Publisher) -> web.Application:
    """The web application over ``state``, publishing writes through ``publisher``."""
    app = web.Application(middlewares=[host_mw, headers_mw], client_max_size=MAX_BODY)
    app[STATE] = state
    app[SETTINGS] = settings
    app[PUBLISHER] = publisher
    app[STOPPING] = asyncio.Event()

    async def on_shutdown(app: web.Application) -> None:
        app[STOPPING].set()

    app.on_shutdown.append(on_shutdown)
    app.on_response_prepare.append(security_headers)
    for method, path, handler in ROUTES:
        app.router.add_route(method, path, handler)
    return app
