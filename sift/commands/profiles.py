"""``sift profiles``: list, add and remove the service's profiles (through Kafka)."""

from __future__ import annotations

import argparse
import base64
import math
import sys
import time
import zlib
from typing import Any

import orjson

from sift.commands._common import broker_option, json_line, nonnegative_seconds, printable
from sift.errors import SiftError
from sift.settings import Settings
from sift.topics.codecs import dumps, loads
from sift.topics.errors import RecordError
from sift.topics.records import ProfileSpec

EPILOG = """\
examples:
  sift profiles add wheat --query "wheat grain exports" --positive r5 --positive r6 --wait 30
  sift profiles add gold --query gold --model knn --param k=20 --update 10
  sift profiles list
  sift profiles rm wheat

Specs go to the profiles topic keyed by name; the worker owning the profile's shard
trains it. 'add' of a profile that exists replaces it: trained afresh from the new spec,
it learns again the judgments the old one held (--reset: without them). 'list' reads
the profile table's changelog (SIFT_APP_ID names it).
With --wait S, 'add' and 'rm' wait up to S seconds for the worker's answer: the
profile's record in the changelog (exit 0), or the spec's dead letter, whose reason
and message are printed (exit 1; for example unknown_positive for a positive that is
neither a known document id nor a text).
"""


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("profiles", help="list, add or remove profiles of the running service",
                       description="Manage the profiles of the streaming service.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    verbs = p.add_subparsers(dest="verb", metavar="VERB", required=True)
    raw = argparse.RawDescriptionHelpFormatter
    ls = verbs.add_parser("list", help="the profiles and their thresholds", formatter_class=raw,
                          description="List the profiles of the running service and their\n"
                                      "thresholds, read from the profile table's changelog.",
                          epilog="example:\n  sift profiles list --json")
    ls.add_argument("--json", action="store_true", help="one JSON object per profile")
    add = verbs.add_parser("add", help="create or replace a profile", formatter_class=raw,
                           description="Create a profile of the running service from a query\n"
                                       "and positive documents (ids or texts), or replace the\n"
                                       "profile of that name; a worker trains it.",
                           epilog='example:\n  sift profiles add wheat --query "wheat grain exports" --positive r5')
    add.add_argument("name")
    add.add_argument("--query", default="", help="query text (default none)")
    add.add_argument("--model", default="rocchio",
                     help="rocchio (default), kantor, knn or fusion")
    add.add_argument("--measure", default="t11su",
                     help="what TROT optimises: t11su (default), t11f, f1, t11u, precision or "
                          "utility:R:N (credit R a relevant delivery, N a non-relevant one)")
    add.add_argument("--update", default="every", help="every, never or a positive integer")
    add.add_argument("--positive", action="append", default=[], help="document id or text")
    add.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                     help="model parameter (value parsed as JSON when it can be)")
    add.add_argument("--bags", type=int, default=1, metavar="B",
                     help="B profiles (1 to 5) from consecutive pseudolabel seeds deciding "
                          "together (sift.filters.bagging; B times the state; default 1)")
    add.add_argument("--bag-rule", default="margin", help="how bagged members decide together: "
                     "margin (default), abstain or vote")
    add.add_argument("--reset", action="store_true",
                     help="replacing a profile, leave out the judgments it learned (by default "
                          "the new profile learns them again)")
    rm = verbs.add_parser("rm", help="delete a profile", formatter_class=raw,
                          description="Delete a profile of the running service.",
                          epilog="example:\n  sift profiles rm wheat --wait 10")
    rm.add_argument("name")
    for verb in (add, rm):
        verb.add_argument("--wait", type=nonnegative_seconds, default=0.0, metavar="S",
                          help="wait up to S seconds for the worker's answer (default 0: "
                               "send and return)")
    broker_option(p, [ls, add, rm])
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


def check_spec(obj: dict[str, Any]) -> None:
    """Build (without training) the profile a spec describes, so that a parameter the
    worker would refuse (an unknown one, a value out of range) is a one-line error here,
    before anything is sent, as ``sift replay --param`` is; without it the command said
    "sent" and the worker dead-lettered the spec."""
    from sift.filters.bagging import BaggedProfile
    from sift.filters.profile import Profile

    try:
        spec = ProfileSpec.from_obj(obj)
    except RecordError as exc:
        raise SiftError(str(exc)) from None
    if spec.delete:
        return
    kwargs: dict[str, Any] = dict(query=spec.query or spec.profile, model=spec.model,
                                  model_params=spec.params, measure=spec.measure,
                                  update=spec.update)
    try:
        if spec.bags > 1:
            BaggedProfile.of(spec.profile, spec.bags, rule=spec.bag_rule, **kwargs)
        else:
            Profile(spec.profile, **kwargs)
    except SiftError as exc:
        raise SiftError(f"profile {spec.profile!r}: {exc}") from None


def send_spec(settings: Settings, obj: dict[str, Any]) -> ProfileSpec:
    from sift.kafkaclient import Sends, ensure_topics, producer

    spec = ProfileSpec.from_obj(obj)
    topic = settings.topic("profiles")
    ensure_topics(settings, [topic])
    prod = producer(settings)
    try:
        value = dumps(obj)
        sends = Sends(prod)
        sends.send(topic, spec.profile.encode(), value,
                   f"profile spec {spec.profile!r} ({len(value):,} bytes)")
        sends.flush(timeout=30)
    finally:
        prod.close(timeout=10)
    return spec


def changelog_topic(settings: Settings) -> str:
    """The profile table's changelog topic (the table's name under ``SIFT_APP_ID``)."""
    from sift.agents.app import TABLE

    return f"{settings.app_id}-{TABLE}-changelog"


def journal_topic(settings: Settings) -> str:
    """The changelog of the profiles' judgment journals (:mod:`sift.agents.journal`)."""
    from sift.agents.app import JOURNAL_TABLE

    return f"{settings.app_id}-{JOURNAL_TABLE}-changelog"


def send_and_wait(settings: Settings, obj: dict[str, Any], timeout: float) -> tuple[bool, str]:
    """Send a spec and wait up to ``timeout`` seconds for the worker's answer:
    ``(True, summary)`` when the profile's record (or, for a deletion, its tombstone)
    with this spec reaches the table's changelog, ``(False, "reason: message")`` when the
    spec is dead-lettered. Raises :class:`SiftError` when neither comes in time."""
    from sift.kafkaclient import consumer_at_ends, ensure_topics

    spec = ProfileSpec.from_obj(obj)
    value = dumps(obj)
    topics = [changelog_topic(settings), settings.topic("dead-letters")]
    ensure_topics(settings, [settings.topic("dead-letters")])
    # the ends before the spec is sent: an answer can only come after them
    with consumer_at_ends(settings, topics) as cons:
        send_spec(settings, obj)
        deadline = time.monotonic() + timeout
        want = spec.to_obj()
        while time.monotonic() < deadline:
            for tp, records in cons.poll(timeout_ms=200).items():
                for r in records:
                    if tp.topic == topics[1]:
                        answer = dead_letter_answer(r.value, value)
                        if answer is not None:
                            return False, answer
                    elif (r.key or b"").decode("utf-8", "replace") == spec.profile:
                        answer = _record_answer(r.value, want, spec.delete)
                        if answer is not None:
                            return True, answer
    raise SiftError(f"no answer for profile {spec.profile!r} within {timeout:g} s: is a worker "
                    f"running with SIFT_APP_ID={settings.app_id}?")


def dead_letter_answer(letter: bytes | None, sent: bytes) -> str | None:
    """``reason: message`` of a dead letter whose original bytes are ``sent``, else None."""
    try:
        obj = orjson.loads(letter or b"")
        if base64.b64decode(obj.get("original_b64", "")) != sent:
            return None
        return f"{obj['reason']}: {obj.get('message', '')}"
    except (orjson.JSONDecodeError, ValueError, KeyError, TypeError, AttributeError):
        return None


def _record_answer(value: bytes | None, want: dict[str, Any], delete: bool) -> str | None:
    if not value:
        return "deleted" if delete else None
    if delete:
        return None
    try:
        rec = _record(value)
    except _UNREADABLE:
        return None
    if rec["spec"] != want:
        return None  # the record of an earlier spec, rewritten meanwhile
    bags = f", {rec['bags']} bagged" if rec["bags"] > 1 else ""
    verb = "replaced" if rec["replaces"] else "created"
    learned = f", {rec['judged']} judgments learned" if rec["judged"] else ""
    return (f"{verb} ({rec['model']}{bags}, threshold {rec['threshold']:.4f}, "
            f"version {rec['model_version']}{learned})")


#: what a table value that is not a profile record raises in :func:`_record`
_UNREADABLE = (zlib.error, orjson.JSONDecodeError, KeyError, TypeError, AttributeError, ValueError)


def _record(data: bytes, journal: bytes | None = None) -> dict[str, Any]:
    """The summary of a profile table value (plain or zlib-compressed orjson): its spec,
    model, update policy, measure, threshold (``inf`` for none), model version and the
    number of judgments learned and of those waiting for the update policy's next
    model update (``update`` = n); after the batches of the profile's judgment
    ``journal`` when it continues the record (the record is rewritten only now and
    then). Raises one of :data:`_UNREADABLE` for anything else."""
    from sift.agents.journal import latest_after, pending_in_state, record_profile_epoch

    rec = orjson.loads(data if data[:1] == b"{" else zlib.decompress(data))
    st = rec["state"]
    now = latest_after((rec.get("journal") or {}).get("epoch"), st["model_version"], journal) or {
        "threshold": st["threshold"], "model_version": st["model_version"],
        "n_judged": st["n_judged"], "n_pending": pending_in_state(st)}
    thr = now["threshold"]
    return {"spec": rec.get("spec"), "model": st["params"]["model"],
            "bags": int(st["params"].get("bags", 1)),
            "update": st["params"]["update"], "measure": st["params"]["measure"],
            "threshold": math.inf if thr is None else float(thr),
            "model_version": int(now["model_version"]), "judged": int(now["n_judged"]),
            "waiting": int(now["n_pending"]), "replaces": rec.get("replaces") is True,
            "profile_epoch": str(record_profile_epoch(rec))}


def list_profiles(settings: Settings) -> list[dict[str, Any]]:
    """Summaries of the profiles in the table's changelog (last value per name)."""
    from sift.agents.service import shard_of
    from sift.kafkaclient import partition_counts, read_all

    table = changelog_topic(settings)
    if table not in partition_counts(settings, [table]):
        # no worker of this app id ever ran here: "0 profiles" would hide a misspelt id
        raise SiftError(f"no profile table on {settings.broker}: topic {table} does not exist; "
                        f"is SIFT_APP_ID={settings.app_id} the workers' (a worker creates it "
                        "when it starts)?")

    def last_values(topic: str) -> dict[str, bytes | None]:
        # a key that is not UTF-8 (no worker writes one) is shown escaped, not a crash
        return {(key or b"").decode("utf-8", "backslashreplace"): value
                for key, value, _, _ in read_all(settings, topic, idle=1.0)}

    latest = last_values(changelog_topic(settings))
    journals = last_values(journal_topic(settings))
    out: list[dict[str, Any]] = []
    for name, data in sorted(latest.items()):
        if not data:
            continue
        try:
            rec = _record(data, journals.get(name))
        except _UNREADABLE:
            out.append({"profile": name, "error": "unreadable state"})
            continue
        del rec["spec"], rec["replaces"]
        out.append({"profile": name, **rec, "shard": shard_of(name, settings.partitions)})
    return out


def run(args: argparse.Namespace) -> int:
    settings = Settings.from_env(broker=args.broker)
    if args.verb == "add":
        update: Any = int(args.update) if str(args.update).isdigit() else args.update
        obj = {"profile": args.name, "query": args.query, "model": args.model,
               "measure": args.measure, "update": update, "positives": args.positive,
               "params": parse_params(args.param)}
        if args.bags != 1 or args.bag_rule != "margin":
            obj.update(bags=args.bags, bag_rule=args.bag_rule)
        if args.reset:
            obj["reset"] = True
        check_spec(obj)  # before connecting
        if args.wait:
            return _answer(args.name, *send_and_wait(settings, obj, args.wait))
        spec = send_spec(settings, obj)
        print(f"sent profile {spec.profile!r} ({spec.model}) to {settings.topic('profiles')}")
    elif args.verb == "rm":
        obj = {"profile": args.name, "delete": True}
        if args.wait:
            return _answer(args.name, *send_and_wait(settings, obj, args.wait))
        send_spec(settings, obj)
        print(f"sent deletion of profile {args.name!r} to {settings.topic('profiles')}")
    else:
        rows = list_profiles(settings)
        if args.json:
            for r in rows:
                sys.stdout.write(json_line(r) + "\n")
        else:
            print(f"{'profile':24} {'model':8} {'bags':>4} {'update':6} {'measure':9} {'threshold':>10} "
                  f"{'version':>7} {'judged':>6} {'waiting':>7} {'shard':>5}")
            for r in rows:
                # names (and anything else read from the topics) escaped: no raw newline
                # or terminal escape sequence reaches the operator's terminal
                name = printable(r["profile"])
                if "error" in r:
                    print(f"{name:24} {printable(r['error'])}")
                    continue
                print(f"{name:24} {printable(str(r['model'])):8} {r['bags']:>4} "
                      f"{printable(str(r['update'])):6} {printable(str(r['measure'])):9} "
                      f"{r['threshold']:>10.4f} {r['model_version']:>7} {r['judged']:>6} "
                      f"{r['waiting']:>7} {r['shard']:>5}")
            print(f"{len(rows)} profiles")
    return 0


def _answer(name: str, accepted: bool, detail: str) -> int:
    if accepted:
        print(f"profile {name!r}: {detail}")
        return 0
    print(f"sift profiles: profile {name!r} rejected: {detail}", file=sys.stderr)
    return 1
