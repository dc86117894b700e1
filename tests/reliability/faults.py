"""Shared pieces of the fault-injection tests: a stream of documents with judgments
flowing, the in-process reference, and the checks (decisions after de-duplication,
judgments applied exactly once, learned state equal to an uninterrupted run).

Why two kinds of profiles: a profile's decisions depend on when its judgments arrive
relative to the documents, which two Kafka topics do not fix. So

* profiles ``fixed-*`` (``update: never``, one per shard at least) get no judgments:
  their decisions are a pure function of the documents, and must equal the reference's
  exactly after de-duplication (every document scored, none missed, none invented);
* profiles ``learn-*`` (``update: every``) get judgments while the documents flow: each
  judgment must be applied exactly once, and the learned state read back from the table
  changelog must equal that of the reference service applying the same judgments in the
  same per-profile order (the partition order), whatever crashed in between.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import orjson
from kafka.errors import KafkaError

from sift.agents.harness import (
    WorkerProcess,
    changelog_tables,
    recovered_profiles,
    send_all,
    total,
    wait_for,
)
from sift.agents.journal import judged_keys
from sift.agents.keys import key_digests
from sift.agents.service import shard_of
from sift.kafkaclient import KafkaClientError
from sift.settings import Settings
from sift.topics.records import Document
from tests.integration import test_service as svc

N_FIXED = 4
N_LEARN = 2
JUDGE_EVERY = 10  # one document in 10 is judged for every learning profile


@dataclass
class Stream:
    """Messages to send, in order, and what the reference expects."""

    docs: list[Document]
    doc_messages: list[tuple[bytes | None, bytes]]
    judgments: list[dict[str, Any]]
    specs: list[dict[str, Any]]
    fixed: list[str]
    learn: list[str]
    chunks: list[tuple[list[tuple[bytes | None, bytes]], list[tuple[bytes | None, bytes]]]] = \
        field(default_factory=list)


def documents(n: int, train: list[Document], test: list[Document]) -> list[Document]:
    """``n`` distinct documents: Reuters test then the training tail, repeated with new ids."""
    pool = test + train[800:]
    out: list[Document] = []
    k = 0
    while len(out) < n:
        for d in pool[: n - len(out)]:
            out.append(Document(d.id if k == 0 else f"{d.id}~{k}", d.text, d.title, None, None,
                                d.topics))
        k += 1
    return out


def make_stream(train: list[Document], test: list[Document], n: int, partitions: int,
                batch: int = 10, chunk: int = 500) -> Stream:
    cats = [str(s["profile"]) for s in svc.specs_for(train, 20)]
    fixed: list[str] = []
    for shard in range(partitions):  # at least one fixed profile per shard
        fixed += [c for c in cats if shard_of(f"fixed-{c}", partitions) == shard][:1]
    fixed += [c for c in cats if c not in fixed][: N_FIXED - len(fixed)]
    learn = [c for c in cats if c not in fixed][:N_LEARN]
    base = {str(s["profile"]): s for s in svc.specs_for(train, 20)}
    specs = ([{**base[c], "profile": f"fixed-{c}", "update": "never"} for c in fixed]
             + [{**base[c], "profile": f"learn-{c}"} for c in learn])
    docs = documents(n, train, test)
    stream = Stream(docs, [], [], specs, [f"fixed-{c}" for c in fixed],
                    [f"learn-{c}" for c in learn])
    for start in range(0, n, chunk):
        part = docs[start:start + chunk]
        msgs = list(svc.doc_messages(part, batch))
        judged = [{"id": f"j-{d.id}-{c}", "doc_id": d.id, "profile": f"learn-{c}",
                   "relevant": c in d.topics, "text": d.text}
                  for i, d in enumerate(part) if (start + i) % JUDGE_EVERY == 0 for c in learn]
        stream.doc_messages += msgs
        stream.judgments += judged
        stream.chunks.append((msgs, [(str(j["profile"]).encode(), orjson.dumps(j))
                                     for j in judged]))
    return stream


def chunks_from(stream: Stream, first: int) -> Iterator[tuple[str, list[tuple[bytes | None,
                                                                              bytes]]]]:
    for docs, judgments in stream.chunks[first:]:
        yield "documents", docs
        yield "judgments", judgments


@dataclass
class Expected:
    decisions: set[tuple[str, str, float]]
    states: dict[str, Any]
    service: Any = None  # the reference Service (its training set recovers the changelogs)


def create_profiles(settings: Settings, stream: Stream, worker: WorkerProcess) -> None:
    """Send the stream's profile specs and wait until ``worker`` has trained them all."""
    send_all(settings, settings.topic("profiles"),
             [(str(spec["profile"]).encode(), orjson.dumps(spec)) for spec in stream.specs])
    wait_for(lambda: total([worker], "profiles_created") == len(stream.specs), 90, "profiles")


def reference(corpus_path: Path, stream: Stream, partitions: int) -> Expected:
    """The uninterrupted run: the service in-process on the same input."""
    ref = svc.Reference(corpus_path, partitions)
    ref.specs(stream.specs)
    # every judgment carries its text, so the reference needs no documents for them
    ref.judgments(stream.judgments)
    decisions = {d for d in ref.documents(stream.doc_messages) if d[1] in stream.fixed}
    states = {name: ref.service.entry(name, ref.table) for name in stream.learn}
    return Expected(decisions, states, ref.service)


def comparable(state: Any) -> Any:
    """A profile state without the model version, its sparse accumulators in feature order.

    Batching does not change the learned model, only its representation: the model
    version counts one step per coalesced batch, and a ``SparseAccumulator`` lists its
    features in first-seen order (sorted here, with their sums: then bit-exact).
    """
    if isinstance(state, dict):
        if set(state) >= {"features", "sums"} and isinstance(state["features"], dict):
            from sift.filters.state import decode_array

            f = decode_array(state["features"])
            sums = decode_array(state["sums"])
            order = np.argsort(f, kind="stable")
            return {**{k: comparable(v) for k, v in state.items()
                       if k not in ("features", "sums")},
                    "features": f[order].tolist(), "sums": sums[..., order].tolist()}
        return {k: comparable(v) for k, v in state.items() if k != "model_version"}
    if isinstance(state, list):
        return [comparable(v) for v in state]
    return state


def decisions_of(settings: Settings, profiles: list[str]) -> list[tuple[str, str, float]]:
    keep = set(profiles)
    return [d for d in svc.decisions(settings) if d[1] in keep]


INPUT_TOPICS = ("documents", "judgments", "profiles", "shard-documents")


def lag(settings: Settings) -> int:
    """Consumer lag of the worker group over the input topics (documents, judgments, shard)."""
    from sift.kafkaclient import group_lag

    return group_lag(settings, INPUT_TOPICS)


@dataclass
class Outcome:
    n_decisions: int
    n_duplicates: int
    n_judgments: int
    seconds: float
    notes: dict[str, Any] = field(default_factory=dict)


def check(settings: Settings, stream: Stream, expected: Expected, started: float) -> Outcome:
    """Every fixed decision present once after de-duplication, repeats identical; every
    judgment applied exactly once; learned state equal to the reference's."""
    got = decisions_of(settings, stream.fixed)
    counts = Counter((d, p) for d, p, _ in got)
    assert set(got) == expected.decisions, (
        f"missing {len(expected.decisions - set(got))}, unexpected {len(set(got) - expected.decisions)}")
    assert len(set(got)) == len(counts), "a repeated decision carries another score"
    states = recovered_profiles(settings, expected.service)
    n_judgments = 0
    for name in stream.learn:
        want = expected.states[name]
        entry = states[name]
        keys = {str(j["id"]) for j in stream.judgments if j["profile"] == name}
        held = entry.judged.digests().tolist()  # type: ignore[attr-defined]
        assert sorted(held) == sorted(key_digests(keys)), f"{name}: judgment keys differ"
        assert entry.profile.n_judged_ == len(keys), f"{name}: applied {entry.profile.n_judged_} of {len(keys)}"  # type: ignore[attr-defined]
        assert comparable(orjson.loads(orjson.dumps(entry.profile.to_state()))) == comparable(  # type: ignore[attr-defined]
            orjson.loads(orjson.dumps(want.profile.to_state()))), f"{name}: learned state differs"
        n_judgments += len(keys)
    return Outcome(len(got), len(got) - len(set(got)), n_judgments, time.monotonic() - started)


def progress(settings: Settings, stream: Stream, expected: Expected) -> dict[str, Any]:
    """What is still missing: fixed decisions, judgments in the learned states, lag."""
    from sift.kafkaclient import group_lag_by_partition

    got = {d for d in decisions_of(settings, stream.fixed)}
    missing = expected.decisions - got
    lags = {f"{t}[{p}]": n for (t, p), n in group_lag_by_partition(settings, INPUT_TOPICS).items()
            if n}
    records, journals = changelog_tables(settings, idle=1.0)
    judged = {k: len(judged_keys(orjson.loads(v), journals.get(k)))
              for k, v in records.items() if k in stream.learn}
    want = Counter(str(j["profile"]) for j in stream.judgments)
    return {"decisions_missing": len(missing),
            "missing_sample": sorted(missing)[:5],
            "lag": lags,
            "judged": {k: f"{judged.get(k, 0)}/{want[k]}" for k in stream.learn},
            "done": not missing and not lags
            and sum(judged.values()) >= len(stream.judgments)}


def wait_complete(settings: Settings, stream: Stream, expected: Expected, timeout: float,
                  alive: Any = None) -> None:
    """Until every expected fixed decision is out, every judgment learned and the lag is 0.

    On timeout the error says what is missing (decisions, judgments per profile, lag per
    topic partition).
    """
    deadline = time.monotonic() + timeout
    last: dict[str, Any] = {}
    while True:
        if alive is not None:
            alive()
        try:
            last = progress(settings, stream, expected)
        except (KafkaError, KafkaClientError, OSError) as exc:  # the broker may be away
            last = {"error": repr(exc), "done": False}
        if last["done"]:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"stream not complete after {timeout:.0f}s: {last}")
        time.sleep(2.0)
