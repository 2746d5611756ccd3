"""verify.rounding (the rounding term of the checked bounds), device comparison and moving links,
and the dtype / device in the records and the table."""
import pytest
import torch
from rich.console import Console

from qstr.constructions import validate
from qstr.constructions.links import TwoLayerNet, make_link
from qstr.verify.registry import Result
from qstr.verify.report import table
from qstr.verify.rounding import Rounding, largest, two_layer


def test_term_is_n_eps_scale_and_stated():
    r = Rounding(n=100, scale=3.0, what="N eps |y|max")
    assert r.term == pytest.approx(100 * 2.0 ** -52 * 3.0)
    assert r.within(1.0 + r.term, 1.0) and not r.within(1.0 + 2 * r.term, 1.0)
    assert "N eps |y|max" in str(r) and "float64" in str(r)
    assert Rounding(n=1, scale=1.0, dtype=torch.float32).term == pytest.approx(2.0 ** -23)


def test_terms_add_and_scale():
    a, b = Rounding(n=10, scale=1.0), Rounding(n=5, scale=2.0)
    assert (a + b).term == pytest.approx(a.term + b.term)
    assert (a + b).times(3.0, "L").term == pytest.approx(3 * (a.term + b.term))
    assert largest([a, None, b]) is a


def test_two_layer_scale_is_the_sum_of_magnitudes():
    W1, b1, W2 = torch.tensor([[1.0], [-2.0]]), torch.tensor([0.5, 1.0]), torch.tensor([[3.0, -1.0]])
    r = two_layer(W1, b1, W2, torch.tensor([[2.0]]))
    assert r.n == 1 + 2 + 2 and r.scale == pytest.approx(3 * 2.5 + 1 * 5.0)


def test_same_device_treats_a_missing_index_as_the_current_device():
    assert validate.same_device("cpu", torch.device("cpu"))
    assert not validate.same_device("cpu", "meta")
    if torch.cuda.is_available():
        assert validate.same_device(torch.Generator(device="cuda").device, torch.zeros(1, device="cuda").device)


def test_link_moves_once_and_refuses_inputs_on_another_device():
    link = make_link("teacher", 2, 3, generator=torch.Generator().manual_seed(0))
    moved = link.to("cpu")
    assert moved is not link and torch.equal(moved.net.W, link.net.W)
    net = TwoLayerNet(a=torch.ones(2), W=torch.ones(2, 6), b=torch.zeros(2))
    assert net.to("cpu") is net
    with pytest.raises(ValueError, match="move them once"):
        net.to("meta")(torch.zeros(1, 2, 3))


def _result(cid, device, dtype):
    return Result(id=cid, ref_seed="r", ref_conference="r", statement="s", measured=1.0, bound="<= 1", holds=True,
                  falsifier_caught=True, profile="quick", device=device, seconds=0.1, seed=0, dtype=dtype)


def test_record_and_table_carry_device_and_dtype():
    same = [_result("a", "cpu", "float64"), _result("b", "cpu", "float64")]
    assert same[0].record()["dtype"] == "float64" and same[0].record()["device"] == "cpu"
    t = table(same, "qstr verify")
    assert "device cpu" in t.title and "dtype float64" in t.title and len(t.columns) == 8
    mixed = table([_result("a", "cpu", "float64"), _result("b", "cpu", "float32+float64")], "qstr verify")
    assert "dtype" not in mixed.title and [c.header for c in mixed.columns].count("dtype") == 1
    Console(width=120, file=open("/dev/null", "w")).print(mixed)
