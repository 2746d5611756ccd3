"""report_public_path (constructions/public_path.py): a split module's names report the path users
import them from, methods included; their code stays where it is."""

from qstr.constructions.public_path import report_public_path


class _Record:
    def method(self):
        return 1

    @classmethod
    def build(cls):
        return cls()

    @staticmethod
    def helper():
        return 2

    @property
    def size(self):
        return 3


def _function():
    return 4


def test_a_class_its_methods_and_a_function_report_the_public_path():
    here = __name__
    assert _Record.__module__ == here and _Record.build.__module__ == here
    report_public_path("somewhere.public", _Record, _function)
    members = (_Record, _Record.method, _Record.build, _Record.helper, _Record.size.fget, _function)
    assert [m.__module__ for m in members] == ["somewhere.public"] * len(members)
    assert _Record.build.__func__.__code__.co_filename == __file__
    assert (_Record().method(), _Record.helper(), _Record().size, _function()) == (1, 2, 3, 4)
