"""``sift replay``: the adaptive filtering job, in process, on JSONL files."""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from sift.commands._common import (
    NO_BUNDLED_DATA,
    Progress,
    check_out_dir,
    nonnegative_int,
    positive_int,
    printable,
    write_json,
)
from sift.devbroker import REPO_ROOT
from sift.errors import ConfigError
from sift.filters.bagging import RULES as BAG_RULES
from sift.replay import (
    FullTrainingConfig,
    ReplayConfig,
    SpecError,
    default_specs,
    load_corpus,
    read_specs_numbered,
    replay,
)

FT = FullTrainingConfig()

EPILOG = """examples:
  sift replay                                   # Reuters-21578, Rocchio, feedback after every judgment
  sift replay --model knn --update 10 --out runs/knn
  sift replay --full-training --model knn       # batch categorization: all training labels, no feedback
  sift replay --train my-train.jsonl.gz --test my-stream.jsonl.gz --profiles profiles.jsonl --skip-bad
"""

DEFAULT_TRAIN = "data/reuters21578/train.jsonl.gz"
DEFAULT_TEST = "data/reuters21578/test.jsonl.gz"


def _update(value: str) -> str | int:
    if value in ("every", "never"):
        return value
    try:
        int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be 'every', 'never' or a positive integer, got {value!r}") from None
    return positive_int(value)


def _param(value: str) -> tuple[str, Any]:
    if "=" not in value:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {value!r}")
    key, raw = value.split("=", 1)
    try:
        parsed = orjson.loads(raw)
    except orjson.JSONDecodeError:
        parsed = raw
    return key.strip(), parsed


def _auto_none_or(ok: Callable[[float], bool], what: str) -> Callable[[str], float | str | None]:
    """An argparse type for ``auto``, ``none`` (None) or a number that ``ok`` accepts."""

    def parse(value: str) -> float | str | None:
        if value in ("auto", "none"):
            return None if value == "none" else value
        try:
            x = float(value)
        except ValueError:
            x = math.nan
        if not ok(x):
            raise argparse.ArgumentTypeError(f"must be 'auto', 'none' or {what}, got {value!r}")
        return x

    return parse


_negative_mass = _auto_none_or(lambda x: 0 < x < math.inf, "a positive number")
_size_cut = _auto_none_or(lambda x: 0.0 < x <= 1.0, "a number in (0, 1]")


def _share(value: str) -> float:
    try:
        x = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number in [0, 1), got {value!r}") from None
    if not 0.0 <= x < 1.0:
        raise argparse.ArgumentTypeError(f"must be in [0, 1), got {x}")
    return x


def _fraction(value: str) -> float:
    try:
        x = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number in [0, 1], got {value!r}") from None
    if not 0.0 <= x <= 1.0:
        raise argparse.ArgumentTypeError(f"must be in [0, 1], got {x}")
    return x


def _placement(value: str) -> float:
    x = _fraction(value)
    if x >= 1.0:
        raise argparse.ArgumentTypeError(f"must be in [0, 1), got {x}")
    return x


def _min_score(value: str) -> float | None:
    if value.lower() == "none":
        return None
    try:
        x = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number or 'none', got {value!r}") from None
    if not math.isfinite(x):
        raise argparse.ArgumentTypeError(f"must be a finite number or 'none', got {value!r}")
    return x


def register(sub: Any) -> None:
    p = sub.add_parser(
        "replay",
        help="replay a document stream in process with simulated feedback and evaluate",
        description="Train one profile per category, stream the test documents in order, deliver a "
        "document when its score reaches the profile's threshold, and feed back the true label of "
        "delivered documents only (the TREC 2002 adaptive filtering protocol).",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--train", default=DEFAULT_TRAIN, help="training JSONL (gzip allowed)")
    p.add_argument("--test", default=DEFAULT_TEST, help="stream JSONL, played in file order")
    p.add_argument("--profiles", help="JSONL of profile specs {profile, query?, positives?, params?}; "
                   "positives are training document ids or texts (whitespace inside); "
                   "without positives a profile gets the first --initial-positives "
                   "training documents of the category named like it")
    p.add_argument("--model", default="rocchio", choices=["rocchio", "kantor", "knn", "fusion"],
                   help="scoring model (default rocchio)")
    p.add_argument("--param", action="append", type=_param, default=[], metavar="KEY=VALUE",
                   help="model hyperparameter, repeatable (e.g. --param k=20)")
    p.add_argument("--update", default="every", type=_update, help="every | never | N (default every)")
    p.add_argument("--measure", default="t11su", choices=["t11su", "t11f", "f1", "t11u", "precision"],
                   help="measure TROT optimises (default t11su; under --full-training with "
                   "--threshold trot only)")
    p.add_argument("--initial-positives", type=int, default=3, metavar="N",
                   help="the first N positive training documents of each category are its "
                        "profile's initial positives (default 3)")
    p.add_argument("--truncate", type=positive_int, default=None, metavar="N",
                   help="keep the first N characters of every token (a stand-in for stemming; "
                        "6 raised adaptive Rocchio's T11F on the validation split)")
    p.add_argument("--chars", type=_share, default=None, metavar="C",
                   help="add character n-grams (3 to 5 bytes of every space-separated chunk, "
                        "the 200 heaviest a document) with share C of the dot product, in [0, 1); "
                        "better batch models on Reuters-21578, not better adaptive runs; slower "
                        "and about six times the memory a profile (docs/engine.md)")
    p.add_argument("--negative-mass", type=_negative_mass, default="auto", metavar="auto|none|M",
                   help="TROT weight of the pseudo-negatives scaled to each profile's prevalence "
                        "(see Profile.negative_mass; auto: 3; "
                        "none: the pseudolabel weight)")
    p.add_argument("--size-cut", type=_size_cut, default="auto", metavar="auto|none|C",
                   help="a floor under that scaling from the shape of each profile's training "
                        "ranking: the documents scoring at least C of the top score above the "
                        "median (see Profile.size_cut; auto: 0.3 for Rocchio, none for the others)")
    p.add_argument("--full-training", action="store_true",
                   help="batch categorization: every training label known, no feedback")
    ft = p.add_argument_group(
        "full training", "options of --full-training only; the defaults were chosen on a validation split of "
        "the Reuters-21578 training set (benchmarks/engine_fulltrain.py --validation)")
    ft.add_argument("--threshold", choices=["scut", "trot"], default=FT.threshold,
                    help="scut: the F1-optimal threshold on leave-one-out training scores, with the fbr "
                    "fallback and the --min-score bound; trot: the profile's TROT on --measure "
                    f"(default {FT.threshold})")
    ft.add_argument("--fbr", type=_fraction, default=FT.fbr, metavar="F",
                    help="scut fallback: when the best training F1 of a category is below F, use "
                    f"--fbr-fallback instead (0 turns it off; default {FT.fbr})")
    ft.add_argument("--fbr-fallback", choices=["top", "none"], default=FT.fbr_fallback,
                    help="top: threshold at the highest training score; none: deliver nothing "
                    f"(default {FT.fbr_fallback})")
    ft.add_argument("--min-score", type=_min_score, default=FT.min_score, metavar="S",
                    help="scut never sets a threshold at or below S ('none': no bound; default "
                    f"{FT.min_score}: a document with no evidence is never delivered)")
    ft.add_argument("--placement", type=_placement, default=FT.placement, metavar="P",
                    help="scut threshold between the lowest accepted training score and the next "
                    f"lower one: 0 at the score, 0.5 the midpoint (default {FT.placement})")
    ft.add_argument("--select-features", type=nonnegative_int, default=FT.select_features, metavar="N",
                    help="keep the N columns with the largest chi-square against any category's "
                    f"training labels, 0 for all (default {FT.select_features})")
    ft.add_argument("--knn-normalize", action=argparse.BooleanOptionalAction, default=FT.knn_normalize,
                    help="kNN: divide the vote by the neighbours' summed similarity "
                    f"(default {'on' if FT.knn_normalize else 'off'})")
    p.add_argument("--bags", type=positive_int, default=1, metavar="B",
                   help="profiles per category, from the pseudolabel seeds SEED .. SEED+B-1, deciding "
                        "together on their mean margin (sift.filters.bagging; B times the work; "
                        "default 1: one profile)")
    p.add_argument("--bag-rule", choices=list(BAG_RULES), default="margin",
                   help="how bagged profiles decide together (default margin)")
    p.add_argument("--seed", type=nonnegative_int, default=0,
                   help="seed of the pseudolabel draws (default 0)")
    p.add_argument("--out", default="runs/replay", help="output folder (default runs/replay)")
    p.add_argument("--skip-bad", action="store_true", help="skip malformed lines and count them")
    p.add_argument("--no-plot", action="store_true", help="do not write the PNG plot")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.initial_positives < 0:
        raise ConfigError(f"--initial-positives must be >= 0, got {args.initial_positives}")
    if args.bags > 1 and args.full_training:
        raise ConfigError("--bags applies to adaptive filtering: --full-training has no pseudolabels to bag")
    for attr, default in (("train", DEFAULT_TRAIN), ("test", DEFAULT_TEST)):
        path = getattr(args, attr)
        if path == default and not Path(path).exists() and (REPO_ROOT / default).exists():
            path = str(REPO_ROOT / default)  # run from elsewhere: the checkout's bundled data
            setattr(args, attr, path)
        if not Path(path).exists() and path == default:
            raise ConfigError(f"{path}: no such file ({NO_BUNDLED_DATA}): pass --train and --test")
        if not Path(path).exists():
            raise ConfigError(f"--{attr} {path}: no such file")
    out = Path(args.out)
    check_out_dir(out)  # before the run, not after it (minutes with --full-training)
    corpus = load_corpus(args.train, args.test, skip_bad=args.skip_bad)
    # a spec with a "mode" (a review spec, or a misspelt one) is refused, file and line,
    # as the worker refuses it (bad_mode): ProfileSpec.from_obj
    numbered = read_specs_numbered(args.profiles) if args.profiles else []
    specs = [spec for _, spec in numbered] if args.profiles else default_specs(corpus)
    where = {spec.profile: f"{args.profiles}:{line}" for line, spec in numbered}
    if not specs and args.profiles:
        raise ConfigError(f"{args.profiles}: no profile specs (every line is blank)")
    if not specs:
        raise ConfigError("no profiles: no category occurs in both files and no --profiles given")
    cfg = ReplayConfig(
        model=args.model,
        model_params=dict(args.param),
        update="never" if args.full_training else args.update,
        measure=args.measure,
        initial_positives=args.initial_positives,
        full_training=args.full_training,
        seed=args.seed,
        vectorizer={**({} if args.truncate is None else {"truncate": args.truncate}),
                    **({} if not args.chars else {"chars": args.chars})},
        profile_params={"negative_mass": args.negative_mass, "size_cut": args.size_cut},
        bags=args.bags,
        bag_rule=args.bag_rule,
        full=FullTrainingConfig(
            threshold=args.threshold, fbr=args.fbr, fbr_fallback=args.fbr_fallback,
            min_score=args.min_score, placement=args.placement,
            select_features=args.select_features or None, knn_normalize=args.knn_normalize,
        ),
    )
    progress = Progress(len(corpus.test), label="replay")
    try:
        result = replay(corpus, cfg, specs, progress=progress.update)
    except SpecError as exc:  # a spec of the --profiles file: say which line
        if exc.profile in where:
            raise SpecError(exc.profile, f"{where[exc.profile]}: {exc}") from None
        raise
    finally:
        progress.close()
    # the measures first: a write that fails still leaves them on the terminal
    print_table(result.metrics, sys.stdout)
    sys.stdout.flush()
    out.mkdir(parents=True, exist_ok=True)
    with (out / "decisions.jsonl").open("wb") as fh:
        for d in result.decisions:
            fh.write(orjson.dumps(d) + b"\n")
    write_json(out / "metrics.json", result.metrics)
    if not args.no_plot:
        plot_t11su(result.metrics, out / "t11su.png")
    print(f"wrote {out / 'metrics.json'} and {out / 'decisions.jsonl'} ({len(result.decisions)} decisions)")
    return 0


def print_table(m: dict[str, Any], stream: Any) -> None:
    """The metrics for the terminal; profile names with control characters (a newline, an
    escape sequence) are printed escaped (:func:`~sift.commands._common.printable`)."""
    cfg = m["config"]
    mode = "full training (batch)" if cfg["full_training"] else f"adaptive, update={cfg['update']}"
    thr = f"TROT on {cfg['measure']}"
    full = cfg.get("full")
    if full and full["threshold"] == "scut":
        thr = f"SCut on {full['measure']} (fbr {full['fbr']:g}, min score {full['min_score']})"
    bags = cfg.get("bags", 1)
    bagged = f" ({bags} bagged from seeds {cfg['seed']}-{cfg['seed'] + bags - 1}, {cfg.get('bag_rule')})" \
        if bags > 1 else ""
    stream.write(f"model {cfg['model']}, {mode}, {thr}, {m['profiles']} profiles{bagged}, "
                 f"{m['seconds']:.1f} s\n")
    if full:
        stream.write(f"  model params {cfg['model_params']}, features {full['select_features'] or 'all'}"
                     + (f", knn vote {'normalised' if full['knn_normalize'] else 'sum'}"
                        if cfg["model"] == "knn" else "") + "\n")
    keys = ["macro_t11su", "macro_t11f", "micro_precision", "micro_recall"]
    keys += [k for k in ("micro_f1", "macro_f1") if k in m]
    stream.write("  ".join(f"{k} {m[k]:.3f}" for k in keys) + "\n")
    stream.write(f"{'group':34s} {'profiles':>8s} {'T11SU':>7s} {'T11F':>7s}\n")
    for name, g in m["groups"].items():
        su = "-" if math.isnan(g["macro_t11su"]) else f"{g['macro_t11su']:.3f}"
        f = "-" if math.isnan(g["macro_t11f"]) else f"{g['macro_t11f']:.3f}"
        stream.write(f"{printable(name):34s} {g['profiles']:8d} {su:>7s} {f:>7s}\n")
    per = sorted(m["per_profile"].items(), key=lambda kv: -kv[1]["relevant_in_test"])[:10]
    stream.write(f"{'largest profiles':20s} {'R+':>5s} {'N+':>5s} {'R-':>5s} {'T11SU':>7s} {'T11F':>7s}\n")
    for name, r in per:
        stream.write(f"{printable(name):20s} {r['R+']:5d} {r['N+']:5d} {r['R-']:5d} "
                     f"{r['t11su']:7.3f} {r['t11f']:7.3f}\n")
    if m.get("skipped_lines"):
        stream.write(f"skipped lines: {m['skipped_lines']}\n")
    empty = sorted(printable(n) for n, r in m["per_profile"].items() if r["relevant_in_test"] == 0)
    if empty:
        shown = ", ".join(empty[:10]) + (", ..." if len(empty) > 10 else "")
        stream.write(f"note: {len(empty)} profile(s) with no relevant document in the stream, for "
                     f"which T11SU and T11F are not defined (counted as 0.333 and 0 in the "
                     f"averages, whatever they delivered): {shown}\n")


def plot_t11su(m: dict[str, Any], path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plot (pip install 'sift[plot]')", file=sys.stderr)
        return
    per = sorted(m["per_profile"].items(), key=lambda kv: -kv[1]["relevant_in_test"])
    names = [k for k, _ in per]
    fig, ax = plt.subplots(figsize=(max(8, len(names) * 0.16), 4))
    ax.bar(range(len(names)), [r["t11su"] for _, r in per], color="#4878a8")
    ax.axhline(1 / 3, color="grey", linestyle=":", label="deliver nothing (1/3)")
    ax.axhline(m["macro_t11su"], color="#c44", linestyle="--", label=f"macro {m['macro_t11su']:.3f}")
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels(names, rotation=90, fontsize=6)
    ax.set_ylabel("T11SU")
    ax.set_ylim(0, 1)
    ax.set_title(f"sift replay: {m['config']['model']}, per profile (largest first)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
