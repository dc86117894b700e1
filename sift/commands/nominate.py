"""``sift nominate``: learn to rank from a few positives by fusing dissimilarities.

Two experiments of Helm et al., "Distance-based Positive and Unlabeled Learning
for Ranking":

* ``--simulate rdpg``: the random dot product graph simulation of the paper's
  Figure 2 (ILP against ASE and LSE alone, for alpha in 0, 0.1, ..., 1);
* ``--data FILE --category C``: the same protocol on text, with word TF-IDF,
  character n-gram TF-IDF and LSA cosine dissimilarities, the ILP against the
  Singleton baseline and each representation alone.
"""

from __future__ import annotations

import argparse
import math
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
from numpy.typing import NDArray

from sift.commands._common import Progress, check_out_dir, nonnegative_int, refuse_unused, write_json
from sift.errors import ConfigError

EPILOG = """examples:
  sift nominate --simulate rdpg --seed 0 --out runs/rdpg
  sift nominate --data data/reuters21578/train.jsonl.gz --category grain \\
      --positives 5 --trials 30 --seed 0 --out runs/grain
"""

ALPHAS = tuple(round(0.1 * i, 1) for i in range(11))

_T = TypeVar("_T")


def run_in_thread(fn: Callable[[], _T], deadline: float) -> _T | None:
    """``fn()`` in a daemon thread joined at ``deadline`` (``time.monotonic()``).

    Returns its result, or ``None`` if it is still running then (the thread is
    abandoned; HiGHS releases the GIL and stops at its own time limit).
    Exceptions are re-raised in the caller. The ``runner`` of
    :func:`sift.filters.fusion.solve_weights` (the pure core starts no threads).
    """
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["result"] = fn()
        except BaseException as exc:  # re-raised in the caller
            box["error"] = exc

    th = threading.Thread(target=target, name="sift-fusion-milp", daemon=True)
    th.start()
    th.join(max(0.0, deadline - time.monotonic()))
    if "error" in box:
        raise box["error"]
    if th.is_alive() or "result" not in box:
        return None
    result: _T = box["result"]
    return result


# --------------------------------------------------------------------------- RDPG


def _ase(a: NDArray[np.float64], dim: int = 2) -> NDArray[np.float64]:
    vals, vecs = np.linalg.eigh(a)
    top = np.argsort(-np.abs(vals))[:dim]
    return np.asarray(vecs[:, top] * np.sqrt(np.abs(vals[top])), dtype=np.float64)


def _lse(a: NDArray[np.float64], dim: int = 2) -> NDArray[np.float64]:
    deg = a.sum(axis=1)
    inv = np.where(deg > 0, 1.0 / np.sqrt(np.where(deg > 0, deg, 1.0)), 0.0)
    lap = inv[:, None] * a * inv[None, :]
    return math.sqrt(a.shape[0]) * _ase(lap, dim)


def _dist_to_first(x: NDArray[np.float64]) -> NDArray[np.float64]:
    return np.asarray(np.linalg.norm(x - x[0], axis=1), dtype=np.float64)


def _latent_positions(rng: np.random.Generator, n: int) -> NDArray[np.float64]:
    r = np.sqrt(rng.uniform(size=n - 1))
    theta = rng.uniform(0.0, math.pi / 2, size=n - 1)
    x = np.column_stack([r * np.cos(theta), r * np.sin(theta)])
    return np.vstack([[0.5, 0.5], x])


def rdpg_run(
    rng: np.random.Generator, *, n: int = 51, k: int = 1000, alphas: tuple[float, ...] = ALPHAS,
    positives: int = 5, x: NDArray[np.float64] | None = None,
) -> dict[str, dict[str, list[float]]]:
    """One Monte Carlo run: reciprocal rank of the 6th closest item, per alpha.

    The latent positions ``x`` are drawn from ``rng`` unless given (the paper's
    fixed realisation). The ground truth ``d_alpha`` is computed on the true
    ``P``; the ILP learns on, and the rankers rank by, the observed matrix
    (``P`` itself, or the mean of ``k`` Bernoulli(``P``) adjacencies). The
    query ``v*`` and ``S`` are excluded from the ranked list.

    Returns ``{"P": {"ilp": [...], "ase": [...], "lse": [...]}, "Abar": {...}}``
    with one value per alpha.
    """
    from sift.filters.fusion import solve_weights

    if x is None:
        x = _latent_positions(rng, n)
    n = x.shape[0]
    p = x @ x.T
    d_ase_true = _dist_to_first(_ase(p))
    d_lse_true = _dist_to_first(_lse(p))
    upper = np.triu(rng.binomial(k, np.clip(p, 0.0, 1.0)) / k, 1)
    abar = upper + upper.T
    observed = {"P": p, "Abar": abar}
    dists = {
        name: np.column_stack([_dist_to_first(_ase(a)), _dist_to_first(_lse(a))])
        for name, a in observed.items()
    }
    out: dict[str, dict[str, list[float]]] = {
        name: {"ilp": [], "ase": [], "lse": []} for name in observed
    }
    others = np.arange(1, n)
    for alpha in alphas:
        interest = alpha * d_ase_true + (1 - alpha) * d_lse_true
        order = others[np.argsort(interest[others], kind="stable")]
        s, s_star = order[:positives], int(order[positives])
        for name, d in dists.items():
            w = solve_weights(d, s, query=0, time_limit=None).weights
            for ranker, scores in (("ilp", d @ w), ("ase", d[:, 0]), ("lse", d[:, 1])):
                out[name][ranker].append(_reciprocal_rank(scores, s_star, [0, *s.tolist()]))
    return out


def _reciprocal_rank(scores: NDArray[np.float64], item: int, exclude: list[int]) -> float:
    from sift.filters.fusion import heldout_mrr

    return heldout_mrr(scores, [item], exclude=exclude)


def simulate_rdpg(
    seed: int, *, runs: int = 100, k: int = 1000, n: int = 51, positives: int = 5,
    fixed_positions: bool = False, progress: Progress | None = None,
) -> dict[str, Any]:
    """Monte Carlo estimate of the paper's Figure 2 (mean reciprocal rank and 95% CI).

    The CI is the normal approximation ``mean +- 1.96 sd / sqrt(runs)``, clipped to
    [0, 1] (where a reciprocal rank lies; with few runs the unclipped interval can leave
    it).

    With ``fixed_positions`` the latent positions are drawn once (from ``seed``)
    and only the adjacency samples vary between runs, as in the paper's single
    realisation (then the ``P`` panel is the same in every run); otherwise they
    are redrawn in every run.
    """
    rng = np.random.default_rng(seed)
    x_fixed = _latent_positions(rng, n) if fixed_positions else None
    raw: dict[str, dict[str, list[list[float]]]] = {}
    for _ in range(runs):
        one = rdpg_run(rng, n=n, k=k, positives=positives, x=x_fixed)
        for obs, by in one.items():
            for ranker, vals in by.items():
                raw.setdefault(obs, {}).setdefault(ranker, []).append(vals)
        if progress is not None:
            progress.update()
    summary: dict[str, Any] = {}
    for obs, by_ranker in raw.items():
        summary[obs] = {}
        for ranker, rows in by_ranker.items():
            arr = np.array(rows)
            mean = arr.mean(axis=0)
            half = (1.96 * arr.std(axis=0, ddof=1) / math.sqrt(arr.shape[0]) if runs > 1
                    else 0 * mean)
            # a reciprocal rank is in [0, 1]: so is its interval
            summary[obs][ranker] = {"mean": mean.tolist(),
                                    "lo": np.clip(mean - half, 0.0, 1.0).tolist(),
                                    "hi": np.clip(mean + half, 0.0, 1.0).tolist()}
    return {"alphas": list(ALPHAS), "runs": runs, "k": k, "n": n, "seed": seed,
            "latent_positions": ("fixed: one draw from the seed" if fixed_positions
                                 else "redrawn in every run"),
            "positions": None if x_fixed is None else np.round(x_fixed, 6).tolist(),
            "observed": {"P": "P itself", "Abar": f"mean of k = {k} Bernoulli(P) adjacencies"},
            "mrr": summary,
            "per_run": {obs: {r: np.round(np.array(rows), 6).tolist() for r, rows in by.items()}
                        for obs, by in raw.items()}}


def plot_rdpg(result: dict[str, Any], path: Path) -> bool:
    """Draw the two panels of Figure 2; return False (with a notice) without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: skipping the plot")
        return False
    alphas = result["alphas"]
    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
    titles = {"P": "P observed", "Abar": f"k = {result['k']} adjacency samples averaged"}
    colors = {"ilp": "C0", "ase": "C1", "lse": "C2"}
    for ax, obs in zip(axes, ("P", "Abar"), strict=True):
        for ranker in ("ilp", "ase", "lse"):
            s = result["mrr"][obs][ranker]
            ax.plot(alphas, s["mean"], marker="o", ms=3, color=colors[ranker], label=ranker.upper(),
                    zorder=3 if ranker == "ilp" else 2, lw=2.5 if ranker == "ilp" else 1.5)
            ax.fill_between(alphas, s["lo"], s["hi"], color=colors[ranker], alpha=0.2)
        ax.set_title(titles[obs])
        ax.set_xlabel("alpha  (interestingness = alpha d_ASE + (1 - alpha) d_LSE)")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel(f"MRR of the 6th closest ({result['runs']} runs, 95% CI)")
    axes[0].legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


# --------------------------------------------------------------------------- text


def text_trials(
    texts: list[str],
    labels: list[set[str]],
    category: str,
    *,
    positives: int = 5,
    trials: int = 30,
    seed: int = 0,
    reps: Any = None,
    time_limit: float = 30.0,
    objective: str = "maxrank",
    progress: Progress | None = None,
) -> dict[str, Any]:
    """The paper's protocol on text: per trial a query, ``positives`` known positives
    and the rest of the category held out; MRR of the held-out documents."""
    from scipy.stats import wilcoxon

    from sift.filters.fusion import SingletonRanker, heldout_mrr, solve_weights
    from sift.filters.representations import TextRepresentations

    members = np.array([i for i, lab in enumerate(labels) if category in lab], dtype=np.intp)
    if members.size < positives + 2:
        raise ConfigError(
            f"category {category!r} has {members.size} documents; --positives {positives} "
            f"needs at least {positives + 2}"
        )
    if reps is None:
        reps = TextRepresentations(seed=seed).fit(texts)
    names = list(reps.names_)
    rng = np.random.default_rng(seed)
    per: dict[str, list[float]] = {"ilp": [], "singleton": [], **{n: [] for n in names}}
    details: list[dict[str, Any]] = []
    t0 = time.monotonic()
    for trial in range(trials):
        pick = rng.permutation(members)
        q, s, held = int(pick[0]), pick[1 : 1 + positives], pick[1 + positives :]
        d = reps.dissimilarities(q)
        excl = [q, *s.tolist()]
        res = solve_weights(d, s, query=q, time_limit=time_limit, objective=objective,
                            seed=seed + trial, runner=run_in_thread)
        single = SingletonRanker(objective=objective, seed=seed + trial).fit(d, s, query=q)
        per["ilp"].append(heldout_mrr(d @ res.weights, held, exclude=excl))
        per["singleton"].append(heldout_mrr(d[:, single.column_], held, exclude=excl))
        for j, name in enumerate(names):
            per[name].append(heldout_mrr(d[:, j], held, exclude=excl))
        details.append({"query": q, "weights": res.weights.round(4).tolist(),
                        "objective": res.objective, "singleton": names[single.column_],
                        "singleton_objective": single.objective_, "optimal": res.optimal,
                        "gap": res.gap, "method": res.method, "seconds": round(res.seconds, 3)})
        if progress is not None:
            progress.update()
    ilp, sing = np.array(per["ilp"]), np.array(per["singleton"])
    p_value = (float(wilcoxon(ilp, sing, alternative="greater").pvalue)
               if np.any(ilp != sing) else 1.0)
    return {
        "category": category,
        "documents": len(texts),
        "category_size": int(members.size),
        "positives": positives,
        "trials": trials,
        "seed": seed,
        "objective": objective,
        "representations": names,
        "mrr_ilp": float(ilp.mean()),
        "mrr_singleton": float(sing.mean()),
        "mrr_by_representation": {n: float(np.mean(per[n])) for n in names},
        "wilcoxon_p": p_value,
        "ilp_better": int((ilp > sing).sum()),
        "ilp_worse": int((ilp < sing).sum()),
        "seconds": time.monotonic() - t0,
        "per_trial": {k: [round(v, 6) for v in vals] for k, vals in per.items()},
        "trials_detail": details,
    }


def load_texts(path: str) -> tuple[list[str], list[set[str]]]:
    """Texts and topic sets of a JSONL(.gz) file of documents."""
    from sift.topics.codecs import read_jsonl
    from sift.topics.records import Document

    texts: list[str] = []
    labels: list[set[str]] = []
    for doc in read_jsonl(path, Document.from_obj):
        texts.append(doc.scored_text)
        labels.append(set(doc.topics))
    return texts, labels


# --------------------------------------------------------------------------- CLI


def _positive_int(name: str, value: int) -> int:
    if value < 1:
        raise ConfigError(f"{name} must be a positive integer, got {value}")
    return value


def _run(args: argparse.Namespace) -> int:
    out = Path(args.out)
    if args.simulate is None and args.data is None:
        raise ConfigError("give --simulate rdpg or --data FILE --category C")
    if args.simulate is not None and args.data is not None:
        raise ConfigError("--simulate and --data are exclusive")
    if not math.isfinite(args.time_limit) or args.time_limit <= 0:
        raise ConfigError(f"--time-limit must be a positive finite number of seconds, "
                          f"got {args.time_limit}")
    check_out_dir(out)  # before the run, not after it
    if args.simulate == "rdpg":  # |S| = 5 and MaxRank, as in the paper
        refuse_unused(args, ("category", "positives", "trials", "objective"),
                      "is for --data, not --simulate rdpg")
    else:
        refuse_unused(args, ("runs", "k", "fixed_positions"), "is for --simulate rdpg, not --data")
    if args.simulate == "rdpg":
        runs = _positive_int("--runs", args.runs)
        k = _positive_int("--k", args.k)
        bar = Progress(runs, "rdpg")
        res = simulate_rdpg(args.seed, runs=runs, k=k, fixed_positions=args.fixed_positions,
                            progress=bar)
        bar.close()
        # the table first: a write that fails still leaves it on the terminal
        for obs in ("P", "Abar"):
            print(f"observed: {res['observed'][obs]}  (MRR of the 6th closest, 95% CI "
                  f"clipped to [0, 1], {runs} runs)")
            print(f"{'alpha':>5}  " + "  ".join(f"{r.upper():>19}" for r in ("ilp", "ase", "lse")))
            for i, a in enumerate(res["alphas"]):
                cells = []
                for r in ("ilp", "ase", "lse"):
                    s = res["mrr"][obs][r]
                    cells.append(f"{s['mean'][i]:.3f} [{s['lo'][i]:.3f},{s['hi'][i]:.3f}]")
                print(f"{a:>5.1f}  " + "  ".join(f"{c:>19}" for c in cells))
        sys.stdout.flush()
        write_json(out / "rdpg.json", res)
        if plot_rdpg(res, out / "rdpg.png"):
            print(f"wrote {out / 'rdpg.json'} and {out / 'rdpg.png'}")
        return 0
    if args.category is None:
        raise ConfigError("--data needs --category")
    positives = _positive_int("--positives", args.positives)
    trials = _positive_int("--trials", args.trials)
    texts, labels = load_texts(args.data)
    if len(texts) < 2:
        raise ConfigError(f"{args.data}: {len(texts)} documents; the representations need at least 2")
    from sift.filters.representations import TextRepresentations

    reps = TextRepresentations(seed=args.seed).fit(texts)
    bar = Progress(trials, args.category)
    res = text_trials(texts, labels, args.category, positives=positives, trials=trials,
                      seed=args.seed, reps=reps, time_limit=args.time_limit,
                      objective=args.objective, progress=bar)
    bar.close()
    print(f"{args.category}: {res['category_size']} of {res['documents']} documents, "
          f"|S| = {positives}, {trials} trials")
    print(f"  MRR ILP        {res['mrr_ilp']:.4f}")
    print(f"  MRR Singleton  {res['mrr_singleton']:.4f}")
    for name, v in res["mrr_by_representation"].items():
        print(f"  MRR {name:<10} {v:.4f}")
    print(f"  Wilcoxon (ILP > Singleton) p = {res['wilcoxon_p']:.3g}  "
          f"(ILP better in {res['ilp_better']}, worse in {res['ilp_worse']})")
    sys.stdout.flush()
    write_json(out / "metrics.json", res)
    print(f"wrote {out / 'metrics.json'}")
    return 0


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "nominate",
        help="learn to rank from a few positives by fusing dissimilarities (ILP)",
        description=(__doc__ or "").replace("``", ""),  # the docstring, without its markup
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    src = p.add_argument_group("input (one of)")
    src.add_argument("--simulate", choices=["rdpg"], help="run the paper's RDPG simulation")
    src.add_argument("--data", help="JSONL(.gz) documents with topics")
    p.add_argument("--category", help="topic whose documents are the positives (with --data)")
    p.add_argument("--positives", type=int, default=5, help="|S|, known positives (default 5)")
    p.add_argument("--trials", type=int, default=30, help="random (v*, S) draws (default 30)")
    p.add_argument("--runs", type=int, default=100, help="Monte Carlo runs for rdpg (default 100)")
    p.add_argument("--k", type=int, default=1000,
                   help="adjacency samples averaged for rdpg (default 1000)")
    p.add_argument("--fixed-positions", action="store_true",
                   help="rdpg: draw the latent positions once (from --seed) and vary only the "
                        "adjacency samples, as in the paper's single realisation")
    p.add_argument("--objective", choices=["maxrank", "meanrank", "mrr"], default="maxrank",
                   help="what the ILP optimises (default: maxrank, the paper's)")
    p.add_argument("--time-limit", type=float, default=30.0,
                   help="seconds per ILP solve, positive and finite (default 30; "
                        "--simulate rdpg solves without a limit)")
    p.add_argument("--seed", type=nonnegative_int, default=0,
                   help="seed of the draws (default 0)")
    p.add_argument("--out", required=True, help="output directory")
    p.set_defaults(func=_run, parser=p)
