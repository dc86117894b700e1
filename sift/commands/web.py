"""``sift web``: the judging page, the live dashboard, ``/api`` and ``/metrics``."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import secrets
import signal
import sys
from dataclasses import replace

from sift.errors import SiftError
from sift.settings import Settings

EPILOG = """\
example:
  SIFT_API_TOKEN=s3cret sift web            # http://127.0.0.1:6066/ beside `sift worker`
  sift web --port 8080 --latest             # only messages from now on

Runs beside the workers (same SIFT_BROKER, SIFT_TOPIC_PREFIX, SIFT_APP_ID) and reads
the topics itself; it creates none, and warns when the workers' are not there.
Judging and changing profiles need SIFT_API_TOKEN; without one a random token is made
for this run and printed in the link. Binds SIFT_WEB_HOST (127.0.0.1 by default).
Logs are JSON lines with SIFT_LOG_JSON=true.
"""

log = logging.getLogger("sift.web")


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("web", help="serve the judging page, dashboard, /api and /metrics",
                       description="Serve the judging page, the live dashboard, the JSON API "
                                   "and Prometheus metrics of a running sift service.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--broker", help="broker URL (SIFT_BROKER)")
    p.add_argument("--app-id", help="the workers' consumer group (SIFT_APP_ID)")
    p.add_argument("--host", help="address to bind (SIFT_WEB_HOST, default 127.0.0.1)")
    p.add_argument("--port", type=int, help="port (SIFT_WEB_PORT, default 6066)")
    p.add_argument("--latest", action="store_true",
                   help="read only new messages (default: everything the topics still hold)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from sift.observability import configure_logging

    settings = Settings.from_env(broker=args.broker, app_id=args.app_id, web_host=args.host,
                                 web_port=args.port,
                                 options={"web_host": "--host", "web_port": "--port"})
    if not 0 < settings.web_port < 65536:
        raise SiftError(f"port must be between 1 and 65535, got {settings.web_port}")
    configure_logging(settings.log_level, settings.log_json)
    # client libraries: their connection retries would bury the one-line error; a topic
    # that does not exist yet (the changelog before the first worker) is not an error here
    for noisy, level in (("aiohttp.access", logging.WARNING), ("kafka", logging.CRITICAL),
                         ("aiokafka", logging.ERROR), ("aiokafka.cluster", logging.CRITICAL)):
        logging.getLogger(noisy).setLevel(level)
    generated = not settings.api_token
    if generated:
        settings = replace(settings, api_token=secrets.token_urlsafe(24))
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(settings, from_beginning=not args.latest, show_token=generated))
    return 0


def startup_warnings(settings: Settings, missing: list[str],
                     committed: bool | None) -> list[str]:
    """What ``sift web`` says at start when the workers' topics (``missing``) or their
    group's offsets (``committed`` false) are not on the broker."""
    lines = []
    if missing:
        lines.append(f"{len(missing)} topics do not exist on {settings.broker}: "
                     f"{', '.join(missing)}; is a worker running with SIFT_TOPIC_PREFIX="
                     f"{settings.topic_prefix!r} and SIFT_APP_ID={settings.app_id!r}? (sift web "
                     "creates no topic: it reads them once a worker has created them)")
    if committed is False:
        lines.append(f"the workers' group {settings.app_id!r} has committed no offsets on "
                     f"{settings.broker}: no worker with SIFT_APP_ID={settings.app_id!r} has "
                     "consumed a message there yet (the consumer lag is unknown until one has)")
    return lines


async def serve(settings: Settings, *, from_beginning: bool = True,
                show_token: bool = False) -> None:
    """Run the web app until SIGINT or SIGTERM."""
    from aiohttp import web

    from sift import kafkaclient
    from sift.web.app import create_web_app
    from sift.web.feed import KafkaFeed, KafkaPublisher
    from sift.web.state import WebState

    loop = asyncio.get_running_loop()
    state = WebState()
    feed = KafkaFeed(settings, state, from_beginning=from_beginning)
    # the web creates no topic (the workers do): it created the ones it reads, so a
    # misspelt SIFT_TOPIC_PREFIX or SIFT_APP_ID gave new empty topics and an empty
    # dashboard without a word (forty-fourth session); now it says what is not there
    missing, committed = await loop.run_in_executor(
        None, lambda: kafkaclient.topic_survey(settings, list(feed.topics)))
    for line in startup_warnings(settings, missing, committed):
        log.warning(line)
    publisher = KafkaPublisher(settings)
    try:
        await publisher.start()
        await feed.start()
    except Exception as exc:
        await feed.stop()
        await publisher.stop()
        raise SiftError(f"cannot connect to {settings.broker}: {exc}") from None
    app = create_web_app(state, settings, publisher)
    runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=2.0)
    await runner.setup()
    site = web.TCPSite(runner, settings.web_host, settings.web_port)
    try:
        await site.start()
    except OSError as exc:
        await runner.cleanup()
        await feed.stop()
        await publisher.stop()
        raise SiftError(f"cannot listen on {settings.web_host}:{settings.web_port}: "
                        f"{exc.strerror or exc}") from None
    url = f"http://{settings.web_host}:{settings.web_port}/"
    link = f"{url}#token={settings.api_token}" if show_token else url
    print(f"sift web: serving {link}", flush=True)
    if show_token:
        print("sift web: no SIFT_API_TOKEN set; the link carries a token made for this run",
              file=sys.stderr, flush=True)
    log.info("serving %s", url, extra={"url": url})
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        await runner.cleanup()
        await feed.stop()
        await publisher.stop()
