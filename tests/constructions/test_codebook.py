"""The Codebook record and its file (constructions/codebook.py): from_tensor, to, require_coherence,
save and load."""

from __future__ import annotations

import re

import pytest
import torch

from qstr.constructions import provenance
from qstr.constructions.codebook import Codebook, CodebookFileError, require_coherence
from qstr.constructions.codes import (
    UNIT_NORM_TOL,
    build_codebook,
    coherence,
    coherence_report,
    experimental_codebook,
    rademacher_codebook,
    rs_hadamard_codebook,
)
from tests.fixtures import seeded as gen


# --------------------------------------------------------------------------- the record


def test_codebook_to_moves_to_the_device_asked_and_stays_without_one():
    """Codebook.to(device=D) puts omega on D; with no device it stays where it is (the meta
    device stands in for a second device on a CPU-only machine)."""
    cb = rs_hadamard_codebook(100)
    moved = cb.to(device="meta")
    assert moved.omega.device.type == "meta" and moved.mu == cb.mu
    assert moved.to(dtype=torch.float64).omega.device.type == "meta"


def test_codebook_to_and_from_tensor():
    cb = rs_hadamard_codebook(100)
    cb64 = cb.to(dtype=torch.float64)
    assert cb64.omega.dtype == torch.float64 and cb64.mu == cb.mu and cb64.params == cb.params
    rad = rademacher_codebook(100, generator=gen(0))
    assert rad.to(dtype=torch.float64).mu == rad.mu == coherence(rad.omega.double())
    omega = torch.randn(30, 8, generator=gen(0), dtype=torch.float64)
    omega = omega / omega.norm(dim=1, keepdim=True)
    custom = Codebook.from_tensor(omega)
    assert (
        custom.kind == "custom"
        and custom.mu == coherence(omega)
        and (custom.N, custom.d_e) == (30, 8)
    )
    c32 = custom.to(dtype=torch.float32)
    assert c32.mu == coherence(omega.float()) and c32.mu == pytest.approx(custom.mu, abs=1e-6)


def test_a_custom_codebook_cast_to_float32_is_re_measured():
    """Codebook.to(dtype=float32) of custom codes re-measures mu on the cast rows."""
    base = rs_hadamard_codebook(64, dtype=torch.float64)
    Q, _ = torch.linalg.qr(torch.randn(base.d_e, base.d_e, generator=gen(7), dtype=torch.float64))
    cast = Codebook.from_tensor(base.omega @ Q).to(dtype=torch.float32)
    assert cast.omega.dtype == torch.float32 and cast.mu == coherence(cast.omega)


def test_from_tensor_unit_norm_tolerance():
    """Codebook.from_tensor refuses a row off by 10 UNIT_NORM_TOL, accepts one off by a tenth."""
    base = rs_hadamard_codebook(64, dtype=torch.float64)
    Q, _ = torch.linalg.qr(torch.randn(base.d_e, base.d_e, generator=gen(6), dtype=torch.float64))
    omega = base.omega @ Q
    assert Codebook.from_tensor(omega).kind == "custom"
    for factor, ok in ((1 + 10 * UNIT_NORM_TOL, False), (1 + UNIT_NORM_TOL / 10, True)):
        bent = omega.clone()
        bent[5] *= factor
        if ok:
            Codebook.from_tensor(bent)
        else:
            with pytest.raises(ValueError, match="unit norm"):
                Codebook.from_tensor(bent)


def test_codes_on_the_meta_device_are_refused():
    with pytest.raises(ValueError, match="on the CPU or a CUDA device, got meta"):
        Codebook.from_tensor(torch.eye(4, device="meta"))


@pytest.mark.parametrize(
    "call, name",
    [
        (lambda: Codebook.from_tensor(torch.tensor([[1.0, float("inf")]])), "omega"),
        (lambda: Codebook.from_tensor(torch.ones(2, 2)), "omega"),
        (lambda: Codebook.from_tensor([[1.0]]), "omega"),
        (lambda: Codebook(torch.ones(2, 2), 0.0, "fancy"), "kind"),
    ],
)
def test_bad_arguments_name_the_argument(call, name):
    with pytest.raises(ValueError, match=name):
        call()


# --------------------------------------------------------------------------- require_coherence


def test_require_coherence_takes_mu_max_by_keyword_and_the_boundary_is_inside():
    book = rs_hadamard_codebook(64, mu=0.5)
    assert book.mu == 0.5 and require_coherence(book, mu_max=0.5, name="codes") == 0.5
    with pytest.raises(ValueError, match="codes has coherence"):
        require_coherence(book, mu_max=0.25, name="codes")


def _accepts(book, *args) -> bool:
    try:
        require_coherence(book, *args)
        return True
    except ValueError:
        return False


def test_require_coherence_default_refuses_just_above_one_half():
    """require_coherence() refuses mu > 1/2: the experiments' codes, and an RS-Hadamard row moved
    towards one it meets at 1/2 (coherence 1/2 + about 1e-6)."""
    base = rs_hadamard_codebook(64, dtype=torch.float64)
    assert not _accepts(experimental_codebook(100, generator=gen(4)))
    i, j = coherence_report(base.omega).pair
    bent = base.omega.clone()
    bent[i] = bent[i] + 2e-6 * torch.sign(bent[i] @ bent[j]) * bent[j]
    bent[i] = bent[i] / bent[i].norm()
    assert not _accepts(bent) and _accepts(base)


def test_require_coherence_accepts_built_codebooks_iff_mu_at_most_one_half():
    """Built codebooks: require_coherence(book, 1/2) accepts exactly when mu <= 1/2 (1/2 inside)."""
    books = [
        build_codebook(8192),
        build_codebook(2048, kind="rademacher", generator=gen(3)),
        build_codebook(64, d_e=300, dtype=torch.float64),
        experimental_codebook(100, generator=gen(4)),
    ]
    for book in books:
        assert _accepts(book, 0.5) == (book.mu <= 0.5)


# --------------------------------------------------------------------------- the codebook file


def test_save_and_load_round_trip_every_kind(tmp_path):
    """Codebook.save then Codebook.load gives the same codes, coherence, kind and params; a path
    and an open file write the same bytes; a bare tensor loads as custom codes."""
    books = (
        build_codebook(64, dtype=torch.float64),
        rademacher_codebook(50, generator=gen(5)),
        experimental_codebook(100, generator=gen(4)),
        Codebook.from_tensor(torch.eye(3, 5)),
    )
    for i, book in enumerate(books):
        path = tmp_path / f"{book.kind}-{i}.pt"
        book.save(path)
        back = Codebook.load(path)
        assert torch.equal(back.omega, book.omega) and back.omega.dtype == book.omega.dtype
        assert (back.mu, back.kind, back.params) == (book.mu, book.kind, book.params)
        with open(tmp_path / "fh.pt", "wb") as fh:
            book.save(fh)
        assert (tmp_path / "fh.pt").read_bytes() == path.read_bytes()
        assert torch.load(path, weights_only=True)["versions"] == provenance.versions()
    torch.save(torch.eye(4), tmp_path / "bare.pt")
    bare = Codebook.load(str(tmp_path / "bare.pt"))
    assert bare.kind == "custom" and bare.N == 4 and bare.mu == 0.0
    assert bare.params == {"N": 4, "d_e": 4}


def test_save_replaces_the_file_whole_and_leaves_no_temporary(tmp_path, monkeypatch):
    path = tmp_path / "cb.pt"
    path.write_bytes(b"old")
    build_codebook(16).save(str(path))
    assert Codebook.load(path).N == 16 and sorted(p.name for p in tmp_path.iterdir()) == ["cb.pt"]

    def full_disk(obj, fh):
        fh.write(b"partial")
        raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 64 vs 0")

    monkeypatch.setattr(torch, "save", full_disk)
    with pytest.raises(ValueError, match=r"cb\.pt: cannot write it \(torch\.save failed: \[enf"):
        build_codebook(4).save(path)
    assert Codebook.load(path).N == 16 and sorted(p.name for p in tmp_path.iterdir()) == ["cb.pt"]
    with pytest.raises(ValueError, match="cannot write it"):
        build_codebook(4).save(tmp_path / "no" / "such" / "cb.pt")


@pytest.mark.parametrize(
    "content, needle",
    [
        (None, r"^'{path}': no such file$"),
        (b"", r"^{path}: not a codebook file .*\(not a torch file: empty or truncated file\)$"),
        (b"hello\n", r"^{path}: not a codebook file .*\(not a torch file: a text file\)$"),
        (bytes(1000), r"^{path}: not a codebook file .*\(not a torch file: all zero bytes\)$"),
        ([1.0, 2.0], r"^{path} holds list, not a tensor or a dict with an 'omega' tensor$"),
        ({"mu": 0.5}, r"^{path} holds dict, not a tensor or a dict with an 'omega' tensor$"),
        ({"omega": torch.eye(4).to_sparse()}, r"^{path} holds a torch\.sparse_coo tensor; "),
        ({"omega": torch.eye(4), "kind": "bogus"}, r"^{path} records the kind 'bogus'; known "),
    ],
)
def test_load_refuses_a_file_that_is_not_a_codebook_in_one_line(content, needle, tmp_path):
    path = tmp_path / "bad.pt"
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        torch.save(content, path)
    with pytest.raises(CodebookFileError, match=needle.format(path=re.escape(str(path)))) as err:
        Codebook.load(str(path))
    assert isinstance(err.value, ValueError) and len(str(err.value).splitlines()) == 1


def test_load_refuses_codes_that_are_not_unit_rows_as_from_tensor_does(tmp_path):
    torch.save({"omega": 2 * torch.eye(3), "kind": "rademacher"}, tmp_path / "x.pt")
    with pytest.raises(ValueError, match="unit norm") as err:
        Codebook.load(tmp_path / "x.pt")
    assert not isinstance(err.value, CodebookFileError)
