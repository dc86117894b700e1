"""Where the streaming service spends its CPU, in process (no Kafka): route + score.

Builds ``--profiles`` query-only profiles from the stream benchmark's corpus, routes
``--documents`` Reuters test documents in messages of 100 and scores every vector batch
against every shard, under cProfile; prints the rate (CPU time, profiler included) and
the share of the run's time in the main parts, and writes them as JSON.

    python benchmarks/service_profile.py --out benchmarks/results/service_profile.json
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import sys
import time
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.stream_bench import Corpus, load  # noqa: E402
from sift.agents.service import InputMessage, Service, TrainingSet  # noqa: E402

#: Parts of the run, by the function whose cumulative time they are: the ones the service
#: calls now (the router vectorizes with ``transform_counts`` since the copies carry term
#: counts, and a shard's payload is read by ``read_vector_batch``); a part whose function
#: the run never called is an error, not a share of 0.
PARTS = {
    "scoring (ProfileBank.score)": ("sift/filters/bank.py", "score"),
    "JSON decoding (orjson.loads)": ("~", "<orjson.loads>"),
    "document validation (Document.from_obj)": ("sift/topics/records.py", "from_obj"),
    "vectorizing (Vectorizer.transform_counts)": ("sift/filters/vectorize.py", "transform_counts"),
    "shard payload decoding (read_vector_batch)": ("sift/agents/service.py", "read_vector_batch"),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profiles", type=int, default=100)
    ap.add_argument("--documents", type=int, default=20_000)
    ap.add_argument("--shards", type=int, default=4)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    corpus = Corpus()
    svc = Service(TrainingSet.load(corpus.idf), n_shards=args.shards)
    table: dict[str, bytes] = {}
    svc.apply_specs([InputMessage(orjson.dumps(s), "profiles", svc.shard(s["profile"]))
                     for s in corpus.specs(args.profiles)], table)
    docs = corpus.documents(args.documents)
    msgs = [InputMessage(orjson.dumps({"documents": docs[i:i + 100]}), "documents", 0, i // 100)
            for i in range(0, len(docs), 100)]

    def run(batch: list[InputMessage]) -> None:
        for m in batch:
            for payload in svc.route([m]).payloads:
                for shard in range(args.shards):
                    svc.score(shard, payload, table,
                              InputMessage(payload, "shard", shard, -1))

    run(msgs[:10])  # warm-up: profiles decoded, caches filled
    prof = cProfile.Profile()
    cpu = time.process_time()
    prof.enable()
    run(msgs[10:])
    prof.disable()
    cpu = time.process_time() - cpu
    n = len(docs) - 1000
    stats = pstats.Stats(prof).stats  # type: ignore[attr-defined]
    total = sum(tt for (_, _, tt, _, _) in stats.values())
    shares = {}
    for part, (path, func) in PARTS.items():
        hits = [ct for (fn, _, name), (_, _, _, ct, _) in stats.items()
                if name == func and (path == "~" or fn.endswith(path))]
        if not hits:  # renamed or no longer called: the table above is out of date
            raise SystemExit(f"service_profile: {part}: {path}:{func} was never called")
        shares[part] = round(sum(hits) / total, 3)
    out = {"benchmark": "service_profile",
           "command": "python benchmarks/service_profile.py " + " ".join(sys.argv[1:]),
           "profiles": args.profiles, "documents": n, "load": load(),
           "docs_per_cpu_s_under_cprofile": round(n / cpu),
           "share_of_profiled_time": shares}
    print(json.dumps(out, indent=1))
    if args.out:
        args.out.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
