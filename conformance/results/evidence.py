"""What a failing test leaves behind for a human: Allure attachments.

Attachments are collected before cleanup deletes anything.
"""

from __future__ import annotations

import allure
import pytest
import yaml

from ..wait import trim

REPORTS = pytest.StashKey[dict]()


_Dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def attach_yaml(name: str, obj) -> None:
    body = yaml.dump(trim(obj) if isinstance(obj, dict) else obj, Dumper=_Dumper, sort_keys=False)
    allure.attach(body, name=name, attachment_type=allure.attachment_type.YAML)


def attach_text(name: str, text: str) -> None:
    allure.attach(text, name=name, attachment_type=allure.attachment_type.TEXT)


def attach_namespace_events(kube, namespace: str) -> None:
    try:
        events = kube.list("v1", "Event", namespace).get("items", [])
    except Exception as e:  # evidence is best effort: never hide the test's own failure
        events = [{"error": f"could not list events: {e}"}]
    attach_yaml(f"events in {namespace}", [
        {k: e.get(k) for k in ("type", "reason", "message", "involvedObject", "count", "lastTimestamp")}
        if "error" not in e else e for e in events])


def attach_namespace_objects(kube, namespace: str) -> None:
    """The objects the test created in its namespace, as the server has them now."""
    observed = []
    for api_version, kind, name in list(kube.created.get(namespace, [])):
        try:
            obj = kube.get(api_version, kind, name, namespace)
        except Exception as e:  # best effort, as above
            obj = {"error": f"could not read {kind} {name}: {e}"}
        observed.append(trim(obj) if obj is not None else {"kind": kind, "name": name, "state": "gone"})
    if observed:
        attach_yaml(f"last observed objects in {namespace}", observed)


def attach_failure_state(kube, namespace: str) -> None:
    """Everything worth seeing of a failed test's namespace before cleanup removes it."""
    attach_namespace_objects(kube, namespace)
    attach_namespace_events(kube, namespace)
