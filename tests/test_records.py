"""kaio.records.frozen: the same class as ``@dataclass(frozen=True)``, made with one exec."""
import copy
import dataclasses
import inspect
import json
import os
import pickle
import subprocess
import sys

import pytest

from kaio.records import frozen


class _Base:
    kind = "base"

    def __repr__(self):
        return "<base repr>"


def _pair():
    """The same class body under both decorators, with each feature kaio's classes use."""
    out = []
    for dec in (dataclasses.dataclass(frozen=True), frozen):
        @dec
        class P(_Base):
            """A record."""
            a: int
            b: tuple = ()
            c: frozenset = dataclasses.field(default_factory=frozenset)
            d: object = dataclasses.field(default=None, compare=False)

            def __post_init__(self):
                object.__setattr__(self, "b", tuple(self.b))

        out.append(P)
    return out


def test_frozen_behaves_as_a_frozen_dataclass():
    dc, fr = _pair()
    for P in (dc, fr):
        p = P(1, [2, 3])
        assert p.b == (2, 3) and p.c == frozenset() and p.d is None       # defaults, post_init
        assert p == P(1, (2, 3), d="ignored") and p != P(2) and p != (1, (2, 3))
        assert hash(p) == hash(P(1, (2, 3), d="other"))
        with pytest.raises(dataclasses.FrozenInstanceError, match="cannot assign to field 'a'"):
            p.a = 5
        with pytest.raises(dataclasses.FrozenInstanceError):
            del p.a
        assert dataclasses.is_dataclass(P) and P.__match_args__ == ("a", "b", "c", "d")
        assert [f.name for f in dataclasses.fields(P)] == ["a", "b", "c", "d"]
        assert dataclasses.replace(p, a=7) == P(7, (2, 3))
        assert dataclasses.asdict(p) == {"a": 1, "b": (2, 3), "c": frozenset(), "d": None}
        assert copy.copy(p) == p == copy.deepcopy(p)
        with pytest.raises(TypeError):
            P()                                                           # a is required
    assert repr(dc(1, d=2)) == repr(fr(1, d=2)).replace(fr.__qualname__, dc.__qualname__)
    assert str(inspect.signature(dc)) == str(inspect.signature(fr))
    assert hash(dc(1, (2,))) == hash(fr(1, (2,)))
    from kaio.regions import Blocked
    assert pickle.loads(pickle.dumps(Blocked(k=4))) == Blocked(k=4) != Blocked(k=2)


def test_frozen_keeps_the_class_s_own_methods_and_inherits():
    @frozen(repr=False)
    class A(_Base):
        x: int

        def __eq__(self, other):
            return isinstance(other, A) and self.x % 2 == other.x % 2

        def __hash__(self):
            return self.x % 2

    @frozen(repr=False)
    class B(A):
        y: int = 0

    assert repr(A(1)) == "<base repr>" and A(1) == A(3) and hash(A(5)) == 1
    assert B(1, 2) == B(1, 2) != B(1, 3) and [f.name for f in dataclasses.fields(B)] == ["x", "y"]
    with pytest.raises(TypeError, match="needs @dataclass"):
        @frozen
        class C:
            z: int = dataclasses.field(init=False, default=0)


_FROZEN_CLASSES = '''
import dataclasses, json, sys
import kaio
import {module}
bad, seen = [], 0
for name, mod in list(sys.modules.items()):
    if not name.startswith("kaio"):
        continue
    for cls in vars(mod).values():
        if isinstance(cls, type) and cls.__module__ == name and dataclasses.is_dataclass(cls):
            seen += 1
            if not cls.__init__.__code__.co_filename.startswith(("<frozen ", "<record ")):
                bad.append(name + "." + cls.__qualname__)
print(json.dumps({"seen": seen, "bad": bad}))
'''


@pytest.mark.parametrize("module", ["kaio", "kaio.backends.cuda"])
def test_import_kaio_makes_its_dataclasses_with_records(module):
    """Every dataclass ``import kaio`` defines is made by ``@frozen`` or ``@record``: made by
    dataclasses (up to six execs each on Python 3.11) they took about half of the import's own
    CPU time (docs/performance.md, "Start-up"). So is every one the CUDA backend's modules add
    (their import is part of the backend's start; cuda.bindings itself is imported later)."""
    p = subprocess.run([sys.executable, "-c", _FROZEN_CLASSES.replace("{module}", module)],
                       capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, KAIO_BACKEND="reference"))
    assert p.returncode == 0, p.stderr[-3000:]
    got = json.loads(p.stdout.strip().splitlines()[-1])
    assert got["seen"] >= 30 and got["bad"] == []


def test_record_behaves_as_a_mutable_dataclass():
    from kaio.records import record

    made = []
    for dec in (dataclasses.dataclass, record):
        @dec
        class M:
            a: int
            items: list = dataclasses.field(default_factory=list)

        made.append(M)
    for M in made:
        m = M(1)
        m.a = 2
        m.items.append(3)
        assert (m.a, m.items) == (2, [3]) and M(1).items is not M(1).items     # a new list each
        assert m == M(2, [3]) != M(2) and M.__hash__ is None
        assert dataclasses.replace(m, a=5) == M(5, [3])
        del m.a
    assert repr(made[0](1)).split("(", 1)[1] == repr(made[1](1)).split("(", 1)[1]
