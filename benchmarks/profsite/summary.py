"""Where profiled worker processes spent their time (see ``sitecustomize.py`` here).

    .venv/bin/python benchmarks/profsite/summary.py --group one /tmp/prof/w1.prof \\
        --group two /tmp/prof/w2.prof /tmp/prof/w3.prof

Each group's profiles are added up (the workers of one phase); prints the cumulative
seconds of the service's main parts and of the socket sends, and the idle wait.
A process's profile covers its whole life, start-up included.
"""

from __future__ import annotations

import argparse
import pstats

#: part -> (file suffix, or "~" for a built-in; function name)
PARTS = {
    "idle (epoll wait)": ("~", "<method 'poll' of 'select.epoll' objects>"),
    "socket sends": ("~", "<method 'send' of '_socket.socket' objects>"),
    "route: decode + vectorize": ("sift/agents/service.py", "route"),
    "score_here: the shards held here": ("sift/agents/service.py", "score_here"),
    "score: shard-topic payloads": ("sift/agents/service.py", "score"),
    "  of which decode_vector_batch": ("sift/agents/service.py", "decode_vector_batch"),
    "store.put (both paths)": ("sift/agents/service.py", "put"),
    "ColumnStack.gather (both paths)": ("sift/filters/sparse.py", "gather"),
    "encode_vector_batch": ("sift/agents/service.py", "encode_vector_batch"),
    "publish (decisions)": ("sift/agents/app.py", "publish"),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--group", nargs="+", action="append", required=True,
                    metavar=("NAME", "PROF"), help="a name and the profiles it adds up")
    args = ap.parse_args()
    for name, *files in args.group:
        if not files:
            ap.error(f"group {name!r} names no profile")
        stats = pstats.Stats(*files).stats  # type: ignore[attr-defined]
        total = sum(v[2] for v in stats.values())
        print(f"{name}: {total:.2f} s profiled in {len(files)} process(es)")
        for part, (path, func) in PARTS.items():
            cum = sum(v[3] for (fn, _, f), v in stats.items()
                      if f == func and (path == "~" or fn.endswith(path)))
            print(f"  {part:36s} {cum:7.2f}")


if __name__ == "__main__":
    main()
