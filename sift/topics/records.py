"""Wire records: documents, judgments, profile specs, decisions.

Records are frozen dataclasses. ``from_obj`` validates a decoded JSON object and
raises :class:`~sift.topics.errors.RecordError` with a reason code on any
violation; ``to_obj`` gives the JSON-safe dict. Unknown fields are ignored on
input (forward compatibility) but never emitted.
"""

from __future__ import annotations

import math
import re
import reprlib
import secrets
import time
from dataclasses import dataclass, field
from typing import Any

from sift.topics.errors import RecordError

MODELS = ("rocchio", "kantor", "knn", "fusion")


def _is_utility(measure: Any) -> bool:
    """Whether ``measure`` is ``utility:R:N`` with finite credits (as
    :func:`sift.filters.measures.get_measure` reads it)."""
    if not isinstance(measure, str) or not measure.startswith("utility:"):
        return False
    parts = measure.split(":")
    try:
        return len(parts) == 3 and all(math.isfinite(float(c)) for c in parts[1:])
    except ValueError:
        return False


MEASURES = ("t11su", "t11f", "f1", "t11u", "precision")
#: a bagged profile's rules (those of sift.filters.bagging; a test keeps them equal)
BAG_RULES = ("margin", "abstain", "vote")
#: the most members of a bagged profile in the service: its table value holds every
#: member's state, about 2.7 MB each with a full example set of Reuters documents
#: (2,000), and the changelog takes 16 MiB a record (sift.agents.app.MAX_STATE_BYTES);
#: the core and `sift replay` allow more (sift.filters.bagging.MAX_BAGS)
MAX_BAGS = 5
MAX_ID_CHARS = 512
#: the most judgments a profile may buffer before it applies them (``update=n``)
MAX_UPDATE = 1_000_000
#: the deepest nesting of objects and arrays a document's metadata may have
MAX_METADATA_DEPTH = 32


#: the most characters of a received value an error message quotes
MAX_SHOWN = 80

_REPR = reprlib.Repr()
_REPR.maxlevel = 2  # [[...]]: a value nested 1,000 levels deep is not walked
_REPR.maxlist = _REPR.maxtuple = _REPR.maxdict = _REPR.maxset = 4
_REPR.maxstring = _REPR.maxother = _REPR.maxlong = MAX_SHOWN


def show(value: Any, limit: int = MAX_SHOWN) -> str:
    """A received value for an error message: its ``repr``, on one line (control characters
    escaped, as ``repr`` does), at most ``limit`` characters, never walking deeper than two
    levels of nesting (``repr`` of a value nested 1,000 levels deep raised RecursionError,
    and one of 100,000 characters made a 100 KB "one-line" error: forty-fifth session).

    >>> show("trade"), show([[[[1]]]]), show(3)
    ("'trade'", '[[...]]', '3')
    >>> len(show("x" * 100_000))
    80
    """
    try:
        text = _REPR.repr(value)
    except Exception:  # a value no JSON decoder makes (a broken __repr__)
        text = f"<{type(value).__name__}>"
    text = " ".join(text.split())  # reprlib leaves no newline; a foreign repr might
    return text if len(text) <= limit else f"{text[:limit - 3]}..."


#: the longest message a dead letter carries (names of up to 512 characters fit)
MAX_MESSAGE = 1000


def clip(message: str, limit: int = MAX_MESSAGE) -> str:
    """``message`` on one line (a character that is not printable, a newline, as its
    ``repr`` escape) and at most ``limit`` characters: for a message built from another
    error's text, which may quote a received value whole (a model's check of a
    100,000-character parameter).

    >>> clip("bad" + chr(10) + "value") == "bad" + chr(92) + "nvalue", clip("x" * 20, 10)
    (True, 'xxxxxxx...')
    """
    text = message[:limit + 1]
    if not text.isprintable():
        text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
    return text if len(text) <= limit else f"{text[:limit - 3]}..."


def _require_obj(obj: Any, what: str) -> dict[str, Any]:
    if not isinstance(obj, dict):
        raise RecordError("not_an_object", f"{what} must be a JSON object, got {type(obj).__name__}")
    return obj


def _str(obj: dict[str, Any], key: str, *, required: bool, what: str, max_len: int | None = None,
         allow_empty: bool = False) -> str | None:
    value = obj.get(key)
    if value is None:
        if required:
            raise RecordError(f"missing_{key}", f"{what} has no {key!r}")
        return None
    # an id may be a number ({"id": 14826}); any other field is text or absent
    if isinstance(value, bool) or not isinstance(value, str | int) \
            or (isinstance(value, int) and key not in _NUMERIC_IDS):
        raise RecordError(f"bad_{key}", f"{what} field {key!r} must be a string, got {type(value).__name__}")
    text = str(value)
    if not text.strip() and not allow_empty:
        if required:
            raise RecordError(f"missing_{key}", f"{what} has an empty {key!r}")
        return None
    if max_len is not None and len(text) > max_len:
        raise RecordError(f"bad_{key}", f"{what} field {key!r} is longer than {max_len} characters")
    return text


#: the fields that may be given as an integer (read as its decimal string)
_NUMERIC_IDS = frozenset({"id", "doc_id"})


def _shallow(value: Any, limit: int) -> bool:
    """Whether ``value`` nests objects and arrays at most ``limit`` levels deep (orjson
    reads 1,024 levels but writes only 254: metadata is written again downstream)."""
    level = [value]
    for _ in range(limit):
        level = [c for v in level for c in (v.values() if isinstance(v, dict) else v)
                 if isinstance(c, dict | list)]
        if not level:
            return True
    return False


def _float(obj: dict[str, Any], key: str, what: str, *, required: bool = True) -> float | None:
    value = obj.get(key)
    if value is None:
        if required:
            raise RecordError(f"missing_{key}", f"{what} has no {key!r}")
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise RecordError(f"bad_{key}", f"{what} field {key!r} must be a number, got {type(value).__name__}")
    out = float(value)
    if math.isnan(out):
        raise RecordError(f"bad_{key}", f"{what} field {key!r} is NaN")
    return out


def scored_text(text: str, title: str = "") -> str:
    """What a document of this text and title is scored as (:attr:`Document.scored_text`):
    the title and the text, the title once. A judgment carrying a document's text must
    carry this, or the worker learns another vector than the one it scored."""
    title = title.strip()
    if not title or text.lstrip().startswith(title):
        return text
    return f"{title}\n{text}"


@dataclass(frozen=True)
class Document:
    """A document to filter: ``{"id", "text", "title"?, "date"?, "metadata"?}``.

    Input files in the Reuters format also carry ``topics`` (gold labels), kept
    here for evaluation; the service ignores them.
    """

    id: str
    text: str
    title: str = ""
    date: str | None = None
    metadata: dict[str, Any] | None = None
    topics: tuple[str, ...] = ()

    @classmethod
    def from_obj(cls, obj: Any) -> Document:
        o = obj if type(obj) is dict else _require_obj(obj, "document")
        # the common case (string id and text, no title) without _str's general checks
        doc_id = o.get("id")
        if type(doc_id) is not str or len(doc_id) > MAX_ID_CHARS or not doc_id.strip():
            doc_id = _str(o, "id", required=True, what="document", max_len=MAX_ID_CHARS)
        title = o.get("title")
        if type(title) is not str:
            title = _str(o, "title", required=False, what="document", allow_empty=True) or ""
        text = o.get("text")
        if type(text) is not str:
            text = _str(o, "text", required=False, what="document", allow_empty=True) or ""
        if not text.strip():
            # screening files carry "abstract" instead of "text"
            abstract = _str(o, "abstract", required=False, what="document", allow_empty=True) or ""
            text = f"{title}\n{abstract}".strip() if abstract.strip() else text
        if not text.strip() and not title.strip():
            raise RecordError("missing_text", f"document {show(doc_id)} has no text")
        if not text.strip():
            text = title
        date = _str(o, "date", required=False, what="document") if "date" in o else None
        meta = o.get("metadata")
        if meta is not None and not isinstance(meta, dict):
            raise RecordError("bad_metadata", "document field 'metadata' must be an object")
        if meta and not _shallow(meta, MAX_METADATA_DEPTH):
            raise RecordError("bad_metadata", f"document field 'metadata' is nested deeper than "
                              f"{MAX_METADATA_DEPTH} levels")
        topics_raw = o.get("topics")
        if topics_raw is None:
            topics: tuple[str, ...] = ()
        elif isinstance(topics_raw, list | tuple) and all(isinstance(t, str) and t.strip()
                                                          for t in topics_raw):
            topics = tuple(topics_raw)
        else:
            raise RecordError("bad_topics", "document field 'topics' must be a list of non-empty strings")
        assert doc_id is not None
        return cls(doc_id, text, title, date, meta, topics)

    @property
    def scored_text(self) -> str:
        r"""What is vectorized and scored: the title and the text, the title once. A title
        is not only for display (a producer following the wire contract's example sends
        it apart from the text); the bundled Reuters texts and screening records already
        begin with their titles, and stay as they are.

        >>> Document("d1", "Officials said output rose.", "OPEC OUTPUT UP").scored_text
        'OPEC OUTPUT UP\nOfficials said output rose.'
        >>> Document("d2", "OPEC OUTPUT UP\nOfficials said.", "OPEC OUTPUT UP").scored_text
        'OPEC OUTPUT UP\nOfficials said.'
        """
        return scored_text(self.text, self.title)

    def to_obj(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "text": self.text}
        if self.title:
            out["title"] = self.title
        if self.date is not None:
            out["date"] = self.date
        if self.metadata is not None:
            out["metadata"] = self.metadata
        if self.topics:
            out["topics"] = list(self.topics)
        return out


def counted_text(doc: Document) -> tuple[str, ...]:
    """What a document's size counts: its text and its title, the title once. A text that
    begins with the title (a title-only document's, which is the title; a screening
    record's, its title and abstract joined by a newline; the bundled Reuters texts) is
    counted alone, as :attr:`Document.scored_text` scores it (before the forty-fifth
    session a title-only document counted its title twice, so one over half the limit was
    refused)."""
    title = doc.title.strip()
    if not title or doc.text.lstrip().startswith(title):
        return (doc.text,)
    return (doc.text, doc.title)


def document_bytes(doc: Document) -> int:
    """The UTF-8 bytes of :func:`counted_text`: what ``SIFT_MAX_DOCUMENT_BYTES`` limits (the
    worker dead-letters a larger document ``too_large``; ``sift produce`` refuses it).

    >>> document_bytes(Document.from_obj({"id": "a", "title": "caf\u00e9"}))
    5
    >>> document_bytes(Document("b", "output rose", "OPEC"))
    15
    """
    return sum(len(part.encode("utf-8")) for part in counted_text(doc))


#: The longest profile epoch a record may carry (the service's have 33 characters).
MAX_EPOCH_CHARS = 64
_EPOCH = re.compile(r"[0-9a-f]{16}-[0-9a-f]{16}")


def new_profile_epoch() -> str:
    """A new profile epoch: the creation time in nanoseconds and 64 random bits, in hex
    (``"18ef0b2f6b1eea63-3e2e905c2ace2029"``), so that the epochs of one profile name sort
    in the order of its lives (across workers, as far as their clocks agree).

    >>> a, b = new_profile_epoch(), new_profile_epoch()
    >>> len(a), a != b, epoch_before(a, b), epoch_before(b, a)
    (33, True, True, False)
    """
    return f"{time.time_ns():016x}-{secrets.token_hex(8)}"


def epoch_before(a: str, b: str) -> bool:
    """Whether epoch ``a`` was given before ``b``: both of :func:`new_profile_epoch`'s
    form and ``a`` sorts first. False for any other pair: the profile epoch of a record
    from before the fifty-second session is its journal's (32 random hex digits), which
    says nothing of order.

    >>> epoch_before("0" * 32, new_profile_epoch())
    False
    """
    return a < b and _EPOCH.fullmatch(a) is not None and _EPOCH.fullmatch(b) is not None


def newest_life(epoch: str, life: str) -> str | None:
    """For a reader following the newest life of a profile or review from records read
    in any order: None when ``epoch`` is of an older life than ``life`` (the newest read
    so far), else the life to follow from now on (``epoch`` when it starts a later one or
    is the first; ``life`` otherwise, ``""`` epochs included).

    >>> old, new = new_profile_epoch(), new_profile_epoch()
    >>> newest_life(new, old) == new, newest_life(old, new), newest_life("", new) == new
    (True, None, True)
    >>> newest_life(old, "") == old
    True
    """
    if epoch_before(epoch, life):
        return None
    if epoch and epoch != life and (not life or epoch_before(life, epoch)):
        return epoch
    return life


@dataclass(frozen=True)
class Judgment:
    """Relevance feedback: ``{"id"?, "doc_id", "profile", "relevant", "judge"?, "ts"?, "text"?,
    "profile_epoch"?}``.

    ``text`` lets a judgment about a document the service never saw (or no
    longer keeps) still be learned from. ``profile_epoch`` (the one of the decision
    judged) names the life of the profile it is meant for: a profile deleted and
    created again under the same name has another, and refuses it.
    """

    doc_id: str
    profile: str
    relevant: bool
    id: str | None = None
    judge: str | None = None
    ts: float | None = None
    text: str | None = None
    profile_epoch: str | None = None

    @property
    def key(self) -> str:
        """Idempotency key: the judgment id, else ``doc_id`` and profile."""
        return self.id if self.id is not None else f"{self.profile}\x1f{self.doc_id}"

    @classmethod
    def from_obj(cls, obj: Any) -> Judgment:
        o = _require_obj(obj, "judgment")
        doc_id = _str(o, "doc_id", required=True, what="judgment", max_len=MAX_ID_CHARS)
        profile = _str(o, "profile", required=True, what="judgment", max_len=MAX_ID_CHARS)
        rel = o.get("relevant")
        if not isinstance(rel, bool):  # JSON true or false: 0 and 1 too are another type
            raise RecordError("bad_relevant", f"judgment field 'relevant' must be true or "
                              f"false, got {show(rel)}")
        jid = _str(o, "id", required=False, what="judgment", max_len=MAX_ID_CHARS)
        if jid is not None and "\x1f" in jid:  # the separator of the key without an id
            raise RecordError("bad_id", "judgment field 'id' must not contain U+001F")
        judge = _str(o, "judge", required=False, what="judgment", max_len=MAX_ID_CHARS)
        ts = _float(o, "ts", "judgment", required=False)
        text = _str(o, "text", required=False, what="judgment")
        epoch = _epoch(o, "judgment")
        assert doc_id is not None and profile is not None
        return cls(doc_id, profile, bool(rel), jid, judge, ts, text, epoch)

    def to_obj(self) -> dict[str, Any]:
        out: dict[str, Any] = {"doc_id": self.doc_id, "profile": self.profile, "relevant": self.relevant}
        for key in ("id", "judge", "ts", "text", "profile_epoch"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        return out


def is_positive_text(entry: str) -> bool:
    """Whether a profile spec's ``positives`` entry that names no known document is a
    text: it has whitespace inside. A bare token that is no known id (a mistyped id, or
    a document no longer kept) is not taken as a one-word document.

    >>> is_positive_text("tariffs on Japanese chips"), is_positive_text("r14826")
    (True, False)
    >>> is_positive_text("  r14826 ")
    False
    """
    return any(ch.isspace() for ch in entry.strip())


def unknown_positive(profile: str, entry: str, where: str) -> RecordError:
    """The error for a ``positives`` entry that is neither a known id nor a text."""
    shown = entry if len(entry) <= 80 else entry[:77] + "..."
    return RecordError("unknown_positive",
                       f"profile {show(profile)}: positive {shown!r} is not {where} "
                       "(a text positive needs whitespace inside)")


@dataclass(frozen=True)
class ProfileSpec:
    """Create, update or delete a profile.

    ``{"profile", "query"?, "model", "params"?, "measure"?, "update"?, "positives"?,
    "bags"?, "bag_rule"?, "reset"?, "delete"?}``; ``positives`` are document ids or texts: an entry
    is an id when the reader knows a document by it, else a text when it has whitespace
    inside (:func:`is_positive_text`); any other entry is an unknown id, rejected with
    the reason ``unknown_positive``. ``bags`` > 1 makes a bagged profile of that many
    members deciding by ``bag_rule`` (:mod:`sift.filters.bagging`). A spec for a profile
    that exists replaces it, trained afresh from the spec, and the new profile learns the
    judgments the old one held again, unless ``reset`` is true.
    """

    profile: str
    model: str = "rocchio"
    query: str = ""
    params: dict[str, Any] = field(default_factory=dict)
    measure: str = "t11su"
    update: str | int = "every"
    positives: tuple[str, ...] = ()
    delete: bool = False
    bags: int = 1
    bag_rule: str = "margin"
    reset: bool = False

    @classmethod
    def from_obj(cls, obj: Any) -> ProfileSpec:
        o = _require_obj(obj, "profile spec")
        name = _str(o, "profile", required=True, what="profile spec", max_len=MAX_ID_CHARS)
        assert name is not None
        delete = o.get("delete", False)
        if not isinstance(delete, bool):
            raise RecordError("bad_delete", "profile spec field 'delete' must be true or false")
        if "mode" in o:  # a review spec (sift.topics.review.is_review_obj): never a profile
            raise RecordError("bad_mode", f"profile spec of {show(name)} has a 'mode' "
                              f"({show(o['mode'])}): a spec with a mode is a review spec "
                              "(sift review start), a standing profile's spec has none")
        model = o.get("model", "rocchio")
        if model not in MODELS:
            raise RecordError(
                "bad_model", f"profile spec field 'model' must be one of {', '.join(MODELS)}, "
                f"got {show(model)}"
            )
        query = _str(o, "query", required=False, what="profile spec", allow_empty=True) or ""
        params = o.get("params", {})
        if not isinstance(params, dict):  # [], false, null: not an empty set of params
            raise RecordError("bad_params", "profile spec field 'params' must be an object, "
                              f"got {show(params)}")
        for key, value in params.items():
            flat = isinstance(value, str | int | float | bool) or value is None or (
                isinstance(value, list) and all(isinstance(v, str | int | float | bool) for v in value))
            if not flat or (isinstance(value, float) and not math.isfinite(value)):
                raise RecordError("bad_params", f"profile spec param {show(key)} must be a finite number, "
                                  "string, boolean or a flat list of them")
        measure = o.get("measure", "t11su")
        if measure not in MEASURES and not _is_utility(measure):
            raise RecordError(
                "bad_measure", f"profile spec field 'measure' must be one of {', '.join(MEASURES)} "
                f"or 'utility:R:N' (finite credits of a relevant and a non-relevant delivery), "
                f"got {show(measure)}"
            )
        update = o.get("update", "every")
        valid_update = update in ("every", "never") or (isinstance(update, int) and 1 <= update <= MAX_UPDATE)
        if isinstance(update, bool) or not valid_update:
            raise RecordError(
                "bad_update",
                f"profile spec field 'update' must be 'every', 'never' or an integer in [1, {MAX_UPDATE}], "
                f"got {show(update)}",
            )
        positives = o.get("positives", [])
        if not isinstance(positives, list) or not all(isinstance(p, str) for p in positives):
            raise RecordError("bad_positives", "profile spec field 'positives' must be a list of strings")
        if not delete and not query.strip() and not positives:
            raise RecordError("empty_profile", f"profile {show(name)} has neither a query nor positives")
        bags = o.get("bags", 1)
        if isinstance(bags, bool) or not isinstance(bags, int) or not 1 <= bags <= MAX_BAGS:
            raise RecordError("bad_bags", f"profile spec field 'bags' must be an integer in "
                              f"[1, {MAX_BAGS}], got {show(bags)}")
        bag_rule = o.get("bag_rule", "margin")
        if bag_rule not in BAG_RULES:
            raise RecordError("bad_bags", f"profile spec field 'bag_rule' must be one of "
                              f"{', '.join(BAG_RULES)}, got {show(bag_rule)}")
        if bags == 1 and bag_rule != "margin":  # else dropped: a plain profile, unasked
            raise RecordError("bad_bags", f"profile spec field 'bag_rule' {show(bag_rule)} needs "
                              "'bags' above 1: one profile has no members to combine")
        reset = o.get("reset", False)
        if not isinstance(reset, bool):
            raise RecordError("bad_reset", "profile spec field 'reset' must be true or false")
        return cls(name, model, query, dict(params), measure, update, tuple(positives), delete,
                   bags, bag_rule, reset)

    def to_obj(self) -> dict[str, Any]:
        out: dict[str, Any] = {"profile": self.profile, "model": self.model, "query": self.query,
                               "params": self.params, "measure": self.measure, "update": self.update,
                               "positives": list(self.positives)}
        if self.delete:
            out["delete"] = True
        if self.bags > 1:
            out["bags"] = self.bags
            out["bag_rule"] = self.bag_rule
        if self.reset:
            out["reset"] = True
        return out


def _epoch(o: dict[str, Any], what: str) -> str | None:
    """The record's ``profile_epoch``: absent (or null) is None; else a non-blank string
    of at most :data:`MAX_EPOCH_CHARS` characters (``bad_profile_epoch``)."""
    value = o.get("profile_epoch")
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_EPOCH_CHARS:
        raise RecordError("bad_profile_epoch", f"{what} field 'profile_epoch' must be a "
                          f"non-blank string of at most {MAX_EPOCH_CHARS} characters, got "
                          f"{show(value)}")
    return value


@dataclass(frozen=True)
class Decision:
    """A delivered document: ``{"doc_id", "profile", "score", "threshold", "model_version",
    "ts", "profile_epoch"}``.

    ``profile_epoch`` names the profile's life (given at its creation, kept by its
    replacements, new when it is deleted and created again, or replaced with ``reset``);
    a judgment that carries it back is refused by another life of the profile. Empty
    (and not written) for a profile whose record predates epochs.
    """

    doc_id: str
    profile: str
    score: float
    threshold: float
    model_version: int = 0
    ts: float = 0.0
    profile_epoch: str = ""

    @property
    def key(self) -> str:
        """Stable de-duplication key for consumers."""
        return f"{self.profile}\x1f{self.doc_id}"

    @classmethod
    def from_obj(cls, obj: Any) -> Decision:
        o = _require_obj(obj, "decision")
        doc_id = _str(o, "doc_id", required=True, what="decision")
        profile = _str(o, "profile", required=True, what="decision")
        score = _float(o, "score", "decision")
        threshold = _float(o, "threshold", "decision")
        version = o.get("model_version", 0)
        if isinstance(version, bool) or not isinstance(version, int):
            raise RecordError("bad_model_version", "decision field 'model_version' must be an integer")
        ts = _float(o, "ts", "decision", required=False) or 0.0
        epoch = _epoch(o, "decision") or ""
        assert doc_id is not None and profile is not None and score is not None and threshold is not None
        return cls(doc_id, profile, score, threshold, version, ts, epoch)

    def to_obj(self) -> dict[str, Any]:
        out = {"doc_id": self.doc_id, "profile": self.profile, "score": self.score,
               "threshold": self.threshold, "model_version": self.model_version, "ts": self.ts}
        if self.profile_epoch:
            out["profile_epoch"] = self.profile_epoch
        return out
