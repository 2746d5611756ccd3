"""The Codebook record: positional codes omega_1..omega_N (Assumption 3) with their exact coherence
mu, the kind that built them, and its file (Codebook.save / Codebook.load, docs/formats.md).
Derivation: docs/derivations/codebooks.md."""

from __future__ import annotations

import dataclasses
import errno
import os
import tempfile
import warnings
from dataclasses import dataclass, field

import torch

from qstr.constructions import provenance
from qstr.constructions.coherence import UNIT_NORM_TOL, _matrix, coherence
from qstr.constructions.validate import device_of, fits_in_memory, float_dtype, positive_float

__all__ = ["KINDS", "BUILDABLE_KINDS", "Codebook", "CodebookFileError", "require_coherence"]

KINDS = ("rademacher", "rs-hadamard", "experimental", "custom")
BUILDABLE_KINDS = ("rs-hadamard", "rademacher", "experimental")


# --------------------------------------------------------------------------- the record


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


# --------------------------------------------------------------------------- its file


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


# --------------------------------------------------------------------------- Assumption 3's check


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


# --------------------------------------------------------------------------- every kind's builder


def _fits(N: int, d_e: int, device, dtype) -> None:
    """About three (N, d_e) copies: the codes, their construction's temporaries, the coherence
    scan."""
    nbytes = 3 * N * d_e * torch.empty((), dtype=dtype).element_size()
    fits_in_memory(
        f"a codebook of N = {N} codes in d_e = {d_e} ({str(dtype).replace('torch.', '')})",
        nbytes,
        device,
    )
