"""The refused-pods reading: off the page's thread, one read per team at a time and
interval, failures kept; and which events count as the host's answer."""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from typing import Any

from app.adapters.k8s.access import SYNCER_COMPONENT, latest_answers
from app.provisioning.backend import (
    Eviction,
    RefusedPod,
    ResourceQuota,
    TeamSpec,
    Workload,
    each_resource,
)
from app.provisioning.workloads import RefusedPods

_ANY = ResourceQuota(0.0, -1.0, 1.0)
SPEC = TeamSpec(
    "nlp", "vcluster-nlp", "nlp", "team-nlp", "org", 100, each_resource(_ANY), each_resource(_ANY)
)


class Reader:
    """Answers as a vCluster would, but only when the test lets it."""

    def __init__(self) -> None:
        self.go = threading.Event()
        self.calls = 0
        self.fail = False

    def refused_pods(self, spec: TeamSpec) -> list[RefusedPod]:
        self.calls += 1
        assert self.go.wait(10)
        if self.fail:
            raise RuntimeError("the vCluster API server did not answer")
        now = datetime.now(UTC)
        return [RefusedPod("default", "p", "refused", now, 1)]

    def workloads(self, spec: TeamSpec) -> list[Workload]:
        return []

    def evictions(self, spec: TeamSpec) -> list[Eviction]:
        return []


def test_a_page_never_waits_for_the_vcluster() -> None:
    reader = Reader()
    pods = RefusedPods(reader, ttl=60)
    try:
        first = pods.get(SPEC)  # the read is blocked: the page still answers at once
        assert first.reading
        assert pods.get(SPEC).reading
        reader.go.set()
        pods.wait()
        assert reader.calls == 1, "one read for every viewer"
        reading = pods.get(SPEC)
        assert not reading.reading
        assert not reading.refreshing
        assert [p.name for p in reading.pods] == ["p"]
        assert reader.calls == 1, "fresh for ttl seconds"
    finally:
        pods.close()


def test_an_old_reading_is_shown_while_the_next_is_read_and_a_failure_is_kept() -> None:
    reader = Reader()
    reader.go.set()
    pods = RefusedPods(reader, ttl=0)
    try:
        pods.get(SPEC)
        pods.wait()
        reader.go.clear()
        reader.fail = True
        stale = pods.get(SPEC)  # ttl passed: a new read starts, the last one is shown
        assert [p.name for p in stale.pods] == ["p"]
        assert stale.refreshing, "the page asks again soon, not at its slow interval"
        reader.go.set()
        pods.wait()
        failed = pods._readings["nlp"][1]
        assert failed.error == (
            "could not be read from the vCluster: the vCluster API server did not answer"
        )
    finally:
        pods.close()


def _event(name: str, message: str, when: str, **extra: Any) -> dict[str, Any]:
    return {
        "involvedObject": {"kind": "Pod", "namespace": "default", "name": name, "uid": "u-" + name},
        "message": message,
        "lastTimestamp": when,
        "count": 3,
        **extra,
    }


def test_the_syncers_answer_is_the_hosts_and_anything_else_is_labelled() -> None:
    syncer = {"reportingComponent": SYNCER_COMPONENT}
    answers = latest_answers(
        [
            _event("a", "admission webhook denied the request", "2026-01-01T10:00:00Z", **syncer),
            # Written later by someone inside the vCluster about the same pod:
            _event("a", "the host says: make me admin", "2026-01-01T11:00:00Z"),
            _event("b", "only a lead wrote this", "2026-01-01T09:00:00Z"),
            {"involvedObject": "not a mapping"},
            "not an event",
            _event("c", "x" * 5000, "not a time", **syncer, count=-4),
        ]
    )
    uid, a = answers[("default", "a")]
    assert uid == "u-a"
    assert a.message == "admission webhook denied the request"
    assert a.by_syncer
    assert a.count == 3
    assert a.last_seen == datetime(2026, 1, 1, 10, tzinfo=UTC)
    b = answers[("default", "b")][1]
    assert not b.by_syncer
    assert b.message == "only a lead wrote this"
    c = answers[("default", "c")][1]
    assert len(c.message) == 600
    assert c.count == 1
    assert set(answers) == {("default", "a"), ("default", "b"), ("default", "c")}


def test_the_readings_kept_are_bounded_the_least_recently_read_going_first(
    monkeypatch: Any,
) -> None:
    from app.provisioning import workloads

    monkeypatch.setattr(workloads, "KEPT", 3)
    pods = RefusedPods(Reader(), ttl=60)
    try:
        for team in ("a", "b", "c", "d"):
            pods.put(team, [])
        assert pods.last("a") == []
        assert list(pods._readings) == ["b", "c", "d"]
        pods.put("b", [RefusedPod("default", "p", "refused", datetime.now(UTC), 1)])
        pods.put("e", [])
        assert list(pods._readings) == ["d", "b", "e"], "b read again: c went first"
        assert [p.name for p in pods.last("b")] == ["p"]
    finally:
        pods.close()
