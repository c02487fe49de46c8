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


def served(a: Answer) -> str | None:
    return None if a.status == 200 else "wanted 200"


def test_a_batch_check_ends_on_the_first_batch_that_passes_whole():
    """A gateway still catching up refuses some of the first batch (sent 10 at a time): the check goes
    on, and ends with the first batch whose every answer passes."""
    seq = [REFUSED, SERVED] * 5 + [SERVED] * 10  # the first 20 mixed, from the 21st on all served
    sent = iter(seq)
    answers_of = client.until_batch_passes(lambda: next(sent, SERVED), served, what="T4", timeout=5, n=20)
    assert len(answers_of) == 20 and all(a is SERVED for a in answers_of)


def test_a_batch_check_that_never_passes_names_the_last_batch():
    mixed = iter([SERVED, REFUSED] * 1000)
    with pytest.raises(NotConsistent) as e:
        client.until_batch_passes(lambda: next(mixed), served, what="T4: side by side", timeout=0.2, n=20)
    line = str(e.value)
    assert line.startswith("T4: side by side: 10 of 20 answers wrong in the last of ")
    assert line.endswith("the first: wanted 200 (HTTP 500 body b'no picker')"), line
