"""``sift screen``: simulate a technology-assisted review on a labelled file.

The review (continuous active learning with power-law sampling and an estimate of
the number of relevant records) is driven with the file's gold labels until its
stopping rule fires; see docs/screening.md.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from sift.commands._common import Progress, check_out_dir, nonnegative_float, nonnegative_int, write_json
from sift.errors import SiftError
from sift.filters.screening.cal import DEFAULTS
from sift.filters.screening.errors import ScreeningError
from sift.filters.screening.simulation import TARGETS, SimulationResult, simulate
from sift.topics.codecs import read_jsonl_numbered
from sift.topics.errors import RecordError
from sift.topics.records import show


@dataclass(frozen=True)
class LabelledRecord:
    id: str
    title: str
    abstract: str
    label: int

    @property
    def text(self) -> str:
        return f"{self.title} {self.abstract}".strip()


def _text(obj: dict[str, Any], key: str) -> str:
    """A record's ``title`` or ``abstract``: a string, or absent or null for none."""
    value = obj.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise RecordError("bad_text", f"{key!r} must be a string or null, got {show(value, 60)}")
    return value


def _parse(obj: Any) -> LabelledRecord:
    if not isinstance(obj, dict):
        raise RecordError("bad_record", "record is not a JSON object")
    if "label" not in obj:
        raise RecordError("no_label", "record has no 'label' field")
    label = obj["label"]
    if isinstance(label, bool) or label not in (0, 1):
        raise RecordError("bad_label", f"'label' must be 0 or 1, got {show(label)}")
    rid = obj.get("id")
    if not isinstance(rid, str | int) or isinstance(rid, bool) or rid == "":
        raise RecordError("bad_id", f"'id' must be a non-empty string or integer, got {show(rid)}")
    # (before, ``or ""`` took 0, [] or false for no text)
    return LabelledRecord(str(rid), _text(obj, "title"), _text(obj, "abstract"), int(label))


def load_records(path: str | Path) -> list[LabelledRecord]:
    """Read a screening file (gzip when named ``.gz`` or starting with gzip's bytes:
    :func:`~sift.topics.codecs.read_jsonl`); raise ScreeningError when
    it cannot be simulated."""
    p = Path(path)
    records: list[LabelledRecord] = []
    first: dict[str, int] = {}  # id -> its line
    try:
        for n, record in read_jsonl_numbered(p, _parse):
            if record.id in first:  # the number 1 and the string "1" are one id
                raise ScreeningError(f"{p}:{n}: record id {show(record.id)} came before, on "
                                     f"line {first[record.id]}: ids must be unique")
            first[record.id] = n
            records.append(record)
    except RecordError as exc:
        raise ScreeningError(str(exc)) from None
    if not records:
        raise ScreeningError(f"{p}: no records")
    n_rel = sum(r.label for r in records)
    if n_rel == 0 or n_rel == len(records):
        raise ScreeningError(
            f"{p}: labels hold a single class ({n_rel} relevant of {len(records)}); "
            "a review needs both relevant and non-relevant records"
        )
    return records


def default_topic(path: str | Path) -> str | None:
    """The review title from ``reviews.json`` beside ``path``, keyed by the file's stem."""
    p = Path(path)
    stem = p.name.split(".")[0]
    reviews = p.parent / "reviews.json"
    if not reviews.exists():
        return None
    try:
        table = orjson.loads(reviews.read_bytes())
    except orjson.JSONDecodeError as exc:
        raise ScreeningError(f"{reviews}: not JSON: {exc}") from None
    topic = table.get(stem) if isinstance(table, dict) else None
    return topic if isinstance(topic, str) and topic.strip() else None


def resolve_topic(path: Path, given: str | None) -> tuple[str | None, str | None]:
    """``(topic, why_none)``: the topic a run of ``path`` uses (``given``, else the file's
    entry in ``reviews.json``) and, when that is no usable topic, why (for the notice:
    with no topic the review has no pseudo document and ranks at random until its first
    relevant find)."""
    if given is not None:
        return given, (None if given.strip() else "--topic is empty")
    topic = default_topic(path)
    if topic is not None:
        return topic, None
    reviews = path.parent / "reviews.json"
    return None, "no entry in reviews.json" if reviews.exists() else "no reviews.json beside it"


def no_topic_notice(path: Path, why: str, hint: str) -> None:
    """One line on stderr: ``path`` is screened without a topic, and why."""
    print(f"sift screen: no topic for {path} ({why}): ranking starts at random; {hint}",
          file=sys.stderr)


def warn_no_text(path: Path, records: Sequence[LabelledRecord]) -> None:
    """One line on stderr when records have no text (no title or abstract, or blank)."""
    empty = sum(1 for r in records if not r.text)
    if empty:
        print(f"sift screen: {path}: {empty} of {len(records)} records have no text (no title "
              "or abstract); the model has nothing to rank them by", file=sys.stderr)


def check_out(out: Path) -> None:
    """Refuse, before any work, an ``--out`` that cannot be the output folder: a file, a
    path under a file, or a folder that cannot be written (nothing is created here)."""
    try:
        check_out_dir(out)
    except SiftError as exc:
        raise ScreeningError(str(exc)) from None


EPILOG = """example:
  sift screen --data data/screening/Donners_2021.jsonl.gz --target-recall 0.95 \\
      --estimator bound --seed 0 --out runs/donners
  sift screen --all data/screening --seeds 10
"""


def _params(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "draws": args.draws, "n_top": args.n_top, "n_negatives": args.negatives,
        "exponent": args.exponent, "target_recall": args.target_recall,
        "estimator": args.estimator,
    }


def run_file(
    path: Path, *, seed: int, params: dict[str, Any], topic: str | None = None,
    run_to_end: bool = True, records: Sequence[LabelledRecord] | None = None,
) -> tuple[SimulationResult, str | None]:
    """Simulate one review of ``path`` (topic from reviews.json unless given; ``records``:
    the file's, when already loaded)."""
    records = load_records(path) if records is None else records
    topic = topic if topic is not None else default_topic(path)
    target = float(params.get("target_recall", 0.95))
    rule = f"{params.get('estimator', 'bound')}@{target}"
    result = simulate(
        [r.id for r in records], [r.text for r in records], [r.label for r in records],
        topic=topic, seed=seed, params=params, main_rule=rule, run_to_end=run_to_end,
        targets=tuple(sorted({*TARGETS, target})),
    )
    return result, topic


def metrics(result: SimulationResult, rule: str) -> dict[str, Any]:
    """The metrics.json content of one run."""
    stop = result.point(rule)
    ranking = result.ranking_metrics()
    knee = result.point("knee")
    return {
        "rule": rule,
        "recall_at_stop": stop["recall"],
        "cost_at_stop": stop["cost"],
        "r_hat": stop["r_hat"],
        "r_hat_var": stop.get("r_hat_var", float("nan")),
        "stopped": stop["fired"],
        **ranking,
        "n_records": result.n_total,
        "n_relevant": result.n_relevant,
        "baselines": {
            "knee": {"recall": knee["recall"], "cost": knee["cost"], "fired": knee["fired"]},
            "fixed_budget": {
                f"{int(b * 100)}pct": ranking[f"recall_at_{int(b * 100)}pct"]
                for b in (0.10, 0.25, 0.50)
            },
            "other_rules": {k: result.point(k) for k in sorted(result.stops) if k != rule},
        },
        "screening_order": result.ids,
        "ordering": result.ordering,
        "threshold": result.threshold,
    }


def plot_run(result: SimulationResult, path: Path, title: str, rule: str) -> bool:
    """Recall versus fraction screened, with the stop point marked; False without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("sift screen: matplotlib is not installed; skipping the plot", file=sys.stderr)
        return False
    n, r = result.n_total, result.n_relevant
    x = np.arange(0, len(result.labels) + 1) / n
    y = np.concatenate([[0.0], np.cumsum(result.labels)]) / r
    if sum(result.labels) == r and len(result.labels) < n:
        # every relevant record is found: the rest of the curve is flat, whatever the order
        x, y = np.append(x, 1.0), np.append(y, 1.0)
    fig, ax = plt.subplots(figsize=(5, 3.6), dpi=100)
    ax.plot(x, y, color="C0", lw=1.5, label="sift (CAL + power-law sampling)")
    ax.plot([0, 1], [0, 1], color="grey", lw=0.8, ls=":", label="random order")
    for key, marker, color in ((rule, "o", "C3"), ("knee", "s", "C2")):
        s = result.stops.get(key)
        if s is not None:
            ax.plot(s.screened / n, s.found / r, marker=marker, color=color, ms=7,
                    label=f"stop {key}: recall {s.found / r:.2f}, cost {s.screened / n:.2f}")
    ax.axhline(0.95, color="grey", lw=0.6, ls="--")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("fraction of records screened")
    ax.set_ylabel("recall")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return True


def _run_one(args: argparse.Namespace) -> int:
    path = Path(args.data)
    params = _params(args)
    rule = f"{args.estimator}@{float(args.target_recall)}"
    seed = 0 if args.seed is None else args.seed
    out = Path(args.out)
    check_out(out)
    records = load_records(path)
    warn_no_text(path, records)
    topic, why = resolve_topic(path, args.topic)
    if why is not None:
        no_topic_notice(path, why, "give --topic")
    else:
        print(f"topic: {topic}")
    result, _ = run_file(path, seed=seed, params=params, topic=topic, records=records)
    m = metrics(result, rule)
    m["seed"] = seed
    m["params"] = params
    m["topic"] = topic  # null: none (the notice above); with seed and params, the run
    write_json(out / "metrics.json", m)
    name = path.name.split(".")[0]
    plot_run(result, out / "recall.png", f"{name}, seed {seed}", rule)
    if m["stopped"]:
        r_hat = "n/a" if m["r_hat"] is None else f"{m['r_hat']:.1f}"
        what = (f"stopped ({rule}) after {m['cost_at_stop']:.1%} screened at recall "
                f"{m['recall_at_stop']:.3f} (R-hat {r_hat})")
    else:  # e.g. --draws 0: greedy CAL, a ranking with no estimate to stop on
        why = "no draws, so no estimate: ranking only" if params.get("draws") == 0 else \
            "the collection ran out first"
        what = f"{rule} never fired ({why}); every record screened"
    print(f"{name}: {what}; WSS@95 {m['wss95']:.3f}; wrote {out / 'metrics.json'}")
    return 0


def _run_all(args: argparse.Namespace) -> int:
    folder = Path(args.all)
    if not folder.exists():
        raise ScreeningError(f"{folder}: no such folder")
    if not folder.is_dir():
        raise ScreeningError(f"{folder}: not a folder")
    files = sorted(folder.glob("*.jsonl.gz")) + sorted(folder.glob("*.jsonl"))
    if not files:
        raise ScreeningError(f"{folder}: no *.jsonl.gz or *.jsonl files")
    if args.out:
        check_out(Path(args.out))
    params = _params(args)
    rule = f"{args.estimator}@{float(args.target_recall)}"
    seeds = 1 if args.seeds is None else args.seeds
    rows: dict[str, list[dict[str, Any]]] = {}
    # every file read, and its topic found, before the runs (and their progress bar)
    loaded = []
    for f in files:
        records = load_records(f)
        warn_no_text(f, records)
        topic, why = resolve_topic(f, None)
        if why is not None:
            no_topic_notice(f, why, "add its title to reviews.json beside it")
        loaded.append((f, records, topic))
    bar = Progress(len(files) * seeds, "screen")
    try:
        for done, (f, records, topic) in enumerate(loaded, 1):
            name = f.name.split(".")[0]
            for seed in range(seeds):
                result, _ = run_file(f, seed=seed, params=params, topic=topic, records=records)
                m = metrics(result, rule)
                m["topic"] = topic
                rows.setdefault(name, []).append(m)
                bar.update()
            if not bar.enabled:  # no bar off a terminal: a line a dataset, not ten silent minutes
                ms = rows[name]
                print(f"screen: {name}: {seeds} seed{'s' if seeds > 1 else ''} done, recall "
                      f"{np.mean([x['recall_at_stop'] for x in ms]):.3f}, cost "
                      f"{np.mean([x['cost_at_stop'] for x in ms]):.3f} "
                      f"({done}/{len(loaded)} datasets)", flush=True)
    finally:
        bar.close()
    print(f"rule {rule}, {seeds} seeds; recall and cost at stop: mean (worst)")
    print(f"{'dataset':26s} {'recall':>14s} {'cost':>14s} {'met':>5s} {'WSS@95':>7s}")
    for name, ms in rows.items():
        rec = [m["recall_at_stop"] for m in ms]
        cost = [m["cost_at_stop"] for m in ms]
        met = np.mean([x >= float(args.target_recall) - 1e-12 for x in rec])
        print(f"{name:26s} {np.mean(rec):6.3f} ({min(rec):5.3f}) {np.mean(cost):6.3f} "
              f"({max(cost):5.3f}) {met:5.0%} {np.mean([m['wss95'] for m in ms]):7.3f}")
    if args.out:
        write_json(Path(args.out) / "summary.json", {
            name: [{k: v for k, v in m.items() if k not in ("screening_order", "ordering")}
                   for m in ms] for name, ms in rows.items()
        })
    return 0


def _run(args: argparse.Namespace) -> int:
    if not 0.0 < args.target_recall <= 1.0:
        raise ScreeningError(f"--target-recall must be in (0, 1], got {args.target_recall}")
    if args.seeds is not None and args.seeds < 1:
        raise ScreeningError(f"--seeds must be >= 1, got {args.seeds}")
    if args.all:
        # one seed, or one topic, for a whole folder of reviews would be a silent mistake
        if args.seed is not None:
            raise ScreeningError("--seed is for --data FILE; with --all give --seeds N "
                                 "(seeds 0..N-1 on every file)")
        if args.topic is not None:
            raise ScreeningError("--topic is for --data FILE; with --all each file's topic "
                                 "is its title in reviews.json beside it")
        return _run_all(args)
    if not args.data:
        raise ScreeningError("give --data FILE (or --all FOLDER)")
    if args.seeds is not None:
        raise ScreeningError("--seeds is for --all FOLDER; with --data give --seed S")
    if not args.out:
        raise ScreeningError("give --out DIR for metrics.json and the plot")
    return _run_one(args)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``sift screen``."""
    p = subparsers.add_parser(
        "screen",
        help="simulate a technology-assisted review on a labelled file",
        description="Simulate a review (CAL with power-law sampling and an estimate of R) "
        "on a labelled JSONL file ({id, title, abstract, label}) until the stopping "
        "rule fires; write metrics.json and a recall plot.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    src = p.add_mutually_exclusive_group()
    src.add_argument("--data", metavar="FILE", help="labelled .jsonl(.gz) file (read as gzip "
                     "when named .gz or when its content is)")
    src.add_argument("--all", metavar="FOLDER", help="run every file of FOLDER, print a table")
    p.add_argument("--topic", help="topic text, with --data (default: the title in reviews.json "
                   "beside FILE; with none, a notice, and the ranking starts at random)")
    p.add_argument("--target-recall", type=float, default=0.95,
                   help="recall the stopping rule aims at, in (0, 1] (default 0.95)")
    p.add_argument("--estimator", choices=("ht", "hh", "bound"), default="bound",
                   help="stopping rule: ht / hh stop when the relevant found reach the target "
                        "times the Horvitz-Thompson / Hansen-Hurwitz estimate of R (ht's "
                        "estimate is biased low on this adaptive design and tends to the "
                        "number found, so ht often stops at its first check); bound when "
                        "found / (R-hat + 1.645 sd) reaches it: a heuristic (normal "
                        "approximation, plug-in variance), not a 95%% guarantee, that stops "
                        "early when the relevant records left sit deep in the ranking "
                        "(docs/screening.md) (default bound)")
    p.add_argument("--seed", type=nonnegative_int, default=None,
                   help="seed of the sampling and the temporary negatives, with --data "
                        "(default 0)")
    p.add_argument("--seeds", type=int, default=None,
                   help="seeds 0..N-1 per file, with --all (default 1)")
    p.add_argument("--out", metavar="DIR", help="output folder")
    p.add_argument("--draws", type=nonnegative_int, default=DEFAULTS["draws"],
                   help=f"b: draws per batch (default {DEFAULTS['draws']})")
    p.add_argument("--n-top", type=nonnegative_int, default=DEFAULTS["n_top"],
                   help="best-ranked documents judged with certainty per batch "
                        f"(default {DEFAULTS['n_top']})")
    p.add_argument("--negatives", type=nonnegative_int, default=DEFAULTS["n_negatives"],
                   help=f"k: random temporary negatives per batch (default {DEFAULTS['n_negatives']})")
    p.add_argument("--exponent", type=nonnegative_float, default=DEFAULTS["exponent"],
                   help="power-law exponent of the sampling distribution "
                        f"(default {DEFAULTS['exponent']})")
    p.set_defaults(func=_run)
