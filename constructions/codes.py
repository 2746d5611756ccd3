"""Positional codebooks omega_1..omega_N of Assumption 3 (rademacher, experimental
d_e = floor(5 ln N), rs-hadamard) with their exact coherence mu, carried into the bounds.
Derivation: docs/derivations/codebooks.md."""

from __future__ import annotations

import dataclasses
import errno
import importlib
import math
import os
import tempfile
import warnings
from dataclasses import dataclass, field
from fractions import Fraction
from functools import lru_cache

import numpy as np
import torch

from qstr.constructions import provenance
from qstr.constructions.validate import (
    device_of,
    finite_tensor,
    fits_in_memory,
    float_dtype,
    generator_on,
    positive_float,
    positive_int,
    probability,
)

KINDS = ("rademacher", "rs-hadamard", "experimental", "custom")
BUILDABLE_KINDS = ("rs-hadamard", "rademacher", "experimental")
UNIT_NORM_TOL = 1e-6
_BLOCK_ELEMENTS = 1 << 24  # entries of one Gram block: O(chunk_rows * N) memory


# --------------------------------------------------------------------------- codebook


@dataclass(frozen=True, eq=False)
class Codebook:
    """Rows of ``omega`` (N, d_e) are the positional codes omega_1..omega_N of Assumption 3.

    ``mu`` is the exact coherence max_{i != j} |<omega_i, omega_j>| of the stored rows,
    ``kind`` one of ``KINDS`` and ``params`` a seed-free description of how it was built.
    Equality is identity (``eq=False``): tensors have no boolean ``==``.
    """

    omega: torch.Tensor
    mu: float
    kind: str
    params: dict = field(default_factory=dict)

    def __post_init__(self):  # cheap checks only; from_tensor validates values
        if not isinstance(self.omega, torch.Tensor) or self.omega.dim() != 2:
            raise ValueError(
                f"omega must be a 2-D tensor (N, d_e), got {type(self.omega).__name__}"
            )
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {self.kind!r}")
        positive_float("mu", self.mu, allow_zero=True)

    @property
    def N(self) -> int:
        return int(self.omega.shape[0])

    @property
    def d_e(self) -> int:
        return int(self.omega.shape[1])

    def to(self, device=None, dtype=None) -> "Codebook":
        """Move/cast ``omega``. Sign codes keep their mu; a custom code is re-measured on a cast."""
        device = self.omega.device if device is None else device_of("device", device)
        dtype = self.omega.dtype if dtype is None else float_dtype("dtype", dtype)
        omega = self.omega.to(device=device, dtype=dtype)
        mu = self.mu
        if dtype != self.omega.dtype and self.kind == "custom":
            mu = coherence(omega)
        return Codebook(omega, mu, self.kind, dict(self.params))

    @classmethod
    def from_tensor(cls, omega: torch.Tensor) -> "Codebook":
        """Wrap user codes: rows must be unit vectors (within 1e-6); mu is measured exactly."""
        _matrix("omega", omega)
        norms = omega.detach().to(torch.float64).norm(dim=1)
        worst = float((norms - 1).abs().max())
        if worst > UNIT_NORM_TOL:
            raise ValueError(
                f"omega rows must have unit norm (| ||omega_i|| - 1 | <= {UNIT_NORM_TOL}), "
                f"worst deviation {worst:.3g}"
            )
        return cls(omega, coherence(omega), "custom", {"N": omega.shape[0], "d_e": omega.shape[1]})

    def save(self, file) -> None:
        """Write the codebook file (``qstr codebook --out``): {'omega', 'mu', 'kind', 'params',
        'versions'}, read back by :meth:`load` or ``torch.load(file, weights_only=True)``. ``file``
        is a binary file object or a path, written atomically (a temporary file beside it, then
        one rename): a failure is a one-line ValueError and leaves the old file."""
        record = {
            "omega": self.omega,
            "mu": self.mu,
            "kind": self.kind,
            "params": dict(self.params),
            provenance.KEY: provenance.versions(),  # docs/formats.md, "Versions in files"
        }
        if not isinstance(file, (str, os.PathLike)):
            _torch_save(record, file)
            return
        try:
            _save_atomically(record, os.fspath(file))
        except OSError as exc:
            raise ValueError(f"{file}: cannot write it ({exc.strerror or exc})") from None

    @classmethod
    def load(cls, path) -> "Codebook":
        """The codebook in the file ``path`` (:meth:`save`; a bare (N, d_e) tensor reads as custom
        codes), under the kind it records. A file that is not one is a one-line
        :class:`CodebookFileError` naming it; codes that are not unit rows a ValueError
        (:meth:`from_tensor`). A file a newer toolkit wrote says so (docs/formats.md, "Versions in
        files"): a ``provenance.NewerFileWarning``, or the newer version in the error."""
        obj = _read_codebook_file(path)
        stored = obj.get(provenance.KEY)
        try:
            book = cls._from_record(obj, path)
        except ValueError as exc:  # CodebookFileError included
            raise type(exc)(f"{exc}{provenance.newer_note(stored)}") from None
        provenance.warn_if_newer(stored, str(path), stacklevel=2)
        return book

    @classmethod
    def _from_record(cls, obj: dict, path) -> "Codebook":
        kind = obj.get("kind", "custom")
        if kind != "custom" and kind not in BUILDABLE_KINDS:
            raise CodebookFileError(
                f"{path} records the kind {kind!r}; known kinds: custom, "
                f"{', '.join(BUILDABLE_KINDS)}"
            )
        book = cls.from_tensor(obj["omega"])
        if kind in BUILDABLE_KINDS:
            params = obj.get("params") if isinstance(obj.get("params"), dict) else {}
            book = dataclasses.replace(book, kind=kind, params=dict(params))
        return book


class CodebookFileError(ValueError):
    """A file :meth:`Codebook.load` cannot read as a codebook (one line naming the file)."""


def _torch_save(record: dict, fh) -> None:
    """``torch.save`` to an open file; torch's short-write RuntimeError (a full disk) as OSError."""
    try:
        torch.save(record, fh)
    except RuntimeError as exc:
        raise OSError(errno.EIO, f"torch.save failed: {str(exc).splitlines()[0]}") from None


def _save_atomically(record: dict, path: str) -> None:
    """``record`` into a temporary file in ``path``'s folder, then renamed over ``path``."""
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(path)), suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            _torch_save(record, fh)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _read_codebook_file(path) -> dict:
    """A dict with at least a dense ``omega`` tensor (a bare tensor ``t`` reads as
    ``{"omega": t}``), or a one-line CodebookFileError."""
    if not os.path.isfile(path):
        raise CodebookFileError(f"{path!r}: no such file")
    try:
        with warnings.catch_warnings():  # torch's warning of a pickle protocol: not for the user
            warnings.simplefilter("ignore")
            obj = torch.load(path, weights_only=True)
    except (
        Exception
    ) as exc:  # OSError, UnpicklingError, EOFError, KeyError ...: any unreadable file
        raise CodebookFileError(
            f"{path}: not a codebook file written by qstr codebook "
            f"(not a torch file: {_what_file(path, exc)})"
        ) from None
    if isinstance(obj, torch.Tensor):
        obj = {"omega": obj}
    if not isinstance(obj, dict) or not isinstance(obj.get("omega"), torch.Tensor):
        raise CodebookFileError(
            f"{path} holds {type(obj).__name__}, not a tensor or a dict with an 'omega' tensor"
        )
    if obj["omega"].layout != torch.strided:
        raise CodebookFileError(
            f"{path} holds a {obj['omega'].layout} tensor; save a dense one (omega.to_dense())"
        )
    return obj


def _what_file(path: str, exc: Exception) -> str:
    """What the file ``torch.load`` could not read looks like, from its first bytes."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(512)
    except OSError as err:
        return f"unreadable: {err.strerror or err}"
    if not head:
        return "empty or truncated file"
    if not head.strip(b"\0"):
        return "all zero bytes"
    if head.startswith(b"PK"):
        return "a damaged or truncated zip archive"
    if head.startswith(b"\x80"):
        return "a Python pickle that torch.load(weights_only=True) refuses"
    try:
        if b"\0" not in head and head.decode("utf-8"):
            return "a text file"
    except UnicodeDecodeError:
        pass
    text = (str(exc).strip().splitlines() or [""])[0].split(". ")[0][:120]
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def require_coherence(codebook, mu_max: float = 0.5, *, name: str = "omega") -> float:
    """Return mu, or refuse with ``ValueError`` when a bound needs mu <= ``mu_max``
    (Assumption 3)."""
    mu_max = positive_float("mu_max", mu_max)
    mu = codebook.mu if isinstance(codebook, Codebook) else coherence(codebook)
    if mu > mu_max:
        raise ValueError(
            f"{name} has coherence mu = {mu:.6g} but the bound needs mu <= {mu_max} "
            f"(Assumption 3); build it with kind='rs-hadamard' or a larger d_e"
        )
    return mu


# --------------------------------------------------------------------------- coherence


@dataclass(frozen=True)
class CoherenceReport:
    """Exact coherence of a codebook and how many pairs break
    ``|<omega_i, omega_j>| <= threshold``."""

    mu: float
    pair: tuple | None  # (i, j), i < j, attaining mu; None when N = 1
    n_violations: int  # unordered pairs with |<omega_i, omega_j>| > threshold
    n_pairs: int  # N (N - 1) / 2
    threshold: float

    @property
    def ok(self) -> bool:
        return self.n_violations == 0

    def __str__(self) -> str:
        verdict = "satisfies" if self.ok else "violates"
        return (
            f"{verdict} |<omega_i, omega_j>| <= {self.threshold}: {self.n_violations} of "
            f"{self.n_pairs} pairs exceed it; mu = {self.mu:.6g} at pair {self.pair}"
        )


def coherence(omega: torch.Tensor, *, chunk_rows: int | None = None) -> float:
    """Exact mu = max_{i != j} |<omega_i, omega_j>| (0.0 for N = 1), in O(chunk_rows * N) memory.

    Serves Assumption 3: every construction uses mu in place of the constant 1/2.
    If all entries share one magnitude s (Rademacher, RS-Hadamard), the Gram matrix of the
    sign matrix is integer valued and computed exactly (float32 for d_e < 2^24, else
    float64), then multiplied by s^2 as a rational number; rows equal to +-s with
    d_e s^2 = 1 up to 1e-6 are read as +-1/sqrt(d_e), so mu = max|S| / d_e exactly.
    Otherwise the inner products are computed in float64 (exact up to float64 rounding,
    whose last ulp may depend on ``chunk_rows``). Runs on omega's device; on CUDA the
    sign path stays exact under TF32 too (+-1 inputs are representable, sums in float32).
    """
    return _scan("omega", omega, chunk_rows, threshold=None)[0]


def coherence_report(
    omega: torch.Tensor, threshold: float = 0.5, *, chunk_rows: int | None = None
) -> CoherenceReport:
    """Coherence, the pair attaining it, and the number of pairs above ``threshold``
    (Assumption 3)."""
    threshold = positive_float("threshold", threshold, allow_zero=True)
    mu, pair, n_violations = _scan("omega", omega, chunk_rows, threshold)
    N = int(omega.shape[0])
    return CoherenceReport(mu, pair, n_violations, N * (N - 1) // 2, threshold)


def _matrix(name: str, omega) -> torch.Tensor:
    if isinstance(omega, torch.Tensor) and omega.device.type not in ("cpu", "cuda"):
        raise ValueError(f"{name} must be on the CPU or a CUDA device, got {omega.device}")
    finite_tensor(name, omega)
    if omega.dim() != 2 or omega.shape[0] < 1 or omega.shape[1] < 1:
        raise ValueError(
            f"{name} must be a 2-D tensor (N, d_e) with N, d_e >= 1, got shape {tuple(omega.shape)}"
        )
    if omega.is_complex() or omega.dtype == torch.bool:
        raise ValueError(f"{name} must be a real tensor, got dtype {omega.dtype}")
    return omega


def _sign_form(omega: torch.Tensor):
    """(signs, unit) with omega = signs * s and <omega_i, omega_j> = (signs signs^T)_ij * unit,
    or None."""
    mags = omega.abs()
    s = mags.max()
    if not bool(s > 0) or not bool((mags == s).all()):
        return None
    d_e = omega.shape[1]
    s = Fraction(float(s))
    unit = Fraction(1, d_e) if abs(float(d_e * s * s) - 1) <= UNIT_NORM_TOL else s * s
    exact_dtype = torch.float32 if d_e < 2**24 else torch.float64
    return torch.sign(omega).to(exact_dtype), unit


def _scan(name, omega, chunk_rows, threshold):
    """Blockwise upper-triangle scan of the Gram matrix: (mu, pair, #pairs above threshold)."""
    _matrix(name, omega)
    N = int(omega.shape[0])
    chunk = (
        max(1, _BLOCK_ELEMENTS // N)
        if chunk_rows is None
        else positive_int("chunk_rows", chunk_rows)
    )
    chunk = min(chunk, N)
    if N == 1:
        return 0.0, None, 0
    sign_form = _sign_form(omega.detach())
    if sign_form is None:
        rows, unit = omega.detach().to(torch.float64), None
        cut = threshold
    else:
        rows, unit = sign_form
        cut = None if threshold is None else math.floor(Fraction(threshold) / unit)
    best, pair, count = -1.0, None, 0
    for a in range(0, N, chunk):
        b = min(a + chunk, N)
        block = (rows[a:b] @ rows[a:].T).abs_()  # columns a..N-1
        w = b - a
        block[:, :w].masked_fill_(
            torch.ones(w, w, dtype=torch.bool, device=block.device).tril(), -1
        )
        flat = int(block.argmax())
        value = float(block.view(-1)[flat])
        if value > best:
            best, pair = value, (a + flat // block.shape[1], a + flat % block.shape[1])
        if cut is not None:
            count += int((block > cut).sum())
    mu = best if unit is None else float(Fraction(int(best)) * unit)
    return mu, pair, count


# --------------------------------------------------------------------------- rademacher


def rademacher(
    N: int, d_e: int, *, generator: torch.Generator, device=None, dtype=torch.float32
) -> torch.Tensor:
    """(N, d_e) i.i.d. entries +-1/sqrt(d_e), drawn with ``generator`` on ``device``
    (Assumption 3)."""
    N, d_e = positive_int("N", N), positive_int("d_e", d_e)
    device, dtype = device_of("device", device), float_dtype("dtype", dtype)
    generator_on("generator", generator, device)
    _fits(N, d_e, device, dtype)
    bits = torch.randint(0, 2, (N, d_e), generator=generator, device=device, dtype=dtype)
    return (2 * bits - 1) * (1 / math.sqrt(d_e))


def coherent_rademacher(
    N: int,
    d_e: int,
    *,
    mu_max: float = 0.5,
    generator: torch.Generator,
    device=None,
    dtype=torch.float32,
    max_tries: int = 20,
) -> Codebook:
    """Rademacher codes in ``d_e`` columns with measured coherence <= ``mu_max`` (Assumption 3
    when mu_max = 1/2): drawn with ``generator`` until the exact coherence is <= mu_max
    (``params['tries']``), at most ``max_tries`` times. The d_e at which one draw fails with
    probability <= delta is ``qstr.bounds.codebooks.rademacher_dim``, and
    ``qstr.bounds.codebooks.rademacher_codebook`` builds at it."""
    N, d_e = positive_int("N", N), positive_int("d_e", d_e)
    mu_max, max_tries = probability("mu_max", mu_max), positive_int("max_tries", max_tries)
    for tries in range(1, max_tries + 1):
        omega = rademacher(N, d_e, generator=generator, device=device, dtype=dtype)
        mu = coherence(omega)
        if mu <= mu_max:
            params = {"N": N, "d_e": d_e, "mu_max": mu_max, "tries": tries}
            return Codebook(omega, mu, "rademacher", params)
    raise ValueError(
        f"max_tries={max_tries} draws all had coherence > mu_max={mu_max} at d_e={d_e}; "
        f"increase d_e or max_tries"
    )


# --------------------------------------------------------------------------- experiments


def experimental_dim(N: int) -> int:
    """d_e = floor(5 ln N) (at least 1), the dimension of the paper's experiments."""
    N = positive_int("N", N)
    return max(1, math.floor(5 * math.log(N)))


def experimental_codes(
    N: int, *, generator: torch.Generator, device=None, dtype=torch.float32
) -> Codebook:
    """Rademacher codes at d_e = floor(5 ln N), NOT resampled: they may violate Assumption 3.

    ``params`` records this draw's pairs above 1/2 and whether it satisfies Assumption 3;
    ``qstr.bounds.codebooks.experimental_codebook`` adds the expected number of them.
    """
    d_e = experimental_dim(N)
    omega = rademacher(N, d_e, generator=generator, device=device, dtype=dtype)
    report = coherence_report(omega, 0.5)
    params = {
        "N": N,
        "d_e": d_e,
        "rule": "floor(5 ln N)",
        "n_violations": report.n_violations,
        "satisfies_assumption3": report.ok,
    }
    return Codebook(omega, report.mu, "experimental", params)


# --------------------------------------------------------------------------- GF(2^m)

IRREDUCIBLE = {
    1: 0b11,
    2: 0b111,
    3: 0b1011,
    4: 0b10011,
    5: 0b100101,
    6: 0b1000011,
    7: 0b10000011,
    8: 0b100011011,
    9: 0b1000010001,
    10: 0b10000001001,
}
MAX_M = max(IRREDUCIBLE)


def _clmul_table(m: int, poly: int) -> np.ndarray:
    """Carry-less a * b reduced mod ``poly`` (degree m), for all a, b in [0, 2^m)."""
    n = 1 << m
    a = np.arange(n, dtype=np.int64)[:, None]
    b = np.arange(n, dtype=np.int64)[None, :]
    prod = np.zeros((n, n), dtype=np.int64)
    for bit in range(m):
        prod ^= np.where((b >> bit) & 1, a << bit, 0)
    for deg in range(2 * m - 2, m - 1, -1):
        prod ^= ((prod >> deg) & 1) * (poly << (deg - m))
    return prod


@lru_cache(maxsize=None)
def gf_mul_table(m: int, poly: int | None = None) -> np.ndarray:
    """Multiplication table of GF(2)[x] / (poly), poly = IRREDUCIBLE[m] by default (then the field
    GF(2^m)); addition is XOR. Read-only. Another ``poly`` of degree m is for checking the table."""
    m = positive_int("m", m)
    if m > MAX_M:
        raise ValueError(f"m must be an integer in [1, {MAX_M}], got {m}")
    if poly is None:
        poly = IRREDUCIBLE[m]
    elif not isinstance(poly, int) or poly.bit_length() != m + 1:
        raise ValueError(
            f"poly must be an int of degree m = {m} (bit length {m + 1}), got {poly!r}"
        )
    table = _clmul_table(m, poly).astype(np.int32)
    table.setflags(write=False)
    return table


# --------------------------------------------------------------------------- RS-Hadamard


def _rs_parameters(N: int, mu: float, m_min: int = 1):
    """Smallest m >= m_min with a length-n RS code (n = 2^m) of >= N words and (k-1)/n <= mu."""
    for m in range(m_min, MAX_M + 1):
        n = 1 << m
        k = 1
        while n**k < N:
            k += 1
        if k - 1 <= mu * n:  # i.e. k <= floor(mu n) + 1
            return m, n, k
    return None


def rs_hadamard_dim(N: int, mu: float = 0.5) -> int:
    """d_e = 4^m of the RS-Hadamard code for N words with guaranteed coherence <= mu.

    m is the smallest with n^(floor(mu n) + 1) >= N, n = 2^m; at mu = 1/2 that is
    n^(n/2 + 1) >= N, so d_e = n^2 = O((log N / log log N)^2): N <= 4 -> 4, N <= 64 -> 16,
    N <= 32768 -> 64, N <= 16^9 -> 256. ``ValueError`` when even m = 10 is not enough.
    """
    return _rs_found(positive_int("N", N), probability("mu", mu))[1] ** 2


def _rs_found(N: int, mu: float):
    """(m, n, k) of the smallest RS-Hadamard code for N words at coherence <= mu, or ValueError."""
    found = _rs_parameters(N, mu)
    if found is None:
        raise ValueError(
            f"N={N} codewords with coherence <= mu={mu} need an RS-Hadamard code beyond "
            f"GF(2^{MAX_M}) (d_e > {4**MAX_M}); use a larger mu or a smaller N"
        )
    return found


def _rs_symbols(indices: np.ndarray, m: int, k: int) -> np.ndarray:
    """Outer RS code: row r is p_r(x) at all x in GF(2^m), p_r's coefficients = base-2^m digits
    of r."""
    n, mul = 1 << m, gf_mul_table(m).ravel()  # mul[(a << m) | b] = a * b
    xs = np.arange(n, dtype=np.int32)[None, :]
    values = np.zeros((len(indices), n), dtype=np.int32)
    for level in range(k - 1, -1, -1):  # Horner: v <- v * x + c_level
        digit = ((indices >> (m * level)) & (n - 1)).astype(np.int32)
        values = np.take(mul, (values << m) | xs) ^ digit[:, None]
    return values


def _hadamard(m: int) -> np.ndarray:
    """Sylvester-Hadamard matrix H[a, b] = (-1)^popcount(a & b); rows are mutually orthogonal."""
    n = 1 << m
    ab = np.arange(n)[:, None] & np.arange(n)[None, :]
    parity = np.zeros_like(ab)
    for bit in range(m):
        parity ^= (ab >> bit) & 1
    return 1 - 2 * parity


def rs_hadamard_coherence(N: int, m: int, k: int) -> float:
    """Exact coherence of the first N RS-Hadamard words, in O(N n) time instead of O(N^2 n^2).

    <omega_i, omega_j> = #{x : p_i(x) = p_j(x)} / n and p_i - p_j is the polynomial whose
    digits are those of i XOR j. For i != j < N, i XOR j ranges over exactly
    [1, 2^L), L = bit length of N - 1 (take i = 2^h, j = c - 2^h, h = top bit of c).
    So mu = max_{1 <= c < 2^L} #roots(p_c) / n.
    """
    return _rs_coherence(positive_int("N", N), m, k)


def _rs_coherence(N: int, m: int, k: int) -> float:
    if N == 1:
        return 0.0
    n = 1 << m
    c = np.arange(1, 1 << (N - 1).bit_length(), dtype=np.int64)
    roots = (_rs_symbols(c, m, k) == 0).sum(axis=1)
    return float(Fraction(int(roots.max()), n))


def _fits(N: int, d_e: int, device, dtype) -> None:
    """About three (N, d_e) copies: the codes, their construction's temporaries, the coherence
    scan."""
    nbytes = 3 * N * d_e * torch.empty((), dtype=dtype).element_size()
    fits_in_memory(
        f"a codebook of N = {N} codes in d_e = {d_e} ({str(dtype).replace('torch.', '')})",
        nbytes,
        device,
    )


def _rs_hadamard(N, m, k, d_e, device, dtype) -> Codebook:
    n = 1 << m
    _fits(N, max(d_e, n * n), device, dtype)
    symbols = torch.as_tensor(_rs_symbols(np.arange(N, dtype=np.int64), m, k), device=device).long()
    H = torch.as_tensor(_hadamard(m), dtype=dtype, device=device) / n  # n blocks of n: unit norm
    omega = H[symbols].reshape(N, n * n)
    if d_e > n * n:
        omega = torch.nn.functional.pad(omega, (0, d_e - n * n))
    params = {
        "N": N,
        "m": m,
        "n": n,
        "k": k,
        "field_poly": IRREDUCIBLE[m],
        "guaranteed_mu": (k - 1) / n,
        "d_e": d_e,
    }
    return Codebook(omega, _rs_coherence(N, m, k), "rs-hadamard", params)


def rs_hadamard_codebook(N: int, *, mu: float = 0.5, device=None, dtype=torch.float32) -> Codebook:
    """Deterministic codes with guaranteed coherence <= (k-1)/n <= mu (Assumption 3 at mu = 1/2).

    Word i: write i in base n = 2^m as k digits = coefficients of p_i, deg p_i < k, over
    GF(2^m); evaluate p_i at all n field elements (Reed-Solomon: distinct words agree in
    <= k-1 places); replace each symbol a by the Walsh row ((-1)^popcount(a & b))_b and
    scale by 1/n. Then ||omega_i|| = 1 and <omega_i, omega_j> = #agreements / n in
    [0, (k-1)/n]. m is the smallest that works, k the fewest digits with n^k >= N:
    d_e = n^2, at mu = 1/2 n^(n/2+1) >= N, so d_e = O((log N / log log N)^2). Smaller mu
    (e.g. 1/(2q) for single-head sparse averaging) just needs a larger n.
    ``mu`` of the result is the exact coherence (:func:`rs_hadamard_coherence`).
    """
    N, mu = positive_int("N", N), probability("mu", mu)
    device, dtype = device_of("device", device), float_dtype("dtype", dtype)
    m, n, k = _rs_found(N, mu)
    _rs_refuse_above(N, mu, Fraction(k - 1, n), f"its guarantee (k - 1)/n (m = {m}, k = {k})")
    book = _rs_hadamard(N, m, k, n * n, device, dtype)
    _rs_refuse_above(N, mu, Fraction(book.mu), "its exact coherence (root count)")
    return book


def _rs_refuse_above(N: int, mu: float, got: Fraction, what: str) -> None:
    """The builder's re-check of its parameter rule: ValueError when ``got`` (the code's
    guarantee or its exact coherence) exceeds the mu asked, compared exactly."""
    if got > Fraction(mu):
        raise ValueError(
            f"the RS-Hadamard code chosen for N = {N} at mu = {mu} has {what} = {float(got):.6g} "
            f"above mu: its parameter rule is broken"
        )


def star_codebook(N: int, *, mu: float = 0.5, device=None, dtype=torch.float64) -> Codebook:
    """Codes on which Lemma 11's leak bound is attained: omega_0 = e_0 meets every other code at
    exactly mu.

    omega_j = mu e_0 + sqrt(1 - mu^2) v_j with v_j RS-Hadamard of coherence <= mu/(1 + mu), so
    the other pairs meet at <= mu^2 + (1 - mu^2) mu/(1 + mu) = mu (docs/derivations/lemma11.md).
    """
    N, mu = positive_int("N", N, minimum=2), probability("mu", mu)
    device, dtype = device_of("device", device), float_dtype("dtype", dtype)
    m, n, k = _rs_found(N - 1, mu / (1 + mu))
    base = _rs_hadamard(N - 1, m, k, n * n, device, torch.float64).omega
    omega = torch.zeros(N, base.shape[1] + 1, dtype=torch.float64, device=device)
    omega[0, 0] = 1
    omega[1:, 0] = mu
    omega[1:, 1:] = math.sqrt(1 - mu * mu) * base
    omega = omega.to(dtype)
    return Codebook(
        omega, coherence(omega), "custom", {"N": N, "d_e": omega.shape[1], "star_mu": mu}
    )


# --------------------------------------------------------------------------- entry point


def padded_rs_hadamard_codebook(
    N: int, *, mu_max: float = 0.5, d_e: int | None = None, device=None, dtype=torch.float32
) -> Codebook:
    """RS-Hadamard codes with coherence <= mu_max guaranteed (Assumption 3 at mu_max = 1/2), in
    ``d_e`` columns: a d_e >= the needed 4^m uses the largest 4^m' <= d_e (smaller coherence),
    zero-padded to d_e columns; the kind rs-hadamard of ``qstr.bounds.codebooks.build_codebook``.
    """
    N, mu_max = positive_int("N", N), probability("mu_max", mu_max)
    device, dtype = device_of("device", device), float_dtype("dtype", dtype)
    need = rs_hadamard_dim(N, mu_max)
    if d_e is None:
        d_e = need
    elif positive_int("d_e", d_e) < need:
        raise ValueError(
            f"d_e must be >= {need} for an rs-hadamard code of N={N} words "
            f"with mu <= {mu_max}, got {d_e}"
        )
    m_fit = min(MAX_M, int(math.log2(d_e)) // 2)
    while 4**m_fit > d_e:
        m_fit -= 1
    m, n, k = _rs_parameters(N, mu_max, m_min=m_fit)
    _rs_refuse_above(N, mu_max, Fraction(k - 1, n), f"its guarantee (k - 1)/n (k = {k})")
    return _rs_hadamard(N, m, k, d_e, device, dtype)


# Names that moved to qstr.bounds.codebooks (issue 56), loaded from there only when asked for:
# the two bounds with a DeprecationWarning; the builders that pick d_e by them (rademacher) or
# record their tail (experimental), and the entry point over every kind, without one.
_MOVED_TO_BOUNDS = ("rademacher_dim", "rademacher_pair_tail", "RADEMACHER_DIM_MAX")
_BUILT_IN_BOUNDS = ("rademacher_codebook", "experimental_codebook", "build_codebook")


def __getattr__(name: str):
    """The old path of a name that moved to ``qstr.bounds.codebooks`` (PEP 562). Loading the
    module by name here is the one way constructions reaches bounds, and only when asked."""
    if name not in _MOVED_TO_BOUNDS + _BUILT_IN_BOUNDS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    home = "qstr.bounds.codebooks"
    if name in _MOVED_TO_BOUNDS:
        warnings.warn(
            f"{__name__}.{name} moved to {home}.{name}; import it from there",
            DeprecationWarning,
            stacklevel=2,
        )
    return getattr(importlib.import_module(home), name)
