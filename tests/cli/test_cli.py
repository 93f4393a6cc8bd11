"""The command line, run as a subprocess on the store the demo makes (and on
stores damaged or crashed on purpose): every command, its --json output, its
exit code, and errors that are one line with a hint and never a traceback."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import trajlog
from kits.tamper import flip_frame_bits
from trajlog.cli.main import cli, main

SQLITE_COPY = "clones a store by copying its file"

DATA = Path(__file__).resolve().parents[1] / "data"
# The light runs of the suite (pure-Python kernel, sanitizer build) keep the
# tests whose outcome depends on the kernel; the whole CLI suite runs once.
QUICK = os.environ.get("TRAJLOG_CLI") == "quick"
whole_suite_only = pytest.mark.skipif(QUICK, reason="TRAJLOG_CLI=quick: runs in the C-kernel "
                                      "run")


def run(*args: str, cwd: Path, env: dict[str, str] | None = None,
        stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "trajlog", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120, input=stdin,
                          env={**os.environ, **(env or {})})


def one_line_error(result: subprocess.CompletedProcess[str], code: int) -> str:
    assert result.returncode == code, (result.returncode, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("trajlog: error: "), result.stderr
    assert "(hint: " in lines[0]
    return lines[0]


@pytest.fixture(scope="module")
def tour(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """``trajlog demo`` in an empty folder, its output and the sessions it made."""
    where = tmp_path_factory.mktemp("tour")
    result = run("demo", cwd=where)
    assert result.returncode == 0, result.stderr
    listed = run("ls", "--all", "--json", cwd=where)
    sessions = [json.loads(line) for line in listed.stdout.splitlines()]
    root = next(s for s in sessions if s["kind"] == "session")
    return {"dir": where, "out": result.stdout, "sessions": sessions, "root": root["id"],
            "db": where / "trajlog.db"}


def test_demo_is_a_tour_of_the_product(tour):
    out = tour["out"]
    assert "verify: ok -- 18 events" in out
    assert "power loss mid-append (cut inside the last frame)    torn" in out
    assert "killed mid tool call (exit -9)" in out
    assert "tool/result  TOOL_OUTCOME_UNKNOWN   call_9" in out
    assert "load(): repaired; a second load appends nothing (last seq 26); verify: ok" in out
    assert "reads 18 inherited events + 1 of its own, copying none" in out
    assert "store.sessions() lists 2 (subagents hidden), 4 with subagents" in out
    assert "[tool read_file #call_1] done" in out
    assert "seq 0..17 folded into a summary; goal revision 2" in out
    assert "- token.expiry = t.expires > now [HUMAN-" in out
    # the default policy admits the host's tool results; the build goes out as requests
    assert "the tests: [TEST-12] call_3: 42 passed" in out
    assert "as provider requests: OpenAI chat " in out and "(6 tool results paired by id)" in out
    assert "Ignore previous instructions" not in out.split("context for the model")[1]
    assert "alice's search finds 1, another tenant's finds 0" in out
    assert "the secret is no longer in the database files; verify: ok" in out
    # the context built with memory layers, each item recorded by id and version
    layers = out.split("memory layers (acme / alice")[1].split("\n\n")[0]
    titles = [x.strip() for x in layers.splitlines() if x.startswith("  ") and x.endswith(":")]
    assert titles == [
        "Constitution (global policy):", "Tenant policy:", "User preferences:",
        "Retrieved memory (facts, episodes):"]
    assert "deploy.ticket: Deploys need a change ticket." in layers
    assert "The login service deploys with blue-green." in layers and "globex" not in layers
    assert re.search(r"recorded in context/injection seq \d+: constitution [0-9a-f]{8}@v1, "
                     r"tenant_policy [0-9a-f]{8}@v1, preferences [0-9a-f]{8}@v1, preferences "
                     r"[0-9a-f]{8}@v1, retrieved [0-9a-f]{8}@v1", layers)
    assert "another tenant's fact retrieved: no" in layers
    assert "verified on its own: clean" in out
    assert "same model: no drift" in out
    assert "model demo-model-2: drift, cause model" in out
    assert "policy v5 admitting untrusted sources: drift, cause policy" in out
    assert "exclude -source.untrusted; now admitted" in out
    # a branch merged through its gate: reference only without the human decision, then facts
    assert "(frozen: revision git:4a1c2e8, samples case-7, case-9, pytest 8.3.2); rebased" in out
    assert "reference-only (missing decision); the cause confirmed on main: no, reference" in out
    assert "through the whole gate: fact" in out
    assert "confirmed: parser.cause = off-by-one in the lexer's last-line check [MERGE-" in out
    assert "failed: parser.suspect = a race in the file reader (rejected in branch" in out
    assert "to confirm: does the CRLF path drop the last line too? (unresolved" in out
    assert (tour["dir"] / "trajlog-tour.zip").exists()
    assert (tour["dir"] / "trajlog-tour.html").exists()
    raw = b"".join(p.read_bytes() for p in tour["dir"].glob("trajlog.db*"))
    assert b"sk-demo-4f9a1c2e8b7d" not in raw
    assert out.rstrip().splitlines()[-1].lstrip().startswith("xdg-open trajlog-tour.html")


@whole_suite_only
def test_every_command_the_tour_suggests_runs(tour):
    tail = tour["out"].split("Explore what the tour made:\n")[1]
    commands = [line.strip() for line in tail.splitlines() if line.startswith("  trajlog ")]
    assert len(commands) >= 10
    for line in commands:
        args = shlex.split(line.split("  (")[0])[1:]
        if args[0] == "tail":
            args.remove("-f")
        result = run(*args, cwd=tour["dir"])
        assert result.returncode == 0, (line, result.stderr)
        assert result.stdout.strip(), line


def test_help_reads_as_plain_text(capsys):
    names = [[n] for n in cli.commands] + [["memory", n] for n in ("ls", "show", "search")]
    for name in [[], *names]:
        assert main([*name, "--help"]) == 0
        text = capsys.readouterr().out
        assert text.startswith("Usage: trajlog"), name
        assert "`" not in text and "\x1b[" not in text and "\b" not in text, (name, text)
        assert ":class:" not in text and ":func:" not in text, name
    top = main(["--help"]) == 0 and capsys.readouterr().out
    assert "Exit codes: 0 done; 1 a check found a defect" in top
    assert "TRAJLOG_DB" in top


@whole_suite_only
def test_ls_filters_and_json(tour):
    where = tour["dir"]
    plain = run("ls", cwd=where).stdout
    assert tour["root"] in plain and "login rejects valid tokens" in plain
    assert len(run("ls", "--json", cwd=where).stdout.splitlines()) == 2
    every = run("ls", "--all", "--json", cwd=where).stdout.splitlines()
    assert len(every) == 4
    assert {json.loads(x)["kind"] for x in every} == {"session", "fork", "subagent"}
    assert run("ls", "--preset", "reviewer", "--all", "--json", cwd=where).stdout.count(
        "\n") == 1
    assert run("ls", "--cwd", "/elsewhere", "--json", cwd=where).stdout == ""
    assert len(run("ls", "--since", "1d", "--json", cwd=where).stdout.splitlines()) == 2
    assert run("ls", "--until", "2000-01-01", "--json", cwd=where).stdout == ""
    line = one_line_error(run("ls", "--since", "yesterday", cwd=where), 2)
    assert "not a date" in line
    env = run("ls", cwd=where.parent, env={"TRAJLOG_DB": str(tour["db"])})
    assert tour["root"] in env.stdout


@whole_suite_only
def test_show_filters_json_and_tombstones(tour):
    where, sid = tour["dir"], tour["root"][:8]
    tools = run("show", sid, "--type", "tool/", cwd=where).stdout.splitlines()
    assert tools and all(" tool/" in line for line in tools)
    assert run("show", sid, "--type", "tool/*", cwd=where).stdout.splitlines() == tools
    events = [json.loads(x) for x in run("show", sid, "--from", "3", "--to", "6", "--json",
                                         cwd=where).stdout.splitlines()]
    assert [e["seq"] for e in events] == [3, 4, 5, 6]
    assert events[1]["type"] == "tool/call" and events[1]["source"] == "host"
    everything = [json.loads(x) for x in run("show", sid, "--json", cwd=where).stdout.split(
        "\n") if x]
    erased = [e for e in everything if isinstance(e["data"], dict) and "erased" in e["data"]]
    assert len(erased) == 1 and erased[0]["data"]["erased"]["actor"] == "human:alice"
    assert "[erased: " in run("show", sid, "--from", str(erased[0]["seq"]), cwd=where).stdout
    one_line_error(run("show", sid, "--from", "9", "--to", "3", cwd=where), 2)


@pytest.mark.sqlite_only(reason=SQLITE_COPY)
@whole_suite_only
def test_tail_and_tail_follow_across_processes(tour, tmp_path):
    db = tmp_path / "f.db"
    shutil.copy(tour["db"], db)
    where, sid = tour["dir"], tour["root"]
    last = run("tail", sid[:8], "-n", "3", "--db", str(db), cwd=where).stdout.splitlines()
    assert len(last) == 3
    follower = subprocess.Popen(
        [sys.executable, "-m", "trajlog", "tail", "-f", "-n", "1", "--interval", "0.05",
         "--idle-exit", "60", sid, "--db", str(db)], cwd=where, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    try:
        # Its first page (the last event) says it has read the head it follows
        # from: only then is an append certain to be new to it (a fixed sleep
        # was not, on a loaded machine).
        assert follower.stdout is not None
        assert follower.stdout.readline() == last[-1] + "\n"
        writer = ("import sys, trajlog\nwith trajlog.open(sys.argv[1]) as st:\n"
                  "    s = st.session(sys.argv[2])\n"
                  "    for n in range(3):\n"
                  "        s.append('user/message', {'content': f'live {n}'})\n")
        subprocess.run([sys.executable, "-c", writer, str(db), sid], check=True, timeout=60)
        seen = []
        deadline = time.monotonic() + 60
        while len(seen) < 3 and time.monotonic() < deadline:
            line = follower.stdout.readline()
            if line:
                seen.append(line)
        assert [("live 0" in x, "live 1" in x, "live 2" in x) for x in seen] == [
            (True, False, False), (False, True, False), (False, False, True)]
    finally:
        follower.send_signal(signal.SIGINT)
        _, err = follower.communicate(timeout=30)
    assert follower.returncode == 0 and "Traceback" not in err


@whole_suite_only
def test_chat_trajectory_context_and_tree(tour):
    where, sid = tour["dir"], tour["root"][:8]
    chat = run("chat", sid, cwd=where).stdout
    assert "Users with valid tokens cannot log in." in chat
    assert "tool read_file" in chat and "done" in chat and "unknown" in chat
    cards = [json.loads(x) for x in run("chat", sid, "--json", cwd=where).stdout.splitlines()]
    assert {c["kind"] for c in cards} == {"message", "tool"}
    traj = run("trajectory", sid, cwd=where).stdout
    assert "turn 1" in traj and "interrupted" in traj and "tool deploy unknown" in traj
    assert "2 error(s)" in traj
    turns = [json.loads(x) for x in run("trajectory", sid, "--json",
                                        cwd=where).stdout.splitlines()]
    # the tour's three turns, then the replayed run's turn
    assert len(turns) == 4 and turns[1]["interrupted"] is True
    assert turns[3]["start_seq"] is not None and not turns[3]["interrupted"]
    ctx = run("context", sid, cwd=where).stdout
    assert "included (" in ctx and "HUMAN-" in ctx
    # the latest build: the replayed run's, which also kept the forum's tool result out
    assert "source.untrusted  x2" in ctx and "Ignore previous instructions" in ctx
    # the default policy admits the host's tool results as evidence
    assert "require.workspace_revision" not in ctx and "42 passed" in ctx
    builds = run("context", sid, "--list", cwd=where).stdout.splitlines()
    # the views step, the memory-layers step, the replayed run
    assert len(builds) == 3 and all("policy coding-default" in b for b in builds)
    data = json.loads(run("context", sid, "--json", cwd=where).stdout)
    assert data["excluded"]["source.untrusted"] == 2
    assert sum(b - a + 1 for a, b in data["excluded_seqs"]["source.untrusted"]) == 2
    fork = next(s for s in tour["sessions"] if s["kind"] == "fork")
    assert "no context build" in one_line_error(run("context", fork["id"], cwd=where), 3)
    tree = run("tree", fork["id"][:8], cwd=where).stdout
    assert tree.splitlines()[0].startswith(sid) and "subagent" in tree
    assert f"{fork['id'][:8]}  fork, seed 18" in tree and tree.count("<-") == 1
    nested = json.loads(run("tree", sid, "--json", cwd=where).stdout)
    assert nested["id"] == tour["root"] and len(nested["children"]) == 3


@whole_suite_only
def test_stats_agree_with_the_api(tour):
    figures = json.loads(run("stats", "--json", cwd=tour["dir"]).stdout)
    with trajlog.open(str(tour["db"])) as st:
        api = st.stats()
        assert figures["sessions"] == 4 and figures["events"] == api.events
        assert figures["stored_bytes"] == api.stored_bytes and figures["subagents"] == 2
        assert figures["by_type"] == api.by_type and figures["by_type"]["tool/call"] >= 5
        own = sum(st.session(h.id).last_seq + 1 - h.seed_length
                  for h in st.sessions(include_subagents=True))
        assert api.events == own
    text = run("stats", cwd=tour["dir"]).stdout
    assert "compression" in text and "tool/result" in text


@pytest.mark.sqlite_only(reason=SQLITE_COPY)
def test_verify_reports_every_session_and_fails_on_any_defect(tour, tmp_path):
    ok = run("verify", cwd=tour["dir"])
    lines = ok.stdout.splitlines()
    assert ok.returncode == 0 and sum(" ok " in x for x in lines[:-1]) == 4, ok.stdout
    assert lines[-1].startswith("memory  ok  6 items")   # 1 remembered + 5 for the layers
    db = tmp_path / "bad.db"
    shutil.copy(tour["db"], db)
    subagent = next(s for s in tour["sessions"] if s["kind"] == "subagent")["id"]
    with trajlog.open(str(db)) as st:
        flip_frame_bits(st, st.session(subagent)._sid, 0, -9, 0xFF)
    bad = run("verify", "--db", str(db), "--json", cwd=tmp_path)
    assert bad.returncode == 1
    reports = [json.loads(x) for x in bad.stdout.splitlines()]
    by_id = {r["session"]: r for r in reports if "session" in r}
    assert len(by_id) == 4 and not by_id[subagent]["ok"] and "seq=0" in by_id[subagent]["defect"]
    assert sum(r["ok"] for r in by_id.values()) == 3
    single = run("verify", subagent[:8], "--db", str(db), cwd=tmp_path)
    assert single.returncode == 1 and "CORRUPT" in single.stdout
    read = run("show", subagent, "--db", str(db), cwd=tmp_path)
    assert "ChecksumError" in one_line_error(read, 3) or "Corrupt" in read.stderr


_CRASH = """
import os, signal, sys, trajlog
with trajlog.open(sys.argv[1]) as st:
    s = st.create_session(cwd="/crash")
    print(s.id, flush=True)
    with s.turn(), s.step():
        s.append("assistant/message", {"content": "run", "tool_calls": [
            {"id": "k1", "name": "sh", "arguments": {}}]})
        s.append("tool/call", {"call_id": "k1", "name": "sh", "arguments": {}})
        os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.mark.sqlite_only(reason=SQLITE_COPY)
def test_inspect_load_and_fork(tour, tmp_path):
    demo = tmp_path / "demo.db"
    shutil.copy(tour["db"], demo)
    root = tour["root"]
    assert "balanced" in run("inspect", root[:8], "--db", str(demo), cwd=tmp_path).stdout
    assert "nothing to close" in run("load", root[:8], "--db", str(demo), cwd=tmp_path).stdout
    forked = run("fork", root[:8], "--at", "17", "--db", str(demo), cwd=tmp_path)
    assert forked.returncode == 0 and "18 inherited event(s)" in forked.stderr
    db = tmp_path / "c.db"
    crashed = subprocess.run([sys.executable, "-c", _CRASH, str(db)], capture_output=True,
                             text=True, timeout=120)
    sid = crashed.stdout.split()[0]
    refused = run("fork", sid[:8], "--db", str(db), cwd=tmp_path)
    assert "ForkUnavailableError" in one_line_error(refused, 3)
    seen = run("inspect", sid[:8], "--db", str(db), cwd=tmp_path)
    assert seen.returncode == 0 and "repair" in seen.stdout and "TOOL_OUTCOME_UNKNOWN" in (
        seen.stdout) and "open turn since seq 0" in seen.stdout
    with trajlog.open(str(db)) as st:
        assert st.session(sid).last_seq == 3      # inspect wrote nothing
    loaded = run("load", sid[:8], "--db", str(db), cwd=tmp_path)
    assert loaded.returncode == 0 and "appended 3 closer(s) at seq 4..6" in loaded.stdout
    assert "balanced" in run("load", sid, "--db", str(db), cwd=tmp_path).stdout
    child = run("fork", sid, "--title", "retry", "--db", str(db), cwd=tmp_path)
    assert child.returncode == 0
    with trajlog.open(str(db)) as st:
        c = st.session(child.stdout.strip())
        assert c.header.parent_session == sid and c.header.seed_length == 7
        assert c.header.metadata["title"] == "retry"


@pytest.mark.sqlite_only(reason=SQLITE_COPY)
@whole_suite_only
def test_export_import_erase_memory_retention(tour, tmp_path):
    where, sid = tour["dir"], tour["root"]
    out = tmp_path / "s.jsonl.zst"
    exported = run("export", sid[:8], "-o", str(out), cwd=where)
    assert exported.returncode == 0 and out.exists() and "jsonl.zst" in exported.stdout
    assert "clean" in run("verify", str(out), cwd=where).stdout
    other = tmp_path / "other.db"
    imported = run("import", str(out), "--db", str(other), cwd=tmp_path)
    assert imported.returncode == 0 and "1 created" in imported.stdout
    assert "0 created" in run("import", str(out), "--db", str(other), cwd=tmp_path).stdout
    mem = run("memory", "ls", "--tenant", "acme", "--user", "alice", cwd=where)
    assert "preference" in mem.stdout and "pytest" in mem.stdout
    item = mem.stdout.split()[0]
    found = run("memory", "search", "pytest", "--tenant", "acme", "--user", "alice", "--json",
                cwd=where)
    assert json.loads(found.stdout.splitlines()[0])["id"] == item
    assert run("memory", "search", "pytest", "--tenant", "globex", cwd=where).stdout == ""
    assert "v1" in run("memory", "show", item, "--tenant", "acme", "--user", "alice",
                       cwd=where).stdout
    hidden = run("memory", "show", item, "--tenant", "globex", cwd=where)
    assert "another tenant" in one_line_error(hidden, 3)
    assert "nothing is due" in run("retention", cwd=where).stdout
    db = tmp_path / "e.db"
    shutil.copy(tour["db"], db)
    erased = run("erase", sid[:8], "1", "--reason", "tidy", "--yes", "--db", str(db),
                 cwd=tmp_path)
    assert erased.returncode == 0 and "frames_blanked             1" in erased.stdout
    assert "Users with valid tokens" not in run("show", sid, "--db", str(db),
                                                cwd=tmp_path).stdout
    assert run("verify", "--db", str(db), cwd=tmp_path).returncode == 0


@pytest.mark.sqlite_only(reason=SQLITE_COPY)
@whole_suite_only
def test_repack_migrate_and_view(tour, tmp_path):
    db = tmp_path / "r.db"
    shutil.copy(tour["db"], db)
    repacked = run("repack", "--db", str(db), cwd=tmp_path)
    assert repacked.returncode == 0 and "repacked 4 session(s)" in repacked.stdout
    assert "already current" in run("migrate", "--db", str(db), cwd=tmp_path).stdout
    old = tmp_path / "old.db"
    for suffix in ("", "-wal", "-shm"):
        shutil.copy(DATA / f"store_v01.db{suffix}", f"{old}{suffix}")
    migrated = run("migrate", "--db", str(old), cwd=tmp_path)
    assert migrated.returncode == 0 and re.search(r"schema 3 -> \d+, \d+ session", (
        migrated.stdout)), migrated.stdout
    assert run("verify", "--db", str(old), cwd=tmp_path).returncode == 0
    page = tmp_path / "v.html"
    shown = run("view", tour["root"][:8], "-o", str(page), "--db", str(db), cwd=tmp_path)
    assert shown.returncode == 0 and "4 session(s)" in shown.stdout
    html = page.read_text()
    assert html.startswith("<!DOCTYPE html>") and "login rejects valid tokens" in html
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", html)
    default = run("view", tour["root"][:8], "--db", str(db), cwd=tmp_path)
    assert (tmp_path / f"trajlog-{tour['root'][:8]}.html").exists(), default.stderr


READS = [["ls"], ["show", "x"], ["tail", "x"], ["chat", "x"], ["trajectory", "x"],
         ["context", "x"], ["tree", "x"], ["verify"], ["load", "x"], ["inspect", "x"],
         ["fork", "x"], ["export", "x", "-o", "o.tlog"], ["erase", "x", "1", "--reason", "r"],
         ["rm", "x", "--reason", "r"],
         ["memory", "ls", "--tenant", "t"], ["stats"], ["view", "x"], ["repack"],
         ["migrate"], ["retention"], ["runs", "x"], ["checkpoints", "x"]]


@whole_suite_only
def test_a_missing_store_is_an_error_for_every_read_command(tmp_path):
    for args in READS:
        line = one_line_error(run(*args, "--db", "missing.db", cwd=tmp_path), 2)
        assert "no store at missing.db" in line, args
    assert not (tmp_path / "missing.db").exists()


@whole_suite_only
def test_usage_errors_and_prefixes(tour):
    where = tour["dir"]
    assert "No such option" in one_line_error(run("ls", "--bogus", cwd=where), 2)
    assert "no session id starts with 'zz'" in one_line_error(run("show", "zz", cwd=where), 2)
    twins = where / "twins.db"
    with trajlog.open(str(twins)) as st:
        for tail in ("1", "2"):
            st.create_session(session_id=f"abcdef00-0000-4000-8000-00000000000{tail}")
    line = one_line_error(run("show", "abcdef", "--db", str(twins), cwd=where), 2)
    assert "'abcdef' starts 2 session ids" in line and "give more of the id" in line
    assert run("show", "abcdef00-0000-4000-8000-000000000002", "--db", str(twins),
               cwd=where).returncode == 0
    for s in tour["sessions"]:
        assert run("show", s["id"][:12], "--to", "0", cwd=where).returncode == 0
    assert run("--version", cwd=where).stdout.startswith("trajlog, version ")


@whole_suite_only
def test_shell_completion_of_commands_and_session_ids(tour):
    script = run("completion", "bash", cwd=tour["dir"])
    assert script.returncode == 0 and "_TRAJLOG_COMPLETE" in script.stdout
    env = {"_TRAJLOG_COMPLETE": "bash_complete", "COMP_CWORD": "1", "COMP_WORDS": "trajlog tr"}
    words = subprocess.run([sys.executable, "-c", "from trajlog.cli import main; main()"],
                           cwd=tour["dir"], capture_output=True, text=True, timeout=60,
                           env={**os.environ, **env}).stdout
    assert "trajectory" in words and "tree" in words
    root = tour["root"]
    env = {"_TRAJLOG_COMPLETE": "bash_complete", "COMP_CWORD": "2",
           "COMP_WORDS": f"trajlog show {root[:3]}"}
    ids = subprocess.run([sys.executable, "-c", "from trajlog.cli import main; main()"],
                         cwd=tour["dir"], capture_output=True, text=True, timeout=60,
                         env={**os.environ, **env}).stdout
    assert root in ids


@whole_suite_only
def test_progress_bars_draw_on_a_terminal_and_never_in_a_pipe(tour):
    import pty
    import select
    master, slave = pty.openpty()
    try:
        done = subprocess.run([sys.executable, "-m", "trajlog", "verify"], cwd=tour["dir"],
                              stdout=subprocess.PIPE, stderr=slave, text=True, timeout=120)
    finally:
        os.close(slave)
    drawn = b""
    # (the child has exited: all it drew is buffered, and the read ends at EOF / EIO;
    # the bound only stops a broken terminal from hanging the test)
    while select.select([master], [], [], 60)[0]:
        try:
            chunk = os.read(master, 65536)
        except OSError:
            break
        if not chunk:
            break
        drawn += chunk
    os.close(master)
    assert done.returncode == 0 and b"verifying" in drawn and b"/4" in drawn
    # the report went to stdout (a pipe), whole, and nothing of it to the terminal
    assert done.stdout.count(" ok ") == 5 and b" ok " not in drawn   # 4 sessions, memory
    piped = run("verify", cwd=tour["dir"])
    assert "verifying" not in piped.stderr and "\x1b[" not in piped.stderr + piped.stdout
