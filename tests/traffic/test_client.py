"""The two ways a traffic check waits: `until_consistent` (a behaviour that must begin) ends on the
first run of right answers; `holds` (one that must last) fails on any wrong answer in its window, however
many right ones came before. Plain answers, no data plane."""

from __future__ import annotations

import pytest

from conformance.traffic import client
from conformance.traffic.client import Answer, NotConsistent

REFUSED, SERVED = Answer(500, body=b"no picker"), Answer(200, body=b'{"pod": "model-server-0"}')


def refused(a: Answer) -> str | None:
    return None if a.status >= 500 else "wanted a 5xx"


def answers(*seq: Answer):
    it = iter(seq)
    return lambda: next(it, seq[-1])


def test_three_refusals_in_a_row_are_enough_to_begin():
    assert client.until_consistent(answers(REFUSED, REFUSED, REFUSED, SERVED), refused,
                                   what="T3", timeout=5) is REFUSED


def test_a_hold_sends_for_its_window_and_counts_what_it_sent():
    sent = client.holds(answers(REFUSED), refused, what="T3", seconds=0.2, pause=0.01)
    assert 5 <= sent <= 21


def test_a_hold_fails_on_the_first_wrong_answer_saying_when_and_what():
    with pytest.raises(NotConsistent) as e:
        client.holds(answers(REFUSED, REFUSED, REFUSED, SERVED), refused, what="T3: FailClose", seconds=5, pause=0)
    line = str(e.value)
    assert line.startswith("T3: FailClose: wanted a 5xx (answer 4, ")
    assert "3 right before it: HTTP 200 served by pod model-server-0" in line
