"""Scale-out with the machine's drift cancelled: one worker and two workers measured at
the same time, each group on a stream of its own.

    .venv/bin/python benchmarks/scale_concurrent.py --profiles 100 --per-message 1 \\
        --documents 150000 --rounds 5 --worker-cores 0.4

``stream_bench.py --two-workers`` measures one worker, then two, back to back. This
machine's speed drifts by tens of percent within a minute (one worker's CPU per document
moved between 69 and 104 µs over the phases of one run), so a pair's ratio carries
that drift, and differences of a few percent (a change to the copies, or the bar of
1.7x) sit inside it. Here both configurations run in the same seconds:

* group **solo**: one worker on topics of its own (prefix ``solo<id>.``);
* group **pair**: two workers in one consumer group on other topics (``pair<id>.``);

the same profiles (``--profiles`` specs, seed 0) on both, 4 partitions each, every
worker capped at ``--worker-cores`` in a cgroup of its own (as in ``stream_bench.py
--worker-cores``; 3 workers at 0.4 leave 0.8 cores to the broker and this script).
Each round produces a backlog of ``--documents`` documents for solo and ``f`` times as
many for the pair, in chunks by turns (which group goes first alternates between
rounds), then samples both groups' scored (document, profile) pairs and CPU every
50 ms until both are done. ``f`` is 2 in the first round and then the median speedup
so far, so that the two groups end at about the same time.

**The figure** (:func:`completion`): each group's rate from ``--settle`` seconds (2)
after the end of the production until it has scored its whole backlog, and the round's
speedup pair / solo. Whatever slows the machine meanwhile slows the three workers
together, for the part of the intervals they share (``overlap``). Also reported, the
rates over the **common window** (:func:`window`: until the first group has scored
90 %), which is biased against the pair under a backlog: its routing runs ahead of the
copies it sends, so at the window's end it has routed more documents than it has
scored (``routed_per_scored`` in the breakdown).

With each figure, where each group's CPU went per document (the workers' own CPU
counters of routing, scoring and the copies, ``cpu_*_us`` in their stats; their main
and other threads from /proc; page faults, context switches and collections). The
median of the rounds' speedups is the result, with every round's figures:
``benchmarks/results/scale_concurrent.json`` (``--out``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
for p in (str(ROOT), str(ROOT / "benchmarks")):
    if p not in sys.path:
        sys.path.insert(0, p)

import stream_bench as sb  # noqa: E402
from cpucap import CpuCap, CpuCapError  # noqa: E402

from sift.agents.harness import WorkerProcess  # noqa: E402
from sift.commands._common import write_json  # noqa: E402
from sift.devbroker import DevBroker  # noqa: E402
from sift.settings import Settings  # noqa: E402

OUT = ROOT / "benchmarks" / "results" / "scale_concurrent.json"
TICK = 0.05
#: documents produced per call of the producer (the messages of a chunk are held in memory)
CHUNK = 100_000

Sample = tuple[float, int, int, float, float]  # time, solo pairs, pair pairs, solo CPU, pair CPU


def window(samples: list[Sample], start: float, solo_target: int, pair_target: int,
           share: float = 0.9) -> dict[str, Any]:
    """Rates of both groups over the common window of ``samples``.

    ``samples`` are ``(time, solo count, pair count, solo CPU s, pair CPU s)`` in time
    order, the counts measured from the start of the round; ``start`` is the end of the
    production. The window opens at the first sample at or after ``start`` and closes at
    the first sample where either group has reached ``share`` of its target (the tails,
    where a group's last partitions drain alone, are left out). Rates are per second
    and per CPU-second of each group, in the units of the counts.

    >>> s = [(0.0, 0, 0, 0.0, 0.0), (1.0, 10, 20, 0.5, 1.0), (2.0, 20, 38, 1.0, 2.0),
    ...      (3.0, 30, 56, 1.5, 3.0), (4.0, 40, 74, 2.0, 4.0)]
    >>> w = window(s, start=1.0, solo_target=40, pair_target=80)
    >>> w["seconds"], w["solo_per_s"], w["pair_per_s"], w["speedup"]
    (3.0, 10.0, 18.0, 1.8)
    """
    if not 0 < share <= 1:
        raise ValueError(f"share: expected a value in (0, 1], got {share}")
    first = next((i for i, s in enumerate(samples) if s[0] >= start), None)
    if first is None:
        raise ValueError("no sample after the start of the window")
    last = next((i for i, s in enumerate(samples) if i > first and (
        s[1] >= share * solo_target or s[2] >= share * pair_target)), None)
    if last is None:
        raise ValueError(f"neither group reached {share:.0%} of its backlog after the start")
    t0, a0, b0, ca0, cb0 = samples[first][:5]
    t1, a1, b1, ca1, cb1 = samples[last][:5]
    secs = t1 - t0
    solo, pair = (a1 - a0) / secs, (b1 - b0) / secs
    if solo <= 0:
        raise ValueError("the solo group scored nothing in the window")
    out: dict[str, Any] = {
        "seconds": round(secs, 3), "solo_count": a1 - a0, "pair_count": b1 - b0,
        "solo_per_s": round(solo, 1), "pair_per_s": round(pair, 1),
        "speedup": round(pair / solo, 3),
        "solo_cores": round((ca1 - ca0) / secs, 3), "pair_cores": round((cb1 - cb0) / secs, 3),
        "first_sample": first, "last_sample": last}
    if ca1 > ca0 and cb1 > cb0:
        out["solo_per_cpu_s"] = round((a1 - a0) / (ca1 - ca0), 1)
        out["pair_per_cpu_s"] = round((b1 - b0) / (cb1 - cb0), 1)
        out["per_cpu_s_ratio"] = round(out["pair_per_cpu_s"] / out["solo_per_cpu_s"], 3)
    return out


def completion(samples: list[Sample], start: float, solo_target: int, pair_target: int,
               complete: float = 0.995) -> dict[str, Any]:
    """Each group's rate from ``start`` until it has scored its whole backlog.

    ``samples`` and ``start`` as for :func:`window`. A group is done at the first sample
    where its count reaches its target; one that stops short (a few messages left in a
    buffer) is done at its last move if that reached ``complete`` of the target. Each
    rate covers all of the group's work on its backlog, so copies a pair of workers
    routed but had not yet scored count when they are scored (in :func:`window` they
    are missing at the window's end while the routing runs ahead). The two intervals
    share their start; ``overlap`` is the shorter over the longer (1: they ended
    together, as when the pair's backlog matches its speedup).

    >>> s = [(0.0, 0, 0, 0.0, 0.0), (1.0, 10, 15, 0.5, 1.0), (2.0, 20, 30, 1.0, 2.0),
    ...      (3.0, 30, 45, 1.5, 3.0), (4.0, 40, 60, 2.0, 4.0), (5.0, 40, 75, 2.0, 5.0)]
    >>> c = completion(s, start=1.0, solo_target=40, pair_target=75)
    >>> c["solo_seconds"], c["pair_seconds"], c["speedup"], c["overlap"]
    (3.0, 4.0, 1.5, 0.75)
    """
    first = next((i for i, s in enumerate(samples) if s[0] >= start), None)
    if first is None:
        raise ValueError("no sample after the start of the window")
    out: dict[str, Any] = {}
    for g, col, target in (("solo", 1, solo_target), ("pair", 2, pair_target)):
        end = next((i for i in range(first, len(samples)) if samples[i][col] >= target), None)
        if end is None:
            moved = [i for i in range(first + 1, len(samples))
                     if samples[i][col] != samples[i - 1][col]]
            end = moved[-1] if moved else None
            if end is None or samples[end][col] < complete * target:
                got = samples[-1][col] - samples[first][col]
                raise ValueError(f"the {g} group did not finish its backlog "
                                 f"({got} of {target - samples[first][col]} after the start)")
        secs = samples[end][0] - samples[first][0]
        count = samples[end][col] - samples[first][col]
        cpu = samples[end][col + 2] - samples[first][col + 2]
        if secs <= 0 or count <= 0:
            raise ValueError(f"the {g} group had nothing left to score after the start")
        out |= {f"{g}_seconds": round(secs, 3), f"{g}_count": count,
                f"{g}_per_s": round(count / secs, 1), f"{g}_cores": round(cpu / secs, 3),
                f"{g}_last_sample": end}
        if cpu > 0:
            out[f"{g}_per_cpu_s"] = round(count / cpu, 1)
    out["speedup"] = round(out["pair_per_s"] / out["solo_per_s"], 3)
    if "solo_per_cpu_s" in out and "pair_per_cpu_s" in out:
        out["per_cpu_s_ratio"] = round(out["pair_per_cpu_s"] / out["solo_per_cpu_s"], 3)
    out["overlap"] = round(min(out["solo_seconds"], out["pair_seconds"])
                           / max(out["solo_seconds"], out["pair_seconds"]), 3)
    out["first_sample"] = first
    return out


def summary(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """Median speedup and per-CPU ratio over the rounds, with their range."""
    sp = [r["speedup"] for r in rounds]
    out: dict[str, Any] = {"rounds": len(rounds), "speedups": sp,
                           "median_speedup": round(statistics.median(sp), 3),
                           "min_speedup": min(sp), "max_speedup": max(sp)}
    cpu = [r["per_cpu_s_ratio"] for r in rounds if "per_cpu_s_ratio" in r]
    if cpu:
        out["per_cpu_s_ratios"] = cpu
        out["median_per_cpu_s_ratio"] = round(statistics.median(cpu), 3)
    if all("overlap" in r for r in rounds):
        out["overlaps"] = [r["overlap"] for r in rounds]
    win = [r["window"]["speedup"] for r in rounds if "speedup" in r.get("window", {})]
    if win:
        out["window_speedups"] = win
        out["median_window_speedup"] = round(statistics.median(win), 3)
    return out


def _stat(path: Path) -> list[str]:
    """The fields of a ``/proc/.../stat`` file after the command name."""
    return path.read_text().rsplit(")", 1)[1].split()


#: the workers' own CPU counters (``sift.agents.service.cpu_timed``), in µs
CPU_KEYS = ("cpu_route_us", "cpu_score_here_us", "cpu_copies_us", "cpu_score_copies_us")
#: counters that say how the work was cut: routing steps and the documents they held,
#: copies scored
COUNT_KEYS = ("scored", "document_batches", "document_batch_messages", "documents",
              "shard_payloads")


def threads_cpu(pid: int) -> tuple[float, float, float]:
    """CPU seconds of a process's main thread, of its other threads together, and the
    main thread's system (kernel) part."""
    main = rest = kernel = 0.0
    tick = os.sysconf("SC_CLK_TCK")
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            fields = _stat(task / "stat")
        except OSError:  # a thread that ended meanwhile
            continue
        cpu = (int(fields[11]) + int(fields[12])) / tick
        if task.name == str(pid):
            main += cpu
            kernel += int(fields[12]) / tick
        else:
            rest += cpu
    return main, rest, kernel


#: per-process event counts from /proc: page faults and context switches
EVENT_KEYS = ("minor_faults", "voluntary_switches", "involuntary_switches", "gc0", "gc1", "gc2",
              "consumer_polls")


def events(pid: int) -> dict[str, float]:
    """The CPU seconds (``process_cpu``, all threads), minor page faults and context
    switches of a process; the collections by generation (``gc0``-``gc2``) come from
    the worker's stats."""
    fields = _stat(Path(f"/proc/{pid}/stat"))
    out = {"process_cpu": (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK"),
           "minor_faults": float(fields[7])}
    vol = inv = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            for line in (task / "status").read_text().splitlines():
                if line.startswith("voluntary_ctxt_switches"):
                    vol += int(line.split()[1])
                elif line.startswith("nonvoluntary_ctxt_switches"):
                    inv += int(line.split()[1])
        except OSError:
            continue
    return out | {"voluntary_switches": float(vol), "involuntary_switches": float(inv)}


def parts(workers: list[WorkerProcess]) -> dict[str, float]:
    """One reading of a group, summed over its workers (each worker's stats and /proc
    read once): its counters (:data:`COUNT_KEYS`, the (document, profile) pairs
    ``scored`` among them), its CPU in seconds (the process, its main and other
    threads, the workers' own timers :data:`CPU_KEYS`) and its events."""
    out = dict.fromkeys(CPU_KEYS + COUNT_KEYS + EVENT_KEYS, 0.0) | {
        "process_cpu": 0.0, "main_thread": 0.0, "other_threads": 0.0,
        "main_thread_kernel": 0.0, "gc_pauses": 0.0}
    for w in workers:
        whole = w.stats()
        gc = whole.get("gc", {})
        out["gc_pauses"] += sum(gc.get("pause_ms_total", [])) / 1e3
        for g, n in enumerate(gc.get("collections", [])[:3]):
            out[f"gc{g}"] += n
        out["consumer_polls"] += whole.get("consumer_polls", 0)
        st = whole.get("stats", {})
        for k in CPU_KEYS:
            out[k] += st.get(k, 0) / 1e6
        for k in COUNT_KEYS:
            out[k] += st.get(k, 0)
        if w.proc is not None:
            for k, v in events(w.proc.pid).items():
                out[k] += v
            main, rest, kernel = threads_cpu(w.proc.pid)
            out["main_thread"] += main
            out["other_threads"] += rest
            out["main_thread_kernel"] += kernel
    return out


def breakdown(before: dict[str, float], after: dict[str, float], documents: int) -> dict[str, float]:
    """µs a document of each part between two :func:`parts` snapshots; ``main_rest``: the
    main thread's CPU outside the timed parts (Faust, aiokafka's producer, the loop)."""
    d = {k: after[k] - before[k] for k in before}
    d["main_rest"] = d["main_thread"] - sum(d[k] for k in CPU_KEYS)
    out: dict[str, float] = {k.removeprefix("cpu_").removesuffix("_us"): round(1e6 * v / max(documents, 1), 2)
                             for k, v in d.items()
                             if k not in COUNT_KEYS + EVENT_KEYS and k != "process_cpu"}
    # events per 1,000 documents
    out |= {f"{k}_per_1000": round(1000 * d[k] / max(documents, 1), 1) for k in EVENT_KEYS}
    steps = d["document_batches"]
    out["documents_per_routing_step"] = round(d["documents"] / steps, 1) if steps else 0.0
    out["messages_per_routing_step"] = round(d["document_batch_messages"] / steps, 1) if steps else 0.0
    out["copies_scored"] = d["shard_payloads"]
    # documents routed in the window against those scored (the divisor): a group whose
    # copies fall behind its routing routes more than it scores
    out["routed_per_scored"] = round(d["documents"] / max(documents, 1), 3)
    return out


def produce(settings: Settings, corpus: sb.Corpus, n: int, per_message: int) -> None:
    for i in range(0, n, CHUNK):
        docs = corpus.documents(min(CHUNK, n - i))
        msgs = sb.single(docs) if per_message == 1 else sb.batched(docs, per_message)
        sb.produce_fast(settings, settings.topic("documents"), msgs)


def spy(groups: dict[str, tuple[Settings, list[WorkerProcess]]], seconds: float,
        out_dir: Path, k: int) -> list[subprocess.Popen[bytes]]:
    """py-spy (``--nonblocking``, 100 Hz, collapsed stacks) on every worker for ``seconds``:
    ``out_dir/round<k>_<group>_<i>.txt``. py-spy runs outside the workers' cgroups."""
    spy_bin = Path(sys.executable).with_name("py-spy")
    procs = []
    for name, (_, workers) in groups.items():
        for i, w in enumerate(workers):
            assert w.proc is not None
            procs.append(subprocess.Popen(
                [str(spy_bin), "record", "--nonblocking", "--threads", "--format", "raw",
                 "-r", "100", "-d", str(int(seconds)), "-p", str(w.proc.pid),
                 "-o", str(out_dir / f"round{k}_{name}_{i}.txt")],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    return procs


def one_round(k: int, groups: dict[str, tuple[Settings, list[WorkerProcess]]],
              corpus: sb.Corpus, n_prof: int, n_docs: int, pair_docs: int, per_message: int,
              settle: float = 2.0, spy_s: float = 0.0, spy_dir: Path | None = None
              ) -> dict[str, Any]:
    for settings, workers in groups.values():
        sb.warm_up(settings, corpus, workers, n_prof)
    solo, pair = groups["solo"][1], groups["pair"][1]
    base = (parts(solo)["scored"], parts(pair)["scored"])
    docs = {"solo": n_docs, "pair": pair_docs}
    targets = {name: n * n_prof for name, n in docs.items()}
    # in chunks, by turns (solo's first in even rounds), so that both backlogs arrive
    # together, each chunk of the pair's in proportion to its backlog; the measurement
    # starts ``settle`` seconds after the last chunk
    order = ["solo", "pair"] if k % 2 == 0 else ["pair", "solo"]
    t_prod = time.monotonic()
    left = dict(docs)
    while any(left.values()):
        for name in order:
            step = min(left[name], CHUNK if name == "solo" else round(CHUNK * pair_docs / n_docs))
            if step:
                produce(groups[name][0], corpus, step, per_message)
                left[name] -= step
    start = time.monotonic() + settle
    spies = spy(groups, spy_s, spy_dir, k) if spy_s and spy_dir is not None else []
    samples: list[Sample] = []
    snaps: list[tuple[dict[str, float], dict[str, float]]] = []
    deadline = start + 900
    moved = time.monotonic()
    while True:
        snap = (parts(solo), parts(pair))
        now = time.monotonic()
        a, b = int(snap[0]["scored"] - base[0]), int(snap[1]["scored"] - base[1])
        if samples and (a, b) != samples[-1][1:3]:
            moved = now
        samples.append((now, a, b, snap[0]["process_cpu"], snap[1]["process_cpu"]))
        snaps.append(snap)
        if (a >= targets["solo"] and b >= targets["pair"]) or now > deadline:
            break
        # a few messages can stay in Faust's take() buffer (stream_bench.measure): stop
        # when both are still for 15 s past 99.5 %
        if a >= 0.995 * targets["solo"] and b >= 0.995 * targets["pair"] and now - moved > 15:
            break
        time.sleep(TICK)
    for proc in spies:
        proc.wait()
    out: dict[str, Any] = {"solo_documents": n_docs, "pair_documents": pair_docs,
                           "produced_first": order[0],
                           "production_s": round(start - settle - t_prod, 1)}
    c = completion(samples, start, targets["solo"], targets["pair"])
    i = c.pop("first_sample")
    ends = {g: c.pop(f"{g}_last_sample") for g in ("solo", "pair")}
    for g in ("solo", "pair"):
        # where each group's CPU went, per document (µs), over its own interval
        c[f"{g}_us_per_document"] = breakdown(snaps[i][g == "pair"], snaps[ends[g]][g == "pair"],
                                              c[f"{g}_count"] // n_prof)
    out |= in_documents(c, n_prof)
    try:  # the common window (both busy), for comparison: biased against the pair
        w = window(samples, start, targets["solo"], targets["pair"])
        w.pop("first_sample"), w.pop("last_sample")
        out["window"] = in_documents(w, n_prof)
    except ValueError as exc:
        out["window"] = {"error": str(exc)}
    out["load"] = sb.load()
    # each worker alive, and the shards it held at the end: a pair worker that left the
    # group shows here (its partner then holds all four and runs alone)
    out["workers"] = []
    for name, (_, ws) in groups.items():
        for w in ws:
            _LOG_READ[w.log_path], problems = log_problems(w.log_path, _LOG_READ.get(w.log_path, 0))
            st = w.stats()
            # the profiles it holds: 100 hashed names fall 31 / 19 / 28 / 22 over the four
            # shards, so a pair split 1, 3 / 0, 2 scores 41 / 59 where 0, 1 / 2, 3 is even
            out["workers"].append({"group": name, "worker": w.name,
                                   "alive": w.proc is not None and w.proc.poll() is None,
                                   "shards": st.get("partitions", []),
                                   "profiles": len(st.get("profiles", [])), "log": problems})
    return out


#: where each worker's log was read up to (a round reports only what is new)
_LOG_READ: dict[Path, int] = {}


def log_problems(path: Path, start: int = 0, keep: int = 3) -> tuple[int, dict[str, Any]]:
    """The error and warning lines a worker logged from byte ``start`` of its log: their
    counts and the first ``keep`` of each (cut to 300 characters), and where the log ends
    now. Records what happened around a lost worker (the twenty-fourth session lost one
    with its logs) and shows a healthy round as 0 errors."""
    out: dict[str, Any] = {"errors": 0, "warnings": 0, "first_errors": [], "first_warnings": []}
    try:
        with open(path, "rb") as fh:
            fh.seek(start)
            data = fh.read()
    except OSError:
        return start, out
    data = data[: data.rfind(b"\n") + 1]  # whole lines only: a line being written waits
    for raw in data.splitlines():
        line = raw.decode("utf-8", "replace")
        # sift's "] ERROR name:", Faust's "[ERROR]", and uncaught tracebacks
        if any(t in line for t in (" ERROR ", "[ERROR]", " CRITICAL ", "[CRITICAL]",
                                   "Traceback (most recent call last)")):
            kind = "errors"
        elif " WARNING " in line or "[WARNING]" in line:
            kind = "warnings"
        else:
            continue
        out[kind] += 1
        first = out["first_" + kind]
        if len(first) < keep:
            first.append(line[:300])
    return start + len(data), out


def in_documents(figures: dict[str, Any], n_prof: int) -> dict[str, Any]:
    """Counts and rates of (document, profile) pairs expressed in documents."""
    out = dict(figures)
    for key in ("solo_count", "pair_count", "solo_per_s", "pair_per_s", "solo_per_cpu_s",
                "pair_per_cpu_s"):
        if key in out:
            out[key] = round(out[key] / n_prof)
    return out


def measure(base: Settings, corpus: sb.Corpus, n_prof: int, n_docs: int, per_message: int,
            rounds: int, partitions: int, settle: float = 2.0, spy_s: float = 0.0,
            spy_dir: Path | None = None, pair_workers: int = 2) -> dict[str, Any]:
    groups: dict[str, tuple[Settings, list[WorkerProcess]]] = {}
    try:
        for name, n in (("solo", 1), ("pair", pair_workers)):
            settings, tmp = sb.fresh_run(base, corpus, partitions, name)
            workers = sb.start_workers(settings, n, tmp)
            groups[name] = (settings, workers)
            sb.add_profiles(settings, corpus, workers, n_prof)
        out: dict[str, Any] = {"profiles": n_prof, "documents_solo": n_docs,
                               "documents_per_message": per_message,
                               "partitions": partitions, "settle_s": settle,
                               "pair_workers": pair_workers, "rounds": []}
        # the rounds report what the workers log from here on, not their start-up (the
        # group coordinator not available yet is logged as an error at every start)
        for _, ws in groups.values():
            for w in ws:
                _LOG_READ[w.log_path] = w.log_path.stat().st_size if w.log_path.exists() else 0
        factor = 2.0  # the pair's backlog over solo's: its expected speedup
        for k in range(rounds):
            r = one_round(k, groups, corpus, n_prof, n_docs, round(factor * n_docs),
                          per_message, settle, spy_s, spy_dir)
            out["rounds"].append(r)
            print(f"  round {k}: {r}", flush=True)
            # the next pair's backlog sized to the speedup so far: both then end together
            factor = min(max(statistics.median(x["speedup"] for x in out["rounds"]), 0.5), 2.5)
        if sb.CAP is not None:
            use = {name: [sb.CAP.usage(w.proc.pid) for w in ws if w.proc is not None]
                   for name, (_, ws) in groups.items()}
            out["throttled_share"] = {
                name: round(sum(u["throttled_periods"] for u in us)
                            / max(sum(u["periods"] for u in us), 1), 3)
                for name, us in use.items()}
        out["summary"] = summary(out["rounds"])
        print(f"  {out['summary']}", flush=True)
        return out
    finally:
        for _, workers in groups.values():
            for w in workers:
                w.stop()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--broker", default="", help="kafka://host:port (default: start a local one)")
    p.add_argument("--profiles", type=int, default=100)
    p.add_argument("--per-message", type=int, default=1, help="documents a message (1 or more)")
    p.add_argument("--documents", type=int, default=150_000,
                   help="the solo group's backlog a round (the pair gets twice as many)")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--partitions", type=int, default=4)
    p.add_argument("--worker-cores", type=float, default=0.4, metavar="CORES",
                   help="cap every worker process at CORES cores (a cgroup each; root); 0: "
                        "no cap")
    p.add_argument("--pair-workers", type=int, default=2,
                   help="workers of the pair group (1: a check of the set-up, which should "
                        "then give a speedup of about 1)")
    p.add_argument("--settle", type=float, default=2.0,
                   help="seconds between the end of the production and the window")
    p.add_argument("--py-spy", type=float, default=0.0, metavar="SECONDS",
                   help="sample every worker with py-spy for SECONDS after each round's "
                        "production (collapsed stacks in --spy-dir; py-spy must be installed "
                        "beside this Python)")
    p.add_argument("--spy-dir", type=Path, default=Path("/tmp/sift-spy"))
    p.add_argument("--out", type=Path, default=OUT)
    args = p.parse_args(argv)
    if args.py_spy:
        args.spy_dir.mkdir(parents=True, exist_ok=True)
    for name in ("profiles", "per_message", "documents", "rounds", "partitions", "pair_workers"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')}: expected at least 1, got {getattr(args, name)}")
    if args.worker_cores:
        try:
            sb.CAP = CpuCap(args.worker_cores)
        except (CpuCapError, ValueError, OSError) as exc:
            p.error(f"--worker-cores: {exc}")
    broker = None
    try:
        if args.broker:
            url = args.broker
        else:
            broker = DevBroker.throwaway()
            url = broker.url
            sb.BROKER_PID = broker.pid()
        corpus = sb.Corpus()
        base = Settings.from_env(broker=url)
        result: dict[str, Any] = {
            "benchmark": "scale_concurrent", "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "command": "python benchmarks/scale_concurrent.py " + " ".join(
                sys.argv[1:] if argv is None else argv),
            "machine": {"cpus": os.cpu_count(), "load_at_start": sb.load()},
            "worker_cores_cap": args.worker_cores or None,
            "settings": {"journal": base.journal, "score_here": base.score_here}}
        print(f"[solo and pair at once: {args.profiles} profiles, {args.per_message} a message, "
              f"{args.documents:,} / {2 * args.documents:,} documents a round]", flush=True)
        try:
            result["result"] = measure(base, corpus, args.profiles, args.documents,
                                       args.per_message, args.rounds, args.partitions,
                                       args.settle, args.py_spy,
                                       args.spy_dir if args.py_spy else None,
                                       args.pair_workers)
        except ValueError as exc:  # a round too short to time (see completion)
            print(f"scale_concurrent: {exc} (a larger --documents gives each round more "
                  f"time; the workers' logs are under {corpus.dir})", file=sys.stderr)
            return 1
        result["machine"]["load_at_end"] = sb.load()
        rounds = result["result"]["rounds"]
        if all(w["alive"] and w["shards"] and not w["log"]["errors"]
               for r in rounds for w in r["workers"]):
            shutil.rmtree(corpus.dir, ignore_errors=True)
        else:  # the workers' logs, to see why one stopped, lost its shards or logged errors
            print(f"a worker died, held no shard or logged an error: logs kept under "
                  f"{corpus.dir}", flush=True)
            result["logs_kept"] = str(corpus.dir)
    finally:
        if broker is not None:
            broker.stop()
            shutil.rmtree(broker.data, ignore_errors=True)
        if sb.CAP is not None:
            sb.CAP.close()
    write_json(args.out, result)
    print(f"results in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
