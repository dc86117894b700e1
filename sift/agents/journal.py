"""The judgment journal: a profile's judgments since its last state record.

A profile's state record (spec, the core's state, judgment keys) is 0.1-2 MB, mostly
the example set and the model's sums, and rewriting it after every batch of judgments
made a judgment cost a megabyte of encoding and changelog traffic: with judgments
spread over 1,000 profiles each one pays that alone. Instead the service appends each
batch it learns (the judged rows, their labels and judgment keys) to the profile's
journal, a record in a second table, and rewrites the state record only when the
journal has grown past a bound. A worker that recovers a profile decodes the state
record and learns the journal's batches after it again, in one step
(:meth:`sift.filters.profile.Profile.relearn`: the state the batches' ``learn_many``
calls leave, bit for bit, with one re-threshold).

A batch also says what was done with its rows (``steps``, since the forty-seventh
session): runs learned as judgments and corrections (a judgment giving a document the
other label than before, :meth:`sift.filters.profile.Profile.relabel`), so recovery
relearns the runs and makes the corrections where they were made, and a correction
costs a journal append, not a state record.

The state record names the journal it starts: an *epoch* (a random id given when the
profile is created or replaced, so a journal of an earlier profile of the same name is
never replayed onto a new one) and *seq*, the number of journal batches learned since
the epoch began. A journal batch carries its own seq; recovery learns the batches
whose seq follows the record's, and ignores a journal that does not continue the
record (another epoch, a gap).

Ordering, which makes a journal never run ahead of its record: the record is written
when a batch's journal would exceed the bound, in place of that batch's journal entry
(the stale journal stays until the next append overwrites it), and the next append
comes in a later consumed batch, after the worker has waited for the record's write
to be on the broker (the agents settle the table writes before acknowledging a batch).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson
import scipy.sparse as sp

from sift.errors import SiftError
from sift.filters.state import CSRParts, decode_csr_parts, encode_csr, stack_csr_parts

#: Version of the journal record.
JOURNAL_FORMAT = 1
#: The state record is rewritten once a journal holds this many batches ...
MAX_JOURNAL_BATCHES = 32
#: ... or more bytes than this share of the state record (and at least MIN_JOURNAL_BYTES).
JOURNAL_SHARE = 0.25
MIN_JOURNAL_BYTES = 64 * 1024
#: Batch numbers (a state record's ``seq`` and a journal batch's) are below this: far
#: more batches than a profile ever learns, and a number the next one follows can still
#: be encoded (orjson writes at most 64-bit integers: a record at 2**64 - 1 made every
#: judgment of its profile fail to save, forty-ninth session)
MAX_SEQ = 2**53
_BATCHES = b',"batches":['


class JournalError(SiftError):
    """A journal record that cannot be read."""


@dataclass(frozen=True)
class JournalBatch:
    """One learned batch of judgments: rows judged ``relevant``, with their keys. The rows
    are kept as their decoded arrays (``parts``); :attr:`X` builds the matrix, and
    :func:`stack_batches` stacks many batches' rows with one matrix built."""

    seq: int
    parts: CSRParts
    relevant: list[bool]
    keys: list[str]
    coalesce: bool
    #: the judged documents' ids, row by row (``None`` in a journal written before the
    #: forty-seventh session): what a recovering worker needs to tell a later judgment
    #: of one of them apart as a repeat or a correction
    docs: list[str] | None = None
    #: what was done with the rows, in order: ``n > 0`` the next ``n`` rows learned as
    #: judgments (one :func:`~sift.agents.service.learn_batch` call), ``-1`` the next row
    #: a correction (:meth:`~sift.filters.profile.Profile.relabel` to its label); ``None``
    #: (every batch before the forty-seventh session, and one with neither correction
    #: nor split): all rows learned in one call
    steps: list[int] | None = None

    @property
    def X(self) -> sp.csr_matrix:
        return stack_csr_parts([self.parts], self.parts[0][1])

    def plan(self) -> list[int]:
        """:attr:`steps`, or the one learning call of a batch without them."""
        return list(self.steps) if self.steps is not None else [len(self.relevant)]


def check_steps(steps: Any, n_rows: int) -> list[int]:
    """``steps`` of a batch of ``n_rows`` rows (see :attr:`JournalBatch.steps`), checked:
    integers, each > 0 or -1, covering the rows exactly (:class:`JournalError` if not).

    >>> check_steps([2, -1, 1], 4)
    [2, -1, 1]
    """
    if (not isinstance(steps, list) or not steps
            or not all(isinstance(n, int) and not isinstance(n, bool) and (n > 0 or n == -1)
                       for n in steps)
            or sum(n if n > 0 else 1 for n in steps) != n_rows):
        raise JournalError(f"journal batch 'steps' must be runs (> 0) and corrections (-1) "
                           f"covering its {n_rows} rows, got {str(steps)[:80]}")
    return list(steps)


def stack_batches(batches: Sequence[JournalBatch], n_features: int) -> sp.csr_matrix:
    """The rows of ``batches``, in order, as one matrix."""
    return stack_csr_parts([b.parts for b in batches], n_features)


def encode_batch(seq: int, X: sp.csr_matrix, relevant: Sequence[bool], keys: Sequence[str],
                 coalesce: bool, docs: Sequence[str] | None = None,
                 steps: Sequence[int] | None = None) -> bytes:
    """One batch as a JSON object (the rows' arrays as base64 of their bytes: exact);
    ``docs``, the judged documents' ids, row by row; ``steps``, what was done with the
    rows (:attr:`JournalBatch.steps`; left out when it is one learning call)."""
    if X.shape[0] != len(relevant) or len(relevant) != len(keys) or (
            docs is not None and len(docs) != len(keys)):
        raise JournalError(f"journal batch {seq}: {X.shape[0]} rows, {len(relevant)} labels, "
                           f"{len(keys)} keys and {'no' if docs is None else len(docs)} "
                           "document ids")
    obj: dict[str, Any] = {"seq": seq, "X": encode_csr(X), "relevant": [bool(r) for r in relevant],
                           "keys": list(keys), "coalesce": bool(coalesce)}
    if docs is not None:
        obj["docs"] = list(docs)
    if steps is not None:
        plan = check_steps(list(steps), len(keys))
        if plan != [len(keys)]:
            obj["steps"] = plan
    return orjson.dumps(obj)


def _head(profile: str, epoch: str, latest: dict[str, Any] | None) -> bytes:
    return orjson.dumps({"format": JOURNAL_FORMAT, "profile": profile, "epoch": epoch,
                         "latest": latest or {}})[:-1]


def encode_journal(profile: str, epoch: str, batches: Sequence[bytes],
                   latest: dict[str, Any] | None = None) -> bytes:
    """The journal record of ``profile``: its epoch, what the profile looks like after the
    last batch (``latest``: threshold, model version, judgments learned; for dashboards,
    which read the changelogs and not the batches), and the batches (each from
    :func:`encode_batch`, joined as they are: appending does not re-encode the others)."""
    return _head(profile, epoch, latest) + _BATCHES + b",".join(batches) + b"]}"


def append(journal: bytes, batch: bytes, profile: str, epoch: str,
           latest: dict[str, Any] | None = None) -> bytes:
    """``journal`` (from :func:`encode_journal`, with at least one batch) and one more,
    with a new ``latest``."""
    # a JSON string escapes its quotes, so the key's bytes cannot occur before the key
    at = journal.find(_BATCHES)
    if at < 0 or not journal.endswith(b"]}"):
        raise JournalError("not an encoded journal")
    return _head(profile, epoch, latest) + journal[at:-2] + b"," + batch + b"]}"


def decode_journal(data: bytes, name: str, n_features: int) -> tuple[str, list[JournalBatch]]:
    """The epoch and batches of a journal record; :class:`JournalError` on a bad one
    (another format, another profile, rows of another width, labels that do not match)."""
    try:
        obj = orjson.loads(data)
        if not isinstance(obj, dict) or obj.get("format") != JOURNAL_FORMAT:
            got = obj.get("format") if isinstance(obj, dict) else type(obj).__name__
            raise JournalError(f"journal format {got!r} is not {JOURNAL_FORMAT}")
        if obj.get("profile") != name:
            raise JournalError(f"journal under {name!r} is for profile {obj.get('profile')!r}")
        epoch = obj["epoch"]
        if not isinstance(epoch, str) or not epoch:
            raise JournalError(f"journal epoch must be a non-empty string, got {epoch!r}")
        out: list[JournalBatch] = []
        for b in obj["batches"]:
            parts = decode_csr_parts(b["X"])
            shape = parts[0]
            relevant, keys, seq = b["relevant"], b["keys"], b["seq"]
            if not isinstance(seq, int) or isinstance(seq, bool) or not 1 <= seq < MAX_SEQ:
                raise JournalError(f"journal batch seq must be an integer in [1, 2**53), got "
                                   f"{seq!r:.40}")
            if (not isinstance(relevant, list) or not all(isinstance(r, bool) for r in relevant)
                    or not isinstance(keys, list) or not all(isinstance(k, str) for k in keys)):
                raise JournalError(f"journal batch {seq}: labels must be booleans and keys "
                                   "strings")
            if shape != (len(relevant), n_features) or len(keys) != len(relevant):
                raise JournalError(f"journal batch {seq}: rows {shape} for {len(relevant)} "
                                   f"labels and {len(keys)} keys of width {n_features}")
            if not keys:
                # the service never writes one; read as a plan of one run of 0 rows it
                # was taken for a correction and failed every scoring of the worker's
                # shards (forty-ninth session)
                raise JournalError(f"journal batch {seq} has no rows")
            if out and seq != out[-1].seq + 1:
                raise JournalError(f"journal batch {seq} follows batch {out[-1].seq}")
            docs = b.get("docs")
            if docs is not None and (not isinstance(docs, list) or len(docs) != len(keys)
                                     or not all(isinstance(d, str) for d in docs)):
                raise JournalError(f"journal batch {seq}: 'docs' must be a list of "
                                   f"{len(keys)} document ids")
            steps = b.get("steps")
            if steps is not None:
                steps = check_steps(steps, len(keys))
            coalesce = b.get("coalesce", True)  # how the batch is relearned: no guessing
            if not isinstance(coalesce, bool):
                raise JournalError(f"journal batch {seq}: 'coalesce' must be true or false, "
                                   f"got {coalesce!r:.40}")
            out.append(JournalBatch(seq, parts, relevant, keys, coalesce, docs, steps))
    except JournalError:
        raise
    except (orjson.JSONDecodeError, KeyError, TypeError, AttributeError, ValueError,
            OverflowError, IndexError, SiftError) as exc:
        raise JournalError(f"bad journal record: {type(exc).__name__}: {exc}") from None
    return epoch, out


def after(batches: list[JournalBatch], seq: int) -> list[JournalBatch]:
    """The batches that follow a state record at ``seq``; :class:`JournalError` when the
    journal does not continue it (a gap between the record and the journal)."""
    rest = [b for b in batches if b.seq > seq]
    if rest and rest[0].seq != seq + 1:
        raise JournalError(f"journal starts at batch {rest[0].seq}, the state record is at "
                           f"{seq}: batches {seq + 1}-{rest[0].seq - 1} are missing")
    return rest


def journal_full(n_batches: int, n_bytes: int, next_bytes: int, record_bytes: int) -> bool:
    """Whether appending a batch of ``next_bytes`` to a journal of ``n_batches`` batches
    and ``n_bytes`` bytes would pass the bound, so the state record should be rewritten
    instead."""
    return (n_batches + 1 > MAX_JOURNAL_BATCHES
            or n_bytes + next_bytes > max(MIN_JOURNAL_BYTES, JOURNAL_SHARE * record_bytes))


def latest_after(epoch: str | None, model_version: int,
                 journal: bytes | None) -> dict[str, Any] | None:
    """What a profile looks like after its journal's last batch (``threshold``, ``None``
    for none, ``model_version``, ``n_judged``), when the journal continues the state
    record of ``epoch`` and ``model_version`` (the same epoch, a model version not
    older); ``None`` when it does not, or there is none (for tools reading the changelogs).

    >>> journal = encode_journal("p", "e1", [], {"threshold": 0.4, "model_version": 5,
    ...                                          "n_judged": 2, "n_pending": 1})
    >>> latest_after("e1", 3, journal)
    {'threshold': 0.4, 'model_version': 5, 'n_judged': 2, 'n_pending': 1}
    >>> latest_after("e1", 3, encode_journal("p", "e0", [], {"model_version": 5})) is None
    True
    """
    if not journal or not epoch:
        return None
    obj = orjson.loads(journal)
    if not isinstance(obj, dict) or obj.get("epoch") != epoch:
        return None
    latest = obj.get("latest")
    if not isinstance(latest, dict):
        return None
    version = latest.get("model_version")
    if not isinstance(version, int) or version < model_version:
        return None
    return {"threshold": latest.get("threshold"), "model_version": version,
            "n_judged": latest.get("n_judged", 0), "n_pending": latest.get("n_pending", 0)}


def record_profile_epoch(record: dict[str, Any]) -> Any:
    """The profile epoch a profile's state record (decoded JSON) stands for, as every
    worker reads it: its ``profile_epoch``, or for a record from before the fifty-second
    session, which has none, its journal's epoch (``""`` before journals too). Not
    checked: the caller validates what it reads.

    >>> record_profile_epoch({"profile_epoch": "e2", "journal": {"epoch": "e1"}})
    'e2'
    >>> record_profile_epoch({"journal": {"epoch": "e1"}}), record_profile_epoch({})
    ('e1', '')
    """
    return record.get("profile_epoch", (record.get("journal") or {}).get("epoch", ""))


def pending_in_state(state: dict[str, Any]) -> int:
    """How many judgments a profile's state (decoded JSON; a bagged profile's too) holds
    back for its update policy's next model update (``update`` = n): received, not yet
    learned, so not in ``n_judged``.

    >>> pending_in_state({"kind": "profile", "pending": {"labels": [1, 0]}})
    2
    >>> pending_in_state({"kind": "bagged_profile", "members": [{"pending": {"labels": [1]}}]})
    1
    """
    if state.get("kind") == "bagged_profile":
        members = state.get("members") or [{}]
        state = members[0]
    pending = state.get("pending") or {}
    return len(pending.get("labels") or ())


def judged_keys(record: dict[str, Any], journal: bytes | None) -> list[int]:
    """The digests (:func:`sift.agents.keys.digest`) of the judgment keys a profile has
    learned, oldest first, each once: its state record's (decoded JSON) and those of its
    journal's batches after the record (for tools reading the changelogs). A record
    since the fifty-third session holds the digests alone; one from before, and the
    journal, the keys, whose digests are taken. Compare with
    :func:`sift.agents.keys.key_digests` of the keys sent."""
    from sift.agents.keys import JudgmentKeys, digest  # (keys imports nothing of the journal)

    held = JudgmentKeys.from_record(record, capacity=2**62).digests().tolist()
    pos = record.get("journal") or {}
    if journal and pos.get("epoch"):
        obj = orjson.loads(journal)
        if obj.get("epoch") == pos["epoch"]:
            held += [digest(str(k)) for b in obj.get("batches", ())
                     if b.get("seq", 0) > pos.get("seq", 0) for k in b.get("keys", ())]
    return list(dict.fromkeys(held))
