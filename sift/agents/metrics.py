"""A worker's own metrics, for Prometheus: ``GET /metrics`` on ``sift worker --web``.

``sift web`` reports the group as its topics show it (decisions, lag, latency from a
document's timestamp to its decision). A worker reports what happens inside it: what it
routed, scored, learned and refused, how long its batches take, what it holds. The
counters mirror the service's own (:attr:`Service.stats`), so ``/sift/stats`` (JSON)
and ``/metrics`` never disagree; the batch histograms are observed by the agents.

>>> m = WorkerMetrics()
>>> m.document_batch.observe(0.004)
>>> text = m.render({"stats": {"documents": 3, "dead_letters.bad_json": 1},
...                  "documents_kept": 3, "profiles": ["a"], "partitions": [0, 1],
...                  "memory": {"rss_bytes": 1024}})
>>> [line for line in text.splitlines() if line.startswith(("sift_worker_documents_total",
...                                                          "sift_worker_dead_letters_total"))]
['sift_worker_documents_total 3', 'sift_worker_dead_letters_total{reason="bad_json"} 1']
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from sift.observability import Counter, Registry

#: Batch durations: a document batch takes a few ms to a few hundred ms.
BATCH_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

#: Document latency: tens of ms at a steady rate, seconds to minutes behind a backlog.
LATENCY_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)

#: (service counter, metric name, help) of the counters mirrored one to one.
COUNTERS = (
    ("documents", "sift_worker_documents_total",
     "Documents this worker decoded and vectorized (read from its documents partitions)."),
    ("scored", "sift_worker_pairs_scored_total",
     "(document, profile) pairs scored here, for the shards this worker holds."),
    ("decisions", "sift_worker_decisions_total", "Deliveries (decisions) emitted."),
    ("judgments", "sift_worker_judgments_total", "Judgments applied to a profile."),
    ("judgments_duplicate", "sift_worker_judgments_duplicate_total",
     "Judgments delivered again and skipped (idempotent by id, or by document and profile)."),
    ("judgments_repeated", "sift_worker_judgments_repeated_total",
     "Judgments giving a document the label it has for the profile already: skipped."),
    ("judgments_corrected", "sift_worker_judgments_corrected_total",
     "Judgments giving a document the other label than before: the earlier one corrected."),
    ("record_keys_trimmed", "sift_worker_record_keys_trimmed_total",
     "Oldest judgment keys and labels a profile record forgot to fit the changelog's limit."),
    ("judgment_batches", "sift_worker_judgment_batches_total",
     "Consumed batches of judgments that applied at least one."),
    ("judgment_profile_batches", "sift_worker_judgment_profile_batches_total",
     "Profiles' shares of those batches: one re-threshold and one state write each "
     "(judgments / this = how many share one)."),
    ("profiles_created", "sift_worker_profiles_created_total", "Profiles created or replaced."),
    ("profiles_deleted", "sift_worker_profiles_deleted_total", "Profiles deleted."),
    ("profiles_released", "sift_worker_profiles_released_total",
     "Profiles let go from memory because their shard moved to another worker."),
    ("store_refills", "sift_worker_store_refills_total",
     "Document stores filled again from the documents topic when a worker that held no "
     "shard was given some."),
    ("store_refill_failures", "sift_worker_store_refill_failures_total",
     "Such refills that failed (logged): judgments of earlier documents are then "
     "dead-lettered unknown_document unless they carry the text."),
    ("store_refill_waits_cut", "sift_worker_store_refill_waits_cut_total",
     "Refills the judgments and specs agents stopped waiting for after 20 s (logged)."),
    ("redelivered_skipped", "sift_worker_redelivered_skipped_total",
     "Messages seen again after a restart or rebalance and skipped as already processed."),
    ("state_records", "sift_worker_state_records_total",
     "Whole profile state records written to the table's changelog."),
    ("journal_appends", "sift_worker_journal_appends_total",
     "Judgment batches appended to a profile's journal."),
    ("bad_state", "sift_worker_bad_state_total",
     "Profile records in the table that could not be decoded: the profile skipped (logged "
     "once each; its spec sent again rebuilds it)."),
    ("bad_journal", "sift_worker_bad_journal_total",
     "Judgment journals that could not be used: the profile's record used alone (logged)."),
    ("bad_table_keys", "sift_worker_bad_table_keys_total",
     "Keys of the profile or journal table that are not UTF-8 (no worker writes one): "
     "skipped, logged once each."),
    ("state_write_failed", "sift_worker_state_write_failures_total",
     "Table writes that did not reach the changelog (the next save rewrites the record)."),
    ("tail_seeks", "sift_worker_tail_seeks_total",
     "Partitions sought back to a message that never reached the worker."),
    ("tail_waits", "sift_worker_tail_waits_total",
     "Partitions found stalled behind their high-water mark whose next messages were seen "
     "waiting in the worker's buffers: not sought back."),
    ("timer_errors", "sift_worker_periodic_task_failures_total",
     "Failures of the worker's periodic tasks (stats file, memory trim, tail check, "
     "progress log), each logged and survived."),
    # review mode (its dead letters are in sift_worker_dead_letters_total with the rest)
    ("reviews_created", "sift_worker_reviews_created_total", "Reviews created here."),
    ("reviews_deleted", "sift_worker_reviews_deleted_total", "Reviews deleted here."),
    ("review_documents", "sift_worker_review_documents_total",
     "Documents added to the reviews held here."),
    ("review_judgments", "sift_worker_review_judgments_total",
     "Judgments applied to the reviews held here."),
    ("review_judgments_duplicate", "sift_worker_review_judgments_duplicate_total",
     "Review judgments delivered again and skipped."),
    ("review_requests", "sift_worker_review_requests_total",
     "Requests for judgment published by the reviews held here."),
    ("review_status_errors", "sift_worker_review_status_errors_total",
     "Review statuses that could not be computed (logged; the review goes on)."),
    ("review_bad_state", "sift_worker_review_bad_state_total",
     "Review records in the table that could not be decoded (logged once each)."),
    ("review_batch_errors", "sift_worker_review_batch_errors_total",
     "Review batches that could not be computed (logged; the judgments are kept)."),
)


#: the parts of the main thread's CPU time the service counts (its ``cpu_timed`` keys,
#: ``cpu_<part>_us``): their series exist at 0 from the start, so that ``increase()``
#: sees the first CPU time of each (a series born at a value hides that first step)
CPU_PARTS = ("route", "score_here", "copies", "score_copies")


def _mirror(counter: Counter, value: float, labels: dict[str, str] | None = None) -> None:
    """Bring a counter up to a count kept elsewhere (never down). A value that is not
    finite is skipped: +Inf once would have stuck the counter there for good (every later
    count is below it), NaN was skipped already."""
    value = float(value)
    if not math.isfinite(value):
        return
    delta = value - counter.get(labels)
    if delta > 0:
        counter.inc(delta, labels)


class WorkerMetrics:
    """The registry of one worker: mirrored counters, gauges and batch histograms."""

    def __init__(self) -> None:
        reg = self.registry = Registry()
        self.counters = {key: reg.counter(name, help) for key, name, help in COUNTERS}
        self.dead_letters = reg.counter("sift_worker_dead_letters_total",
                                        "Inputs refused, by reason (sent to the dead-letter topic).",
                                        ["reason"])
        self.cpu = reg.counter("sift_worker_cpu_seconds_total",
                               "CPU seconds of the main thread in each part of the work: "
                               "route (decode and vectorize), score_here, copies (encode "
                               "other shards' copies), score_copies (decode, store and score "
                               "copies received).", ["part"])
        for part in CPU_PARTS:
            self.cpu.inc(0.0, {"part": part})
        self.document_latency = reg.histogram(
            "sift_worker_document_latency_seconds",
            "Seconds from a document message's Kafka timestamp until this worker has delivered "
            "its decisions for the shards it holds (other shards' copies take one hop more).",
            LATENCY_BUCKETS)
        self.document_batch = reg.histogram(
            "sift_worker_document_batch_seconds",
            "Time to route, score and publish one taken batch of document messages.",
            BATCH_BUCKETS)
        self.copy_batch = reg.histogram(
            "sift_worker_shard_batch_seconds",
            "Time to score and publish one taken batch of other workers' document copies.",
            BATCH_BUCKETS)
        self.judgment_batch = reg.histogram(
            "sift_worker_judgment_batch_seconds",
            "Time to apply one taken batch of judgments, state writes settled.",
            BATCH_BUCKETS)
        self.profiles = reg.gauge("sift_worker_profiles", "Profiles held by this worker.")
        self.shards = reg.gauge("sift_worker_shards", "Profile shards (partitions) held.")
        self.documents_kept = reg.gauge("sift_worker_documents_kept",
                                        "Recent document vectors kept for late judgments.")
        self.rss = reg.gauge("sift_worker_resident_bytes", "Resident set size of the process.")

    def render(self, snapshot: Mapping[str, Any]) -> str:
        """The text exposition format, counters and gauges taken from ``snapshot`` (the
        worker's :meth:`~sift.agents.app.Worker.stats`)."""
        stats: Mapping[str, Any] = snapshot.get("stats", {})
        for key, counter in self.counters.items():
            _mirror(counter, stats.get(key, 0))
        prefix = "dead_letters."
        for key, value in stats.items():
            if key.startswith(prefix):
                _mirror(self.dead_letters, value, {"reason": key[len(prefix):]})
            elif key.startswith("cpu_") and key.endswith("_us"):
                _mirror(self.cpu, value / 1e6, {"part": key[len("cpu_"):-len("_us")]})
        self.profiles.set(len(snapshot.get("profiles", ())))
        self.shards.set(len(snapshot.get("partitions", ())))
        self.documents_kept.set(float(snapshot.get("documents_kept", 0)))
        self.rss.set(float(snapshot.get("memory", {}).get("rss_bytes", 0)))
        return self.registry.render()
