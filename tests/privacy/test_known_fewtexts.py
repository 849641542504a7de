"""The held-values search of a few texts that cannot hold one (a run's output: its keys
and empty streams) answers at once, never waiting for the index of a large result."""

from __future__ import annotations

import asyncio
import random
import threading

from codemode.privacy.known import FEW, KnownValues, _unsearchable
from codemode.privacy.layers import _after_send

from .reference import searchable

HELD = {"Anna Lee Smith": "[PERSON_abcdefghij]", "6505550123": "[PHONE_bcdefghijk]"}


def test_the_batch_test_of_searchable_values_agrees_with_the_one_by_one_test() -> None:
    rnd = random.Random(5)
    alphabet = "aZ09 .-\x00é٣"
    values = ["", "abc", "abcd", "Abcd", "12345", "123456", "١٢٣٤٥", "active", "a\x00bcdef"]
    values += ["".join(rnd.choice(alphabet) for _ in range(rnd.randrange(9))) for _ in range(3000)]
    bad = _unsearchable(values)
    assert [v in bad for v in values] == [not searchable(v) for v in values]


def test_a_runs_output_of_keys_and_empty_streams_does_not_wait_for_the_index() -> None:
    known = KnownValues(HELD)
    texts = ["stdout", "", "stderr", "", "warnings", "value", "ok", "12345"]
    assert len(texts) <= FEW
    done = threading.Event()

    def look() -> None:
        known.find(texts)
        done.set()

    with known._lock:  # the index being built in another thread
        threading.Thread(target=look, daemon=True).start()
        assert done.wait(10)
    assert known.find(texts) == ({}, {})


def test_a_few_texts_holding_a_held_value_are_still_searched() -> None:
    known = KnownValues(HELD)
    texts = [
        "stdout",
        "ok",
        "Call Anna Lee Smith",
        "6505550123",
        "x\x00Anna Lee Smith",
        "é 6505550123",
    ]
    whole, inside = known.find(texts)
    assert whole == {3: "PHONE"}
    assert inside == {2: [(5, 19, "PERSON")], 4: [(2, 16, "PERSON")], 5: [(2, 12, "PHONE")]}


def test_the_index_of_a_results_new_values_starts_on_the_loops_next_turn() -> None:
    ran: list[str] = []
    _after_send(lambda: ran.append("outside a loop"))
    assert ran == ["outside a loop"]

    async def call() -> None:
        _after_send(lambda: ran.append("after the send"))
        ran.append("the result encoded for the worker")
        await asyncio.sleep(0)

    asyncio.run(call())
    assert ran[1:] == ["the result encoded for the worker", "after the send"]
