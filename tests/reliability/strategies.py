"""Hypothesis strategies for hostile input: bytes, JSON of every shape, wire-like records.

Raw JSON is written by hand so that it can carry what ``orjson.dumps`` never writes:
duplicate keys, ``NaN``/``Infinity`` literals, numbers beyond a double or a 64-bit
integer, and nesting deeper than orjson's encoder accepts.
"""

from __future__ import annotations

import orjson
from hypothesis import strategies as st

#: Every field name of every wire record, so that the fuzzer hits the validators.
FIELDS = ["id", "doc_id", "profile", "text", "title", "abstract", "date", "metadata", "topics",
          "documents", "relevant", "judge", "ts", "query", "model", "params", "measure",
          "update", "positives", "delete", "score", "threshold", "model_version", "reason",
          "message", "original_b64", "review", "screened", "found", "r_hat", "recall", "stop"]
#: Number literals orjson rejects or turns into something surprising.
ODD_NUMBERS = ["NaN", "-NaN", "Infinity", "-Infinity", "1e400", "-1e400", "1e-400",
               "18446744073709551616", "-9223372036854775809", "1" * 400, "0.0000e99999",
               "-0", "1E+2", "9007199254740993"]

scalars = (st.none() | st.booleans()
           | st.integers(min_value=-(2**63), max_value=2**64 - 1)
           | st.floats(allow_nan=False, allow_infinity=False)
           | st.text(max_size=40)
           | st.sampled_from(["rocchio", "kantor", "knn", "fusion", "t11su", "every", "never",
                              "earn", "d0", ""]))
keys = st.sampled_from(FIELDS) | st.text(max_size=8)
json_values = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=5) | st.dictionaries(keys, children, max_size=6),
    max_leaves=25,
)


def _dump(value: object) -> str:
    return orjson.dumps(value).decode()


@st.composite
def raw_object(draw: st.DrawFn, allowed_keys: st.SearchStrategy[str] = keys) -> bytes:
    """A JSON object as text: maybe duplicate keys, maybe odd number literals."""
    pairs = draw(st.lists(st.tuples(allowed_keys, json_values), max_size=8))
    parts = []
    for k, v in pairs:
        text = draw(st.sampled_from(ODD_NUMBERS)) if draw(st.integers(0, 9)) == 0 else _dump(v)
        parts.append(f"{_dump(k)}:{text}")
    if pairs and draw(st.booleans()):  # a duplicate key, the last one wins in orjson
        k, _ = pairs[0]
        parts.append(f"{_dump(k)}:{_dump(draw(json_values))}")
    return ("{" + ",".join(parts) + "}").encode()


def nested(depth: int, leaf: bytes = b"1", *, kind: str = "object") -> bytes:
    """JSON nested ``depth`` levels deep (objects ``{"x": ...}`` or lists)."""
    if kind == "object":
        return b'{"x":' * depth + leaf + b"}" * depth
    return b"[" * depth + leaf + b"]" * depth


good_document = st.fixed_dictionaries(
    {"id": st.text(min_size=1, max_size=20).filter(str.strip), "text": st.text(min_size=1,
                                                                                 max_size=200)},
    optional={"title": st.text(max_size=30), "metadata": st.dictionaries(st.text(max_size=5),
                                                                          scalars, max_size=3),
              "date": st.text(max_size=20), "unknown_field": json_values},
).filter(lambda d: bool(str(d["text"]).strip()))

#: Batch items: good documents, documents with wrong types, anything.
batch_item = good_document | st.dictionaries(keys, json_values, max_size=6) | json_values


@st.composite
def document_message(draw: st.DrawFn) -> bytes:
    """A message of the documents topic, from perfectly fine to pure noise."""
    kind = draw(st.integers(0, 5))
    if kind == 0:
        return draw(st.binary(max_size=300))
    if kind == 1:
        return orjson.dumps(draw(good_document))
    if kind == 2:
        return orjson.dumps({"documents": draw(st.lists(batch_item, max_size=8))})
    if kind == 3:
        return draw(raw_object())
    if kind == 4:
        return orjson.dumps(draw(json_values))
    # a batch envelope with odd siblings, or a non-list "documents"
    return orjson.dumps({"documents": draw(json_values), "extra": draw(json_values)})


@st.composite
def judgment_message(draw: st.DrawFn, profiles: list[str], doc_ids: list[str]) -> bytes:
    kind = draw(st.integers(0, 4))
    if kind == 0:
        return draw(st.binary(max_size=200))
    if kind == 1:
        return draw(raw_object())
    obj: dict[str, object] = {
        "doc_id": draw(st.sampled_from(doc_ids) | st.text(max_size=10) | json_values),
        "profile": draw(st.sampled_from(profiles) | st.text(max_size=10)),
        "relevant": draw(st.booleans() | st.sampled_from([0, 1, 2, "yes", None, 0.0, 1.0])),
    }
    if draw(st.booleans()):
        obj["id"] = draw(st.text(max_size=12) | st.integers(-(2**63), 2**64 - 1))
    if draw(st.booleans()):
        obj["text"] = draw(st.text(max_size=100) | json_values)
    if draw(st.booleans()):
        obj["ts"] = draw(json_values)
    if draw(st.booleans()):
        obj[draw(st.text(max_size=6))] = draw(json_values)
    return orjson.dumps(obj)


@st.composite
def spec_message(draw: st.DrawFn, profiles: list[str]) -> bytes:
    kind = draw(st.integers(0, 4))
    if kind == 0:
        return draw(st.binary(max_size=200))
    if kind == 1:
        return draw(raw_object())
    obj: dict[str, object] = {"profile": draw(st.sampled_from(profiles) | st.text(max_size=8))}
    for key, strategy in [
        ("query", st.text(max_size=40) | json_values),
        ("model", st.sampled_from(["rocchio", "kantor", "knn", "fusion", "svm"]) | json_values),
        ("params", st.dictionaries(st.sampled_from(["alpha", "beta", "gamma", "k", "tau",
                                                     "members", "weights", "nope"]),
                                   scalars | st.lists(scalars, max_size=3), max_size=3)
         | json_values),
        ("measure", st.sampled_from(["t11su", "f1", "t11u", "zz"]) | json_values),
        ("update", st.sampled_from(["every", "never", 1, 3, 0, -1, 1.5, True])),
        ("positives", st.lists(st.text(max_size=30), max_size=3) | json_values),
        ("delete", st.booleans() | json_values),
    ]:
        if draw(st.booleans()):
            obj[key] = draw(strategy)
    return orjson.dumps(obj)
