"""``--view`` on ``show``, ``chat``, ``view`` and ``export``, and ``trajlog
probes`` with its exit status -- each a subprocess, as a user runs it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import trajlog
from trajlog.projections.context import ContextPolicy, build_context

SECRET = "AKIAIOSFODNN7EXAMPLE"


def run(*args: str, cwd: Path, code: int = 0) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([sys.executable, "-m", "trajlog", *args], cwd=cwd,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == code and "Traceback" not in result.stderr, (
        result.returncode, result.stdout, result.stderr)
    return result


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    where = tmp_path_factory.mktemp("reader")
    path = where / "r.db"
    with trajlog.open(str(path)) as st:
        s = st.create_session(cwd="/w")
        with s.turn():
            s.append("user/message", {"content": "fix it"}, data_class="public")
            s.append("assistant/message", {"content": "", "tool_calls": [
                {"id": "c1", "name": "cat", "arguments": {}}]}, data_class="public")
            s.append("tool/call", {"call_id": "c1", "name": "cat"}, data_class="public")
            s.append("tool/result", {"call_id": "c1", "output": f"KEY={SECRET}"},
                     data_class="internal")
            s.append("user/message", {"content": "ssn 078-05-1120"}, data_class="restricted")
        s.append("approval/grant", {"action": "push", "expires_at": 1})
        s.append("model/policy", {"model": "ext", "allowed_data_classes": ["public"]})
        build_context(s, target_model="in-house")
        sid = s.id
    return {"dir": where, "db": str(path), "sid": sid}


def test_show_by_view_keeps_every_seq(db):
    base = ["show", str(db["sid"]), "--db", str(db["db"]), "--json"]
    raw = [json.loads(x) for x in run(*base, cwd=db["dir"]).stdout.splitlines()]
    assert SECRET in json.dumps(raw)
    for role in ("developer", "auditor", "external-model"):
        extra = ["--model", "ext"] if role == "external-model" else []
        out = run(*base, "--view", role, *extra, cwd=db["dir"]).stdout
        seen = [json.loads(x) for x in out.splitlines()]
        assert [e["seq"] for e in seen] == [e["seq"] for e in raw]
        assert SECRET not in out and "078-05-1120" not in out
        assert any(e["data"].get("withheld", {}).get("view") == role for e in seen)
    text = run("show", str(db["sid"]), "--db", str(db["db"]), "--view", "auditor",
               cwd=db["dir"]).stdout
    assert "[restricted]" in text and "[unclassified]" in text
    assert '"expired":true' in text and '"data_classes":{"internal":[4],"public":[1,2]}' in text
    assert '0  ' in text and "turn/start           {}" in text   # nothing to withhold


def test_chat_by_view_shows_the_gap(db):
    out = run("chat", str(db["sid"]), "--db", str(db["db"]), "--view", "developer", "--full",
              cwd=db["dir"]).stdout
    assert "[REDACTED:aws_access_key]" in out and SECRET not in out
    assert "withheld from the developer view: data_class.restricted" in out
    ext = run("chat", str(db["sid"]), "--db", str(db["db"]), "--view", "external-model",
              "--model", "ext", "--full", cwd=db["dir"]).stdout
    assert "fix it" in ext and "KEY=" not in ext
    bad = run("chat", str(db["sid"]), "--db", str(db["db"]), "--model", "ext",
              cwd=db["dir"], code=2)
    assert "--model goes with --view external-model" in bad.stderr


def test_export_and_view_by_view(db, tmp_path):
    out = tmp_path / "audit.jsonl"
    run("export", str(db["sid"]), "--db", str(db["db"]), "-o", str(out), "--view", "auditor",
        cwd=db["dir"])
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert lines[0]["trajlog"] == "trajlog-view/1" and lines[0]["view"] == "auditor"
    assert [x["seq"] for x in lines[1:-1]] == list(range(len(lines) - 2))
    assert lines[-1]["end"]["withheld"] >= 5
    refused = run("export", str(db["sid"]), "--db", str(db["db"]), "-o",
                  str(tmp_path / "a.tlog"), "--view", "auditor", cwd=db["dir"], code=2)
    assert "jsonl" in refused.stderr and not (tmp_path / "a.tlog").exists()
    page = tmp_path / "dev.html"
    run("view", str(db["sid"]), "--db", str(db["db"]), "-o", str(page), "--view", "developer",
        cwd=db["dir"])
    html = page.read_text()
    assert SECRET not in html and "(developer view)" in html


def test_probes_exit_status_gates_on_leaks(db, tmp_path):
    ok = run("probes", str(db["sid"]), "--db", str(db["db"]), cwd=db["dir"])
    assert "no pollutant reached the model input" in ok.stdout
    weak = tmp_path / "weak.json"
    weak.write_text(json.dumps(ContextPolicy(exclude=()).config()))
    leaked = run("probes", str(db["sid"]), "--db", str(db["db"]), "--policy", str(weak),
                 "--json", cwd=db["dir"], code=1)
    report = json.loads(leaked.stdout)
    assert report["ok"] is False
    assert {p["name"] for p in report["probes"] if p["leaked"]} == {
        "rejected-conclusion", "other-branch", "web-instruction", "expired-approval"}
    run("probes", str(db["sid"]), "--db", str(db["db"]), "--policy", "strict", cwd=db["dir"])
    bad = run("probes", str(db["sid"]), "--db", str(db["db"]), "--policy", "lax",
              cwd=db["dir"], code=2)
    assert "--policy lax" in bad.stderr
    # the probed session is as it was: the scratch forks are gone
    listed = run("ls", "-a", "--json", "--db", str(db["db"]), cwd=db["dir"]).stdout
    assert [json.loads(x)["id"] for x in listed.splitlines()] == [db["sid"]]
