"""constructions/moved.py: the old path of a moved name warns once, charged to the code that asked
for it, and serves the name from its new home; an unknown name stays an AttributeError."""

import pytest

from qstr.constructions.moved import module_getattr


def test_a_moved_name_warns_at_the_caller_and_comes_from_its_home():
    getattr_ = module_getattr("old.module", {"sqrt": "math"})
    with pytest.warns(DeprecationWarning, match=r"old\.module\.sqrt moved to math\.sqrt") as caught:
        fn = getattr_("sqrt")
    assert fn(9.0) == 3.0 and len(caught) == 1 and caught[0].filename == __file__


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="'old.module' has no attribute 'cbrt'"):
        module_getattr("old.module", {"sqrt": "math"})("cbrt")
