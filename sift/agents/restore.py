"""A starting worker's document store, filled again from the documents topic.

Judgments name documents by id; the worker learns the vector it kept for the id
(:class:`~sift.agents.service.DocumentStore`, the last ``SIFT_RECENT_DOCUMENTS``). The
store lives in memory, so before this module a restarted or replacement worker started
with it empty, and a judgment of a document scored before the start (a judging UI
minutes behind the stream, a deploy) was dead-lettered ``unknown_document``.

Before it joins the group, ``sift worker`` now reads back the newest documents of every
partition of the documents topic below the group's committed offset (those at and above
it, the worker reads anyway) and stores them (:meth:`Service.restore_recent`): up to
the store's capacity (and :data:`MAX_RESTORED`), split evenly over the partitions (what a short partition leaves
goes to the others), newest first, in rounds sized by the documents a message seen so
far. Every worker scores every document (its own
partitions' and the copies of the others'), so every worker reads every partition.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from sift.agents.service import InputMessage, Service
from sift.settings import Settings
from sift.topics.records import Document

#: messages read back per partition in the first round, which measures the documents
#: a message (one, or a batch of up to a few thousand)
FIRST_ROUND = 100
#: messages read back per partition in a later round at most
MAX_STEP = 50_000
#: rounds at most (each sized by the documents a message seen so far)
MAX_ROUNDS = 6
#: documents restored at most, whatever the store holds: the documents read are held in
#: memory until stored (about 1 KB a Reuters document), and the worker joins its group
#: only after (100,000 documents: 2.5-4.2 s here, benchmarks/restore_store.py)
MAX_RESTORED = 200_000


@dataclass
class Restored:
    """What :func:`restore_document_store` did."""

    documents: int = 0
    messages: int = 0
    seconds: float = 0.0


def restore_document_store(settings: Settings, service: Service, *,
                           limit: int = MAX_RESTORED, partitions: int | None = None,
                           read: Callable[..., list[Any]] | None = None,
                           starts: Callable[..., dict[tuple[str, int], int]] | None = None,
                           beginnings: Callable[..., dict[tuple[str, int], int]] | None = None
                           ) -> Restored:
    """Fill ``service``'s document store from the documents topic (see the module), with
    at most ``limit`` documents.

    ``partitions`` (the documents topic's, asked of the broker when not given), ``read``,
    ``starts`` and ``beginnings`` (by default :func:`sift.kafkaclient.read_offsets`,
    :func:`sift.kafkaclient.start_offsets` and :func:`sift.kafkaclient.first_offsets`)
    are for tests.
    Raises :class:`sift.kafkaclient.KafkaClientError` when the broker cannot be read.
    """
    t0 = time.monotonic()
    docs, messages, tops = read_recent_documents(settings, service, limit=limit,
                                                 partitions=partitions, read=read,
                                                 starts=starts, beginnings=beginnings)
    stored = service.restore_recent(docs)
    service.restored_to = tops
    return Restored(stored, messages, time.monotonic() - t0)


def read_recent_documents(settings: Settings, service: Service, *,
                          limit: int = MAX_RESTORED, partitions: int | None = None,
                          read: Callable[..., list[Any]] | None = None,
                          starts: Callable[..., dict[tuple[str, int], int]] | None = None,
                          beginnings: Callable[..., dict[tuple[str, int], int]] | None = None,
                          since: Mapping[tuple[str, int], int] | None = None
                          ) -> tuple[list[Document], int, dict[tuple[str, int], int]]:
    """The documents :func:`restore_document_store` stores, oldest first, the messages
    read for them, and the offsets read up to (the group's committed offsets: each
    partition's documents are read below them). With ``since`` (offsets an earlier read
    went up to: :attr:`Service.restored_to`), nothing below them is read again. Changes
    nothing in ``service`` (it decodes without dead letters), so a worker can run it in
    a thread while its event loop goes on."""
    from sift import kafkaclient

    capacity = min(service.store.capacity, limit)
    if capacity <= 0:
        return [], 0, {}
    read = read or kafkaclient.read_offsets
    starts = starts or kafkaclient.start_offsets
    beginnings = beginnings or kafkaclient.first_offsets
    topic = settings.topic("documents")
    n = partitions if partitions is not None else \
        kafkaclient.partition_counts(settings, [topic]).get(topic, 0)
    if n == 0:
        return [], 0, {}
    wanted = [(topic, p) for p in range(n)]
    top = starts(settings, wanted)  # the group's committed offsets: read from there anyway
    floor = beginnings(settings, wanted)
    hi = {tp: int(top.get(tp, 0)) for tp in wanted}
    tops = dict(hi)
    lo_limit = {tp: max(int(floor.get(tp, 0)), int((since or {}).get(tp, 0))) for tp in wanted}
    got: dict[tuple[str, int], list[list[Document]]] = {tp: [] for tp in wanted}
    counted = dict.fromkeys(wanted, 0)
    documents = messages = 0
    size = FIRST_ROUND
    for _ in range(MAX_ROUNDS):
        # the capacity split evenly over the partitions that still hold older documents;
        # what a partition read to its start did not fill goes to the others
        done = [tp for tp in wanted if hi[tp] <= lo_limit[tp]]
        active = len(wanted) - len(done)
        share = max(1, (capacity - sum(counted[tp] for tp in done)) // max(1, active))
        ranges = []
        for tp in wanted:
            need = share - counted[tp]
            if need > 0 and hi[tp] > lo_limit[tp]:
                per_message = documents / messages if messages else 1.0
                step = max(1, min(size, math.ceil(need / max(per_message, 1.0))))
                ranges.append((tp[0], tp[1], max(lo_limit[tp], hi[tp] - step), hi[tp]))
        if not ranges:
            break
        read_back: dict[tuple[str, int], list[Document]] = {tp[:2]: [] for tp in ranges}
        for t, p, offset, key, value in read(settings, ranges, timeout=60.0):
            read_back[(t, p)] += service.decode_documents(InputMessage(value, t, p, offset, key),
                                                          None)
            messages += 1
        for t, p, a, _ in ranges:
            docs = read_back[(t, p)]
            got[(t, p)].insert(0, docs)  # older rounds go before
            counted[(t, p)] += len(docs)
            documents += len(docs)
            hi[(t, p)] = a
        size = MAX_STEP
    return [d for tp in wanted for part in got[tp] for d in part], messages, tops
