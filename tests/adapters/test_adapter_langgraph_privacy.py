"""TrajlogSaver under a redaction policy and under erasure, on real LangGraph
graphs: a masked secret never corrupts a stored checkpoint (the scanners work
on the values, not on the serde's bytes), a value the saver cannot open is
refused rather than stored with the secret, and erasing a message reaches
every checkpoint and write of the thread that copied its text."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langgraph")

from langchain_core.messages import HumanMessage
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

import trajlog
from adapters.test_adapter_langgraph_saver import _graph, cfg, put
from kits.tamper import file_bytes
from trajlog.adapters.langgraph import TrajlogSaver, TrajlogStore
from trajlog.adapters.langgraph._log import PUT, WRITES, session_id_of
from trajlog.errors import (
    ErasureError,
    RedactionPausedError,
    RedactionRefusedError,
    UnredactableValueError,
)
from trajlog.redaction import RedactionPolicy

SQLITE_ERASED = "proves what is gone on the bytes of the SQLite file and its WAL"

AWS = "AKIA" + "Q4ZJ7W2XK9LM3NPR"
MASK = "[REDACTED:aws_access_key]"


@pytest.fixture
def db(tmp_path: Path) -> str:
    return str(tmp_path / "t.db")


def stored_text(store: trajlog.Store, thread: str) -> str:
    """Everything a thread's log holds, as text: every event's data, and every
    serialized value in it as the serde's bytes (latin-1)."""
    parts = []
    for ev in store.session(session_id_of(thread)).events():
        parts.append(json.dumps(ev.data, ensure_ascii=False, default=repr))
    return "\n".join(parts)


def contents(graph: Any, config: Any) -> list[Any]:
    return [m.content for m in graph.get_state(config).values["messages"]]


# -- redaction ------------------------------------------------------------------------

@pytest.mark.sqlite_only(reason=SQLITE_ERASED)
def test_a_masked_secret_leaves_the_graph_working(db: str) -> None:
    store = trajlog.open(db, redaction=RedactionPolicy())
    try:
        graph = _graph(TrajlogSaver(store))
        config = cfg("chat")
        graph.invoke({"messages": [HumanMessage(f"use {AWS} please")]}, config)
        assert contents(graph, config)[0] == f"use {MASK} please"
        graph.invoke({"messages": [HumanMessage("and again")]}, config)   # it goes on
        got = contents(graph, config)
        assert got[0] == f"use {MASK} please" and got[-1] == "it is noon"
        assert AWS not in stored_text(store, "chat")
        history = list(graph.get_state_history(config))     # every checkpoint decodes
        assert len(history) > 4
        assert store.session(session_id_of("chat")).verify().ok
        # the checkpoint events say they were redacted
        puts = [ev for ev in store.session(session_id_of("chat")).events() if ev.type == PUT]
        assert any(ev.data_class == "internal-redacted" for ev in puts)
    finally:
        store.close()
    assert AWS.encode() not in file_bytes(db)


def test_masking_reaches_writes_bytes_keys_and_nested_values(db: str) -> None:
    store = trajlog.open(db, redaction=RedactionPolicy())
    try:
        saver = TrajlogSaver(store)
        values = {"raw": b"\x00\xff key " + AWS.encode(), "nested": {AWS: [1, (2.5, AWS)]},
                  "n": float("nan"), "big": 2**63 + 5, "neg": -(2**63)}
        stored = put(saver, "t", values)
        saver.put_writes(stored, [("w", f"x {AWS} y"), ("m", HumanMessage(AWS, id="m1"))],
                         "task")
        tup = saver.get_tuple(cfg("t"))
        assert tup is not None
        cv = tup.checkpoint["channel_values"]
        assert cv["raw"] == b"\x00\xff key " + MASK.encode()
        assert cv["nested"] == {MASK: [1, [2.5, MASK]]}
        assert cv["n"] != cv["n"] and cv["big"] == 2**63 + 5 and cv["neg"] == -(2**63)
        assert tup.pending_writes is not None
        assert tup.pending_writes[0] == ("task", "w", f"x {MASK} y")
        assert tup.pending_writes[1][2].content == MASK
        assert AWS not in stored_text(store, "t")
    finally:
        store.close()


def test_values_without_findings_round_trip_under_a_policy(db: str) -> None:
    store = trajlog.open(db, redaction=RedactionPolicy())
    try:
        saver = TrajlogSaver(store)
        values = {"raw": b"\x00\xff\xfe binary", "text": "a\x00b ünïcode", "n": [1, (2, 3)],
                  "m": HumanMessage("hello", id="x"), "f": 0.1, "none": None, "t": True,
                  "ik": {1: "one", 2: b"two"}}
        put(saver, "t", values)
        tup = TrajlogSaver(store).get_tuple(cfg("t"))     # (a fresh saver: from the log)
        assert tup is not None
        serde = JsonPlusSerializer()
        assert tup.checkpoint["channel_values"] == serde.loads_typed(serde.dumps_typed(values))
    finally:
        store.close()


@pytest.mark.sqlite_only(reason=SQLITE_ERASED)
def test_refuse_writes_nothing(db: str) -> None:
    store = trajlog.open(db, redaction=RedactionPolicy(actions={"aws_access_key": "refuse"}))
    try:
        graph = _graph(TrajlogSaver(store))
        with pytest.raises(RedactionRefusedError):
            graph.invoke({"messages": [HumanMessage(f"use {AWS}")]}, cfg("chat"))
        assert AWS not in stored_text(store, "chat")
    finally:
        store.close()
    assert AWS.encode() not in file_bytes(db)


def test_hash_pauses_with_a_checkpoint_that_decodes(db: str) -> None:
    store = trajlog.open(db, redaction=RedactionPolicy(default="hash"))
    try:
        saver = TrajlogSaver(store)
        put(saver, "t", {"k": f"key {AWS}", "after": "kept"})
        tup = TrajlogSaver(store).get_tuple(cfg("t"))     # (a fresh saver: from the log)
        assert tup is not None
        got = tup.checkpoint["channel_values"]
        assert got["k"].startswith("key sha256:") and len(got["k"]) == len("key sha256:") + 64
        assert got["after"] == "kept"
        with pytest.raises(RedactionPausedError):
            put(saver, "t", {"k": "next"})
    finally:
        store.close()


def test_channel_versions_never_look_like_a_finding(db: str) -> None:
    """The saver's own strings in a checkpoint (versions, ids) are never masked."""
    from trajlog.redaction import BUILTIN
    random.seed(7)
    with TrajlogSaver.open(db) as saver:
        current = None
        for _ in range(3000):
            current = saver.get_next_version(current, None)
            assert not BUILTIN.scan(current), current
            assert saver.get_next_version(current, None) > current


class Opaque:
    """A serde whose bytes the saver cannot open (an encrypting one, say)."""

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        return "opaque", json.dumps(obj, default=repr).encode()

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        return json.loads(data[1])


def test_a_value_the_saver_cannot_open_is_refused_not_corrupted(db: str) -> None:
    store = trajlog.open(db, redaction=RedactionPolicy())
    try:
        saver = TrajlogSaver(store, serde=Opaque())   # type: ignore[arg-type]
        put(saver, "clean", {"k": "fine"})
        tup = saver.get_tuple(cfg("clean"))
        assert tup is not None and tup.checkpoint["channel_values"] == {"k": "fine"}
        s = store.session(session_id_of("clean"))
        last = s.last_seq
        with pytest.raises(UnredactableValueError) as err:
            put(saver, "clean", {"k": f"key {AWS}"})
        assert err.value.kind == "aws_access_key" and AWS not in str(err.value)
        assert s.last_seq == last
        assert AWS not in stored_text(store, "clean")
    finally:
        store.close()


def test_without_a_policy_the_stored_form_is_unchanged(db: str) -> None:
    with TrajlogSaver.open(db) as saver:
        put(saver, "t", {"k": f"key {AWS}"})
        ev = saver.store.session(session_id_of("t")).get(0)
        assert ev.data["checkpoint"][1] in ("u", "l")      # the serde's bytes as text


# -- erasure --------------------------------------------------------------------------

SECRET = "my card pin is 4417"


@pytest.mark.sqlite_only(reason=SQLITE_ERASED)
def test_erasing_a_message_reaches_every_checkpoint_and_write(db: str) -> None:
    with TrajlogSaver.open(db) as saver:
        store = saver.store
        graph = _graph(saver)
        config = cfg("chat")
        graph.invoke({"messages": [HumanMessage(SECRET)]}, config)
        graph.invoke({"messages": [HumanMessage("what time?")]}, config)
        sid = session_id_of("chat")
        assert SECRET in stored_text(store, "chat")
        mirrored = [ev for ev in store.session(sid).events()
                    if ev.type == "user/message" and ev.data.get("content") == SECRET]
        assert len(mirrored) == 1
        held = [ev.seq for ev in store.session(sid).events() if ev.type in (PUT, WRITES)
                and SECRET in json.dumps(ev.data)]
        assert len(held) > 3          # the input, its write, and every later checkpoint
        report = saver.erase_message("chat", mirrored[0].data["message_id"],
                                     reason="user asked")
        assert set(held) | {mirrored[0].seq} <= set(report.erased)
        assert SECRET not in stored_text(store, "chat")
        got = contents(graph, config)
        assert got[0] == TrajlogSaver.ERASED and "what time?" in got
        assert len(list(graph.get_state_history(config))) >= len(
            [s for s in held if store.session(sid).get(s).type == PUT])
        graph.invoke({"messages": [HumanMessage("still there?")]}, config)   # it goes on
        assert contents(graph, config)[0] == TrajlogSaver.ERASED
        assert SECRET not in stored_text(store, "chat")
        # the mirror does not mirror the erased message again
        assert not [ev for ev in store.session(sid).events() if ev.type == "user/message"
                    and ev.data.get("content") == TrajlogSaver.ERASED]
        assert store.verify().ok
        # a fresh saver (its index from the log) reads the same thread
        fresh = _graph(TrajlogSaver(store))
        assert contents(fresh, config) == contents(graph, config)
    assert SECRET.encode() not in file_bytes(db)


def test_erasing_after_the_mirrored_event_was_erased(db: str) -> None:
    """``Store.erase`` of the mirrored event alone leaves the copies; the
    saver still finds them by the message's id."""
    with TrajlogSaver.open(db) as saver:
        graph = _graph(saver)
        config = cfg("chat")
        graph.invoke({"messages": [HumanMessage(SECRET)]}, config)
        sid = session_id_of("chat")
        ev = next(e for e in saver.store.session(sid).events() if e.type == "user/message")
        saver.store.erase(sid, ev.seq, reason="by hand")
        saver.erase_message("chat", ev.data["message_id"], reason="and its copies")
        assert SECRET not in stored_text(saver.store, "chat")
        assert contents(graph, config)[0] == TrajlogSaver.ERASED


def test_erasing_an_unknown_message_changes_nothing(db: str) -> None:
    with TrajlogSaver.open(db) as saver:
        graph = _graph(saver)
        graph.invoke({"messages": [HumanMessage(SECRET)]}, cfg("chat"))
        s = saver.store.session(session_id_of("chat"))
        last = s.last_seq
        with pytest.raises(ErasureError):
            saver.erase_message("chat", "no-such-id", reason="x")
        with pytest.raises(ErasureError):
            saver.erase_message("nobody", "no-such-id", reason="x")
        assert s.last_seq == last


def test_erasure_reaches_a_copied_thread(db: str) -> None:
    with TrajlogSaver.open(db) as saver:
        graph = _graph(saver)
        graph.invoke({"messages": [HumanMessage(SECRET)]}, cfg("src"))
        saver.copy_thread("src", "dst")
        mid = graph.get_state(cfg("src")).values["messages"][0].id
        saver.erase_message("src", mid, reason="user asked")
        for thread in ("src", "dst"):
            assert SECRET not in stored_text(saver.store, thread)
            assert contents(graph, cfg(thread))[0] == TrajlogSaver.ERASED
        graph.invoke({"messages": [HumanMessage("go on")]}, cfg("dst"))
        assert contents(graph, cfg("dst"))[-1] == "it is noon"


def test_erasing_a_message_under_a_policy(db: str) -> None:
    store = trajlog.open(db, redaction=RedactionPolicy())
    try:
        saver = TrajlogSaver(store)
        graph = _graph(saver)
        graph.invoke({"messages": [HumanMessage(f"{SECRET} and {AWS}")]}, cfg("chat"))
        mid = graph.get_state(cfg("chat")).values["messages"][0].id
        saver.erase_message("chat", mid, reason="user asked")
        text = stored_text(store, "chat")
        assert SECRET not in text and AWS not in text
        assert contents(graph, cfg("chat"))[0] == TrajlogSaver.ERASED
    finally:
        store.close()


def test_a_checkpoint_put_directly_erases_too(db: str) -> None:
    """Checkpoints a caller puts (no graph) with a message in them."""
    with TrajlogSaver.open(db) as saver:
        cp = empty_checkpoint()
        msg = HumanMessage(SECRET, id="m-1")
        cp["channel_values"] = {"messages": [msg], "copy": {"note": SECRET}}
        saver.put(cfg("t"), cp, {"source": "input", "step": -1}, {})
        saver.erase_message("t", "m-1", reason="x")
        tup = saver.get_tuple(cfg("t"))
        assert tup is not None
        assert tup.checkpoint["channel_values"]["copy"] == {"note": TrajlogSaver.ERASED}
        assert SECRET not in stored_text(saver.store, "t")


# -- TrajlogStore under a policy ------------------------------------------------------

PHONE = "+1 415-555-0134"


def test_store_items_stay_addressable_when_a_label_or_key_is_masked(db: str) -> None:
    store = trajlog.open(db, redaction=RedactionPolicy())
    try:
        s = TrajlogStore(store)
        s.put(("users", PHONE), "prefs", {"note": f"key {AWS}", "n": 1})
        s.put(("users", "bob"), "alice@example.com", {"x": 1})
        s.put(("users", "bob"), "alice@example.com", {"x": 2})     # a new version of it
        got = s.get(("users", PHONE), "prefs")
        assert got is not None and got.value == {"note": f"key {MASK}", "n": 1}
        assert got.namespace == ("users", PHONE) and got.key == "prefs"
        got = s.get(("users", "bob"), "alice@example.com")
        assert got is not None and got.value == {"x": 2} and got.key == "alice@example.com"
        found = {(tuple(i.namespace), i.key) for i in s.search(("users",))}
        assert found == {(("users", PHONE), "prefs"), (("users", "bob"), "alice@example.com")}
        assert [i.key for i in s.search(("users", PHONE))] == ["prefs"]
        assert sorted(s.list_namespaces()) == [("users", PHONE), ("users", "bob")]
        s.delete(("users", "bob"), "alice@example.com")
        assert s.get(("users", "bob"), "alice@example.com") is None
        # the value is masked at the value level: its secret is nowhere
        assert all(AWS not in json.dumps(mi.content) for mi in s.memory.list(
            scopes=["user"], states=("active", "revoked")))
    finally:
        store.close()


def test_store_search_by_a_label_a_policy_masks(db: str) -> None:
    card = "4111111111111111"
    store = trajlog.open(db, redaction=RedactionPolicy())
    try:
        s = TrajlogStore(store)
        s.put(("cards", card), "k", {"v": 1})
        assert [i.key for i in s.search(("cards", card))] == ["k"]
        assert [i.key for i in s.search((card,))] == [] and s.get(("cards", card), "k")
    finally:
        store.close()


def test_store_long_address_with_a_finding_is_refused(db: str) -> None:
    store = trajlog.open(db, redaction=RedactionPolicy())
    try:
        s = TrajlogStore(store)
        long_key = "alice@example.com " + "x" * 300     # hashed: the record is the address
        with pytest.raises(UnredactableValueError):
            s.put(("users",), long_key, {"v": 1})
        assert s.search(("users",)) == []
        s.put(("users",), "y" * 300, {"v": 1})           # nothing found: stored
        got = s.get(("users",), "y" * 300)
        assert got is not None and got.value == {"v": 1}
    finally:
        store.close()


def test_an_older_checkpoint_put_again_is_not_the_latest(db: str) -> None:
    """A restored put of an older checkpoint lands after newer ones in the log:
    the latest is still the greatest id, for a fresh saver (the backwards
    scan), for one that follows the log, and for the full index."""
    with TrajlogSaver.open(db) as saver:
        cp = empty_checkpoint()
        cp["channel_values"] = {"messages": [HumanMessage(SECRET, id="m-1")]}
        first = saver.put(cfg("t"), cp, {"source": "input", "step": -1}, {})
        follower = TrajlogSaver(saver.store)
        assert follower.get_tuple(cfg("t")) is not None     # (it knows the head now)
        newer = put(saver, "t", {"messages": []}, parent=first["configurable"]["checkpoint_id"])
        saver.put_writes(newer, [("x", 1)], "task")
        saver.erase_message("t", "m-1", reason="x")
        want = newer["configurable"]["checkpoint_id"]
        for reader in (TrajlogSaver(saver.store), follower, saver):
            tup = reader.get_tuple(cfg("t"))
            assert tup is not None and tup.checkpoint["id"] == want
            assert tup.pending_writes == [("task", "x", 1)]
        old = saver.get_tuple(first)
        assert old is not None and old.checkpoint["channel_values"]["messages"][0].content == (
            TrajlogSaver.ERASED)
        assert [t.checkpoint["id"] for t in saver.list(cfg("t"))] == [
            want, first["configurable"]["checkpoint_id"]]
