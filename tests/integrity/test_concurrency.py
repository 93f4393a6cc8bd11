"""Concurrency: threads sharing one store (group commit), processes sharing one
session, and the per-session writer lease.  Real files, real processes."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import trajlog
from kits.tamper import raw
from trajlog import errors
from trajlog.api.leases import lease_is_live, process_token
from trajlog.storage import statements as storage

SQLITE_CONN = "runs SQL on the SQLite backend's own connections"


def test_concurrency_threads_group_commit(tmp_path):
    path = str(tmp_path / "g.db")
    st = trajlog.open(path)
    batches: list[int] = []
    group = st._e.writer.commit
    original = group.commit

    def counting(batch):
        batches.append(len(batch))
        return original(batch)

    group.commit = counting  # type: ignore[method-assign]
    alone = group._commit_one   # (the fast path: a lone request committed inline)

    def counting_alone(apply, args, key=None):
        batches.append(1)
        return alone(apply, args, key)

    group._commit_one = counting_alone  # type: ignore[method-assign]
    own = [st.create_session(cwd=f"/t{i}") for i in range(8)]
    shared = st.create_session(cwd="/shared")
    got: dict[str, list[int]] = {s.id: [] for s in [*own, shared]}
    reader = trajlog.open(path)
    failures: list[BaseException] = []

    def work(s, n):
        try:
            other = reader.session(s.id)
            for i in range(n):
                ev = s.append("user/message", {"content": f"{threading.get_ident()}:{i}"})
                got[s.id].append(ev.seq)
                # returned means committed: another connection already sees it
                assert other.last_seq >= ev.seq
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=work, args=(s, 60)) for s in own]
    threads += [threading.Thread(target=work, args=(shared, 60)) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures, failures
    for s in own:
        assert got[s.id] == list(range(60))
        assert s.verify().ok
    assert sorted(got[shared.id]) == list(range(240))
    assert shared.verify().ok
    assert sum(batches) == 8 * 60 + 240
    assert max(batches) > 1, "concurrent appends were never coalesced"
    assert len(batches) < 8 * 60 + 240
    reader.close()
    st.close()


def test_a_lone_append_commits_inline_without_a_group_request(tmp_path):
    """With no commit in progress an append commits in its caller's thread,
    with no group-commit request or hand-off (``GroupCommit.call``); the
    test above shows concurrent appends still share commits.  Fails if every
    append goes through the queue."""
    st = trajlog.open(str(tmp_path / "l.db"))
    group = st._e.writer.commit
    batches: list[int] = []
    original = group.commit

    def counting(batch):
        batches.append(len(batch))
        return original(batch)

    group.commit = counting  # type: ignore[method-assign]
    s = st.create_session(cwd="/l")
    for i in range(20):
        assert s.append("user/message", {"content": str(i)}).seq == i
    with pytest.raises(errors.ValidationError):   # a refusal, inline too
        s.append("tool/result", {"call_id": "none", "output": ""})
    s.append("user/message", {"content": "after"})
    assert batches == []
    assert s.last_seq == 20 and s.verify().ok
    st.close()


def test_concurrency_failure_in_one_request_spares_the_others(tmp_path):
    st = trajlog.open(str(tmp_path / "f.db"))
    a, b = st.create_session(cwd="/a"), st.create_session(cwd="/b")
    writer = st._e.writer
    rows_ok = [writer.prepare("user/message", {"content": "ok"}, None, {})]
    rows_bad = [writer.prepare("tool/result", {"call_id": "x", "output": ""}, None, {})]
    reqs = [writer.request(a._ref, rows_ok), writer.request(b._ref, rows_bad),
            writer.request(a._ref, list(rows_ok))]
    writer.commit.commit(reqs)
    assert [r.error is None for r in reqs] == [True, False, True]
    assert isinstance(reqs[1].error, errors.ValidationError)
    assert a.last_seq == 1 and b.last_seq == -1
    st.close()


CHILD = """
import random, sys, trajlog
path, sid, n, seed = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
rng = random.Random(seed)
got = []
with trajlog.open(path) as st:
    s = st.session(sid)
    done = 0
    while done < n:
        k = min(n - done, rng.choice([1, 1, 1, 4, 16]))
        if k == 1:
            got.append(s.append("user/message", {"content": f"{seed}:{done}"}).seq)
        else:
            evs = s.append_batch([("user/message", {"content": f"{seed}:{done + i}"})
                                  for i in range(k)])
            got.extend(e.seq for e in evs)
        done += k
print(" ".join(map(str, got)))
"""


def test_concurrency_processes_same_session(tmp_path):
    """>= 4 processes, >= 10,000 appends to one session: contiguous, no duplicate,
    nothing acknowledged lost, and the chain verifies."""
    path = str(tmp_path / "p.db")
    with trajlog.open(path) as st:
        sid = st.create_session(cwd="/shared").id
    procs, per = 4, 2500
    children = [subprocess.Popen([sys.executable, "-c", CHILD, path, sid, str(per), str(k)],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                for k in range(procs)]
    acked: list[int] = []
    for child in children:
        out, err = child.communicate(timeout=600)
        assert child.returncode == 0, err
        seqs = [int(x) for x in out.split()]
        assert len(seqs) == per and seqs == sorted(seqs)
        acked += seqs
    assert sorted(acked) == list(range(procs * per))
    with trajlog.open(path) as st:
        s = st.session(sid)
        assert s.last_seq == procs * per - 1
        report = s.verify()
        assert report.ok and report.events == procs * per
        contents = [e.data["content"] for e in s.events()]
        for k in range(procs):  # each process's events in its own order
            mine = [c for c in contents if c.startswith(f"{k}:")]
            assert mine == [f"{k}:{i}" for i in range(per)]


HOLDER = """
import sys, time, trajlog
from pathlib import Path
path, sid, flag = sys.argv[1], sys.argv[2], Path(sys.argv[3])
with trajlog.open(path) as st:
    s = st.session(sid)
    with s.turn():
        s.append("user/message", {"content": "holder"})
        flag.write_text("ready")
        while flag.read_text() != "release":
            time.sleep(0.01)
print("released")
"""


def _start_holder(path: str, sid: str, flag: Path) -> subprocess.Popen[str]:
    flag.write_text("")
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, path, sid, str(flag)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while flag.read_text() != "ready":
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        assert time.monotonic() < deadline
        time.sleep(0.01)
    return proc


def test_concurrency_lease_refuses_second_writer(tmp_path):
    path, flag = str(tmp_path / "l.db"), tmp_path / "flag"
    with trajlog.open(path) as st:
        s = st.create_session(cwd="/r")
        holder = _start_holder(path, s.id, flag)
        try:
            with pytest.raises(errors.LeaseHeldError, match="being written"):
                s.append("user/message", {"content": "intruder"})
            with pytest.raises(errors.LeaseHeldError), s.turn():
                pass
            before = s.last_seq
            # waiting: released by the holder a little later
            threading.Timer(0.3, lambda: flag.write_text("release")).start()
            with s.lease(wait=30):
                s.append("user/message", {"content": "after the holder"})
        finally:
            flag.write_text("release")
            holder.communicate(timeout=60)
        types = [(e.type, e.data.get("content")) for e in s.events()]
        assert types[:3] == [("turn/start", None), ("user/message", "holder"),
                             ("turn/end", None)]
        assert types[-1] == ("user/message", "after the holder")
        assert before == 1
        assert s.verify().ok


DIER = """
import os, sys, trajlog
with trajlog.open(sys.argv[1]) as st:
    s = st.session(sys.argv[2])
    held = s.lease()
    held.__enter__()   # and never left
    s.append("user/message", {"content": "then died"})
    os._exit(0)   # no release: the lease stays behind
"""


@pytest.mark.sqlite_only(reason=SQLITE_CONN)
def test_concurrency_stale_lease_of_dead_process_is_taken_over(tmp_path):
    path = str(tmp_path / "d.db")
    with trajlog.open(path) as st:
        s = st.create_session(cwd="/r")
        subprocess.run([sys.executable, "-c", DIER, path, s.id], check=True, timeout=60)
        owner = storage.lease(raw(st), s._sid)[0]
        assert owner is not None  # left behind
        s.append("user/message", {"content": "takes over"})
        with s.lease():
            assert storage.lease(raw(st), s._sid)[0] == st.writer_id
        assert s.last_seq == 1


def test_concurrency_lease_liveness_rule():
    now = storage.now_ms()
    # this process: live while the store that took the lease is open
    with trajlog.open(":memory:") as st:
        me = st.writer_id
        assert lease_is_live(me, storage_host(), os.getpid(), now, None, 1000)
    assert not lease_is_live(me, storage_host(), os.getpid(), now, None, 1000)
    never = f"{storage_host()}:{os.getpid()}:{process_token()}:abc"  # no store of ours
    assert not lease_is_live(never, storage_host(), os.getpid(), now, None, 1000)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    assert not lease_is_live("x", storage_host(), dead.pid, now, now, 10**9)
    # same pid, another process (a restarted writer, a reused pid): not live
    other = f"{storage_host()}:{os.getpid()}:{process_token()}0:abc"
    assert not lease_is_live(other, storage_host(), os.getpid(), now, now, 10**9)
    # no token: a process that started after the lease was taken is not its holder
    assert not lease_is_live("old", storage_host(), os.getpid(), now - 3_600_000, now, 10**9)
    assert lease_is_live("elsewhere:1:-:x", "elsewhere", 1, now, now - 500, 1000)
    assert not lease_is_live("elsewhere:1:-:x", "elsewhere", 1, now, now - 5000, 1000)
    assert not lease_is_live("elsewhere:1:-:x", "elsewhere", 1, now, None, 1000)


def storage_host() -> str:
    from trajlog.api import leases

    return leases.HOST


OPENER = """
import sys, trajlog
with trajlog.open(sys.argv[1]) as st:
    st.create_session(cwd="/racer").append("user/message", {"content": "hi"})
"""


def test_concurrency_processes_racing_to_create_the_store(tmp_path):
    """Migrations and the WAL switch race safely: every opener waits, none fails."""
    path = str(tmp_path / "race.db")
    procs = [subprocess.Popen([sys.executable, "-c", OPENER, path], stderr=subprocess.PIPE,
                              text=True) for _ in range(6)]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    with trajlog.open(path) as st:
        assert len(st.sessions()) == 6
