"""Readers racing appenders never see a false corruption verdict or a wrong event.

Writers -- two threads of this process (on two stores of one file) and one
child process -- append single events, batches (some of several 64 KiB chunk
rows), turns with steps and tool calls, and whole turns in one batch; they fork
their sessions (and forks of forks) and keep writing into the forks while the
parents grow; the background repack (on by default in every store) merges rows
meanwhile.  Readers -- three threads (two on a writer's store, one on the other)
and two child processes, each on its own store -- run ``verify()``,
``inspect()``, ``store.load()``, ``events()`` (whole, from a seq, a range,
lazy), ``tail()``, ``get()`` and the views, on the sessions being written.

Never allowed: a verify report that is not clean, any exception from a read
(``StoreBusyError`` included: the default busy timeout must cover this load),
an ``inspect()`` refused for anything but a live writer, a read that goes back
on what the same reader saw before, a read shorter than a head already seen,
and -- checked at the end against the log as finally written -- an event seen
at seq i that is not the final event at seq i (forks included), a view that
named an event the log does not have there, a recovery closer in any log (a
``load()`` that closed a live writer's turn), an acknowledged event lost.
Legitimate and only counted: ``LiveWriterError`` / ``LeaseHeldError`` from
``load()`` and a refused ``inspect()`` while a writer holds a turn's lease.

``TRAJLOG_CONCURRENCY_READS`` sets the number of reads (default 1,500, or 10,000
with ``TRAJLOG_SOAK=1``); ``TRAJLOG_CONCURRENCY_SEED`` fixes the seed (else a
random one, printed).  The summary line is printed whatever the outcome.
"""

from __future__ import annotations

import json
import math
import os
import random
import re
import subprocess
import threading
import time
from collections import Counter
from pathlib import Path

import trajlog
from kits.racekit import Reader, Tally, Writer, check_against_final, child_command, thread

SOAK = os.environ.get("TRAJLOG_SOAK") == "1"


def _reads_target() -> int:
    env = os.environ.get("TRAJLOG_CONCURRENCY_READS")
    return int(env) if env else (10_000 if SOAK else 1500)


def _seed() -> int:
    env = os.environ.get("TRAJLOG_CONCURRENCY_SEED")
    return int(env) if env else random.SystemRandom().randrange(2**32)


def _summary(seed: int, tallies: list[Tally], readers: list[Tally], rows: int | None,
             checked: int, seconds: float) -> str:
    reads: dict[str, int] = {}
    refusals: dict[str, int] = {}
    for t in tallies:
        for src, dst in ((t.reads, reads), (t.refusals, refusals)):
            for k, v in src.items():
                dst[k] = dst.get(k, 0) + v
    total = sum(reads.values())
    in_procs = sum(sum(t.reads.values()) for t in readers if t.who.startswith("proc"))
    appends = sum(t.appends for t in tallies)
    submits = sum(t.submits for t in tallies)
    by_kind = " ".join(f"{k}={reads[k]}" for k in sorted(reads))
    return (f"integrity-concurrency seed={seed} reads={total} (threads={total - in_procs} "
            f"processes={in_procs}; {by_kind}) appends={appends} submits={submits} "
            f"rows={rows} forks={sum(t.forks for t in tallies)} "
            f"roots={sum(t.roots for t in tallies)} refusals={sum(refusals.values())} "
            f"{dict(sorted(refusals.items()))} observations={checked} "
            f"failures={sum(len(t.failures) for t in tallies)} seconds={seconds:.1f}")


def _kind(failure: str) -> str:
    """``[who] inspect <sid>: ...`` -> ``inspect`` (``tail(9)`` -> ``tail``)."""
    words = failure.split("] ", 1)[-1].split()
    return re.sub(r"\(.*", "", words[0]) if words else "?"


def _report(failures: list[str], seed: int, summary: str) -> str:
    """The failures by kind, then the first of each kind and a few more."""
    kinds = Counter(_kind(f) for f in failures)
    first = {}
    for f in failures:
        first.setdefault(_kind(f), f)
    shown = [*first.values(), *(f for f in failures if f not in first.values())][:12]
    return (f"{len(failures)} failures (seed {seed}), by kind {dict(kinds)}; the first of "
            "each kind, then others:\n\n" + "\n\n".join(shown) + f"\n\n{summary}")


def test_readers_racing_appenders_never_see_false_corruption(tmp_path, capsys):
    target, seed = _reads_target(), _seed()
    started = time.monotonic()
    path = str(tmp_path / "race.db")
    # soak: histories past the projections' autosave (SAVE_EVERY events)
    max_len, prefill = (12_000, 5600) if SOAK else (2500, 400)
    pace = 0.004
    timeout = 1800 if SOAK else 300

    w_store, r_store = trajlog.open(path), trajlog.open(path)
    stop = threading.Event()
    # writers: a thread on each store of this process, and a child process
    t_writers = [Tally("thread-writer-0"), Tally("thread-writer-1")]
    writers = [Writer(st, random.Random(seed + 1 + i), t, f"tw{i}", max_len=max_len,
                      max_forks=3, pace=pace)
               for i, (st, t) in enumerate(zip((w_store, r_store), t_writers, strict=True))]
    for w in writers:
        w.warm_up(prefill)
    p_writer = Tally("proc-writer")
    stop_file, ready = tmp_path / "stop", tmp_path / "ready"
    child_root = w_store.create_session(cwd="/race/pw").id
    writer_proc = subprocess.Popen(child_command("writer", {
        "who": p_writer.who, "path": path, "seed": seed + 10, "tag": "pw", "root": child_root,
        "max_len": max_len, "prefill": prefill, "max_forks": 3, "pace": pace,
        "stop": str(stop_file), "ready": str(ready), "out": str(tmp_path / "proc-writer.json")}),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    writer_threads = [thread(lambda w=w: w.run(stop.is_set), w.tally) for w in writers]
    for t in writer_threads:
        t.start()
    deadline = time.monotonic() + 120
    while not ready.exists() and writer_proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)

    # readers: two child processes and three threads; quotas add up to >= target
    per_proc = target // 4
    per_thread = math.ceil((target - 2 * per_proc) / 3)
    p_readers = [Tally(f"proc-reader-{i}") for i in range(2)]
    reader_procs = [subprocess.Popen(child_command("reader", {
        "who": t.who, "path": path, "seed": seed + 20 + i, "quota": per_proc,
        "out": str(tmp_path / f"{t.who}.json")}),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for i, t in enumerate(p_readers)]
    t_readers = [Tally(f"thread-reader-{i}") for i in range(3)]
    readers = [Reader(st, random.Random(seed + 30 + i), t)
               for i, (st, t) in enumerate(zip((w_store, w_store, r_store), t_readers,
                                               strict=True))]
    reader_threads = [thread(lambda r=r: r.run(per_thread), r.tally) for r in readers]
    for t in reader_threads:
        t.start()

    children_failed: list[str] = []

    def collect(proc: subprocess.Popen[str], tally: Tally, out: Path) -> Tally:
        try:
            _, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
            children_failed.append(f"[{tally.who}] timed out after {timeout} s:\n{err}")
            return tally
        if proc.returncode != 0 or not out.exists():
            children_failed.append(f"[{tally.who}] exit {proc.returncode}:\n{err}")
            return tally
        return Tally.from_json(json.loads(out.read_text()))

    for t in reader_threads:
        t.join(timeout)
    p_readers = [collect(p, t, tmp_path / f"{t.who}.json")
                 for p, t in zip(reader_procs, p_readers, strict=True)]
    stop.set()
    stop_file.write_text("stop")
    for t in writer_threads:
        t.join(timeout)
    p_writer = collect(writer_proc, p_writer, tmp_path / "proc-writer.json")
    w_store.close()
    r_store.close()

    # the log as finally written, read by a fresh store
    tallies = [*t_writers, p_writer, *t_readers, *p_readers]
    with trajlog.open(path, repack=False) as final:
        checked, final_failures = check_against_final(final, tallies)
        # the chunk rows, counted through the backend's reader (on SQLite or PostgreSQL)
        reader = final._e.backend.reader()
        rows = sum(len(reader.chunk_meta(row.sid, -1, 2**62))
                   for row in reader.sessions(True))
    seconds = time.monotonic() - started

    summary = _summary(seed, tallies, [*t_readers, *p_readers], rows, checked, seconds)
    with capsys.disabled():
        print(f"\n{summary}")
    failures = [*children_failed, *(f for t in tallies for f in t.failures), *final_failures]
    assert not failures, _report(failures, seed, summary)
    total = sum(sum(t.reads.values()) for t in [*t_readers, *p_readers])
    assert total >= target, f"only {total} reads of {target}: {summary}"
    assert all(sum(t.reads.values()) > 0 for t in p_readers), summary
    assert all(t.appends > 0 for t in (*t_writers, p_writer)), summary
    assert sum(t.forks for t in (*t_writers, p_writer)) >= 3, summary
    # every append wrote at least one row: fewer rows than appends means the
    # background repack merged rows while the readers read
    assert rows < sum(t.submits for t in (*t_writers, p_writer)), summary
