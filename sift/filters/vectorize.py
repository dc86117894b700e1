"""Text to sparse vectors: tokens, log-TF, training-set IDF, length normalisation.

Terms are hashed into a fixed space (``n_features`` columns, MurmurHash3 as in
scikit-learn's :class:`~sklearn.feature_extraction.text.HashingVectorizer`), so
terms first seen in the stream need no vocabulary update, every worker maps a
term to the same column, and the state stays bounded.

Within-document weight: 0 for an absent term, ``1 + ln(tf)`` otherwise (or raw
tf, or binary). Corpus weight: ``idf = ln(N + 1) - ln(n + 1)`` where ``N`` is
the number of training documents and ``n`` those containing the term, learned
by :meth:`Vectorizer.fit` from the training set only; a term never seen in
training gets ``ln(N + 1)``. ``idf="idf2"`` squares it, ``idf="none"`` drops it.
``normalize=True`` scales each document to unit length.

Examples
--------
>>> v = Vectorizer(n_features=2**10).fit(["wheat prices rose", "oil prices fell"])
>>> X = v.transform(["wheat wheat exports"])
>>> X.shape
(1, 1024)
>>> round(float(X.multiply(X).sum()), 6)   # unit length
1.0

With a block of character n-grams (``chars``), inflections of a word share features:

>>> c = Vectorizer(n_features=2**12, chars=0.4).fit(["wheat exports", "oil prices"])
>>> Y = c.transform(["exports", "exported", "oil"])
>>> bool((Y[0] @ Y[1].T).toarray()[0, 0] > 0), float((Y[0] @ Y[2].T).toarray()[0, 0])
(True, 0.0)
"""

from __future__ import annotations

import hashlib
import itertools
import re
from collections.abc import Iterable, Sequence
from typing import Any, Self

import numpy as np
import scipy.sparse as sp
from numpy.typing import NDArray
from sklearn.feature_extraction.text import HashingVectorizer
from sklearn.utils import murmurhash3_32

from sift.filters.errors import FilterError, ParameterError, StateError
from sift.filters.state import MAX_COUNT, check_version, decode_array, encode_array

# A deliberately small list of function words. Content words that are stop
# words elsewhere ("interest", "computer", "system", ...) stay: they can be a
# profile's whole query.
STOP_WORDS = frozenset(
    [
        "a", "about", "after", "all", "also", "an", "and", "any", "are", "as", "at", "be", "been",
        "but", "by", "can", "could", "did", "do", "does", "for", "from", "had", "has", "have", "he",
        "her", "his", "how", "i", "if", "in", "into", "is", "it", "its", "may", "more", "most", "no",
        "not", "of", "on", "or", "our", "she", "should", "so", "such", "than", "that", "the", "their",
        "them", "then", "there", "these", "they", "this", "those", "to", "was", "we", "were", "what",
        "when", "which", "who", "will", "with", "would", "you", "your", "said",
    ]
)

# Tokens of two or more characters: a token starts at a letter not preceded by a word
# character and runs to the last word character of the run of word characters,
# apostrophes and hyphens it starts in. (The tokenizer was once
# ``\b[^\W\d_][\w'-]*\w\b|\b[^\W\d_]\b`` with the one-letter matches dropped
# afterwards; the closing ``\b`` always holds, and a one-letter match is the last word
# character of its run, so the tokens are the same.)
_TOKEN = re.compile(r"(?u)\b[^\W\d_][\w'-]*\w")


def tokenize(text: str, *, stop_words: frozenset[str] = STOP_WORDS) -> list[str]:
    """Lower-case word tokens of at least two characters starting with a letter.

    >>> tokenize("U.S. wheat exports rose 5 pct, the USDA said.")
    ['wheat', 'exports', 'rose', 'pct', 'usda']
    """
    return list(itertools.filterfalse(stop_words.__contains__, _TOKEN.findall(text.lower())))


# -- the batch tokenizer and hasher ----------------------------------------------------
# ``Vectorizer`` counts terms without a Python step per token: a chunk of documents is
# lower-cased and joined into one string, every character is classified with a table
# built from the tokenizer's own regex character classes, token spans come from the
# runs of word characters (the rule in the comment on ``_TOKEN``), stop words are
# dropped by comparing bytes, and the UTF-8 bytes of every span are hashed with
# MurmurHash3 (x86, 32 bit, seed 0) in numpy, as scikit-learn's HashingVectorizer
# hashes one token at a time. Batches of fewer than ``_SMALL`` characters go token by
# token instead (``tokenize`` and a dict of columns: less cost per call). The tests
# check both against the per-document implementation this replaced, bit for bit.
_WORD, _LETTER, _JOIN = 1, 2, 4  # \w, [^\W\d_], ' or -
_classes: NDArray[np.uint8] | None = None
_classes_latin1: bytes | None = None
_CHUNK = 256  # documents tokenized together
_SMALL = 2000  # characters: a smaller batch is tokenized and hashed token by token (less fixed cost)
_BLOCKS = 64  # 32-bit blocks: a longer token is hashed on its own


def _char_classes() -> NDArray[np.uint8]:
    """Class bits of every code point, taken from the regex engine itself (built once, ~0.2 s)."""
    global _classes
    if _classes is None:
        every = "".join(map(chr, range(0x110000)))
        table = np.zeros(0x110000, dtype=np.uint8)
        for pattern, bit in ((r"\w", _WORD), (r"[^\W\d_]", _LETTER), (r"['-]", _JOIN)):
            chars = "".join(re.findall(pattern, every)).encode("utf-32-le")
            table[np.frombuffer(chars, dtype=np.uint32)] |= bit
        _classes = table
    return _classes


def _latin1_classes() -> bytes:
    """The class table of U+0000..U+00FF, for bytes.translate."""
    global _classes_latin1
    if _classes_latin1 is None:
        _classes_latin1 = _char_classes()[:256].tobytes()
    return _classes_latin1


def _spans(
    text: str, doc_start: NDArray[np.int64]
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.bool_], NDArray[np.int64]]:
    """The tokens in ``text`` (which starts and ends with a separator), one-letter ones included.

    Returns their UTF-8 byte ranges (start, end exclusive), whether each has two or more
    characters, and for each character offset in ``doc_start`` the number of tokens before it.
    """
    cp: NDArray[Any]
    try:
        raw = text.encode("latin-1")
        cp = np.frombuffer(raw, dtype=np.uint8)
        cls = np.frombuffer(raw.translate(_latin1_classes()), dtype=np.uint8)  # 0: a separator
    except UnicodeEncodeError:
        cp = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
        cls = np.take(_char_classes(), cp)
    word = (cls & _WORD).view(bool)
    # the runs of word characters, [begin, end) (the text starts and ends with a separator)
    edges = np.flatnonzero(word[1:] != word[:-1]) + 1
    begin, end = edges[0::2], edges[1::2]
    # Runs of word characters with only apostrophes and hyphens between them make one
    # stretch. A token runs from the first of them that begins with a letter to the end
    # of the last. Does a separator follow run k before run k + 1 begins?
    closes = cls[end] == 0
    check = np.flatnonzero(~closes[:-1])
    if check.size:
        closes[check] = _has_separator(cls, end[check], begin[check + 1])
    closes[-1:] = True
    last = np.flatnonzero(closes)  # the last run of each stretch
    stretch = np.zeros(begin.size, dtype=np.int64)
    stretch[last[:-1] + 1] = 1
    np.cumsum(stretch, out=stretch)
    opening = np.flatnonzero((cls[begin] & _LETTER) != 0)
    in_stretch = stretch.take(opening)
    is_first = np.ones(opening.size, dtype=bool)
    np.not_equal(in_stretch[1:], in_stretch[:-1], out=is_first[1:])
    firsts = np.flatnonzero(is_first)
    start = begin.take(opening.take(firsts))
    end = end.take(last.take(in_stretch.take(firsts)))
    bstart, bend = _utf8_offsets(text, cp, start, end)
    return bstart, bend, end - start >= 2, np.searchsorted(start, doc_start)


def _utf8_offsets(text: str, cp: NDArray[Any], start: NDArray[np.int64], end: NDArray[np.int64]
                  ) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Character offsets in ``text`` (code points ``cp``) as UTF-8 byte offsets: one more
    byte for every earlier character from U+0080, U+0800 and U+10000 on."""
    bstart, bend = start, end
    if not text.isascii():
        for lo in (0x80, 0x800, 0x10000):
            wide = np.flatnonzero(cp >= lo)
            if wide.size:
                bstart = bstart + np.searchsorted(wide, start)
                bend = bend + np.searchsorted(wide, end)
    return bstart, bend


def _has_separator(cls: NDArray[np.uint8], lo: NDArray[np.int64], hi: NDArray[np.int64]) -> NDArray[np.bool_]:
    """Whether each ``cls[lo[i]:hi[i]]`` holds a separator (0).

    The ranges are ascending, disjoint, never empty and end before the last character.
    """
    bounds = np.empty(2 * lo.size, dtype=np.int64)
    bounds[0::2] = lo
    bounds[1::2] = hi
    result: NDArray[np.bool_] = np.minimum.reduceat(cls, bounds)[0::2] == 0
    return result


_C1, _C2 = np.uint32(0xCC9E2D51), np.uint32(0x1B873593)
_TAIL_MASK = np.array([0, 0xFF, 0xFFFF, 0xFFFFFF], dtype=np.uint32)
# the bytes of a token of k bytes in the first 8 at it: mask k (none if k > 8)
_U8_MASK = np.array([0] + [(1 << (8 * k)) - 1 for k in range(1, 9)] + [0], dtype=np.uint64)


def _mix(k: NDArray[np.uint32]) -> None:
    """k = rotl(k * c1, 15) * c2, in place."""
    k *= _C1
    t = k >> np.uint32(17)
    k <<= np.uint32(15)
    k |= t
    k *= _C2


def _block(h: NDArray[np.uint32], k: NDArray[np.uint32]) -> None:
    """One 32-bit block into the hashes: h = rotl(h ^ mix(k), 13) * 5 + 0xe6546b64, in place
    (``k`` is overwritten)."""
    _mix(k)
    h ^= k
    t = h >> np.uint32(19)
    h <<= np.uint32(13)
    h |= t
    h *= np.uint32(5)
    h += np.uint32(0xE6546B64)


def _murmur3(buf: NDArray[np.uint8], start: NDArray[np.int64], length: NDArray[np.int64]) -> NDArray[np.int32]:
    """MurmurHash3_x86_32 with seed 0 of the byte ranges of ``buf`` (padded with 8 bytes), as signed ints.

    Ranges of more than ``_BLOCKS`` 32-bit blocks are hashed one by one, by scikit-learn.
    """
    words = np.ndarray((buf.size - 3,), dtype="<u4", buffer=buf, strides=(1,))  # the word at each byte
    n = start.size
    h = np.zeros(n, dtype=np.uint32)
    blocks = length >> 2
    top = int(blocks.max()) if n else 0
    if top == 1:  # (character n-grams: no range has a second block, nothing to order)
        one = np.flatnonzero(blocks)
        hs = np.zeros(one.size, dtype=np.uint32)
        _block(hs, words[start[one]])
        h[one] = hs
    elif top:
        # longest first, so that the ranges still in play at block j are a prefix
        blocks = np.minimum(blocks, _BLOCKS)
        order = np.argsort((255 - blocks).astype(np.uint8), kind="stable")
        at = start[order]
        hs = np.zeros(n, dtype=np.uint32)
        left = n - np.cumsum(np.bincount(blocks))  # left[j]: ranges with more than j blocks
        for j in range(min(top, _BLOCKS)):
            m = int(left[j])
            p = at[:m]
            k = words[p]
            p += 4
            _block(hs[:m], k)
        h[order] = hs
    rem = length & 3
    k = words[start + length - rem]
    k &= _TAIL_MASK[rem]
    _mix(k)
    h ^= k
    h ^= length.astype(np.uint32)
    h ^= h >> np.uint32(16)
    h *= np.uint32(0x85EBCA6B)
    h ^= h >> np.uint32(13)
    h *= np.uint32(0xC2B2AE35)
    h ^= h >> np.uint32(16)
    out = h.view(np.int32)
    if top > _BLOCKS:
        for i in np.flatnonzero(length > 4 * _BLOCKS + 3).tolist():
            out[i] = murmurhash3_32(buf[start[i] : start[i] + length[i]].tobytes(), seed=0)
    return out


#: The most columns a vectorizer may have: hashed columns are 32-bit indices (and
#: :meth:`Profile.from_state <sift.filters.profile.Profile.from_state>` takes no wider state).
MAX_FEATURES = 2**31 - 1


def _integer(value: Any) -> Any:
    """``value`` as a Python int if it is an integer (numpy integer scalars included, bool
    not), else unchanged (for the validation to refuse)."""
    if isinstance(value, int | np.integer) and not isinstance(value, bool):
        return int(value)
    return value


def _switch(name: str, value: Any) -> bool:
    """A boolean switch as a Python bool: ``True``/``False`` or a numpy bool, nothing else.

    Raises
    ------
    ParameterError
        If ``value`` is of another type (a truthy string such as ``"no"`` included).
    """
    if not isinstance(value, bool | np.bool_):
        raise ParameterError(f"{name} must be a bool, got {value!r}")
    return bool(value)


def _documents(texts: Any) -> list[Any]:
    """The documents of ``texts`` as a list; a bare string (or bytes) is refused, as
    scikit-learn's vectorizers refuse it, rather than read as one document per character.

    Raises
    ------
    ParameterError
        If ``texts`` is a ``str`` or ``bytes``, or not iterable, or holds a document that
        is neither a ``str`` nor UTF-8 ``bytes`` (the message names its index).
    """
    if isinstance(texts, str | bytes):
        more = "..." if len(texts) > 40 else ""
        raise ParameterError(f"texts: an iterable of texts expected, got a {type(texts).__name__} "
                             f"({texts[:40]!r}{more}); pass [text] for a single document")
    try:
        docs = list(texts)
    except TypeError:
        raise ParameterError(f"texts: an iterable of texts expected, got {type(texts).__name__}") from None
    if not all(type(d) is str for d in docs):
        for i, d in enumerate(docs):
            if isinstance(d, bytes):
                try:
                    d.decode("utf-8")
                except UnicodeDecodeError as exc:
                    raise ParameterError(f"texts[{i}]: bytes that are not UTF-8 ({exc.reason} at "
                                         f"byte {exc.start})") from None
            elif not isinstance(d, str):
                raise ParameterError(f"texts[{i}]: a str or UTF-8 bytes expected, got "
                                     f"{type(d).__name__} {d!r:.40}")
    return docs


def _as_text(doc: str | bytes) -> str:
    """What HashingVectorizer's decoder does before the analyzer (bytes are UTF-8;
    :func:`_documents` has checked that they decode)."""
    return doc.decode("utf-8") if isinstance(doc, bytes) else doc


def _truncated(buf: NDArray[np.uint8], start: NDArray[np.int64], length: NDArray[np.int64],
               cut: int) -> NDArray[np.int64]:
    """Byte lengths of the first ``cut`` characters of the tokens (UTF-8 byte ranges of
    ``buf``): ``cut`` bytes for an ASCII token, its own count for the others."""
    long = np.flatnonzero(length > cut)
    if not long.size:
        return length
    out = length.copy()
    out[long] = cut
    ends = start[long] + length[long]
    high = np.concatenate([[0], np.cumsum(buf >= 0x80)])  # bytes of multi-byte characters
    for i in long[high[ends] > high[start[long]]].tolist():  # rare: not ASCII
        a = int(start[i])
        token = buf[a : a + int(length[i])].tobytes().decode("utf-8", "surrogatepass")
        out[i] = len(token[:cut].encode("utf-8", "surrogatepass"))
    return out


def _distinct(key: NDArray[np.int64]) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    """The distinct values of ``key``, sorted, and how often each occurs (as floats)."""
    key.sort()
    new = np.ones(key.size, dtype=bool)
    np.not_equal(key[1:], key[:-1], out=new[1:])
    first = np.flatnonzero(new)
    counts = np.diff(np.append(first, key.size)).astype(np.float64)
    return key.take(first), counts


def _stop_keys(stop: frozenset[str]) -> tuple[NDArray[np.uint64], int, int, list[bytes]]:
    """Stop words as UTF-8 bytes: those of up to 8 bytes packed into integers in a collision-free
    multiplicative hash table (table, multiplier, shift; for more than 128 of them, a sorted
    array and multiplier 0), the longer ones as a list."""
    short, long = [], []
    for word in stop:
        b = word.encode("utf-8", "surrogatepass")
        if b"\x00" in b:  # never a token (and would spoil the zero padding)
            continue
        if 0 < len(b) <= 8:
            short.append(int.from_bytes(b, "little"))
        elif len(b) > 8:
            long.append(b)
    bits, mult = 1, 0
    if len(short) > 128:  # a collision-free table would be large: a sorted array, binary search
        return np.array(sorted(short), dtype=np.uint64), 0, 0, sorted(long)
    if short:
        bits = max(4, (4 * len(short) - 1).bit_length())
        for attempt in itertools.count():
            mult = (0x9E3779B97F4A7C15 * (2 * attempt + 1)) % 2**64
            if len({(k * mult) % 2**64 >> (64 - bits) for k in short}) == len(short):
                break
            if attempt % 64 == 63:
                bits += 1
    # an empty slot: bytes 0xFF, never in UTF-8; a token of more than 8 bytes is looked up as 0
    table = np.full(2**bits, 2**64 - 1, dtype=np.uint64)
    for k in short:
        table[(k * mult) % 2**64 >> (64 - bits)] = k
    return table, mult, 64 - bits, sorted(long)

_spaces: tuple[bytes, NDArray[np.uint32]] | None = None


def _space_tables() -> tuple[bytes, NDArray[np.uint32]]:
    """What ``str.split()`` splits on: a bytes.translate table for U+0000..U+00FF (1 for
    whitespace) and every whitespace code point, sorted (built once)."""
    global _spaces
    if _spaces is None:
        points = np.array([c for c in range(0x110000) if chr(c).isspace()], dtype=np.uint32)
        latin1 = bytes(1 if chr(c).isspace() else 0 for c in range(256))
        _spaces = (latin1, points)
    return _spaces


def _chunk_spans(text: str, doc_start: NDArray[np.int64]
                 ) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]]:
    """The runs of characters other than whitespace in ``text`` (which starts and ends
    with whitespace): what ``text.split()`` gives, as UTF-8 byte ranges (start, end
    exclusive), and for each character offset in ``doc_start`` the number of runs before it."""
    latin1, points = _space_tables()
    cp: NDArray[Any]
    try:
        raw = text.encode("latin-1")
        cp = np.frombuffer(raw, dtype=np.uint8)
        space = np.frombuffer(raw.translate(latin1), dtype=np.bool_)
    except UnicodeEncodeError:
        cp = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
        space = np.isin(cp, points)
    edges = np.flatnonzero(space[1:] != space[:-1]) + 1
    start, end = edges[0::2], edges[1::2]
    bstart, bend = _utf8_offsets(text, cp, start, end)
    return bstart, bend, np.searchsorted(start, doc_start)


_TOP_ROWS = 2048  # rows whose n-grams are ranked together (bounds the bucket table)
_BUCKETS = 256


def _beyond_top(row: NDArray[np.int64], weight: NDArray[np.float64], col: NDArray[np.int32 | np.int64],
                k: int) -> NDArray[np.bool_]:
    """Which entries are not among their row's ``k`` heaviest (weight descending, then
    column ascending). Entries are grouped by row. Without a sort of them all: the
    weights are binned, each row keeps its bins above the one where its ``k``-th
    entry falls, and only that bin's entries are ranked exactly."""
    r0 = int(row[0])
    r = row - r0
    n = int(r[-1]) + 1
    top = float(weight.max())
    scale = (_BUCKETS / top) if top > 0 else 0.0
    bucket = np.minimum((weight * scale).astype(np.int64), _BUCKETS - 1)  # monotone in the weight
    count = np.bincount(r * _BUCKETS + bucket, minlength=n * _BUCKETS).reshape(n, _BUCKETS)
    above = np.zeros((n, _BUCKETS + 1), dtype=np.int64)  # above[i, b]: entries of row i in bins >= b
    np.cumsum(count[:, ::-1], axis=1, out=above[:, -2::-1])
    cut = np.count_nonzero(above[:, :-1] >= k, axis=1) - 1  # the bin holding the k-th (-1: fewer than k)
    room = k - above[np.arange(n), cut + 1]  # entries the cut bin still gives
    row_cut = cut[r]
    keep = bucket > row_cut
    tied = np.flatnonzero(bucket == row_cut)
    if tied.size:
        t_row = r[tied]
        order = np.lexsort((col[tied], -weight[tied], t_row))
        per = np.bincount(t_row, minlength=n)
        first = np.cumsum(per) - per
        rank = np.empty(tied.size, dtype=np.int64)
        rank[order] = np.arange(tied.size) - first[t_row[order]]
        keep[tied[rank < room[t_row]]] = True
    beyond: NDArray[np.bool_] = ~keep
    return beyond


class Vectorizer:
    """Hashing vectorizer with log-TF, training-set IDF and L2 normalisation.

    Parameters
    ----------
    n_features
        Number of hashed columns, 2 to ``MAX_FEATURES`` (``2**31 - 1``; a power of two
        is customary). A numpy integer is taken as the same Python int.
    tf
        ``"log"`` (``1 + ln tf``), ``"raw"`` or ``"binary"``.
    idf
        ``"idf"``, ``"idf2"`` (squared) or ``"none"``.
    normalize
        Scale every document vector to unit Euclidean length (a bool; a numpy bool is
        taken as the same Python bool).
    stop_words
        ``"default"`` (the small built-in list), ``"none"``, or an iterable of words
        (strings). ``None`` is refused: say ``"none"`` for no stop words.
    ngram_max
        1 for words only, 2 to add word bigrams.
    truncate
        Keep only the first ``truncate`` characters of every token (after stop words
        are removed), a language-blind stand-in for stemming: ``exports`` and
        ``exported`` both become ``export`` at 6; ``None`` (default) keeps tokens whole.
        On the Reuters-21578 validation split it raised adaptive Rocchio's macro T11F
        (docs/engine.md); kNN and Kantor did not gain.
    chars
        Share ``c`` in ``[0, 1)`` of a second block of features: the byte n-grams
        (lengths ``char_ngrams``) of every run of characters other than whitespace in
        the lower-cased text (what ``str.split`` gives: numbers, punctuation and stop
        words included), padded with a space on each side (``"wheat,"`` gives ``" wh"``,
        ``"whe"``, ..., ``"at,"``, ``"t, "``), as scikit-learn's ``char_wb`` analyzer
        does; a stand-in for stemming that needs no language. 0 (default) leaves it out and
        changes nothing. With ``c > 0`` words hash into the first half of the columns
        and n-grams into the second; each block is normalised on its own and scaled by
        ``sqrt(1 - c)`` and ``sqrt(c)``, so the dot product of two documents is
        ``(1 - c) cos_words + c cos_ngrams``. Needs ``normalize=True`` and
        ``ngram_max=1``. On Reuters-21578 it made better starting models (batch
        filtering) but no better adaptive runs, and it costs: about five times the
        stored entries a document (so about six times a profile's memory, whose example
        set holds vectors) and vectorizing 12 to 16 times slower (docs/engine.md).
    char_ngrams
        The n-gram lengths ``(lo, hi)`` in bytes (default ``(3, 5)``).
    char_top
        n-grams kept per document, those of highest weight (log-TF x IDF; ties to the
        lower column), so that a document stays about as sparse as its words make it
        (a Reuters story has about 1,500 distinct n-grams); ``None`` keeps all.

    Attributes
    ----------
    n_docs_ : int
        Number of training documents seen by :meth:`fit`/:meth:`partial_fit`.
    df_ : ndarray of shape (n_features,)
        Document frequency per hashed column.

    Examples
    --------
    >>> vec = Vectorizer(n_features=2**10).fit(["wheat exports rose", "oil prices fell"])
    >>> X = vec.transform(["wheat exports", "oil", "barley harvest"])
    >>> X.shape
    (3, 1024)
    >>> [int(n) for n in X.getnnz(axis=1)]  # terms first seen now count too (hashed)
    [2, 1, 2]
    >>> round(float(X[0].multiply(X[0]).sum()), 6)  # unit length
    1.0
    """

    def __init__(
        self,
        n_features: int = 2**20,
        *,
        tf: str = "log",
        idf: str = "idf",
        normalize: bool = True,
        stop_words: str | Iterable[str] = "default",
        ngram_max: int = 1,
        truncate: int | None = None,
        chars: float = 0.0,
        char_ngrams: tuple[int, int] | list[int] = (3, 5),
        char_top: int | None = 200,
    ) -> None:
        self.n_features = _integer(n_features)
        self.tf = tf
        self.idf = idf
        self.normalize = normalize
        self.stop_words = stop_words
        self.ngram_max = _integer(ngram_max)
        self.truncate = _integer(truncate)
        self.chars = chars
        self.char_ngrams = char_ngrams
        self.char_top = _integer(char_top)
        self._validate()
        self.normalize = bool(self.normalize)  # (a numpy bool: the Python one, for the state)
        # with n-grams: words in [0, half), n-grams in [half, n_features)
        self._half = self.n_features // 2 if self.chars else self.n_features
        self._grams = (int(self.char_ngrams[0]), int(self.char_ngrams[1]))
        self._char_columns: dict[str, NDArray[np.int64]] = {}  # chunk -> n-gram columns (small batches)
        self.n_docs_ = 0
        self.df_: NDArray[np.float64] = np.zeros(self.n_features, dtype=np.float64)
        self._weights: NDArray[np.float64] | None = None
        self._fingerprint: tuple[NDArray[np.float64], str] | None = None
        self._stop = self._stop_set()
        self._stop_table, self._stop_mult, self._stop_shift, self._stop_long = _stop_keys(self._stop)
        self._columns: dict[str, int] = {}  # token -> column, for small batches
        self._hasher = HashingVectorizer(
            n_features=self.n_features,
            analyzer=self._analyze,
            alternate_sign=False,
            norm=None,
            dtype=np.float64,
        )

    def _validate(self) -> None:
        n = self.n_features
        if isinstance(n, bool) or not isinstance(n, int) or not 2 <= n <= MAX_FEATURES:
            raise ParameterError(f"n_features must be an integer in [2, 2**31 - 1], got {n!r}")
        if self.tf not in ("log", "raw", "binary"):
            raise ParameterError(f"tf must be 'log', 'raw' or 'binary', got {self.tf!r}")
        if self.idf not in ("idf", "idf2", "none"):
            raise ParameterError(f"idf must be 'idf', 'idf2' or 'none', got {self.idf!r}")
        _switch("normalize", self.normalize)
        if isinstance(self.ngram_max, bool) or self.ngram_max not in (1, 2):
            raise ParameterError(f"ngram_max must be 1 or 2, got {self.ngram_max!r}")
        if self.truncate is not None and (not isinstance(self.truncate, int)
                                          or isinstance(self.truncate, bool) or self.truncate < 1):
            raise ParameterError(f"truncate must be None or an integer >= 1, got {self.truncate!r}")
        c = self.chars
        if isinstance(c, bool) or not isinstance(c, int | float) or not 0.0 <= c < 1.0:
            raise ParameterError(f"chars must be a number in [0, 1), got {c!r}")
        g = self.char_ngrams
        if (not isinstance(g, tuple | list) or len(g) != 2
                or not all(isinstance(x, int) and not isinstance(x, bool) for x in g) or not 1 <= g[0] <= g[1] <= 8):
            raise ParameterError(f"char_ngrams must be (lo, hi) with 1 <= lo <= hi <= 8, got {g!r}")
        t = self.char_top
        if t is not None and (isinstance(t, bool) or not isinstance(t, int) or t < 1):
            raise ParameterError(f"char_top must be None or an integer >= 1, got {t!r}")
        if c:
            if not self.normalize:
                raise ParameterError("chars > 0 needs normalize=True (each block is normalised on its own)")
            if self.ngram_max != 1:
                raise ParameterError(f"chars > 0 needs ngram_max=1, got {self.ngram_max!r}")
            if self.n_features < 4 or self.n_features > 2**31 - 1:
                raise ParameterError(f"chars > 0 needs 4 <= n_features < 2**31, got {self.n_features!r}")

    def _stop_set(self) -> frozenset[str]:
        words = self.stop_words
        if isinstance(words, str):
            if words == "default":
                return STOP_WORDS
            if words == "none":
                return frozenset()
        elif words is not None and not isinstance(words, bytes):
            try:
                stop = frozenset(words)
            except TypeError:  # not iterable, or of unhashable items
                pass
            else:
                if all(isinstance(w, str) for w in stop):
                    return stop
        raise ParameterError("stop_words must be 'default', 'none' (no stop words) or an iterable "
                             f"of strings, got {words!r}")

    def _analyze(self, text: str) -> list[str]:
        tokens = tokenize(text, stop_words=self._stop)
        if self.truncate is not None:
            tokens = [t[: self.truncate] for t in tokens]
        if self.ngram_max == 2 and len(tokens) > 1:
            tokens = tokens + [f"{a} {b}" for a, b in itertools.pairwise(tokens)]
        return tokens

    # -- learning -----------------------------------------------------------------
    def fit(self, texts: Iterable[str]) -> Vectorizer:
        """Learn document frequencies from a training set, replacing earlier ones.

        Raises
        ------
        ParameterError
            If ``texts`` is a single ``str`` (or ``bytes``) or not iterable; the earlier
            frequencies are then kept.
        """
        docs = _documents(texts)
        self.n_docs_ = 0
        self.df_ = np.zeros(self.n_features, dtype=np.float64)
        return self.partial_fit(docs)

    def partial_fit(self, texts: Iterable[str]) -> Vectorizer:
        """Add documents to the document-frequency counts (never call it on unseen stream documents)."""
        counts, _ = self._count(texts)
        self.n_docs_ += counts.shape[0]
        cols = counts.indices
        self.df_ += np.bincount(cols, minlength=self.n_features).astype(np.float64)
        self._weights = None
        return self

    @property
    def idf_(self) -> NDArray[np.float64]:
        """IDF per column: ``ln(N+1) - ln(n+1)``."""
        out: NDArray[np.float64] = np.log(self.n_docs_ + 1.0) - np.log(self.df_ + 1.0)
        return out

    def feature_weights(self) -> NDArray[np.float64]:
        """The corpus weight applied to every column (idf, idf squared, or ones)."""
        if self._weights is None:
            if self.idf != "none" and self.n_docs_ == 0:
                # every IDF would be ln 1 - ln 1 = 0: all-zero vectors, without a word
                raise FilterError(f"Vectorizer(idf={self.idf!r}) has no training documents: "
                                  "call fit(texts) first (or use idf='none')")
            if self.idf == "none":
                self._weights = np.ones(self.n_features)
            elif self.idf == "idf2":
                self._weights = self.idf_**2
            else:
                self._weights = self.idf_
        return self._weights

    # -- transforming ---------------------------------------------------------------
    def transform(self, texts: Sequence[str] | Iterable[str]) -> sp.csr_matrix:
        """Vectorize texts into a CSR matrix of shape (n_texts, n_features)."""
        X, rows = self._keep_top_grams(*self._count(texts))
        return self._weigh_counts(X, rows)

    def transform_counts(self, texts: Sequence[str] | Iterable[str]
                         ) -> tuple[sp.csr_matrix, NDArray[np.float64]]:
        """:meth:`transform`, and the term count behind each of its stored entries (in
        the order of ``X.data``): :meth:`weigh` of those counts gives ``X`` back bit for
        bit, so a vector can travel as its counts (5 bytes a term instead of 12).

        Examples
        --------
        >>> import numpy as np
        >>> vec = Vectorizer(n_features=1024).fit(["wheat corn", "corn oil"])
        >>> X, counts = vec.transform_counts(["corn corn oil", "wheat"])
        >>> sorted(counts.tolist())
        [1.0, 1.0, 2.0]
        >>> C = X.copy(); C.data = counts
        >>> np.array_equal(vec.weigh(C).data, X.data)
        True
        """
        X, rows = self._keep_top_grams(*self._count(texts))
        X.sort_indices()  # (already sorted: _count sorts the columns of each row)
        counts = X.data.copy()
        return self._weigh_counts(X, rows), counts

    def weigh(self, counts: sp.csr_matrix, *, copy: bool = True) -> sp.csr_matrix:
        """The vectors of documents from their term counts (a CSR matrix, columns
        sorted within rows, as :meth:`transform_counts` gives them): the steps of
        :meth:`transform` after counting, so the result equals what :meth:`transform`
        gives for the texts bit for bit. ``copy=False`` weighs a float64 ``counts``
        in place (unless ``char_top`` drops n-grams from it: counts that
        :meth:`transform_counts` gave never lose any).

        Raises
        ------
        ParameterError
            If ``counts`` has another number of columns than ``n_features``, or a stored
            count below 1 or not finite (log-TF would make its whole row NaN).
        """
        C = sp.csr_matrix(counts, dtype=np.float64, copy=copy)
        if C.shape[1] != self.n_features:
            raise ParameterError(f"counts must have {self.n_features} columns, got {C.shape[1]}")
        d = C.data
        if d.size and not (d.min() >= 1.0 and d.max() < np.inf):  # (NaN fails the first)
            bad = d[~((d >= 1.0) & (d < np.inf))]
            raise ParameterError(f"counts must be finite term counts of at least 1, got {float(bad[0])!r}")
        return self._weigh_counts(*self._keep_top_grams(C, np.repeat(np.arange(C.shape[0]), np.diff(C.indptr))))

    def _tf(self, counts: NDArray[np.float64]) -> NDArray[np.float64]:
        """The within-document weights of ``counts``, written over them."""
        if self.tf == "log":
            np.log(counts, out=counts)
            counts += 1.0
        elif self.tf == "binary":
            counts[:] = 1.0
        return counts

    def _keep_top_grams(self, X: sp.csr_matrix, rows: NDArray[np.int64]
                        ) -> tuple[sp.csr_matrix, NDArray[np.int64]]:
        """Term counts with only each row's ``char_top`` heaviest n-grams (log-TF x IDF,
        ties to the lower column); a row with fewer keeps them all, so applying it twice
        changes nothing, and a row's choice depends on that row alone."""
        if not self.chars or self.char_top is None or not X.nnz:
            return X, rows
        X.sort_indices()
        grams = np.flatnonzero(X.indices >= self._half)
        g_rows = rows[grams]
        per_row = np.bincount(g_rows, minlength=X.shape[0])
        if int(per_row.max()) <= self.char_top:
            return X, rows
        weight = self._tf(X.data[grams]) * self.feature_weights()[X.indices[grams]]  # (of a copy: X keeps its counts)
        drop = np.zeros(grams.size, dtype=bool)
        bounds = np.searchsorted(g_rows, np.arange(0, X.shape[0] + _TOP_ROWS, _TOP_ROWS))
        for lo, hi in itertools.pairwise(bounds.tolist()):
            if hi > lo:
                drop[lo:hi] = _beyond_top(g_rows[lo:hi], weight[lo:hi], X.indices[grams[lo:hi]], self.char_top)
        keep = np.ones(X.nnz, dtype=bool)
        keep[grams[drop]] = False
        rows = rows[keep]
        indptr = np.zeros(X.shape[0] + 1, dtype=X.indptr.dtype)
        np.cumsum(np.bincount(rows, minlength=X.shape[0]), out=indptr[1:])
        out = sp.csr_matrix((X.data[keep], X.indices[keep], indptr), shape=X.shape)
        out.has_sorted_indices = True
        return out, rows

    def _weigh_counts(self, X: sp.csr_matrix, rows: NDArray[np.int64]) -> sp.csr_matrix:
        """Term counts to vectors, in place: TF, corpus weights, length normalisation."""
        X.sort_indices()  # before the weighting: each row's norm sums in column order
        self._tf(X.data)
        if X.nnz:  # (no term, nothing to weigh: an unfitted IDF vectorizer may say so)
            X.data *= self.feature_weights()[X.indices]
        if self.normalize and self.chars:  # each block normalised, then scaled
            block = (X.indices >= self._half).astype(np.int64)
            key = 2 * rows + block
            norms = np.sqrt(np.bincount(key, weights=X.data**2, minlength=2 * X.shape[0]))
            norms[norms == 0] = 1.0
            X.data /= norms[key]
            X.data *= np.where(block == 1, np.sqrt(self.chars), np.sqrt(1.0 - self.chars))
        elif self.normalize:  # as normalize_rows, in place
            norms = np.sqrt(np.bincount(rows, weights=X.data**2, minlength=X.shape[0]))
            norms[norms == 0] = 1.0
            X.data /= norms[rows]
        return X

    def fingerprint(self) -> str:
        """A short hash of what turns counts into vectors (the parameters and the corpus
        weights): two vectorizers with equal fingerprints weigh counts identically."""
        weights = self.feature_weights()
        cached = self._fingerprint
        if cached is not None and cached[0] is weights:
            return cached[1]
        h = hashlib.blake2b(repr(sorted(self.params().items())).encode(), digest_size=8)
        h.update(np.ascontiguousarray(weights, dtype="<f8").tobytes())
        self._fingerprint = (weights, h.hexdigest())
        return self._fingerprint[1]

    def _count(self, texts: Iterable[str]) -> tuple[sp.csr_matrix, NDArray[np.int64]]:
        """Term counts, exactly as HashingVectorizer(analyzer=self._analyze) counts them, and each entry's row.

        Columns are sorted within rows and duplicates summed. Bigrams, and more columns
        than 32-bit indices hold, take scikit-learn's (slower) path.
        """
        docs = _documents(texts)
        n = len(docs)
        # (scikit-learn's hasher raises StopIteration on an empty batch: no documents take
        # the path below whatever the options, which gives a 0-row matrix)
        if n and (self.ngram_max != 1 or self.n_features > 2**31 - 1):
            X = sp.csr_matrix(self._hasher.transform(docs), dtype=np.float64)
            return X, np.repeat(np.arange(X.shape[0]), np.diff(X.indptr))
        try:
            size = sum(map(len, docs))
        except TypeError:  # not all text: the small path raises what scikit-learn's path did
            size = 0
        if not n or (n <= _CHUNK and size < _SMALL):
            parts = [self._count_keys_small(docs)]
        else:  # in chunks of documents: the working arrays stay in cache
            parts = [self._count_keys(docs[a : a + _CHUNK], a) for a in range(0, n, _CHUNK)]
        key = np.concatenate([k for k, _ in parts]) if len(parts) > 1 else parts[0][0]
        counts = np.concatenate([c for _, c in parts]) if len(parts) > 1 else parts[0][1]
        rows = key >> 31
        indptr = np.searchsorted(rows, np.arange(n + 1))
        index_dtype = np.int32 if key.size <= np.iinfo(np.int32).max else np.int64
        X = sp.csr_matrix((counts, (key & 0x7FFFFFFF).astype(index_dtype), indptr.astype(index_dtype)),
                          shape=(n, self.n_features))
        return X, rows

    def _count_keys(self, docs: list[Any], offset: int) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
        """The distinct (row << 31 | column) of the documents' tokens, sorted, and their counts.

        Rows are numbered from ``offset``.
        """
        n = len(docs)
        # the batch lower-cased with a separator before, between and after documents
        try:
            text = "\n".join(["", *docs, ""])
        except TypeError:  # not all str
            text = ""
        if text and (text.isascii() or "\u0130" not in text):
            # (the separator is neither cased nor case-ignorable, so lower-casing the whole is
            # lower-casing each document, and only U+0130 changes length when lower-cased)
            text = text.lower()
            lengths = np.fromiter(map(len, docs), dtype=np.int64, count=n)
        else:
            low = [d.lower() if type(d) is str else _as_text(d).lower() for d in docs]
            text = "\n".join(["", *low, ""])
            lengths = np.fromiter(map(len, low), dtype=np.int64, count=n)
        doc_start = np.ones(n + 1, dtype=np.int64)
        np.cumsum(lengths + 1, out=doc_start[1:])
        doc_start[1:] += 1
        bstart, bend, keep, bounds = _spans(text, doc_start)
        utf8 = text.encode("utf-8", "surrogatepass")
        buf = np.zeros(len(utf8) + 8, dtype=np.uint8)
        buf[: len(utf8)] = np.frombuffer(utf8, dtype=np.uint8)
        length = bend - bstart
        keep &= self._not_stop(buf, bstart, length)
        kept = np.flatnonzero(keep)
        bstart, length = bstart.take(kept), length.take(kept)
        row = np.repeat(np.arange(offset, offset + n, dtype=np.int64), np.diff(np.searchsorted(kept, bounds)))
        if self.truncate is not None:
            length = _truncated(buf, bstart, length, self.truncate)
        col = np.abs(_murmur3(buf, bstart, length).astype(np.int64))
        half = self._half
        if half & (half - 1):
            col %= half
        else:  # a power of two
            col &= half - 1
        key = (row << 31) | col
        if self.chars:
            cstart, cend, cbounds = _chunk_spans(text, doc_start)
            crow = np.repeat(np.arange(offset, offset + n, dtype=np.int64), np.diff(cbounds))
            key = np.concatenate([key, self._gram_keys(buf, cstart, cend - cstart, crow)])
        return _distinct(key)

    def _gram_keys(self, buf: NDArray[np.uint8], start: NDArray[np.int64], length: NDArray[np.int64],
                   row: NDArray[np.int64]) -> NDArray[np.int64]:
        """``row << 31 | column`` of the byte n-grams of every chunk (UTF-8 byte ranges of
        ``buf``), each padded with a space on both sides; one key per occurrence."""
        m = start.size
        if not m:
            return np.zeros(0, dtype=np.int64)
        chunks = np.arange(m)
        padded = length + 2
        at = np.zeros(m + 1, dtype=np.int64)  # where each padded chunk starts in `spaced`
        np.cumsum(padded, out=at[1:])
        spaced = np.full(int(at[-1]) + 8, 0x20, dtype=np.uint8)
        spaced[-8:] = 0
        which = np.repeat(chunks, length)
        first = np.cumsum(length) - length
        inside = np.arange(which.size) - first[which]
        spaced[at[which] + 1 + inside] = buf[start[which] + inside]
        lo, hi = self._grams
        starts, lengths, rows = [], [], []
        for n in range(lo, hi + 1):
            count = np.maximum(padded - n + 1, 0)
            which = np.repeat(chunks, count)
            first = np.cumsum(count) - count
            starts.append(at[which] + np.arange(which.size) - first[which])
            lengths.append(np.full(which.size, n, dtype=np.int64))
            rows.append(row[which])
        col = np.abs(_murmur3(spaced, np.concatenate(starts), np.concatenate(lengths)).astype(np.int64))
        col %= self.n_features - self._half
        col += self._half
        return (np.concatenate(rows) << 31) | col

    def _count_keys_small(self, docs: list[Any]) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
        """As :meth:`_count_keys`, a token at a time, the columns of tokens seen before from a dict."""
        columns = self._columns
        if len(columns) > 100_000:
            columns.clear()
        keys = []
        cut = self.truncate
        half = self._half
        grams: list[NDArray[np.int64]] = []
        for row, doc in enumerate(docs):
            text = doc if type(doc) is str else _as_text(doc)
            for token in tokenize(text, stop_words=self._stop):
                col = columns.get(token)
                if col is None:
                    head = token if cut is None else token[:cut]
                    col = columns[token] = abs(murmurhash3_32(head, seed=0)) % half
                keys.append(row << 31 | col)
            if self.chars:
                grams.extend((row << 31) | self._chunk_grams(chunk) for chunk in text.lower().split())
        key = np.array(keys, dtype=np.int64)
        if grams:
            key = np.concatenate([key, *grams])
        return _distinct(key)

    def _chunk_grams(self, chunk: str) -> NDArray[np.int64]:
        """The n-gram columns of one chunk (as :meth:`_gram_keys`), remembered."""
        cols = self._char_columns.get(chunk)
        if cols is None:
            if len(self._char_columns) > 100_000:
                self._char_columns.clear()
            b = f" {chunk} ".encode("utf-8", "surrogatepass")
            lo, hi = self._grams
            h = [murmurhash3_32(b[p : p + n], seed=0) for n in range(lo, hi + 1) for p in range(len(b) - n + 1)]
            cols = np.abs(np.array(h, dtype=np.int64)) % (self.n_features - self._half) + self._half
            self._char_columns[chunk] = cols
        return cols

    def _not_stop(
        self, buf: NDArray[np.uint8], start: NDArray[np.int64], length: NDArray[np.int64]
    ) -> NDArray[np.bool_]:
        """False for the tokens (UTF-8 byte ranges of ``buf``) that are stop words: exact byte comparison."""
        if not start.size or not self._stop:
            return np.ones(start.size, dtype=bool)
        # the bytes of a token as one integer (zero-padded; tokens contain no zero byte)
        first8 = np.ndarray((buf.size - 7,), dtype="<u8", buffer=buf, strides=(1,))[start]
        if self._stop_mult:
            packed = first8 & _U8_MASK[np.minimum(length, 9)]
            slot = packed * np.uint64(self._stop_mult)
            slot >>= np.uint64(self._stop_shift)
            keep: NDArray[np.bool_] = self._stop_table[slot] != packed
        elif self._stop_table.size:  # many stop words: sorted
            packed = first8 & _U8_MASK[np.minimum(length, 9)]
            at = np.minimum(np.searchsorted(self._stop_table, packed), self._stop_table.size - 1)
            keep = self._stop_table[at] != packed
        else:
            keep = np.ones(start.size, dtype=bool)
        for word in self._stop_long:
            head = int.from_bytes(word[:8], "little")
            for i in np.flatnonzero((length == len(word)) & (first8 == head)).tolist():
                if buf[start[i] : start[i] + len(word)].tobytes() == word:
                    keep[i] = False
        return keep

    # -- state ----------------------------------------------------------------------
    def get_params(self) -> dict[str, Any]:
        """Every hyperparameter of :meth:`__init__` by name (defaults included), so that
        ``Vectorizer(**v.get_params())`` is an unfitted copy of ``v``.

        >>> Vectorizer(2**10, truncate=6).get_params()["truncate"]
        6
        >>> Vectorizer(2**10).get_params() == Vectorizer(**Vectorizer(2**10).get_params()).get_params()
        True
        """
        return {"n_features": self.n_features, "tf": self.tf, "idf": self.idf,
                "normalize": self.normalize, "stop_words": self.stop_words,
                "ngram_max": self.ngram_max, "truncate": self.truncate, "chars": self.chars,
                "char_ngrams": self.char_ngrams, "char_top": self.char_top}

    def params(self) -> dict[str, Any]:
        """The hyperparameters as the state and the fingerprint keep them: JSON values,
        and the options added later only when they differ from their defaults (so a
        state written before them is unchanged); :meth:`get_params` has them all."""
        stop: Any = self.stop_words if isinstance(self.stop_words, str) else sorted(self.stop_words)
        out = {"n_features": self.n_features, "tf": self.tf, "idf": self.idf,
               "normalize": self.normalize, "stop_words": stop, "ngram_max": self.ngram_max}
        if self.truncate is not None:  # (states written before the option stay the same)
            out["truncate"] = self.truncate
        if self.chars:  # (the same)
            out.update(chars=self.chars, char_ngrams=list(self._grams), char_top=self.char_top)
        return out

    def to_state(self) -> dict[str, Any]:
        nz = np.flatnonzero(self.df_)
        return {"kind": "vectorizer", "version": 1, "params": self.params(), "n_docs": self.n_docs_,
                "df_index": encode_array(nz.astype(np.int64)), "df_count": encode_array(self.df_[nz])}

    @classmethod
    def from_state(cls, state: Any) -> Vectorizer:
        """Rebuild a fitted vectorizer from :meth:`to_state` output, validating it.

        Raises
        ------
        StateError
            If the state is not a vectorizer state of this version, or corrupt: its
            width is checked before anything of that width is allocated.
        """
        s = check_version(state, "vectorizer")
        v = cls._from_params(s, "vectorizer")
        v._load_counts(s, "vectorizer")
        return v

    @classmethod
    def _from_params(cls, s: dict[str, Any], kind: str) -> Self:
        """A new instance made with the ``params`` of state ``s``; ``params.n_features`` is
        checked against ``MAX_FEATURES`` first, so that a corrupt width is a
        :class:`StateError` and not an allocation of that many columns."""
        try:
            params = s["params"]
            width = _integer(params.get("n_features", 0)) if isinstance(params, dict) else 0
            if isinstance(width, bool) or not isinstance(width, int) or width > MAX_FEATURES:
                raise StateError(f"{kind}: params.n_features must be an integer of at most "
                                 f"2**31 - 1, got {params['n_features']!r}")
            return cls(**params)
        except (KeyError, TypeError, ValueError, ParameterError) as exc:
            raise StateError(f"{kind}: {exc}") from None

    def _load_counts(self, s: dict[str, Any], kind: str) -> None:
        """Set :attr:`n_docs_` and :attr:`df_` from state ``s`` (written by
        :meth:`to_state`), validated: ``n_docs`` a count (at most ``MAX_COUNT``, which
        a state can carry), column indices in range and
        every document frequency in ``[0, n_docs]``."""
        try:
            idx = decode_array(s["df_index"], name="df_index", dtype=np.int64, ndim=1)
            cnt = decode_array(s["df_count"], name="df_count", dtype=self.df_.dtype, ndim=1)
            n_docs = s["n_docs"]
        except (KeyError, TypeError, ValueError) as exc:
            raise StateError(f"{kind}: {exc}") from None
        if isinstance(n_docs, bool) or not isinstance(n_docs, int) or not 0 <= n_docs <= MAX_COUNT:
            raise StateError(f"{kind}: n_docs must be a count in [0, 2**62], got {n_docs!r}")
        if idx.shape != cnt.shape or (idx.size and (idx.min() < 0 or idx.max() >= self.n_features)):
            raise StateError(f"{kind}: document-frequency arrays are inconsistent")
        if cnt.size and not (cnt.min() >= 0 and cnt.max() <= n_docs):
            raise StateError(f"{kind}: document frequencies must be in [0, n_docs = {n_docs}]")
        self.df_[idx] = cnt
        self.n_docs_ = n_docs
        self._weights = None


def normalize_rows(X: sp.csr_matrix) -> sp.csr_matrix:
    """Scale each row to unit Euclidean length (empty rows stay empty)."""
    X = sp.csr_matrix(X, dtype=np.float64, copy=True)
    X.sum_duplicates()  # a column given twice counts once, summed (a no-op when canonical)
    lengths = np.diff(X.indptr)
    rows = np.repeat(np.arange(X.shape[0]), lengths)
    norms = np.sqrt(np.bincount(rows, weights=X.data**2, minlength=X.shape[0]))
    norms[norms == 0] = 1.0
    X.data /= norms[rows]
    return X
