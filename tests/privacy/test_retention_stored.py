"""Retention rules saved in the store: every store opened on it later applies
them (also a ``trajlog retention`` process), rules given to ``open`` override
them for that store object, a stored value that is not rules is a typed error
naming its version, and the sweeper's status is readable."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import time
from typing import Any

import pytest

import trajlog
from trajlog import aio
from trajlog.errors import InvalidArgumentError, StoredRetentionRulesError
from trajlog.memory import RetentionRules
from trajlog.memory.stored_rules import RULES_KEY

NOW = 4_000_000_000_000   # far past every event's time: every TTL has run out
TOOLS_7D = RetentionRules.of(tool_outputs="7d")


def _recorded(store: trajlog.Store) -> str:
    s = store.create_session()
    with s.turn():
        s.append("user/message", {"content": "list it"})
        s.append("assistant/message", {"content": "", "tool_calls": [
            {"id": "c1", "name": "ls", "arguments": {}}]})
        s.append("tool/call", {"call_id": "c1", "name": "ls", "arguments": {}})
        s.append("tool/result", {"call_id": "c1", "output": "TOOLOUTPUT"})
    return s.id


def test_rules_saved_by_one_store_apply_in_every_store_opened_later(tmp_path):
    db = str(tmp_path / "s.db")
    with trajlog.open(db) as store:
        sid = _recorded(store)
        assert store.retention is None and store.stored_retention() is None
        item = store.set_retention(TOOLS_7D, actor="ops")
        assert store.retention == TOOLS_7D   # applied here at once too
        assert store.set_retention(TOOLS_7D, actor="ops") == item   # idempotent
    with trajlog.open(db) as store:   # no rules given: the stored ones
        assert store.retention == TOOLS_7D
        _, events = store.retention_plan(NOW)
        assert events == [(sid, [4], "retention rule tool_outputs: ttl 604800000 ms")]
        # versioned and audited like any global item
        both = RetentionRules.of(tool_outputs="7d", messages="90d")
        assert store.set_retention(both, actor="ops") == item
        view = store.memory(trajlog.memory.Identity(tenant="acme"))
        versions = view.history(item)
        assert [v.version for v in versions] == [1, 2]
        assert [v.decision["actor"] for v in versions] == ["ops", "ops"]
        assert store.verify_memory().ok
    with trajlog.open(db) as store:
        assert store.retention == both
        store.set_retention(None, actor="ops")   # cleared
        assert store.retention is None
    with trajlog.open(db) as store:
        assert store.retention is None and store.retention_plan(NOW) == ([], [])


def test_a_retention_process_applies_the_stored_rules(tmp_path):
    db = str(tmp_path / "c.db")
    with trajlog.open(db) as store:
        sid = _recorded(store)

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "trajlog", "retention", *args, "--db", db],
                              cwd=tmp_path, capture_output=True, text=True, timeout=120,
                              env=dict(os.environ))

    plan = run("--plan", "--now-ms", str(NOW), "--json")
    assert plan.returncode == 0 and plan.stdout == "", plan.stderr   # nothing stored yet
    saved = run("--rule", "tool_outputs=7d", "--save", "--actor", "ops", "--json")
    assert saved.returncode == 0, saved.stderr
    assert json.loads(saved.stdout)["rules"]["tool_outputs"]["ttl_ms"] == 604_800_000
    with trajlog.open(db) as store:
        assert store.retention == TOOLS_7D   # saved by the command, read by a store
    plan = run("--plan", "--now-ms", str(NOW), "--json")
    assert [json.loads(x) for x in plan.stdout.splitlines()] == [
        {"erase": sid, "seqs": [4], "reason": "retention rule tool_outputs: ttl 604800000 ms"}]
    # --rule overrides the stored rules for the one run
    over = run("--plan", "--rule", "messages=1d", "--now-ms", str(NOW), "--json")
    assert [json.loads(x)["seqs"] for x in over.stdout.splitlines()] == [[1, 2]]
    assert run("--clear", "--json").returncode == 0
    assert run("--plan", "--now-ms", str(NOW), "--json").stdout == ""
    refused = run("--save")
    assert refused.returncode == 2 and refused.stderr.startswith("trajlog: error: ")


def test_rules_given_to_open_override_the_stored_ones(tmp_path):
    db = str(tmp_path / "o.db")
    with trajlog.open(db) as store:
        sid = _recorded(store)
        store.set_retention(TOOLS_7D, actor="ops")
    messages = RetentionRules.of(messages="1d")
    with trajlog.open(db, retention=messages) as store:
        assert store.retention == messages
        assert store.stored_retention() == TOOLS_7D   # still stored, not applied here
        _, events = store.retention_plan(NOW)
        assert [(s, seqs) for s, seqs, _ in events] == [(sid, [1, 2])]
        store.retention = TOOLS_7D.__class__()   # assigning: this store object only
    with trajlog.open(db) as store:
        assert store.retention == TOOLS_7D


@pytest.mark.parametrize(("content", "rule"), [
    ({"retention_rules": {"tool_outputs": "7 weeks"}}, "tool_outputs"),
    ({"retention_rules": {"nope": "7d"}}, "nope"),
    ({"retention_rules": {"per_pass": 0}}, "per_pass"),
    ({"retention_rules": ["7d"]}, None),
    ({"rules": {}}, None),
    ("7d", None),
])
def test_a_stored_value_that_is_not_rules_is_a_typed_error_naming_its_version(
        tmp_path, content, rule):
    db = str(tmp_path / "m.db")
    with trajlog.open(db) as store:
        item = store.deploy_global("policy", content, key=RULES_KEY, actor="someone")
        with pytest.raises(StoredRetentionRulesError) as info:
            store.stored_retention()
    assert (info.value.item, info.value.version, info.value.rule) == (item, 1, rule)
    assert item in str(info.value) and "version 1" in str(info.value)
    with pytest.raises(StoredRetentionRulesError):
        trajlog.open(db)   # no store object applies rules it cannot read
    with trajlog.open(db, retention=TOOLS_7D) as store:   # an override still opens it
        store.set_retention(None, actor="ops")   # ... and mends it
    with trajlog.open(db) as store:
        assert store.retention is None


def test_saving_rules_checks_them_and_names_its_actor(tmp_path):
    with trajlog.open(str(tmp_path / "a.db")) as store:
        with pytest.raises(TypeError):
            store.set_retention({"tool_outputs": "7d"}, actor="ops")   # type: ignore[arg-type]
        with pytest.raises(InvalidArgumentError):
            store.set_retention(TOOLS_7D, actor="")
        assert store.stored_retention() is None


def test_the_async_store_saves_and_reads_the_stored_rules(tmp_path):
    db = str(tmp_path / "y.db")

    async def main() -> None:
        async with await aio.open(db) as astore:
            await astore.set_retention(TOOLS_7D, actor="ops")
            assert await astore.stored_retention() == TOOLS_7D
            status = await astore.sweeper_status()
            assert not status.running and status.passes == 0
        async with await aio.open(db) as astore:
            assert astore.retention == TOOLS_7D

    asyncio.run(main())


def _wait(check: Any, what: str) -> None:
    """Wait until ``check()`` (a bound on the wait, never a timing assertion)."""
    deadline = time.monotonic() + 60
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


def test_the_sweeper_status_reports_its_passes(tmp_path):
    db = str(tmp_path / "w.db")
    with trajlog.open(db) as store:
        _recorded(store)
        store.set_retention(RetentionRules.of(tool_outputs="1ms", sweep_seconds=0.05),
                            actor="ops")
    with trajlog.open(db) as store:   # the stored rules start the sweeper
        assert store.sweeper_status().running
        _wait(lambda: store.sweeper_status().passes >= 1, "a background pass")
        status = store.sweeper_status()
        assert status.last is not None and status.errors == ()
        report = store.sweep_retention(NOW)
        assert store.sweeper_status().passes > status.passes
        assert store.sweeper_status().last is not None
    assert not store.sweeper_status().running
    assert report.read >= 0
    assert not [t for t in threading.enumerate() if t.name == "trajlog-retention"]
