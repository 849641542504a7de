"""What the worker-side pickler saves by value, what it refuses, and what it names."""

from __future__ import annotations

import builtins
import pickle
from typing import Any

import pytest

from codemode_worker import checkpoint


def _ns(code: str) -> dict[str, Any]:
    ns: dict[str, Any] = {"__name__": "__main__", "__builtins__": builtins}
    exec(code, ns)
    return ns


def _round_trip(code: str) -> tuple[dict[str, Any], dict[str, str]]:
    data, _, skipped = checkpoint.dumps(_ns(code))
    fresh: dict[str, Any] = {"__name__": "__main__", "__builtins__": builtins}
    checkpoint.loads(data, fresh)
    return fresh, skipped


def test_functions_closures_and_recursion_defined_in_the_session_come_back() -> None:
    ns, _ = _round_trip(
        "def fact(n): return 1 if n < 2 else n * fact(n - 1)\n"
        "def adder(k):\n    def add(v): return v + k\n    return add\n"
        "add3 = adder(3)\nsq = lambda z, p=2: z ** p\n"
    )
    assert ns["fact"](5) == 120
    assert ns["add3"](1) == 4
    assert ns["sq"](3) == 9


def test_restored_functions_see_the_restored_namespace() -> None:
    ns, _ = _round_trip("limit = 10\ndef over(v): return v > limit\n")
    ns["limit"] = 100
    assert ns["over"](50) is False


def test_classes_dataclasses_and_abcs_defined_in_the_session_come_back() -> None:
    ns, _ = _round_trip(
        "import abc\nfrom dataclasses import dataclass, field, asdict\n"
        "@dataclass\nclass Point:\n    x: int\n    tags: list = field(default_factory=list)\n"
        "class Base(abc.ABC):\n    @abc.abstractmethod\n    def name(self): ...\n"
        "class Impl(Base):\n    def name(self): return 'impl:' + type(self).__name__\n"
        "p = Point(1, ['a'])\ni = Impl()\n"
    )
    assert ns["asdict"](ns["p"]) == {"x": 1, "tags": ["a"]}
    assert isinstance(ns["p"], ns["Point"])
    assert ns["i"].name() == "impl:Impl"
    with pytest.raises(TypeError):
        ns["Base"]()  # still abstract


def test_modules_come_back_by_name_and_shared_references_stay_shared() -> None:
    ns, _ = _round_trip("import json\ndata = {'a': [1]}\nsame = data\n")
    assert ns["json"].dumps([1]) == "[1]"
    assert ns["same"] is ns["data"]


def test_names_that_cannot_be_saved_are_listed_with_the_reason_and_the_rest_is_kept() -> None:
    ns, skipped = _round_trip(
        "import threading, enum\nlock = threading.Lock()\ngen = (i for i in range(3))\n"
        "class Color(enum.Enum):\n    RED = 1\nkept = 'yes'\n"
    )
    assert set(skipped) == {"lock", "gen", "Color"}
    assert "lock" in skipped["lock"] and "generator" in skipped["gen"]
    assert "metaclass" in skipped["Color"]
    assert ns["kept"] == "yes" and "lock" not in ns


def test_codemode_names_are_not_saved() -> None:
    from codemode_worker.errors import ToolError

    _data, names, _ = checkpoint.dumps(_ns("x = 1") | {"ToolError": ToolError})
    assert names == ["x"]


def test_a_checkpoint_of_another_python_version_is_refused_naming_both() -> None:
    data, _, _ = checkpoint.dumps(_ns("x = 1"))
    forged = data.replace(checkpoint.PYTHON.encode(), b"2.7", 1)
    with pytest.raises(checkpoint.CheckpointError, match=r"Python 2\.7.*Python 3\."):
        checkpoint.loads(forged, {})


def test_bytes_that_are_not_a_checkpoint_are_refused() -> None:
    with pytest.raises(checkpoint.CheckpointError, match="not a codemode checkpoint"):
        checkpoint.loads(pickle.dumps({"x": 1}), {})


def test_a_name_skipped_before_is_saved_again_once_it_can_be() -> None:
    ns = _ns("import threading\nbox = [threading.Lock()]\nkept = 1")
    _, names, skipped = checkpoint.dumps(ns)
    assert set(skipped) == {"box"} and names == ["kept", "threading"]
    ns["box"].clear()  # the same list, now picklable
    _, names, skipped = checkpoint.dumps(ns)
    assert skipped == {} and "box" in names
