"""Pollution probes (trajlog.api.probes): five pollutants planted in a scratch
fork, the verdict per probe, the fork deleted, the probed session untouched."""

from __future__ import annotations

import pytest

from trajlog import errors
from trajlog.api.probes import PROBES, run_probes
from trajlog.projections.context import ContextPolicy

REASONS = {"stale-file": "file.snapshot.stale", "rejected-conclusion": "event.status.rejected",
           "other-branch": "branch.other", "web-instruction": "source.untrusted",
           "expired-approval": "permission.expired"}


def worked(store):
    s = store.create_session(cwd="/repo", metadata={"title": "probe me"})
    with s.turn():
        s.append("user/message", {"content": "fix the login bug"})
        s.append("assistant/message", {"content": "the check is inverted"})
    return s


def snapshot(store, s, tmp_path, name):
    path = tmp_path / f"{name}.jsonl"
    store.export(s.id, path)
    return s.last_seq, s._head(), path.read_bytes()


def test_the_default_policy_keeps_every_pollutant_out(store, tmp_path):
    s = worked(store)
    before = snapshot(store, s, tmp_path, "before")
    sessions = sorted(h.id for h in store.sessions())
    forks: list[str] = []
    report = run_probes(store, s.id, on_fork=forks.append)
    assert report.ok and report.leaked == []
    assert [p.name for p in report.probes] == list(PROBES)
    for p in report.probes:
        assert p.reason == REASONS[p.name] and p.where == () and p.marker.startswith("PROBE-")
    assert len({p.marker for p in report.probes}) == len(PROBES)
    # the probed session: same head, same bytes; the scratch fork is gone
    assert snapshot(store, s, tmp_path, "after") == before
    assert sorted(h.id for h in store.sessions()) == sessions
    with pytest.raises(errors.SessionDeletedError):
        store.session(forks[0])


def test_a_weak_policy_shows_its_leaks(store):
    s = worked(store)
    report = run_probes(store, s.id, ContextPolicy(exclude=()))
    assert not report.ok
    assert set(report.leaked) == set(PROBES) - {"stale-file"}
    leaked = {p.name: p for p in report.probes}
    assert leaked["web-instruction"].where == ("messages",)
    assert leaked["other-branch"].reason is None
    # a stale snapshot is stale whatever the exclusions: the builder's own rule
    assert leaked["stale-file"].reason == "file.snapshot.stale"


def test_the_scratch_fork_is_deleted_when_probing_fails(store):
    s = worked(store)
    forks: list[str] = []

    def fail(fork_id: str) -> None:
        forks.append(fork_id)
        raise RuntimeError("host gave up")

    with pytest.raises(RuntimeError, match="host gave up"):
        run_probes(store, s.id, on_fork=fail)
    with pytest.raises(errors.SessionDeletedError):
        store.session(forks[0])
    with pytest.raises(errors.ContextBudgetError):   # the build itself refusing
        run_probes(store, s.id, ContextPolicy(budget_chars=100, reserved_chars=10),
                   on_fork=forks.append)
    with pytest.raises(errors.SessionDeletedError):
        store.session(forks[1])


def test_a_session_in_a_turn_is_probed_from_its_last_completed_turn(store):
    s = worked(store)
    s.append("turn/start", {})
    s.append("user/message", {"content": "and the tests"})
    head = s.last_seq
    assert run_probes(store, s.id).ok
    assert s.last_seq == head
    empty = store.create_session()
    with pytest.raises(errors.InvalidArgumentError, match="no completed turn"):
        run_probes(store, empty.id)
    with pytest.raises(errors.InvalidArgumentError):
        run_probes(store, s.id, {"exclude": []})   # type: ignore[arg-type]


def test_a_model_policy_is_probed_for_its_target(store):
    s = worked(store)
    s.append("model/policy", {"model": "ext", "allowed_data_classes": ["public"]})
    weak = ContextPolicy(exclude=())
    report = run_probes(store, s.id, weak, target_model="ext")
    # unclassified pollutants count as internal: the model's policy keeps them out
    assert report.ok
    assert {p.reason for p in report.probes} == {"data_class.not_allowed_for_model",
                                                 "file.snapshot.stale"}


def test_a_closed_session_of_another_branch_is_probed_as_it_is(store, tmp_path):
    s = store.create_session(metadata={"branch": "feature"})
    with s.turn():
        s.append("user/message", {"content": "on the feature branch"})
    s.close()
    before = snapshot(store, s, tmp_path, "closed")
    report = run_probes(store, s.id)
    assert report.ok and {p.name: p.reason for p in report.probes}["other-branch"] == \
        "branch.other"
    assert snapshot(store, s, tmp_path, "closed-after") == before


def test_a_probe_crowded_out_by_a_limit_is_inconclusive_not_kept_out(store):
    s = worked(store)
    default = ContextPolicy()
    weak = ContextPolicy(exclude=tuple(x for x in default.exclude
                                       if x not in ("event.status.rejected", "branch.other")),
                         recent_messages=1)
    report = run_probes(store, s.id, weak)
    probe = {p.name: p for p in report.probes}["rejected-conclusion"]
    # no rule kept the rejected conclusion out: the later plants pushed it out of the window
    assert probe.reason == "limit.recent_messages" and not probe.leaked
    assert probe.inconclusive and report.inconclusive == ["rejected-conclusion"]
    assert report.leaked == ["other-branch"] and not report.ok
    assert not any(p.inconclusive for p in run_probes(store, s.id).probes)


@pytest.mark.parametrize("kw", [{"now": "x"}, {"now": 1.5}, {"now": -1}, {"now": True},
                                {"on_fork": 5}])
def test_bad_arguments_are_refused_before_a_fork_is_made(store, kw):
    s = worked(store)
    sessions = sorted(h.id for h in store.sessions())
    with pytest.raises(errors.ArgumentTypeError):
        run_probes(store, s.id, **kw)
    assert sorted(h.id for h in store.sessions()) == sessions
