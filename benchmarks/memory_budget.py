"""Memory budget of one worker's learned state at its caps, from the live objects.

In-process, without Kafka (as ``benchmarks/soak.py --caps``): a :class:`Service` with
``--profiles`` profiles (half Rocchio, half kNN, the soak's specs), the worker's
settings (``SIFT_RECENT_DOCUMENTS`` 20,000, a journal table beside the state table, the
record limit ``MAX_RECORD_BYTES``), documents routed and scored for the four shards at
once (:meth:`Service.score_here`, what a single worker does) and a judgment every
``--judge-every`` documents, round robin over the profiles, until every example set
holds ``max_examples`` real judgments (its cap) plus ``--after`` more documents.

Then, after ``gc.collect()`` and ``malloc_trim(0)`` (:func:`release_free_memory`):

* per profile: the bytes of its state record and journal (what the Faust tables hold),
  the numpy bytes of its decoded live objects, split by where they hang (example set,
  model sums, kNN neighbour lists, cached products, ...), the Python bytes of its
  judgment keys and document labels, and the numpy bytes of the same record decoded
  afresh (the state without the caches a live profile builds);
* the bank-level structures (stacks: Rocchio's column stack, kNN's union and codes) not
  held by any profile, the document store, the training set and vectorizer, and the
  module-level caches;
* the sum against the process's RSS (``VmRSS``), and against the RSS measured before
  any profile was made.

Every figure is summed from the objects themselves (``ndarray.nbytes`` of each owning
buffer once, ``len`` of the bytes, ``sys.getsizeof`` of dicts and strings): none is
estimated.

    nice -n 5 .venv/bin/python benchmarks/memory_budget.py                 # 20 profiles
    nice -n 5 .venv/bin/python benchmarks/memory_budget.py --profiles 100 --judge-every 1
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import json
import os
import sys
import tempfile
import time
import types
import weakref
from collections import defaultdict, deque
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import scipy.sparse as sp

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.soak import REUTERS, profile_specs, stream  # noqa: E402
from sift.agents.service import (  # noqa: E402
    MAX_RECORD_BYTES,
    InputMessage,
    Service,
    TrainingSet,
    decode_profile_record,
    memory_usage,
    release_free_memory,
    shard_of,
)
from sift.filters import examples as examples_module  # noqa: E402
from sift.filters import knn as knn_module  # noqa: E402
from sift.filters import sparse as sparse_module  # noqa: E402
from sift.topics.codecs import read_jsonl, write_jsonl  # noqa: E402
from sift.topics.records import Document  # noqa: E402

MB = 2**20


class Walker:
    """Sums the buffers of numpy arrays reachable from objects, each buffer once.

    An array's bytes are those of the array that owns its memory (a view counts its
    base, once), or of the ``bytes`` it was made from. Objects are followed through
    their ``__dict__`` and ``__slots__``, dicts, lists, tuples, sets and deques; not
    through weak references, modules, classes or functions. ``seen`` is shared across
    calls, so what one call counted the next does not count again (an array shared by
    two profiles counts for the first)."""

    def __init__(self) -> None:
        self.seen_buffers: set[int] = set()
        self.keep: list[Any] = []  # holds the roots counted, so their ids stay unique

    def walk(self, obj: Any, label: str = "") -> dict[str, int]:
        """Bytes by path (attribute names, joined by dots, collections collapsed)."""
        out: dict[str, int] = defaultdict(int)
        visited: set[int] = set()
        todo: deque[tuple[Any, str]] = deque([(obj, label)])
        while todo:
            o, path = todo.popleft()
            if id(o) in visited:
                continue
            visited.add(id(o))
            if isinstance(o, np.ndarray):
                root: Any = o
                while isinstance(root, np.ndarray) and root.base is not None:
                    root = root.base
                if isinstance(root, np.ndarray):
                    size = root.nbytes
                elif isinstance(root, bytes | bytearray):
                    size = len(root)
                elif isinstance(root, memoryview):
                    size = root.nbytes
                else:  # another buffer owner (mmap ...): count the view
                    root, size = o, o.nbytes
                if id(root) not in self.seen_buffers:
                    self.seen_buffers.add(id(root))
                    self.keep.append(root)
                    out[path] += size
                continue
            if isinstance(o, sp.spmatrix | sp.sparray):
                for part in ("data", "indices", "indptr"):
                    if hasattr(o, part):
                        todo.append((getattr(o, part), path))
                for attr in vars(o):
                    if attr not in ("data", "indices", "indptr"):
                        todo.append((getattr(o, attr), f"{path}.{attr}"))
                continue
            if isinstance(o, str | bytes | int | float | bool | type(None) | complex
                          | types.ModuleType | type | types.FunctionType
                          | types.BuiltinFunctionType | types.MethodType | weakref.ref
                          | weakref.WeakKeyDictionary | weakref.WeakValueDictionary):
                continue
            if isinstance(o, dict):
                for k, v in o.items():
                    key = k if isinstance(k, str) and not path.endswith("]") else "[]"
                    todo.append((v, f"{path}.{key}" if key != "[]" else f"{path}[]"))
                continue
            if isinstance(o, list | tuple | set | frozenset | deque):
                for v in o:
                    todo.append((v, path if path.endswith("[]") else f"{path}[]"))
                continue
            attrs: dict[str, Any] = {}
            for cls in type(o).__mro__:
                for s in getattr(cls, "__slots__", ()):
                    if s != "__weakref__" and hasattr(o, s):
                        attrs[s] = getattr(o, s)
            attrs.update(getattr(o, "__dict__", {}))
            for k, v in attrs.items():
                todo.append((v, f"{path}.{k}"))
        return dict(out)


def py_bytes_strings(d: dict[str, Any]) -> int:
    """A dict of str keys: the dict and its key objects (values: bools, None)."""
    return sys.getsizeof(d) + sum(sys.getsizeof(k) for k in d)


def rss() -> int:
    return memory_usage()["rss_bytes"]


class _Mallinfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]


def heap() -> dict[str, float]:
    """glibc's own count (``mallinfo2``, every arena): bytes in use from the heaps
    (``uordblks``) and in mmapped chunks (``hblkhd``), free bytes the heaps keep
    (``fordblks``); MB. Empty where there is no glibc 2.33+."""
    try:
        fn = ctypes.CDLL("libc.so.6").mallinfo2
    except (OSError, AttributeError):
        return {}
    fn.restype = _Mallinfo2
    m = fn()
    return {"in_use_heap_mb": round(m.uordblks / MB, 1), "in_use_mmap_mb": round(m.hblkhd / MB, 1),
            "free_in_heap_mb": round(m.fordblks / MB, 1), "heap_arena_mb": round(m.arena / MB, 1)}


def trimmed_rss() -> tuple[int, int]:
    gc.collect()
    release_free_memory()
    m = memory_usage()
    return m["rss_bytes"], m["python_blocks"]


def group(parts: dict[str, int], prefix: str) -> dict[str, int]:
    """Bytes by path, the paths shortened to their first attributes (what they are)."""
    out: dict[str, int] = defaultdict(int)
    for path, n in parts.items():
        short = path[len(prefix):].lstrip(".")
        bits = [b for b in short.replace("[]", "").split(".") if b]
        key = ".".join(bits[:3]) if bits else "(self)"
        out[key] += n
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--profiles", type=int, default=20)
    ap.add_argument("--judge-every", type=int, default=2)
    ap.add_argument("--after", type=int, default=20_000,
                    help="documents after every example set is at its cap")
    ap.add_argument("--max-documents", type=int, default=2_000_000)
    ap.add_argument("--recent", type=int, default=20_000, help="SIFT_RECENT_DOCUMENTS")
    ap.add_argument("--idf-docs", type=int, default=2000)
    ap.add_argument("--batch", type=int, default=1000, help="documents per routed message")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "memory_budget_s52.json"))
    args = ap.parse_args(argv)

    t0 = time.monotonic()
    train = list(read_jsonl(REUTERS / "train.jsonl.gz", Document.from_obj))
    test = list(read_jsonl(REUTERS / "test.jsonl.gz", Document.from_obj))
    tmp = Path(tempfile.mkdtemp(prefix="sift-budget-"))
    idf = tmp / "idf.jsonl.gz"
    write_jsonl(idf, train[: args.idf_docs])
    n_shards = 4
    journal: dict[str, bytes] = {}
    svc = Service(TrainingSet.load(idf), n_shards=n_shards, recent_documents=args.recent,
                  journal=journal, max_record_bytes=MAX_RECORD_BYTES)
    table: dict[str, bytes] = {}
    rss_start, blocks_start = trimmed_rss()

    every = profile_specs(train[: args.idf_docs], 100)
    half = args.profiles // 2
    specs = ([s for s in every if s["profile"].endswith("-rocchio")][:half]
             + [s for s in every if s["profile"].endswith("-knn")][: args.profiles - half])
    for i, spec in enumerate(specs):
        svc.apply_specs([InputMessage(orjson.dumps(spec), "profiles",
                                      shard_of(str(spec["profile"]), n_shards), i)], table)
    names = [str(s["profile"]) for s in specs]
    rss_profiles, _ = trimmed_rss()
    cap = {n: e.profile.max_examples for n in names if (e := svc.entry(n, table)) is not None}

    def real_examples(name: str, svc: Service, table: dict[str, bytes]) -> int:
        e = svc.entry(name, table)
        assert e is not None
        return int(np.count_nonzero(e.profile.examples_.real))

    buf: list[dict[str, Any]] = []
    judged: list[InputMessage] = []
    n_judged = 0
    capped_at: int | None = None
    progress: list[dict[str, Any]] = []
    shards = list(range(n_shards))
    documents = 0
    for i, d in stream(test + train[args.idf_docs:], args.max_documents):
        buf.append({"id": d.id, "title": d.title, "text": d.text})
        if i % args.judge_every == 0:
            name = names[(i // args.judge_every) % len(names)]
            judged.append(InputMessage(orjson.dumps(
                {"id": f"j-{d.id}", "doc_id": d.id, "profile": name,
                 "relevant": name.rsplit("-", 1)[0] in d.topics}), "judgments",
                shard_of(name, n_shards), i))
        if len(buf) < args.batch:
            continue
        routed = svc.route([InputMessage(orjson.dumps({"documents": buf}), "documents", 0, i)])
        for ids, X in routed.parts:
            svc.score_here(shards, ids, X, table)
        for part in shards:
            svc.apply_judgments([m for m in judged if m.partition == part], table)
        n_judged += len(judged)
        buf, judged = [], []
        documents = i + 1
        if documents % 20_000 == 0:
            reals = [real_examples(n, svc, table) for n in names]
            r, b = trimmed_rss()
            progress.append({"documents": documents, "judgments": n_judged,
                             "real_examples_min": min(reals), "rss_mb": round(r / MB, 1),
                             "python_blocks": b, **heap(),
                             "seconds": round(time.monotonic() - t0, 1)})
            print(json.dumps(progress[-1]), flush=True)
        if capped_at is None and documents % 5_000 == 0 and all(
                real_examples(n, svc, table) >= cap[n] for n in names):
            capped_at = documents
            print(f"every example set at its cap of real judgments at {documents} documents",
                  flush=True)
        if capped_at is not None and documents >= capped_at + args.after:
            break

    rss_end, blocks_end = trimmed_rss()
    heap_end = heap()
    walker = Walker()
    # shared first: what every profile refers to is counted once, here
    shared = {
        "training set and vectorizer": sum(walker.walk(svc.training, "training").values())
        + sum(walker.walk(svc.weights, "weights").values()),
    }
    store_parts = walker.walk(svc.store, "store")
    store = {"numpy_bytes": sum(store_parts.values()),
             "ids_dict_python_bytes": sys.getsizeof(svc.store._pos)
             + sum(sys.getsizeof(k) for k in svc.store._pos),
             "added_tuples_python_bytes": sum(sys.getsizeof(t) for t in svc.store._added),
             "documents_held": len(svc.store), "capacity": svc.store.capacity,
             "batches_held": sum(m is not None for m in svc.store._mats)}

    per_profile: dict[str, Any] = {}
    for name in names:
        entry = svc._entries[name]
        p = entry.profile
        live = walker.walk(p, "profile")
        fresh = decode_profile_record(table[name], svc.weights, name,
                                      n_features=svc.vectorizer.n_features)
        fresh_walker = Walker()
        fresh_walker.seen_buffers = set(walker.seen_buffers)  # the shared arrays: not again
        fresh_parts = fresh_walker.walk(fresh.profile, "profile")
        ex = p.examples_
        comp = ex._compact()
        per_profile[name] = {
            "model": p.model,
            "examples": len(ex), "real_examples": int(np.count_nonzero(ex.real)),
            "examples_nnz": int(comp.data.size),
            "compact_buffer_entries": None if comp._buf is None else int(comp._buf.data.size),
            "record_bytes": len(table[name]),
            "journal_bytes": len(journal.get(name, b"")),
            "live_numpy_bytes": sum(live.values()),
            "live_numpy_by_part": group(live, "profile"),
            "decoded_afresh_numpy_bytes": sum(fresh_parts.values()),
            "judgment_keys": len(entry.judged),
            # their digests' arrays and sets since the fifty-third session (a dict of the
            # key strings before: py_bytes_strings)
            "judgment_keys_python_bytes": entry.judged.nbytes(),
            "labels": len(entry.labels),
            "labels_python_bytes": py_bytes_strings(entry.labels),
        }
        del fresh, fresh_parts
    banks = {}
    for shard, bank in sorted(svc._banks.items()):
        banks[f"shard {shard}"] = group(walker.walk(bank, "bank"), "bank")
    if svc._joint is not None:
        banks["joint (all shards held)"] = group(walker.walk(svc._joint[1], "joint"), "joint")
    stacks = []
    for label, bank in [(f"shard {s}", b) for s, b in sorted(svc._banks.items())] + (
            [("joint", svc._joint[1])] if svc._joint is not None else []):
        for _cls, (_, stack, cols) in bank._stacks.items():
            info: dict[str, Any] = {"bank": label, "stack": type(stack).__name__,
                                    "models": len(cols)}
            if isinstance(stack, knn_module.KNNStack) and stack._built:
                info.update({"union_rows": stack.union.n,
                             "union_nnz": int(stack.union.compact.data.size),
                             "models_in_union": int(stack.cols.size),
                             "models_alone": len(stack.alone)})
            stacks.append(info)
    caches = {
        "examples._SHARED (compact forms of shared matrices)":
            sum(walker.walk(examples_module._SHARED, "x").values()),
        "knn._SHARED_LISTS (neighbour lists over shared matrices)":
            sum(walker.walk(knn_module._SHARED_LISTS, "x").values()),
        "knn._ROW_KEYS": sum(walker.walk(dict(knn_module._ROW_KEYS.items()), "x").values()),
        "sparse._SCRATCH": sum(walker.walk(sparse_module._SCRATCH, "x").values()),
    }

    def by_model(model: str) -> dict[str, Any]:
        rows = [v for v in per_profile.values() if v["model"] == model]
        if not rows:
            return {}
        keys = ("record_bytes", "journal_bytes", "live_numpy_bytes", "decoded_afresh_numpy_bytes",
                "judgment_keys_python_bytes", "labels_python_bytes", "examples_nnz")
        out: dict[str, Any] = {"profiles": len(rows)}
        for k in keys:
            vals = [int(r[k]) for r in rows]
            out[f"{k}_mean"] = round(sum(vals) / len(vals))
            out[f"{k}_max"] = max(vals)
        parts: dict[str, int] = defaultdict(int)
        for r in rows:
            for k, v in r["live_numpy_by_part"].items():
                parts[k] += v
        out["live_numpy_by_part_mean"] = {k: round(v / len(rows))
                                          for k, v in sorted(parts.items(), key=lambda kv: -kv[1])}
        return out

    totals = {
        "records_and_journals_bytes": sum(v["record_bytes"] + v["journal_bytes"]
                                          for v in per_profile.values()),
        "profiles_live_numpy_bytes": sum(v["live_numpy_bytes"] for v in per_profile.values()),
        "profiles_keys_and_labels_python_bytes": sum(
            v["judgment_keys_python_bytes"] + v["labels_python_bytes"]
            for v in per_profile.values()),
        "banks_numpy_bytes": sum(sum(b.values()) for b in banks.values()),
        "document_store_bytes": store["numpy_bytes"] + store["ids_dict_python_bytes"]
        + store["added_tuples_python_bytes"],
        "training_and_vectorizer_bytes": shared["training set and vectorizer"],
        "module_caches_bytes": sum(caches.values()),
    }
    accounted = sum(totals.values())
    result = {
        "command": "benchmarks/memory_budget.py " + " ".join(argv if argv is not None
                                                               else sys.argv[1:]),
        "profiles": len(names), "judge_every": args.judge_every,
        "documents": documents, "judgments": n_judged, "capped_at_documents": capped_at,
        "recent_documents": args.recent, "max_record_bytes": MAX_RECORD_BYTES,
        "rss_mb": {"before_profiles": round(rss_start / MB, 1),
                   "after_specs": round(rss_profiles / MB, 1),
                   "at_end": round(rss_end / MB, 1)},
        "malloc_at_end": heap_end,
        "python_blocks": {"before_profiles": blocks_start, "at_end": blocks_end},
        "totals_mb": {k: round(v / MB, 2) for k, v in totals.items()},
        "accounted_mb": round(accounted / MB, 1),
        "rss_growth_since_start_mb": round((rss_end - rss_start) / MB, 1),
        "accounted_without_training_mb": round(
            (accounted - totals["training_and_vectorizer_bytes"]) / MB, 1),
        "by_model": {m: by_model(m) for m in ("rocchio", "knn")},
        "banks": banks, "stacks": stacks, "document_store": store, "shared": shared, "module_caches": caches,
        "per_profile": per_profile, "progress": progress,
        "seconds": round(time.monotonic() - t0, 1),
        "cpu_count": os.cpu_count(), "load_average_at_end": os.getloadavg(),
    }
    # the records as orjson made them against exact copies: the allocation behind a
    # ``bytes`` from ``orjson.dumps`` may be far larger than its length
    for mapping, held in ((table, svc._raw), (journal, svc._jraw)):
        for name in list(mapping):
            copy = bytes(memoryview(mapping[name]))
            mapping[name] = copy
            if name in held:
                held[name] = copy
    rss_exact, _ = trimmed_rss()
    result["rss_mb"]["records_copied_to_exact_size"] = round(rss_exact / MB, 1)
    result["malloc_records_copied_to_exact_size"] = heap()
    # what the held state really costs: drop it all, and see what RSS gives back
    entry = p = ex = comp = stack = bank = routed = X = ids = live = None
    del walker, svc, table, journal
    rss_dropped, blocks_dropped = trimmed_rss()
    result["rss_mb"]["after_dropping_the_service"] = round(rss_dropped / MB, 1)
    result["malloc_after_dropping_the_service"] = heap()
    result["rss_released_by_dropping_mb"] = round((rss_end - rss_dropped) / MB, 1)
    result["python_blocks"]["after_dropping_the_service"] = blocks_dropped
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1))
    print(json.dumps({k: v for k, v in result.items() if k not in ("per_profile", "progress")},
                     indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
