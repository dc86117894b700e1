"""The judgment keys a profile remembers, as 64-bit digests in arrays.

A profile remembers the key of every judgment it learned (its id, or its document and
profile), up to :data:`~sift.agents.service.MAX_JUDGED_KEYS`, so that the same judgment
delivered again changes nothing. Held as a ``dict`` of strings, 200,000 keys took about
19 MB of a worker's memory a profile and some 8 MiB of its 16 MiB state record, more than
the learned state itself (fifty-second session, ``benchmarks/memory_budget.py``).
:class:`JudgmentKeys` keeps each key's 8-byte BLAKE2b digest instead: an array in the
order the keys came (the oldest is forgotten first), a sorted copy for lookups and a
small set of the digests changed since that copy was made (at most an eighth of them). 200,000 keys take 3.2 MB here
and 2.1 MB of base64 in the record.

Two different keys with the same digest would make the second look like a judgment
applied already; with 200,000 keys the chance that any two of them collide is about
one in 10^9.
"""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Iterable
from typing import Any

import numpy as np
from numpy.typing import NDArray

from sift.filters.errors import StateError
from sift.filters.state import decode_array, encode_array

#: digests added (or forgotten) before the sorted copy is made again: an eighth of those
#: held, at least REBUILD_MIN and at most REBUILD_EVERY (the set of the digests changed
#: since holds Python ints, 60 bytes or so each with the set's table, against 16 in
#: the arrays: with all of them in it, 2,200 keys took more than as a dict of strings)
REBUILD_EVERY = 4096
REBUILD_MIN = 64

_blake2b = hashlib.blake2b
_from_bytes = int.from_bytes


def digest(key: str) -> int:
    """The key's 64-bit digest (BLAKE2b of its UTF-8, 8 bytes little-endian).

    >>> digest("j-1") == digest("j-1"), digest("j-1") == digest("j-2")
    (True, False)
    """
    return _from_bytes(_blake2b(key.encode("utf-8", "surrogatepass"), digest_size=8).digest(),
                       "little")


class JudgmentKeys:
    """Judgment keys remembered up to ``capacity``, the oldest forgotten first.

    Parameters
    ----------
    capacity
        How many keys are remembered.
    keys
        Keys to remember first, oldest first.

    Examples
    --------
    >>> keys = JudgmentKeys(capacity=2, keys=["a", "b"])
    >>> "a" in keys, "c" in keys, len(keys)
    (True, False, 2)
    >>> keys.add("a")  # known: it keeps its place
    >>> keys.add("c")  # the oldest, "a", is forgotten
    >>> "a" in keys, "b" in keys, "c" in keys
    (False, True, True)
    >>> JudgmentKeys.from_obj(keys.to_obj(), capacity=2) == keys
    True
    """

    def __init__(self, capacity: int, keys: Iterable[str] = ()) -> None:
        if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1:
            raise ValueError(f"capacity must be a positive integer, got {capacity!r}")
        self.capacity = capacity
        #: the digests in the order they came, from ``_head`` on, wrapping around
        self._ring: NDArray[np.uint64] = np.zeros(0, dtype=np.uint64)
        self._head = 0
        self._n = 0
        #: the digests held at the last rebuild, sorted
        self._sorted: NDArray[np.uint64] = np.zeros(0, dtype=np.uint64)
        #: added since the rebuild, and forgotten since (those still in ``_sorted``)
        self._recent: set[int] = set()
        self._gone: set[int] = set()
        for k in keys:
            self.add(k)

    # ----------------------------------------------------------------- the set
    def __len__(self) -> int:
        return self._n

    def __bool__(self) -> bool:
        return self._n > 0

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self._has(digest(key))

    def __eq__(self, other: object) -> bool:
        """Same capacity and the same digests in the same order."""
        if not isinstance(other, JudgmentKeys):
            return NotImplemented
        return self.capacity == other.capacity and np.array_equal(self.digests(),
                                                                   other.digests())

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        return f"JudgmentKeys({self._n} of {self.capacity})"

    def _has(self, d: int) -> bool:
        if d in self._recent:
            return True
        if d in self._gone:
            return False
        return self._in_sorted(d)

    def _in_sorted(self, d: int) -> bool:
        s = self._sorted
        if not s.size:  # (fewer keys than REBUILD_MIN: all of them in the set)
            return False
        u = np.uint64(d)  # (a Python int above 2**63 would be compared as an object)
        i = s.searchsorted(u)
        return bool(i < s.size and s[i] == u)

    def add(self, key: str) -> None:
        """Remember ``key``; a key remembered already keeps its place."""
        self._add(digest(key))

    def _add(self, d: int) -> None:
        if self._has(d):
            return
        if self._n == self.capacity:
            self.pop_oldest()
        if self._n == self._ring.size:  # grow (doubling, up to the capacity)
            grown = np.zeros(min(self.capacity, max(16, 2 * self._ring.size)), dtype=np.uint64)
            grown[:self._n] = self.digests()
            self._ring, self._head = grown, 0
        self._ring[(self._head + self._n) % self._ring.size] = d
        self._n += 1
        self._gone.discard(d)
        self._recent.add(d)
        self._maybe_rebuild()

    def pop_oldest(self) -> None:
        """Forget the oldest key (none held: nothing)."""
        if not self._n:
            return
        d = int(self._ring[self._head])
        self._head = (self._head + 1) % self._ring.size
        self._n -= 1
        self._recent.discard(d)
        if self._in_sorted(d):  # (also when added again since it was last forgotten)
            self._gone.add(d)
        self._maybe_rebuild()

    def _maybe_rebuild(self) -> None:
        changed = len(self._recent) + len(self._gone)
        if changed >= REBUILD_EVERY or changed >= max(REBUILD_MIN, self._n >> 3):
            self._sorted = np.sort(self.digests())
            self._recent.clear()
            self._gone.clear()

    def nbytes(self) -> int:
        """Bytes held: the arrays and the two sets with their ints (about)."""
        sets = sum(sys.getsizeof(x) + sum(sys.getsizeof(d) for d in x)
                   for x in (self._recent, self._gone))
        return int(self._ring.nbytes + self._sorted.nbytes + sets)

    def digests(self) -> NDArray[np.uint64]:
        """The digests held, oldest first (a copy)."""
        idx = (self._head + np.arange(self._n)) % max(self._ring.size, 1)
        return self._ring[idx]

    def copy(self) -> JudgmentKeys:
        out = JudgmentKeys(self.capacity)
        out._extend(self.digests())
        return out

    def _extend(self, digests: NDArray[np.uint64]) -> None:
        """Remember digests, oldest first, as :meth:`add` would (duplicates keep the first
        place; past the capacity, the oldest are forgotten)."""
        d = np.asarray(digests, dtype=np.uint64)
        if d.size:
            # the first place of each digest, in order
            _, first = np.unique(d, return_index=True)
            d = d[np.sort(first)]
        if self._n or d.size > self.capacity:
            for x in d.tolist():
                self._add(int(x))
            return
        ring = np.zeros(min(self.capacity, max(16, d.size)), dtype=np.uint64)
        ring[:d.size] = d
        self._ring, self._head, self._n = ring, 0, int(d.size)
        self._sorted = np.sort(d)
        self._recent.clear()
        self._gone.clear()

    # ------------------------------------------------------------ the record
    def to_obj(self) -> dict[str, Any]:
        """JSON-safe: the digests, oldest first (as int64 bits)."""
        return encode_array(self.digests().view(np.int64))

    @classmethod
    def from_obj(cls, obj: Any, capacity: int) -> JudgmentKeys:
        """Inverse of :meth:`to_obj`; raises ``StateError`` on anything else."""
        arr = decode_array(obj, name="judged_digests", dtype=np.int64, ndim=1)
        out = cls(capacity)
        out._extend(np.ascontiguousarray(arr).view(np.uint64))
        return out

    @classmethod
    def from_record(cls, obj: dict[str, Any], capacity: int) -> JudgmentKeys:
        """The keys of a state record: its digests, or, written before the fifty-third
        session, its list of keys."""
        if "judged_digests" in obj:
            return cls.from_obj(obj["judged_digests"], capacity)
        keys = obj.get("judged", [])
        if not isinstance(keys, list):
            raise StateError(f"judged: not a list of keys ({type(keys).__name__})")
        out = cls(capacity)
        out._extend(np.fromiter((digest(str(k)) for k in keys), dtype=np.uint64,
                                count=len(keys)))
        return out


def key_digests(keys: Iterable[str]) -> list[int]:
    """The digests of ``keys``, in order (what :meth:`JudgmentKeys.digests` holds for them).

    >>> key_digests(["a", "b"]) == JudgmentKeys(10, ["a", "b"]).digests().tolist()
    True
    """
    return [digest(k) for k in keys]
