"""Exact, JSON-safe encoding of numpy arrays and sparse matrices.

Arrays become ``{"dtype", "shape", "b64"}`` with the raw little-endian bytes in
base64, so a round trip through orjson is bit-exact (no float formatting) and no
pickle is ever involved. Decoding validates dtype, shape and (for floats)
finiteness, raising :class:`~sift.filters.errors.StateError`. Sparse matrices are
written in canonical form (each row's columns strictly increasing), and a decoded one
must be in it: a column stored twice in a row scores the same but changes the
leave-one-out terms of the examples it is in.

>>> import numpy as np
>>> a = np.array([0.1, 1e-300, -2.5])
>>> bool(np.array_equal(decode_array(encode_array(a)), a))
True
"""

from __future__ import annotations

import base64
import math
from typing import Any

import numpy as np
import scipy.sparse as sp
from numpy.typing import NDArray

from sift.filters.errors import StateError

STATE_VERSION = 1

_DTYPES = {"<f8": np.float64, "<f4": np.float32, "<i8": np.int64, "<i4": np.int32, "|i1": np.int8,
           "|b1": np.bool_}


def encode_array(a: NDArray[Any]) -> dict[str, Any]:
    """Encode an array as a JSON-safe dict."""
    arr = np.ascontiguousarray(a)
    dt = arr.dtype.newbyteorder("<") if arr.dtype.byteorder == ">" else arr.dtype
    arr = arr.astype(dt, copy=False)
    key = dt.str
    if key not in _DTYPES:
        raise StateError(f"cannot encode arrays of dtype {arr.dtype}")
    return {"dtype": key, "shape": list(arr.shape), "b64": base64.b64encode(arr.tobytes()).decode("ascii")}


def decode_array(
    obj: Any, *, name: str = "array", finite: bool = True, dtype: Any = None, ndim: int | None = None
) -> NDArray[Any]:
    """Decode :func:`encode_array` output, validating it (and its dtype and rank if given)."""
    if not isinstance(obj, dict) or set(obj) != {"dtype", "shape", "b64"}:
        raise StateError(f"{name}: not an encoded array")
    stored = _DTYPES.get(obj["dtype"])
    if stored is None:
        raise StateError(f"{name}: unsupported dtype {obj['dtype']!r}")
    shape = obj["shape"]
    if not isinstance(shape, list) or not all(isinstance(s, int) and s >= 0 for s in shape):
        raise StateError(f"{name}: bad shape {shape!r}")
    try:
        raw = base64.b64decode(obj["b64"], validate=True)
    except (ValueError, TypeError):
        raise StateError(f"{name}: bad base64 payload") from None
    expected = math.prod(shape) * np.dtype(stored).itemsize  # Python ints: no wrap-around
    if len(raw) != expected:
        raise StateError(f"{name}: {len(raw)} bytes for shape {shape} of {obj['dtype']}")
    arr = np.frombuffer(raw, dtype=np.dtype(obj["dtype"])).reshape(shape).copy()
    if finite and arr.dtype.kind == "f" and not np.all(np.isfinite(arr)):
        raise StateError(f"{name}: contains NaN or infinite values")
    if dtype is not None and arr.dtype != np.dtype(dtype):
        raise StateError(f"{name}: expected dtype {np.dtype(dtype)}, got {arr.dtype}")
    if ndim is not None and arr.ndim != ndim:
        raise StateError(f"{name}: expected {ndim} dimensions, got {arr.ndim}")
    return arr


def encode_csr(m: sp.csr_matrix) -> dict[str, Any]:
    """Encode a CSR matrix in canonical form (each row's columns sorted and stored once,
    float64 data), which :func:`decode_csr` requires. The matrix is not changed (one not
    in canonical form is made so in a copy, a column stored twice summed as scipy's
    ``sum_duplicates`` sums it, as profiles do before learning)."""
    if not (isinstance(m, sp.csr_matrix) and m.has_canonical_format):
        m = sp.csr_matrix(m, copy=True)
        m.sum_duplicates()
    return {
        "shape": list(m.shape),
        "data": encode_array(m.data.astype(np.float64)),
        "indices": encode_array(m.indices.astype(np.int32)),
        "indptr": encode_array(m.indptr.astype(np.int64)),
    }


#: A decoded sparse matrix not yet built: ``(shape, data, indices, indptr)``.
CSRParts = tuple[tuple[int, int], NDArray[np.float64], NDArray[np.int32], NDArray[np.int64]]


def decode_csr_parts(obj: Any, *, name: str = "matrix") -> CSRParts:
    """Decode and validate :func:`encode_csr` output into ``(shape, data, indices,
    indptr)`` without building the matrix (to stack many at once).

    The shape must be two integers in ``[0, 2**31)`` (not strings, floats or booleans)
    and each row's columns strictly increasing (sorted, none stored twice).
    """
    if not isinstance(obj, dict):
        raise StateError(f"{name}: not an encoded sparse matrix")
    try:
        raw_shape = obj["shape"]
        data = decode_array(obj["data"], name=f"{name}.data", dtype=np.float64, ndim=1)
        indices = decode_array(obj["indices"], name=f"{name}.indices", dtype=np.int32, ndim=1)
        indptr = decode_array(obj["indptr"], name=f"{name}.indptr", dtype=np.int64, ndim=1)
    except (KeyError, TypeError, ValueError) as exc:
        raise StateError(f"{name}: {exc}") from None
    if (not isinstance(raw_shape, list | tuple) or len(raw_shape) != 2
            or not all(isinstance(d, int) and not isinstance(d, bool) and 0 <= d < 2**31
                       for d in raw_shape)):
        raise StateError(f"{name}: shape must be two dimensions in [0, 2**31) (integers), "
                         f"got {raw_shape!r}")
    shape = (int(raw_shape[0]), int(raw_shape[1]))
    if indptr.shape != (shape[0] + 1,) or data.shape != indices.shape:
        raise StateError(f"{name}: inconsistent sparse structure")
    if indptr.size and (indptr[0] != 0 or indptr[-1] != data.size or np.any(np.diff(indptr) < 0)):
        raise StateError(f"{name}: bad indptr")
    if indices.size and (indices.min() < 0 or indices.max() >= shape[1]):
        raise StateError(f"{name}: column index out of range")
    if indices.size > 1:
        # each entry against the one before it, except where a row starts
        ok = np.diff(indices) > 0
        starts = indptr[1:-1]
        ok[starts[(starts > 0) & (starts < indices.size)] - 1] = True
        if not ok.all():
            at = int(np.argmin(ok)) + 1
            row = int(np.searchsorted(indptr, at, side="right")) - 1
            raise StateError(f"{name}.indices: columns must be strictly increasing within each row, "
                             f"row {row} has column {int(indices[at])} after {int(indices[at - 1])}")
    return shape, data, indices, indptr


def decode_csr(obj: Any, *, name: str = "matrix") -> sp.csr_matrix:
    """Decode :func:`encode_csr` output, validating the structure."""
    shape, data, indices, indptr = decode_csr_parts(obj, name=name)
    return sp.csr_matrix((data, indices, indptr), shape=shape)


def stack_csr_parts(parts: list[CSRParts], n_cols: int) -> sp.csr_matrix:
    """The rows of :func:`decode_csr_parts` results (each ``n_cols`` wide) stacked in
    order, as one CSR matrix built once."""
    if any(shape[1] != n_cols for shape, *_ in parts):
        raise StateError(f"stacked matrices must all be {n_cols} wide")
    n_rows = sum(shape[0] for shape, *_ in parts)
    if not parts:
        return sp.csr_matrix((0, n_cols))
    offsets = np.cumsum([0] + [data.size for _, data, _, _ in parts[:-1]])
    indptr = np.concatenate([np.zeros(1, np.int64)]
                            + [ptr[1:] + off for (_, _, _, ptr), off in zip(parts, offsets, strict=True)])
    return sp.csr_matrix((np.concatenate([d for _, d, _, _ in parts]),
                          np.concatenate([i for _, _, i, _ in parts]), indptr),
                         shape=(n_rows, n_cols))


def check_version(state: Any, kind: str) -> dict[str, Any]:
    """Check that ``state`` is a dict of the given kind and the current version."""
    if not isinstance(state, dict):
        raise StateError(f"{kind} state must be an object, got {type(state).__name__}")
    if state.get("kind") != kind:
        raise StateError(f"expected {kind} state, got kind {state.get('kind')!r}")
    version = state.get("version")
    # an integer, not True or 1.0 (which equal 1)
    if isinstance(version, bool) or not isinstance(version, int) or version != STATE_VERSION:
        raise StateError(f"{kind} state version {version!r} is not {STATE_VERSION}")
    return state


#: Largest counter a state may carry (far above any real count, and safe for int64
#: arithmetic and for orjson, which refuses integers beyond 64 bits).
MAX_COUNT = 2**62


def decode_count(value: Any, *, name: str) -> int:
    """A non-negative integer counter from a state, validated."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_COUNT:
        raise StateError(f"{name}: must be an integer in [0, 2**62], got {value!r}")
    return int(value)
