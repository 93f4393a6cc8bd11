"""``trajlog runs`` and ``trajlog checkpoints``,
run in-process through :func:`trajlog.cli.main.main` on stores recorded with
the real API.  Each test names, in its docstring, the rule whose removal makes
it fail."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

import trajlog
from trajlog import projections
from trajlog.cli.main import main
from trajlog.cli.run_views import cost_cell
from trajlog.projections.checkpoint_marks import read_marks
from trajlog.projections.envelopes import FINALIZED, STARTED

T0 = 1_800_000_000_000
REV_A, REV_B = "git:aaaa111", "git:bbbb222"


def one_turn(s: Any, text: str = "task", tokens: tuple[int, int] = (900, 40)) -> None:
    with s.turn():
        s.append("user/message", {"content": text})
        s.append("assistant/message", {"content": "ok", "usage": {
            "input_tokens": tokens[0], "output_tokens": tokens[1]}})


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def recorded(tmp_path: Path) -> dict[str, Any]:
    """A session with a run delegating to a subagent's run, then checkpoints
    through human-approved and a resume after the workspace moved."""
    db = str(tmp_path / "runs.db")
    with trajlog.open(db) as store:
        s = store.create_session(cwd="/repo")
        with s.run(model="gpt-x", policy_version="ctx-3") as lead:
            one_turn(s)
            lead.add_cost("inference", 0.0042)
            sub = s.spawn_subagent("review", call_id="t1")
            with sub.run(model="small", parent_run=lead.id) as child:
                one_turn(sub, "review it", (5, 3))
                child.add_cost("tools", 0.5)
        s.append("goal/change", {"revision": 1, "goal": {"text": "fix"}}, source="user")
        s.append("context/injection", {"policy": "p", "selected": []}, source="system")
        s.checkpoint("context-ready", now=T0)
        s.append("assistant/message", {"content": "the check is inverted"})
        s.checkpoint("analysis-complete", now=T0)
        patch = s.checkpoint("patch-prepared", workspace_revision=REV_A, now=T0)
        s.append("human/decision", {"subject": "patch", "value": "approve"},
                 source="human:alice")
        approved = s.checkpoint("human-approved", workspace_revision=REV_A, now=T0)
        paused = s.resume(now=T0, workspace_revision=REV_B)
        resumed = s.resume(patch.seq, now=T0, workspace_revision=REV_A)
        return {"db": db, "sid": s.id, "sub": sub.id, "lead": lead.id, "child": child.id,
                "patch": patch.seq, "approved": approved.seq, "paused": paused,
                "resumed": resumed}


def test_runs_table_shows_each_envelope_field(recorded, capsys):
    """Rule: the table has run id, model, state, integrity verdict, events, the
    four cost surfaces and parent run (drop a column or a surface: fails)."""
    code, out, _ = cli(capsys, "--db", recorded["db"], "runs", recorded["sid"][:8])
    assert code == 0
    header, row = out.splitlines()[:2]
    for name in ("run", "model", "state", "integrity", "events", "inference", "retrieval",
                 "tools", "persistence", "parent run"):
        assert name in header, name
    assert recorded["lead"] in row and "gpt-x" in row and "completed" in row
    assert " ok " in row and "0.0042, 1 req, 900 in, 40 out" in row
    # the subagent's run belongs to the subagent's session, not to this table
    assert recorded["child"] not in out
    code, out, _ = cli(capsys, "--db", recorded["db"], "runs", recorded["sub"][:8])
    assert recorded["child"] in out and recorded["lead"] in out   # as its parent run
    assert "0.5, 1 calls" not in out and "0.5" in out


def test_runs_json_is_the_projection(recorded, capsys):
    """Rule: --json prints projections.runs, one envelope per line, unchanged."""
    code, out, _ = cli(capsys, "runs", recorded["sid"], "--json", "--db", recorded["db"])
    assert code == 0
    rows = [json.loads(line) for line in out.splitlines()]
    with trajlog.open(recorded["db"]) as store:
        want = projections.runs(store.session(recorded["sid"]))
    assert [r["run_id"] for r in rows] == [e.run_id for e in want]
    assert rows[0]["cost"] == want[0].cost and rows[0]["integrity"] == "ok"
    assert rows[0]["cost"]["inference"]["amount"] == pytest.approx(0.0042)


def test_runs_tree_sums_cost_per_delegation_path(recorded, capsys):
    """Rule: --tree walks run_tree (subagents included) and prints each node's
    own cost and its path's total (print only the own cost: fails)."""
    code, out, _ = cli(capsys, "--db", recorded["db"], "runs", recorded["sid"], "--tree")
    assert code == 0
    lead_at, child_at = out.index(recorded["lead"]), out.index(recorded["child"])
    assert lead_at < child_at
    # the lead's inference line: its own (1 request) / the path's (2 requests)
    assert "inference 0.0042, 1 req, 900 in, 40 out / 0.0042, 2 req, 905 in, 43 out" in out
    assert "tools 0.5 / 0.5" in out or "tools - / 0.5" in out
    code, out, _ = cli(capsys, "--db", recorded["db"], "runs", recorded["sid"], "--tree",
                       "--json")
    nodes = [json.loads(line) for line in out.splitlines()]
    assert [n["path"] for n in nodes] == [[recorded["lead"]],
                                          [recorded["lead"], recorded["child"]]]
    assert nodes[0]["total"]["tools"]["amount"] == pytest.approx(0.5)
    assert nodes[0]["run"]["cost"]["tools"]["amount"] == 0


def test_an_integrity_mismatch_exits_1(tmp_path, capsys):
    """Rule: a run whose events do not hash to its recorded digest is a defect:
    exit code 1 and the verdict shown (return 0 regardless: fails)."""
    db = str(tmp_path / "bad.db")
    with trajlog.open(db) as store:
        s = store.create_session(cwd="/r")
        start = s.append(STARTED, {"run_id": "r1", "model": "m"})
        s.append(FINALIZED, {"run_id": "r1", "state": "completed", "integrity": {
            "algorithm": "sha256-chain/1", "first_seq": start.seq, "last_seq": start.seq,
            "digest": "00" * 32}})
        sid = s.id
    code, out, err = cli(capsys, "--db", db, "runs", sid)
    assert code == 1
    assert "mismatch" in out and "do not hash" in out
    assert "integrity mismatch in 1 run(s): r1" in err


def test_runs_without_runs_and_usage_errors(tmp_path, capsys):
    """Rules: no run is said on stderr with exit 0; a missing store and an
    unknown session are usage errors (2), one line with a hint."""
    db = str(tmp_path / "plain.db")
    with trajlog.open(db) as store:
        sid = store.create_session(cwd="/r").id
    code, out, err = cli(capsys, "--db", db, "runs", sid)
    assert code == 0 and out == "" and "records no run" in err
    code, out, err = cli(capsys, "--db", db, "checkpoints", sid)
    assert code == 0 and out == "" and "records no checkpoint" in err
    for command in ("runs", "checkpoints"):
        code, _, err = cli(capsys, "--db", str(tmp_path / "missing.db"), command, "x")
        assert code == 2 and err.startswith("trajlog: error: no store at") and "hint" in err
        code, _, err = cli(capsys, "--db", db, command, "zz")
        assert code == 2 and "no session id starts with 'zz'" in err
    assert not (tmp_path / "missing.db").exists()


def test_stored_markup_and_escapes_stay_text(tmp_path, capsys):
    """Rule: model names and check details are untrusted: rich markup and
    terminal escapes are shown as text (print them raw: fails)."""
    db = str(tmp_path / "hostile.db")
    with trajlog.open(db) as store:
        s = store.create_session(cwd="/r")
        with s.run(model="[bold red]evil[/]\x1b[2J"):
            pass
        sid = s.id
    code, out, _ = cli(capsys, "--db", db, "runs", sid)
    assert code == 0 and "[bold red]evil[/]\\x1b[2J" in out and "\x1b" not in out


def test_checkpoints_show_validity_checks_and_outcomes(recorded, capsys):
    """Rules: each checkpoint with stage, seq and valid / invalidated and why;
    each recovery attempt with every check and its verdict, and the outcome
    (drop the invalidation, a check or the outcome: fails)."""
    code, out, _ = cli(capsys, "--db", recorded["db"], "checkpoints", recorded["sid"])
    assert code == 0
    lines = out.splitlines()
    approved = next(line for line in lines if line.strip().startswith(str(recorded["approved"])))
    assert "human-approved" in approved and "invalidated at seq" in approved
    assert f"workspace-changed ({REV_A} -> {REV_B})" in approved
    patch = next(line for line in lines if line.strip().startswith(str(recorded["patch"]) + " "))
    assert "patch-prepared" in patch and "valid" in patch and "invalidated" not in patch
    paused, resumed = recorded["paused"], recorded["resumed"]
    assert (f"resume from checkpoint {recorded['patch']} (patch-prepared)  -> paused at seq "
            f"{paused.events[-1].seq}, awaiting restart-or-fork") in out
    assert f"-> resumed at seq {resumed.events[-1].seq}" in out
    assert f"invalidated checkpoint(s) [{recorded['approved']}] first" in out
    assert re.search(rf"FAIL workspace-revision +recorded {REV_A}, now {REV_B}", out)
    for name in ("side-effects", "unconfirmed-outcomes", "permissions", "policy-versions",
                 "goal"):
        assert re.search(rf"ok +{name} ", out), name


def test_checkpoints_json_kinds(recorded, capsys):
    """Rule: --json gives one object per checkpoint and recovery, kind first,
    with the recorded verdicts (read_marks' shapes)."""
    code, out, _ = cli(capsys, "--db", recorded["db"], "checkpoints", recorded["sid"],
                       "--json")
    assert code == 0
    rows = [json.loads(line) for line in out.splitlines()]
    assert [r["kind"] for r in rows] == ["checkpoint"] * 4 + ["recovery"] * 2
    cps = {r["seq"]: r for r in rows if r["kind"] == "checkpoint"}
    assert cps[recorded["approved"]]["valid"] is False
    assert cps[recorded["approved"]]["reason"] == "workspace-changed"
    recs = [r for r in rows if r["kind"] == "recovery"]
    assert [r["outcome"] for r in recs] == ["paused", "resumed"]
    assert recs[0]["checks"][0] == {"name": "workspace-revision", "ok": False,
                                    "detail": f"recorded {REV_A}, now {REV_B}"}
    assert recs[0]["reasons"] == [{"check": "workspace-revision",
                                   "detail": f"recorded {REV_A}, now {REV_B}"}]


def test_restart_and_fork_are_shown_as_such(tmp_path, capsys):
    """Rule: run/restart and run/fork are distinct outcomes in the listing."""
    db = str(tmp_path / "rf.db")
    with trajlog.open(db) as store:
        s = store.create_session(cwd="/r")
        s.append("goal/change", {"revision": 1, "goal": {"text": "fix"}}, source="user")
        with s.turn():
            s.append("context/injection", {"policy": "p", "selected": []}, source="system")
        cp = s.checkpoint("context-ready", now=T0)
        s.restart(reason="try again", now=T0)
        s.fork_from(cp.seq, reason="another approach")
        sid = s.id
    code, out, _ = cli(capsys, "--db", db, "checkpoints", sid)
    assert code == 0 and "restart from checkpoint" in out and "-> restarted at seq" in out
    assert "forks from a checkpoint (1)" in out and "another approach" in out


def test_read_marks_skips_malformed_payloads_and_orphan_outcomes(store):
    """Rules: an invalidation naming no checkpoint, an outcome naming no check
    and non-dict payloads change nothing and raise nothing."""
    s = store.create_session(cwd="/r")
    s.append("checkpoint/stage", "not a dict")
    good = s.append("checkpoint/stage", {"stage": "context-ready"})
    s.append("checkpoint/invalidated", {"checkpoint": "0"})
    s.append("checkpoint/invalidated", {"checkpoint": 999})
    s.append("run/resume", {"recovery_check": good.seq})
    rec = s.append("recovery/check", {"checks": [{"name": "goal", "ok": "yes"}, 3]})
    s.append("run/paused", {"recovery_check": rec.seq, "reasons": [1, {"check": "goal"}]})
    s.append("run/resume", {"recovery_check": rec.seq})   # a second outcome: ignored
    marks = read_marks(s.events())
    assert [c["valid"] for c in marks.checkpoints] == [True, True]
    (r,) = marks.recoveries
    assert r["checks"] == [{"name": "goal", "ok": False, "detail": ""}]   # "yes" is not True
    assert r["outcome"] == "paused" and r["reasons"] == [{"check": "goal", "detail": None}]


def test_cost_cell():
    """Rule: the amount first (omitted when zero), then every counter."""
    assert cost_cell({"amount": 0.0, "events": 3}) == "3 ev"
    assert cost_cell({"amount": 1.5, "requests": 2, "custom": 7}) == "1.5, 2 req, 7 custom"
    assert cost_cell({"amount": 0.0}) == "-" and cost_cell(None) == "-"
