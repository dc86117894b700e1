"""``sift profiles``: list, add and remove the service's profiles (through Kafka)."""

from __future__ import annotations

import argparse
import math
import sys
import zlib
from typing import Any

import orjson

from sift.errors import SiftError
from sift.settings import Settings
from sift.topics.codecs import dumps, loads
from sift.topics.errors import RecordError
from sift.topics.records import ProfileSpec

EPILOG = """\
examples:
  sift profiles add wheat --query "wheat grain exports" --positive r123 --positive r456
  sift profiles add gold --query gold --model knn --param k=20 --update 10
  sift profiles list
  sift profiles rm wheat

Specs go to the profiles topic keyed by name; the worker owning the profile's shard
trains it. 'list' reads the profile table's changelog (SIFT_APP_ID names it).
"""


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("profiles", help="list, add or remove profiles of the running service",
                       description="Manage the profiles of the streaming service.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--broker", help="broker URL (SIFT_BROKER)")
    verbs = p.add_subparsers(dest="verb", metavar="VERB", required=True)
    raw = argparse.RawDescriptionHelpFormatter
    ls = verbs.add_parser("list", help="the profiles and their thresholds", formatter_class=raw,
                          epilog="example:\n  sift profiles list --json")
    ls.add_argument("--json", action="store_true", help="one JSON object per profile")
    add = verbs.add_parser("add", help="create or replace a profile", formatter_class=raw,
                           epilog='example:\n  sift profiles add wheat --query "wheat grain exports" --positive r123')
    add.add_argument("name")
    add.add_argument("--query", default="")
    add.add_argument("--model", default="rocchio")
    add.add_argument("--measure", default="t11su")
    add.add_argument("--update", default="every", help="every, never or a positive integer")
    add.add_argument("--positive", action="append", default=[], help="document id or text")
    add.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                     help="model parameter (value parsed as JSON when it can be)")
    rm = verbs.add_parser("rm", help="delete a profile", formatter_class=raw,
                          epilog="example:\n  sift profiles rm wheat")
    rm.add_argument("name")
    p.set_defaults(func=run)


def parse_params(items: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise SiftError(f"--param must be KEY=VALUE, got {item!r}")
        try:
            out[key] = loads(raw)
        except RecordError:
            out[key] = raw
    return out


def send_spec(settings: Settings, obj: dict[str, Any]) -> ProfileSpec:
    from sift.kafkaclient import ensure_topics, producer

    spec = ProfileSpec.from_obj(obj)
    topic = settings.topic("profiles")
    ensure_topics(settings, [topic])
    prod = producer(settings)
    try:
        prod.send(topic, key=spec.profile.encode(), value=dumps(obj))
        prod.flush(timeout=30)
    finally:
        prod.close(timeout=10)
    return spec


def list_profiles(settings: Settings) -> list[dict[str, Any]]:
    """Summaries of the profiles in the table's changelog (last value per name)."""
    from sift.agents.app import TABLE
    from sift.agents.harness import read_all
    from sift.agents.service import shard_of

    topic = f"{settings.app_id}-{TABLE}-changelog"
    latest: dict[str, bytes | None] = {}
    for key, value, _, _ in read_all(settings, topic, idle=1.0):
        latest[(key or b"").decode()] = value
    out = []
    for name, value in sorted(latest.items()):
        if not value:
            continue
        try:
            rec = orjson.loads(value if value[:1] == b"{" else zlib.decompress(value))
            st = rec["state"]
            thr = st["threshold"]
            out.append({"profile": name, "model": st["params"]["model"],
                         "update": st["params"]["update"], "measure": st["params"]["measure"],
                         "threshold": math.inf if thr is None else thr,
                         "model_version": st["model_version"], "judged": st["n_judged"],
                         "shard": shard_of(name, settings.partitions)})
        except (zlib.error, orjson.JSONDecodeError, KeyError, TypeError):
            out.append({"profile": name, "error": "unreadable state"})
    return out


def run(args: argparse.Namespace) -> int:
    settings = Settings.from_env(broker=args.broker)
    if args.verb == "add":
        update: Any = int(args.update) if str(args.update).isdigit() else args.update
        obj = {"profile": args.name, "query": args.query, "model": args.model,
               "measure": args.measure, "update": update, "positives": args.positive,
               "params": parse_params(args.param)}
        spec = send_spec(settings, obj)
        print(f"sent profile {spec.profile!r} ({spec.model}) to {settings.topic('profiles')}")
    elif args.verb == "rm":
        send_spec(settings, {"profile": args.name, "delete": True})
        print(f"sent deletion of profile {args.name!r} to {settings.topic('profiles')}")
    else:
        rows = list_profiles(settings)
        if args.json:
            for r in rows:
                sys.stdout.write(orjson.dumps(r).decode() + "\n")
        else:
            print(f"{'profile':24} {'model':8} {'update':6} {'threshold':>10} {'version':>7} "
                  f"{'judged':>6} {'shard':>5}")
            for r in rows:
                if "error" in r:
                    print(f"{r['profile']:24} {r['error']}")
                    continue
                print(f"{r['profile']:24} {r['model']:8} {r['update']!s:6} "
                      f"{r['threshold']:>10.4f} {r['model_version']:>7} {r['judged']:>6} "
                      f"{r['shard']:>5}")
            print(f"{len(rows)} profiles")
    return 0
