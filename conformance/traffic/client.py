"""Requests to a Gateway, as upstream's traffic tests send them, and the answers they judge.

Requests are POSTs with a JSON body like upstream's (`{"model": ..., "prompt": ...}`): an endpoint
picker reads the body, and a gateway that streams bodies must carry it. The answer of a model server
(Gateway API's echo server, or the suite's stand-in) is JSON naming the Pod that served; the test EPP's
verifier adds `x-conformance-test-served-endpoint`. `until_consistent` waits for a state the way the
traffic rules ask: it passes after `times` answers in a row meet the check, never after a sleep, and
fails with one line describing the last answer.
"""

from __future__ import annotations

import http.client
import json
import socket
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

BODY = {"model": "conformance-fake-model",
        "prompt": "Answer with no disclaimers: what are the advantages and disadvantages of genetically modified food?"}
SELECTION_HEADER = "test-epp-endpoint-selection"  # upstream's test EPP keeps only the endpoints named here
SERVED_HEADER = "x-conformance-test-served-endpoint"  # upstream's test EPP: the endpoint the gateway says served


@dataclass(frozen=True)
class Answer:
    status: int  # 0: no HTTP answer at all (see `error`)
    headers: Mapping[str, str] = field(default_factory=dict)  # lower-case names
    body: bytes = b""
    error: str = ""

    @property
    def echo(self) -> dict:
        """The model server's JSON answer ({} when the body is not one)."""
        try:
            data = json.loads(self.body)
        except ValueError:
            return {}
        return data if isinstance(data, dict) else {}

    @property
    def pod(self) -> str | None:
        return self.echo.get("pod")

    @property
    def served(self) -> str | None:
        return self.headers.get(SERVED_HEADER)

    def describe(self) -> str:
        if self.error:
            return f"no answer ({self.error})"
        who = f" served by pod {self.pod}" if self.pod else ""
        text = "" if self.pod else f" body {self.body[:120]!r}"
        return f"HTTP {self.status}{who}{text}"


class UnixHTTPConnection(http.client.HTTPConnection):
    """HTTP over a unix socket (a bridge's, into the embedded cluster's network sandbox)."""

    def __init__(self, path: str, timeout: float):
        super().__init__("localhost", timeout=timeout)
        self.path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.path)


def _connection(where: str, timeout: float) -> http.client.HTTPConnection:
    if where.startswith("unix:"):
        return UnixHTTPConnection(where.removeprefix("unix:"), timeout)
    address, _, port = where.rpartition(":")
    return http.client.HTTPConnection(address.strip("[]"), int(port), timeout=timeout)


def post(target: str, *, host: str = "", path: str = "/", headers: Mapping[str, str] | None = None,
         body: Mapping | None = None, timeout: float = 10.0, via: str | None = None) -> Answer:
    """POST a JSON body to `target` ("address:port"), connecting to `via` instead when given ("address:port"
    or "unix:PATH": how this machine reaches that address); connection failures come back as status 0."""
    address = target.rpartition(":")[0]
    payload = json.dumps(BODY if body is None else body).encode()
    conn = _connection(via or target, timeout)
    try:
        conn.request("POST", path, body=payload, headers={
            "Host": host or address, "Content-Type": "application/json", **(headers or {})})
        res = conn.getresponse()
        return Answer(res.status, {k.lower(): v for k, v in res.getheaders()}, res.read())
    except (OSError, http.client.HTTPException) as e:
        return Answer(0, error=f"{type(e).__name__}: {e}")
    finally:
        conn.close()


def many(send: Callable[[], Answer], n: int = 100, concurrency: int = 10) -> list[Answer]:
    """n answers of `send`, at most `concurrency` at a time (upstream: 100 requests, 10 at a time)."""
    with ThreadPoolExecutor(concurrency) as pool:
        return list(pool.map(lambda _: send(), range(n)))


class NotConsistent(AssertionError):
    """The answers did not meet the check `times` in a row before the deadline."""


def until_consistent(send: Callable[[], Answer], check: Callable[[Answer], str | None], *, what: str,
                     timeout: float, times: int = 3) -> Answer:
    """Send until `times` answers in a row pass `check` (which returns None, or what is wrong).

    A failure names the last answer that was wrong (with what was wrong with it), even when the answers
    after it were right but too few."""
    deadline, good, problem, wrong = time.monotonic() + timeout, 0, None, None
    while True:
        last = send()
        verdict = check(last)
        if verdict:
            good, problem, wrong = 0, verdict, last
        else:
            good += 1
        if good >= times:
            return last
        if time.monotonic() >= deadline:
            if wrong is None:  # every answer right, but fewer than `times` came in time
                problem, wrong = f"only {good} answers came", last
            which = "last answer" if wrong is last else f"last wrong answer, {good} right after it"
            raise NotConsistent(f"{what}: {problem} ({which}: {wrong.describe()}; waited {timeout:g}s "
                                f"for {times} consistent answers)")
        time.sleep(0.05 if verdict else 0)


def until_batch_passes(send: Callable[[], Answer], check: Callable[[Answer], str | None], *, what: str,
                       timeout: float, n: int, concurrency: int = 10) -> list[Answer]:
    """Batches of `n` answers, `concurrency` at a time, until every answer of one batch passes `check`.

    For a behaviour judged on requests side by side, as upstream's tests send them: a gateway still
    catching up (a picker that has just gone, say) may fail some answers of an earlier batch, never
    all of the last one it is given time for. A failure names how many of the last batch were wrong
    and the first of them."""
    deadline, batches = time.monotonic() + timeout, 0
    while True:
        answers = many(send, n, concurrency)
        batches += 1
        wrong = [(problem, a) for a in answers if (problem := check(a))]
        if not wrong:
            return answers
        if time.monotonic() >= deadline:
            problem, answer = wrong[0]
            raise NotConsistent(f"{what}: {len(wrong)} of {n} answers wrong in the last of {batches} batch(es) "
                                f"in {timeout:g}s, the first: {problem} ({answer.describe()})")
        time.sleep(0.05)


def holds(send: Callable[[], Answer], check: Callable[[Answer], str | None], *, what: str, seconds: float,
          pause: float = 0.05) -> int:
    """Send for `seconds`, one request every `pause` seconds at most; every answer must pass `check`.
    Returns how many were sent. For a behaviour that must last, not only begin: a wrong answer that
    comes once the gateway has caught up is a failure however many right ones came before it."""
    start = time.monotonic()
    sent = 0
    while True:
        answer = send()
        sent += 1
        if problem := check(answer):
            raise NotConsistent(f"{what}: {problem} (answer {sent}, {time.monotonic() - start:.1f}s into a "
                                f"{seconds:g}s watch, {sent - 1} right before it: {answer.describe()})")
        if time.monotonic() - start >= seconds:
            return sent
        time.sleep(pause)
