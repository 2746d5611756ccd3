"""Each check's evidence label means what it says (docs/claims.md, "What a check rests on").

A ``built`` check measures the object users get inside the check: run on inputs where every built
object (a module, a tensor of weights or codes, a saved file) is replaced by a stand-in whose every
use raises, and with the claim's builders refusing to build, it must raise or fail. One that still
holds read only records, formulas or numbers (issue 53). A ``certified`` check encloses the built
object's weights, so it is held to the same (issue 58), unless it is an agreement of a bound's
float64 evaluation with its enclosure.
"""

import copy
import dataclasses
import functools
import inspect
import os
import pathlib
import types

import pytest
import torch

from qstr.verify.claims import all_claims

CLAIMS = all_claims()


class PoisonedUse(RuntimeError):
    """A check used a built object the test replaced."""


def _refuse(self, *args, **kwargs):
    raise PoisonedUse(f"used the built object at {object.__getattribute__(self, 'where')}")


class Poisoned:
    """Stands for one built object: reading an attribute, calling, indexing, iterating,
    converting, comparing or computing with it raises ``PoisonedUse``."""

    def __init__(self, where: str):
        object.__setattr__(self, "where", where)

    def __getattr__(self, name):
        _refuse(self)

    def __repr__(self) -> str:
        return f"Poisoned({object.__getattribute__(self, 'where')})"

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        raise PoisonedUse(f"torch.{getattr(func, '__name__', func)} on a built object")


for _name in (
    "__call__ __getitem__ __setitem__ __iter__ __len__ __contains__ __bool__ __float__ __int__ "
    "__index__ __complex__ __array__ __eq__ __ne__ __lt__ __le__ __gt__ __ge__ __hash__ __neg__ "
    "__pos__ __abs__ __add__ __radd__ __sub__ __rsub__ __mul__ __rmul__ __truediv__ "
    "__rtruediv__ __floordiv__ __rfloordiv__ __mod__ __rmod__ __pow__ __rpow__ __matmul__ "
    "__rmatmul__ __fspath__ __setattr__ __reduce_ex__ __copy__ __deepcopy__ __format__"
).split():
    setattr(Poisoned, _name, _refuse)

LEAVES = (int, float, complex, bool, type(None), bytes, type, types.ModuleType)
CALLABLES = (types.FunctionType, types.BuiltinFunctionType, types.MethodType, type)


def _is_file(value) -> bool:
    return (
        isinstance(value, (str, pathlib.PurePath))
        and len(str(value)) < 4096
        and (os.path.isfile(value) or os.path.isdir(value))
    )


def poisoned(value, where: str = "inputs", memo=None):
    """``value`` with every built object in it (an ``nn.Module``, a tensor, the path of an existing
    file) replaced by a ``Poisoned`` stand-in; records, numbers and functions are kept, rebuilt
    where they hold a built object."""
    memo = {} if memo is None else memo
    if id(value) in memo:
        return memo[id(value)]
    if isinstance(value, (torch.nn.Module, torch.Tensor)) or _is_file(value):
        out = Poisoned(where)
    elif isinstance(value, LEAVES) or isinstance(value, CALLABLES) or isinstance(value, str):
        out = value
    elif isinstance(value, tuple):
        items = [poisoned(v, f"{where}[{i}]", memo) for i, v in enumerate(value)]
        out = type(value)(*items) if hasattr(value, "_fields") else _rebuilt(value, items)
    elif isinstance(value, list):
        out = [poisoned(v, f"{where}[{i}]", memo) for i, v in enumerate(value)]
    elif isinstance(value, dict):
        out = {k: poisoned(v, f"{where}[{k!r}]", memo) for k, v in value.items()}
    elif hasattr(value, "__dict__"):
        out = copy.copy(value)
        memo[id(value)] = out
        for name, v in vars(value).items():
            if isinstance(getattr(type(value), name, None), functools.cached_property):
                del vars(out)[name]  # a measurement cached by an earlier run: measured again
            else:
                object.__setattr__(out, name, poisoned(v, f"{where}.{name}", memo))
    else:
        out = value
    memo[id(value)] = out
    return out


def _rebuilt(value: tuple, items: list):
    """A tuple, or a tuple subclass rebuilt from its items (a stand-in when it refuses them)."""
    if type(value) is tuple:
        return tuple(items)
    try:
        return type(value)(items)
    except Exception:  # noqa: BLE001 - a tuple type that cannot hold stand-ins stands in whole
        return Poisoned(type(value).__name__)


def test_the_stand_in_refuses_every_use():
    """The stand-in raises on the uses a check makes of a module, a tensor or a file."""
    p = Poisoned("x")
    for use in (
        lambda: p(torch.ones(1)),
        lambda: p.weight,
        lambda: p[0],
        lambda: float(p),
        lambda: torch.ones(2) @ p,
        lambda: torch.linalg.norm(p),
        lambda: open(p),
        lambda: p == 1,
        lambda: list(p),
    ):
        with pytest.raises((PoisonedUse, TypeError)):
            use()


def test_records_are_kept_and_built_objects_replaced(tmp_path):
    """Numbers and records stay as they are; modules, tensors and existing files are stand-ins,
    also inside dataclasses, named tuples, lists and dicts."""

    @dataclasses.dataclass(frozen=True)
    class Case:
        d_h: int
        net: torch.nn.Module
        weights: tuple
        file: str

    f = tmp_path / "m.pt"
    f.write_text("x")
    case = Case(384, torch.nn.Linear(2, 2), (torch.ones(2), 0.5), str(f))
    out = poisoned({"cases": [case], "eps": 0.1})
    got = out["cases"][0]
    assert got.d_h == 384 and out["eps"] == 0.1 and got.weights[1] == 0.5
    assert all(isinstance(v, Poisoned) for v in (got.net, got.weights[0], got.file))
    assert isinstance(case.net, torch.nn.Linear)  # the honest inputs are left as they are


class Cached:
    def __init__(self, net):
        self.net = net

    @functools.cached_property
    def measured(self) -> float:
        return float(self.net.weight.detach().sum())


def test_a_cached_measurement_is_dropped_not_kept():
    """A value a ``cached_property`` measured on the honest object before is not carried into
    the stand-in's copy: reading it measures again, on the stand-in, and raises."""
    honest = Cached(torch.nn.Linear(2, 2))
    assert honest.measured == float(
        honest.net.weight.detach().sum()
    )  # cached, as an earlier run leaves it
    with pytest.raises(PoisonedUse):
        _ = poisoned(honest).measured


BUILT = [
    (cid, check.name)
    for cid, claim in CLAIMS.items()
    for check in claim.checks_in("quick")
    # a certified check encloses the built weights too, except a bound's enclosure against its
    # float64 evaluation (an agreement: thm-4's and thm-7's bounds), which reads no built object
    if check.evidence == "built" or (check.evidence == "certified" and not check.agreement)
]


def _builders_refused(check, claim, monkeypatch) -> None:
    """The claim's builders (``Claim.builds``), as the check's module names them, raise when
    called: a check that builds its object inside itself uses one."""
    names = inspect.unwrap(check.fn).__globals__
    for name, value in list(names.items()):
        if any(value is b for b in claim.builds):
            monkeypatch.setitem(names, name, Poisoned(f"the builder {name}"))


@pytest.mark.parametrize("cid, name", BUILT)
def test_a_built_check_measures_the_built_object(cid, name, declared, monkeypatch):
    """A ``built`` check raises or fails when every built object in its inputs is a stand-in
    and the claim's builders refuse to build: it measured the object users get (in its inputs,
    or built inside the check), not a record of it."""
    d = declared(cid)
    inputs = poisoned(d.inputs)
    _builders_refused(d.claim.check_named(name), d.claim, monkeypatch)
    try:
        verdict = d.claim.check_named(name).run(inputs, d.ctx)
    except Exception:  # noqa: BLE001 - using a stand-in raises: the check reads the object
        return
    assert not verdict.holds, (
        f"{cid} / {name} is labelled built but holds without any built object "
        f"(measured {verdict.measured}, bound {verdict.bound}): it reads records"
    )
