"""`available()` decides whether the traffic tier runs at all, so it is tested where it is not skipped.

The tier is skipped, with `available()`'s one line, where no network namespace can be made; it must
not be skipped here, where one can (this machine runs the project's tests as root, with util-linux
and iproute2), and its line must name what is missing.
"""

import os

import pytest

from conformance.traffic import netns


@pytest.mark.skipif(os.geteuid() != 0, reason="not root: a namespace then depends on unprivileged user namespaces")
def test_available_as_root():
    assert netns.available() is None


def test_available_gives_one_line_without_the_tools(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    reason = netns._probe.__wrapped__()[1]
    assert reason == "traffic tier skipped: `unshare` (util-linux) is not installed, so no network namespace"
