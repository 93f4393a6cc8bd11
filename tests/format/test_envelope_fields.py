"""The envelope's ``supersedes`` and ``branch_id`` (FORMAT.md,
"Event payload"): trailing payload fields that leave every older payload decoding --
and encoding -- byte for byte as before; validated at append (``supersedes``
must name an earlier seq); honoured by the evidence rules and the context
builder before the older data fields; carried through export and import.

Each test names the rule it proves; removing the rule fails it."""

from __future__ import annotations

import asyncio

import msgspec
import pytest

import trajlog
from trajlog import errors
from trajlog.events import ENVELOPE_FIELDS, Event, decode_event, decode_lazy, encode_event
from trajlog.projections.context import build_context
from trajlog.projections.evidence import branch_of, collect, supersedes_of

OLD = ["tool/result", 1_700_000_000_000, {"call_id": "c1", "output": "ok"}, "Bash", 2,
       "git:abc", "internal", "k-1"]


def _text(build) -> str:
    return "\n".join(m["content"] for m in build.messages) + build.summary_text


def _reasons(build) -> dict[int, str]:
    return {x.seq: x.reason for x in build.excluded}


# --- the payload layout --------------------------------------------------------------

@pytest.mark.parametrize("n", [3, 4, 5, 6, 7, 8])
def test_a_payload_of_the_old_layout_decodes_and_re_encodes_unchanged(n):
    """Rule: the new fields are trailing (a payload written before them --
    3 to 8 elements -- decodes with both None), and an event that sets
    neither encodes to the old bytes, so the payload check of every old
    frame still holds.  Fails if a field is inserted before
    idempotency_key or if encode_event stops trimming trailing Nones."""
    old = msgspec.msgpack.encode(OLD[:n])
    for ev in (decode_event(old, 7), decode_lazy(old, 7).event()):
        assert ev.seq == 7 and ev.supersedes is None and ev.branch_id is None
        assert [ev.type, ev.time, ev.data, *[getattr(ev, f) for f in ENVELOPE_FIELDS[:5]]][:n] \
            == OLD[:n]
        assert encode_event(ev) == old


def test_the_new_fields_are_the_payloads_9th_and_10th_elements():
    """Rule (FORMAT.md 4.4): supersedes is element 8, branch_id element 9,
    trailing Nones left out."""
    both = Event(*OLD, supersedes=3, branch_id="exp")
    assert msgspec.msgpack.decode(encode_event(both)) == [*OLD, 3, "exp"]
    only_branch = Event(OLD[0], OLD[1], OLD[2], branch_id="exp")
    assert msgspec.msgpack.decode(encode_event(only_branch)) == [
        *OLD[:3], None, None, None, None, None, None, "exp"]
    only_sup = Event(OLD[0], OLD[1], OLD[2], supersedes=0)
    assert msgspec.msgpack.decode(encode_event(only_sup)) == [*OLD[:3], *[None] * 5, 0]
    assert ENVELOPE_FIELDS[5:7] == ("supersedes", "branch_id")


def test_the_new_fields_are_stored_and_read_back(store):
    """Rule: append takes both as envelope keywords; every read path (get,
    events, lazy events, a batch, the envelope) returns them."""
    s = store.create_session(cwd="/r")
    first = s.append("note/x", {"t": "a"})
    ev = s.append("note/x", {"t": "b"}, supersedes=first.seq, branch_id="exp")
    assert (ev.supersedes, ev.branch_id) == (first.seq, "exp")
    assert ev.envelope == {"supersedes": first.seq, "branch_id": "exp"}
    assert s.get(ev.seq) == ev
    assert [(e.supersedes, e.branch_id) for e in s.events()] == [(None, None), (0, "exp")]
    assert [(e.supersedes, e.branch_id) for e in s.events(lazy=True)][1] == (0, "exp")
    batch = s.append_batch([("note/x", {}, {"branch_id": "b2"}),
                            ("note/x", {}, {"supersedes": ev.seq + 1, "branch_id": "b2"})])
    assert [(e.supersedes, e.branch_id) for e in batch] == [(None, "b2"), (ev.seq + 1, "b2")]
    assert s.verify().ok


def test_async_append_takes_the_new_fields(tmp_path):
    """Rule: trajlog.aio's append has the same envelope keywords."""
    async def main() -> tuple[int | None, str | None]:
        st = await trajlog.aio.open(str(tmp_path / "a.db"))
        try:
            s = await st.create_session(cwd="/r")
            await s.append("note/x", {})
            ev = await s.append("note/x", {}, supersedes=0, branch_id="exp")
            return ev.supersedes, ev.branch_id
        finally:
            await st.close()
    assert asyncio.run(main()) == (0, "exp")


# --- validation ----------------------------------------------------------------------

def test_supersedes_must_name_an_earlier_seq(store):
    """Rule: supersedes < the new event's seq, checked at append with a
    ValidationError naming both seqs; nothing is written.  Fails if the
    append-time check (write_stages.check_supersedes) is removed."""
    s = store.create_session(cwd="/r")
    s.append("note/x", {})
    for target in (1, 5):                      # itself, and a future seq
        with pytest.raises(errors.ValidationError, match=rf"seq 1 .*supersedes seq {target}"):
            s.append("note/x", {}, supersedes=target)
    assert s.last_seq == 0
    # in a batch, an earlier event of the same batch may be superseded, not a later one
    with pytest.raises(errors.ValidationError, match="supersedes seq 2"):
        s.append_batch([("note/x", {}, {"supersedes": 2}), ("note/x", {})])
    assert s.last_seq == 0
    ok = s.append_batch([("note/x", {}), ("note/x", {}, {"supersedes": 1})])
    assert ok[1].supersedes == 1 and s.last_seq == 2


def test_supersedes_is_checked_under_a_privacy_mode_too(tmp_path):
    """Rule: a privacy mode remakes the rows before the write; the check
    survives it (writer._remake keeps the check flag of an event with
    supersedes)."""
    from trajlog.redaction import RedactionPolicy
    st = trajlog.open(str(tmp_path / "p.db"), repack=False)
    try:
        st.redaction = RedactionPolicy(scanners=(), privacy={"acme": "none"})
        s = st.create_session(cwd="/r", metadata={"tenant": "acme"})
        s.append("note/x", {"t": "x"})
        with pytest.raises(errors.ValidationError, match="supersedes seq 1"):
            s.append("note/x", {"t": "y"}, supersedes=1)
        assert s.append("note/x", {"t": "y"}, supersedes=0).supersedes == 0
    finally:
        st.close()


@pytest.mark.parametrize("env, exc", [
    ({"supersedes": -1}, errors.ValidationError),
    ({"supersedes": 2**63}, errors.ValidationError),
    ({"supersedes": True}, TypeError),
    ({"supersedes": "0"}, TypeError),
    ({"branch_id": ""}, errors.ValidationError),
    ({"branch_id": "b" * 513}, errors.ValidationError),
    ({"branch_id": 3}, TypeError),
])
def test_the_new_fields_are_type_and_value_checked(store, env, exc):
    """Rule: supersedes is a seq (int, not bool, 0 <= n < 2**63); branch_id
    a str of 1 to 512 characters, like source."""
    s = store.create_session(cwd="/r")
    s.append("note/x", {})
    with pytest.raises(exc):
        s.append("note/x", {}, **env)
    assert s.last_seq == 0


# --- the evidence rules and the context builder -------------------------------------

def _fact(s, call_id: str, output: str, **env):
    s.append("assistant/message", {"content": "", "tool_calls": [
        {"id": call_id, "name": "run_tests", "arguments": {}}]}, source="model")
    call = s.append("tool/call", {"call_id": call_id, "name": "run_tests", "arguments": {}},
                    source="host")
    return s.append("tool/result", {"call_id": call_id, "name": "run_tests", "output": output,
                                    "is_error": False},
                    source="run_tests", causal_parent=call.seq, data_class="internal",
                    workspace_revision="git:a", **env)


def test_envelope_supersedes_retires_the_earlier_fact(store):
    """Rule: the envelope's supersedes marks its target superseded and the
    context builder leaves it out (event.status.superseded)."""
    s = store.create_session(cwd="/r")
    first = _fact(s, "c1", "FIRST-RUN flaky")
    second = _fact(s, "c2", "SECOND-RUN passed", supersedes=first.seq)
    assert supersedes_of(second) == first.seq
    assert collect(s.events()).status_of(first.seq) == "superseded"
    build = build_context(s)
    assert "FIRST-RUN" not in _text(build) and "SECOND-RUN" in _text(build)
    assert _reasons(build)[first.seq] == "event.status.superseded"


def test_envelope_supersedes_follows_the_authority_rules(store):
    """Rule: an untrusted source's envelope supersedes retires nothing."""
    s = store.create_session(cwd="/r")
    fact = _fact(s, "c1", "KEPT-FACT")
    s.append("note/x", {"text": "x"}, source="web:evil.example", supersedes=fact.seq)
    assert collect(s.events()).status_of(fact.seq) == "active"
    assert "KEPT-FACT" in _text(build_context(s))


def test_envelope_branch_id_scopes_facts_and_wins_over_data(store):
    """Rule: the envelope's branch_id scopes an event (branch.other in a
    build of another branch), and it wins over an older data.branch_id."""
    s = store.create_session(cwd="/r", metadata={"branch": "main"})
    main = _fact(s, "c1", "MAIN-FACT", branch_id="main")
    exp = s.append("note/x", {"text": "EXP-NOTE", "branch_id": "main"}, source="human:alice",
                   branch_id="exp")
    assert branch_of(exp) == "exp"
    build = build_context(s)
    assert "MAIN-FACT" in _text(build) and "EXP-NOTE" not in _text(build)
    assert _reasons(build)[exp.seq] == "branch.other"
    other = build_context(s, branch="exp")
    assert _reasons(other)[main.seq] == "branch.other"


def test_envelope_supersedes_counts_only_on_its_branch(store):
    """Rule: a superseding event of another branch (envelope branch_id)
    retires nothing on this one."""
    s = store.create_session(cwd="/r")
    fact = _fact(s, "c1", "MAIN-FACT")
    _fact(s, "c2", "EXP-FACT", branch_id="exp", supersedes=fact.seq)
    assert "MAIN-FACT" in _text(build_context(s))
    assert _reasons(build_context(s, branch="exp"))[fact.seq] == "event.status.superseded"


def test_the_data_fields_of_older_logs_still_count(store):
    """Rule: with no envelope field, data.supersedes / data.branch_id (the
    layout of logs written before the fields) are read as before."""
    s = store.create_session(cwd="/r")
    first = _fact(s, "c1", "OLD-FIRST")
    second = s.append("note/x", {"supersedes": first.seq, "branch_id": "exp"},
                      source="human:alice")
    assert second.supersedes is None and second.branch_id is None
    assert supersedes_of(second) == first.seq and branch_of(second) == "exp"
    assert collect(s.events()).status_of(first.seq) == "superseded"   # (every branch)
    assert "OLD-FIRST" in _text(build_context(s))          # main: another branch's note
    assert _reasons(build_context(s, branch="exp"))[first.seq] == "event.status.superseded"


# --- export and import ----------------------------------------------------------------

@pytest.mark.parametrize("fmt", ["jsonl", "tlog"])
def test_the_new_fields_round_trip_through_export_and_import(tmp_path, fmt):
    """Rule: export writes both fields and import restores them (the frames
    are the same bytes); fails if export or the importer drops a field."""
    with trajlog.open(str(tmp_path / "a.db")) as a, trajlog.open(str(tmp_path / "b.db")) as b:
        s = a.create_session(cwd="/r")
        s.append("note/x", {"t": 1})
        s.append("note/x", {"t": 2}, supersedes=0, branch_id="exp")
        s.append("note/x", {"t": 3}, branch_id="main", idempotency_key="k")
        out = tmp_path / f"s.{fmt}"
        a.export(s.id, out)
        if fmt == "jsonl":
            lines = out.read_text().splitlines()
            assert '"supersedes":0' in lines[2] and '"branch_id":"exp"' in lines[2]
        b.import_path(out)
        got = b.session(s.id)
        assert [e.envelope for e in got.events()] == [e.envelope for e in s.events()]
        assert [e.envelope for e in got.events()][1:] == [
            {"supersedes": 0, "branch_id": "exp"}, {"idempotency_key": "k", "branch_id": "main"}]
        assert got.verify().ok
