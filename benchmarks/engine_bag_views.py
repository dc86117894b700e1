"""Bags whose members differ in representation as well as in pseudolabel seed.

``benchmarks/engine_bagging.py`` bags ``B`` Rocchio profiles per category trained from
``B`` consecutive pseudolabel seeds, all on ONE vectorizer (``--truncate 6``: tokens cut
to 6 characters). Here each member is a ``(truncate, seed)`` pair: every distinct
truncation gets its own :class:`~sift.filters.vectorize.Vectorizer`, fitted on the
training split as the replay fits it, and its own training and stream matrices, and
every member is a bank of plain profiles built by :func:`sift.replay.build_bank` with
that vectorizer and seed (so a member is exactly the profile ``sift replay --seed S
--truncate T`` starts from).

The protocol is :func:`sift.replay.run_protocol`'s (TREC 2002 adaptive filtering,
feedback only for delivered documents, exactly one document at a time), over the bags
as one filterer (:class:`ViewBags`): every stream document is scored by every member with its own
view's vector; the members' scores and thresholds are combined by
:func:`sift.filters.bagging.bag_scores` (``--rule``, default ``margin``: mean ``score -
threshold``, a silenced member counting -1) and delivered when that reaches
:func:`~sift.filters.bagging.bag_threshold`; a delivered document is judged from the
gold labels and every member learns it from its own view's vector. Documents are
scored in batches (``--batch-size``, as the replay's 256), the rest of a batch scored
again after a delivery whose feedback changed a member. Macro T11SU / T11F come from
:func:`sift.replay.evaluate`.

A configuration is ``name=T:o,T:o,...``: one member per item, ``T`` a truncation
(``none`` for whole tokens) and ``o`` the seed offset inside the group; a group ``g``
has seeds ``g*group_size + o`` (``--group-size 5``, the groups of engine_bagging.py:
seeds 0-4, 5-9, ...). ``ref6=6:0,6:1,6:2,6:3,6:4`` is engine_bagging.py's ``--bags 5
--truncate 6`` bag (members scored separately here, the bank scores that linear bag as
one merged vector: the same up to the rounding of the sums).

    .venv/bin/python benchmarks/engine_bag_views.py --validation --groups 4 \\
        --config ref6=6:0,6:1,6:2,6:3,6:4 --config mix5=5:0,6:1,7:2,none:3,6:4

``--check FILE`` compares the first configuration with the bagged runs of the same
seeds in an ``engine_bagging.py`` JSON, e.g. one written to /tmp by
``benchmarks/engine_bagging.py --bags 5 --groups 4 --validation --truncate 6 --out
/tmp/ref.json`` (reproduced exactly, every profile, in all four groups).

Writes ``benchmarks/results/engine_bag_views.json`` (``--out``; ``--merge`` keeps the
other runs of the file): per configuration and group, macro T11SU / T11F and the
per-profile T11SU, and for every configuration but the first (the reference) the
per-group difference against the first, its mean and the groups where T11SU rose.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import orjson
from numpy.typing import NDArray

sys.path.insert(0, str(Path(__file__).resolve().parent))
from engine_variants import validation_corpus

from sift.filters.bagging import RULES, bag_scores, bag_threshold
from sift.filters.bank import Hit, ProfileBank
from sift.filters.vectorize import Vectorizer
from sift.replay import Corpus, ReplayConfig, build_bank, default_specs, evaluate, load_corpus, run_protocol

ROOT = Path(__file__).resolve().parent.parent
METRICS = ("macro_t11su", "macro_t11f")

Member = tuple[int | None, int]  # (truncate, seed offset)


def parse_config(text: str) -> tuple[str, list[Member]]:
    """``name=T:o,T:o,...`` -> ``(name, [(truncate, offset), ...])``."""
    name, sep, body = text.partition("=")
    if not sep or not name or not body:
        raise SystemExit(f"--config must be name=T:o,T:o,..., got {text!r}")
    members: list[Member] = []
    for item in body.split(","):
        t, sep, o = item.partition(":")
        if not sep:
            raise SystemExit(f"--config {name}: member {item!r} is not T:o")
        members.append((None if t.lower() == "none" else int(t), int(o)))
    return name, members


class View:
    """One representation: a vectorizer fitted on the training split, and its matrices."""

    def __init__(self, corpus: Corpus, truncate: int | None) -> None:
        self.params: dict[str, Any] = {"truncate": truncate} if truncate else {}
        self.vec = Vectorizer(**self.params).fit(d.text for d in corpus.train)
        self.X_train = self.vec.transform([d.text for d in corpus.train])
        self.X_test = self.vec.transform([d.text for d in corpus.test])


class ViewBags:
    """Every category's bag as a :class:`sift.replay.Filterer`: member ``b`` is
    ``banks[b]`` scoring ``views[b]``'s vectors. :func:`sift.replay.run_protocol` streams
    the row numbers of the test documents (``np.arange``) in place of one matrix, and
    each member takes its own view's rows."""

    def __init__(self, banks: list[ProfileBank], views: list[View], names: list[str],
                 rule: str) -> None:
        self.banks, self.views, self.names, self.rule = banks, views, names, rule

    def decide(self, rows: NDArray[np.int64]) -> list[Hit]:
        part = slice(int(rows[0]), int(rows[-1]) + 1)  # the protocol's rows are contiguous
        S = np.stack([bank.score(v.X_test[part]) for bank, v in zip(self.banks, self.views, strict=True)])
        T = np.stack([bank.thresholds() for bank in self.banks])  # (B, P)
        combined = bag_scores(S, T, self.rule)  # (n, P)
        thr = np.asarray(bag_threshold(T, self.rule), dtype=np.float64)  # (P,)
        at, j = np.nonzero(combined >= thr[None, :])
        return [Hit(int(r), self.names[c], float(combined[r, c]), float(thr[c]), 0)
                for r, c in zip(at.tolist(), j.tolist(), strict=True)]

    def learn(self, profile: str, row: int, relevant: bool) -> bool:
        moved = False
        for bank, v in zip(self.banks, self.views, strict=True):
            p = bank[profile]
            before = p.version_
            p.learn_one(v.X_test[int(row)], relevant)
            moved |= p.version_ != before
        return moved


def run_config(corpus: Corpus, views: dict[int | None, View], members: list[Member], seed0: int,
               rule: str, batch_size: int) -> dict[str, Any]:
    specs = default_specs(corpus)
    names = [s.profile for s in specs]
    t0, w0 = time.process_time(), time.perf_counter()
    banks, member_views = [], []
    n_initial: dict[str, int] = {}
    for trunc, off in members:
        view = views[trunc]
        cfg = ReplayConfig(model="rocchio", seed=seed0 + off, vectorizer=view.params)
        bank, n_initial = build_bank(corpus, specs, cfg, view.vec, view.X_train)
        banks.append(bank)
        member_views.append(view)
    bags = ViewBags(banks, member_views, names, rule)
    rows = np.arange(len(corpus.test))
    hits = run_protocol(bags, rows, corpus.test, feedback=True, batch_size=batch_size)  # type: ignore[arg-type]
    m = evaluate(hits, corpus.test, names, n_initial=n_initial)
    return {"members": [{"truncate": t, "seed": seed0 + o} for t, o in members],
            **{k: m[k] for k in METRICS},
            "groups_t11su": {k: v["macro_t11su"] for k, v in m["groups"].items()},
            "per_profile_t11su": {n: m["per_profile"][n]["t11su"] for n in names},
            "deliveries": len(hits),
            "cpu_seconds": time.process_time() - t0, "wall_seconds": time.perf_counter() - w0}


def check(path: Path, ref: dict[str, Any], split: str) -> list[dict[str, Any]]:
    """Each group of ``ref`` against the bagged run of the same seeds in an
    engine_bagging.py JSON (``split`` runs only): equal macro figures, and how many
    profiles' T11SU differ."""
    doc = orjson.loads(path.read_bytes())
    theirs = {tuple(g["seeds"]): (key, g) for key, run in doc["runs"].items() if key.startswith(split + "/")
              for g in run["groups"]}
    out = []
    for row in ref["groups"]:
        seeds = tuple(m["seed"] for m in row["members"])
        if seeds not in theirs:
            out.append({"seeds": list(seeds), "found": False})
            continue
        key, g = theirs[seeds]
        differ = [n for n, v in row["per_profile_t11su"].items() if g["per_profile_t11su"][n]["bagged"] != v]
        out.append({"seeds": list(seeds), "found": True, "run": key, "file": str(path),
                    "file_commands": doc.get("commands", []),
                    **{f"engine_bagging_{k}": g["bagged"][k] for k in METRICS},
                    **{f"equal_{k}": g["bagged"][k] == row[k] for k in METRICS},
                    "profiles_t11su_differing": len(differ)})
        print(f"check seeds {seeds[0]}-{seeds[-1]} against {key}: "
              f"{g['bagged']['macro_t11su']:.6f} / {g['bagged']['macro_t11f']:.6f} vs "
              f"{row['macro_t11su']:.6f} / {row['macro_t11f']:.6f}, {len(differ)} profiles differ", flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", action="append", required=True,
                    help="name=T:o,T:o,... (T a truncation or none, o a seed offset); the first "
                         "is the reference the others are compared with")
    ap.add_argument("--groups", type=int, default=1)
    ap.add_argument("--first", type=int, default=0, help="the first group")
    ap.add_argument("--group-size", type=int, default=5, help="seeds per group (group g: g*size + o)")
    ap.add_argument("--rule", choices=RULES, default="margin")
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--validation", action="store_true", help="first 70%% of train as train, rest as stream")
    ap.add_argument("--out", default=str(ROOT / "benchmarks/results/engine_bag_views.json"))
    ap.add_argument("--merge", action="store_true")
    ap.add_argument("--check", default=None,
                    help="an engine_bagging.py JSON: compare the first configuration's groups with "
                         "its bagged runs of the same seeds (macro and per-profile T11SU)")
    args = ap.parse_args()
    configs = [parse_config(c) for c in args.config]
    if args.validation:
        corpus, split = validation_corpus(), "validation"
    else:
        corpus = load_corpus(ROOT / "data/reuters21578/train.jsonl.gz", ROOT / "data/reuters21578/test.jsonl.gz")
        split = "test"
    truncs = sorted({t for _, ms in configs for t, _ in ms}, key=lambda t: (t is None, t or 0))
    w0 = time.perf_counter()
    views = {t: View(corpus, t) for t in truncs}
    print(f"{len(views)} views fitted in {time.perf_counter() - w0:.1f}s", flush=True)
    groups = range(args.first, args.first + args.groups)
    runs: dict[str, Any] = {}
    for name, members in configs:
        rows = []
        for g in groups:
            row = run_config(corpus, views, members, g * args.group_size, args.rule, args.batch_size)
            row["group"] = g
            rows.append(row)
            seeds = sorted({m["seed"] for m in row["members"]})
            print(f"{name} group {g} (seeds {seeds[0]}-{seeds[-1]}): {row['macro_t11su']:.4f} / "
                  f"{row['macro_t11f']:.4f} ({row['wall_seconds']:.0f}s)", flush=True)
        runs[name] = {"members": [{"truncate": t, "seed_offset": o} for t, o in members],
                      "groups": rows,
                      "mean": {k: float(np.mean([r[k] for r in rows])) for k in METRICS}}
    ref_name = configs[0][0]
    ref = runs[ref_name]
    for name, _ in configs[1:]:
        run = runs[name]
        diffs = np.array([[r[k] - q[k] for k in METRICS] for r, q in zip(run["groups"], ref["groups"], strict=True)])
        run["against"] = ref_name
        run["difference_per_group"] = diffs.tolist()
        run["mean_difference"] = dict(zip(METRICS, diffs.mean(axis=0).tolist(), strict=True))
        run["t11su_up_in_groups"] = int(np.count_nonzero(diffs[:, 0] > 0))
    if args.check:
        runs[ref_name]["reference_check"] = check(Path(args.check), ref, split)
    for name, _ in configs:
        run = runs[name]
        extra = ""
        if "mean_difference" in run:
            d = run["mean_difference"]
            extra = (f", against {ref_name} {d['macro_t11su']:+.4f} / {d['macro_t11f']:+.4f}, "
                     f"T11SU up in {run['t11su_up_in_groups']} of {len(run['groups'])}")
        print(f"{name}: mean {run['mean']['macro_t11su']:.4f} / {run['mean']['macro_t11f']:.4f}{extra}",
              flush=True)
    path = Path(args.out)
    doc: dict[str, Any] = orjson.loads(path.read_bytes()) if args.merge and path.exists() else {}
    key = f"{split}/{args.rule}/groups={groups[0]}-{groups[-1]}"
    doc.setdefault("runs", {})[key] = runs
    doc.setdefault("commands", []).append(".venv/bin/python " + " ".join(sys.argv))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
