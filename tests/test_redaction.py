"""Redaction before write and privacy modes (trajlog.redaction): every rule
of the built-in scanner, every policy action and every privacy mode, proven
on what the store returns and on the raw bytes of the database files."""

from __future__ import annotations

import re

import pytest

import trajlog
import trajlog.api
from tamper import file_bytes
from trajlog import Identity, projections
from trajlog.errors import RedactionPausedError, RedactionRefusedError
from trajlog.redaction import (
    BUILTIN,
    PII_KINDS,
    SECRET_KINDS,
    Finding,
    PatternScanner,
    RedactionPolicy,
    Rule,
)

AWS = "AKIA" + "Q4ZJ7W2XK9LM3NPR"
GITHUB = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
OPENAI = "sk-proj-" + "Zx9Qw8Er7Ty6Ui5Op4As3Df2Gh1"
SLACK = "xoxb-" + "1234567890-abcdefGHIJKL"
PEM = "-----BEGIN RSA PRIVATE KEY-----\nMIIEow1b2c3\n-----END RSA PRIVATE KEY-----"
BEARER = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.k3y"
PASSWORD = "Tr0ub4dor&3xQz"
CARD = "4111 1111 1111 1111"         # passes the Luhn check

# kind -> (text holding it, the matched span)
SAMPLES = {
    "aws_access_key": (f"key id {AWS} in env", AWS),
    "github_token": (f"token={GITHUB}", GITHUB),
    "openai_key": (f"OPENAI_API_KEY {OPENAI}", OPENAI),
    "slack_token": (f"slack {SLACK} here", SLACK),
    "private_key": (f"cert:\n{PEM}\nend", PEM),
    "bearer_token": (f"Authorization: Bearer {BEARER}", BEARER),
    "credential": (f"db password={PASSWORD.replace('&', 'x')} ok", PASSWORD.replace("&", "x")),
    "email": ("write to alice.smith@example.com today", "alice.smith@example.com"),
    "phone": ("call +1 415 555 2671 now", "+1 415 555 2671"),
    "credit_card": (f"card {CARD} exp 12/29", CARD),
}




def _open(tmp_path, policy=None, name="r.db"):
    # (trajlog.open(..., redaction=policy) once interop/store.py forwards it;
    # trajlog.api.open takes it today)
    store = trajlog.open(str(tmp_path / name), repack=False)
    store.redaction = policy
    return store


# -- the built-in scanner: one test per rule (removing the rule fails it) ------

def test_redaction_builtin_covers_every_kind():
    assert set(SAMPLES) == SECRET_KINDS | PII_KINDS


@pytest.mark.parametrize("kind", sorted(SAMPLES))
def test_redaction_builtin_rule_finds_its_kind(kind):
    text, span = SAMPLES[kind]
    found = BUILTIN.scan({"a": [text]})
    assert [(f.kind, f.path, text[f.start:f.end]) for f in found] == [(kind, "$.a[0]", span)]


@pytest.mark.parametrize("text", [
    "card 4111 1111 1111 1112",            # fails the Luhn check
    "password=changeme",                   # low entropy: a placeholder
    "password=${DB_PASSWORD}",
    "host 192.168.100.200 port 8080",      # an address, not a phone number
    "released 2024-01-15, build 1.2.3",
    "sk-short",
    # a Luhn-valid run of digits inside a hex digest or an id is no card number
    # (a run's integrity hash was masked once in a hundred runs before this rule)
    "digest 9f4111111111111111e0c2 and run 4111111111111111-aa",
])
def test_redaction_builtin_leaves_lookalikes(text):
    assert BUILTIN.scan(text) == []


def test_redaction_paths_name_odd_keys():
    found = BUILTIN.scan({"a b": {"x": ["me@example.org"]}})
    assert found == [Finding("email", '$["a b"].x[0]', 0, 14)]


# -- mask: the done-when test on the file's bytes --------------------------------

def _plant(s, mem, secret: str) -> None:
    with s.turn():
        s.append("user/message", {"content": "deploy it"})
        with s.step():
            s.append("assistant/message", {"content": f"using key {secret}", "tool_calls": [
                {"id": "c1", "name": "env", "arguments": {}}]})
            s.append("tool/call", {"call_id": "c1", "name": "env", "arguments": {}})
            s.append("tool/result", {"call_id": "c1", "output": f"AWS_KEY={secret}\n",
                                     "is_error": False})
    mem.remember("session", "fact", {"text": f"the deploy key is {secret}"})


@pytest.mark.parametrize("masked", [False, True])
def test_redaction_mask_keeps_a_secret_out_of_the_database_files(tmp_path, masked):
    """Tool output, model output and a memory item: under the masking policy
    the secret is nowhere in the .db or -wal bytes (without it, it is: the
    test can fail)."""
    store = _open(tmp_path, RedactionPolicy() if masked else None)
    s = store.create_session(metadata={"tenant": "acme"})
    mem = store.memory(Identity("acme", session=s.id))
    _plant(s, mem, AWS)
    projections.model_history(s)
    projections.checkpoint(s)
    raw = file_bytes(store.path)
    assert (AWS.encode() in raw) is not masked
    if masked:
        events = list(s.events())
        assert events[3].data["content"] == "using key [REDACTED:aws_access_key]"
        assert events[3].data_class == "internal-redacted"
        assert events[5].data["output"] == "AWS_KEY=[REDACTED:aws_access_key]\n"
        assert events[2].data_class is None         # nothing found: unchanged
        [item] = mem.list()
        assert item.content == {"text": "the deploy key is [REDACTED:aws_access_key]"}
        assert item.sensitivity == "internal-redacted"
        assert mem.search("deploy")                 # the index holds the masked text
        assert b"[REDACTED:aws_access_key]" in raw
    store.close()
    assert (AWS.encode() in file_bytes(store.path)) is not masked


def test_redaction_data_class_is_raised_never_lowered(tmp_path):
    store = _open(tmp_path, RedactionPolicy())
    s = store.create_session()
    ev = s.append("note/x", {"t": "me@example.org"}, data_class="restricted")
    assert ev.data_class == "restricted" and ev.data == {"t": "[REDACTED:email]"}
    ev = s.append("note/x", {"t": "me@example.org"}, data_class="public")
    assert ev.data_class == "internal-redacted"


def test_redaction_batches_and_atomic_writes_are_redacted(tmp_path):
    store = _open(tmp_path, RedactionPolicy())
    s = store.create_session()
    [a, b] = s.append_batch([("note/x", {"t": GITHUB}), ("note/y", {"t": "fine"})])
    assert a.data == {"t": "[REDACTED:github_token]"} and b.data == {"t": "fine"}
    [[c]] = store.append_atomic([(s, [("note/z", {"t": SLACK})], None)])
    assert c.data == {"t": "[REDACTED:slack_token]"}
    assert GITHUB.encode() not in file_bytes(store.path)


def test_redaction_policy_set_on_an_open_store(tmp_path):
    store = _open(tmp_path)
    s = store.create_session()
    assert s.append("note/x", {"t": AWS}).data == {"t": AWS}
    store.redaction = RedactionPolicy()
    assert store.redaction is not None
    assert s.append("note/x", {"t": AWS}).data == {"t": "[REDACTED:aws_access_key]"}
    store.redaction = None
    assert s.append("note/x", {"t": AWS}).data == {"t": AWS}


# -- refuse ----------------------------------------------------------------------

def test_redaction_refuse_names_type_path_and_kind_and_writes_nothing(tmp_path):
    store = _open(tmp_path, RedactionPolicy(actions={"private_key": "refuse"}))
    s = store.create_session()
    s.append("user/message", {"content": "hi"})
    with pytest.raises(RedactionRefusedError) as err:
        s.append("tool/result-like", {"files": [{"body": PEM}]})
    assert (err.value.event_type, err.value.path, err.value.kind) == (
        "tool/result-like", "$.files[0].body", "private_key")
    assert "MIIEow" not in str(err.value)
    with pytest.raises(RedactionRefusedError):
        s.append_batch([("note/a", {"t": "ok"}), ("note/b", {"t": PEM})])
    assert s.last_seq == 0
    mem = store.memory(Identity("acme", user="u"))
    with pytest.raises(RedactionRefusedError) as err:
        mem.remember("user", "fact", {"text": PEM})
    assert err.value.event_type == "memory/fact"
    assert mem.list() == []
    store.close()
    assert b"MIIEow" not in file_bytes(store.path)


# -- hash, and the pause it causes -----------------------------------------------

def test_redaction_hash_stores_a_digest_and_pauses_the_session(tmp_path):
    policy = RedactionPolicy(actions={"credit_card": "hash"})
    store = _open(tmp_path, policy)
    s = store.create_session()
    with s.lease():
        s.append("turn/start", {})
        ev = s.append("user/message", {"content": f"my card is {CARD}"})
        assert re.fullmatch(r"my card is sha256:[0-9a-f]{64}", ev.data["content"])
        assert ev.data_class == "restricted"
        paused = s.get(ev.seq + 1)
        assert paused.type == "redaction/paused"
        assert paused.data["events"] == [{"seq": ev.seq,
                                          "findings": [["credit_card", "$.content"]]}]
        with pytest.raises(RedactionPausedError) as err:
            s.append("assistant/message", {"content": "thanks"})
        assert err.value.seq == paused.seq + 1 and err.value.event_type == "assistant/message"
        s.append("turn/end", {"interrupted": True})   # closing what is open passes
    # another store on the file (another process) reads the pause from the log
    other = _open(tmp_path)
    with pytest.raises(RedactionPausedError):
        other.session(s.id).append("note/x", {})
    other.close()
    s.append("redaction/resumed", {"by": "human:alice", "reason": "checked"})
    assert s.append("user/message", {"content": "go on"}).seq == s.last_seq
    assert CARD.encode() not in file_bytes(store.path)


def test_redaction_hash_in_memory_holds_the_item_provisional(tmp_path):
    store = _open(tmp_path, RedactionPolicy(actions={"email": "hash"}))
    mem = store.memory(Identity("acme", user="u"))
    item = mem.remember("user", "fact", {"text": "boss is bob@corp.example"})
    assert item.state == "provisional" and item.sensitivity == "restricted"
    assert "bob@corp.example" not in str(item.content)
    assert mem.search("boss") == []
    clean = mem.remember("user", "fact", {"text": "CI runs on linux"})
    fixed = mem.correct(clean.id, {"text": "mail ann@corp.example"}, reason="x")
    assert fixed.state == "provisional"


def test_redaction_allow_passes_a_kind_through(tmp_path):
    store = _open(tmp_path, RedactionPolicy(actions={"email": "allow"}))
    s = store.create_session()
    ev = s.append("note/x", {"t": "me@example.org", "k": AWS})
    assert ev.data == {"t": "me@example.org", "k": "[REDACTED:aws_access_key]"}


def test_redaction_scanners_are_pluggable(tmp_path):
    ticket = PatternScanner([Rule("ticket", re.compile(r"\bTCK-\d{4}\b"))])
    store = _open(tmp_path, RedactionPolicy(scanners=[ticket]))
    s = store.create_session()
    ev = s.append("note/x", {"t": "see TCK-1234 and me@example.org"})
    assert ev.data == {"t": "see [REDACTED:ticket] and me@example.org"}  # builtin not used


def test_redaction_policy_checks_its_values():
    with pytest.raises(trajlog.errors.InvalidArgumentError):
        RedactionPolicy(actions={"email": "drop"})
    with pytest.raises(trajlog.errors.InvalidArgumentError):
        RedactionPolicy(privacy={"acme": "some"})
    with pytest.raises(TypeError):
        RedactionPolicy(scanners=[object()])


# -- privacy modes -----------------------------------------------------------------

def _tool_turn(s, text: str) -> None:
    with s.turn():
        s.append("user/message", {"content": text})
        with s.step():
            s.append("assistant/message", {"content": text, "tool_calls": [
                {"id": "c1", "name": "read", "arguments": {"path": text}}]})
            s.append("tool/call", {"call_id": "c1", "name": "read", "arguments": {"path": text}})
            s.append("tool/result", {"call_id": "c1", "output": text, "is_error": False})


@pytest.mark.parametrize("mode", ["full", "metadata", "none"])
def test_redaction_privacy_mode_routes_before_any_write(tmp_path, mode):
    text = "PLAINWORDS-quietly-kept"
    store = _open(tmp_path, RedactionPolicy(scanners=(), privacy={"acme/alice": mode,
                                                                  "acme": "full"}))
    s = store.create_session(metadata={"tenant": "acme", "user": "alice"})
    _tool_turn(s, text)
    fork = s.fork(at_seq=s.last_seq)                   # inherits the identity
    fork.append("user/message", {"content": text + "-fork"})
    projections.checkpoint(s)
    chat = projections.chat(s)
    store.export(s.id, str(tmp_path / "s.jsonl"))
    store.export(s.id, str(tmp_path / "s.tlog"))
    exported = (tmp_path / "s.jsonl").read_bytes() + (tmp_path / "s.tlog").read_bytes()
    raw = file_bytes(store.path)
    kept = mode == "full"
    assert (text.encode() in raw) is kept
    assert (text.encode() in exported) is kept
    assert (text in repr(chat)) is kept
    result = next(e for e in s.events() if e.type == "tool/result")
    assert result.data["call_id"] == "c1" and result.data["is_error"] is False
    assert s.verify().ok
    if not kept:
        user = s.get(1)
        assert user.data["content"] == ""
        assert user.data["privacy"]["mode"] == mode
        assert re.fullmatch(r"[0-9a-f]{64}", user.data["privacy"]["sha256"])
        assert ("shape" in user.data["privacy"]) is (mode == "metadata")
        if mode == "metadata":
            assert user.data["privacy"]["shape"] == {"content": f"str:{len(text)}"}
        assert s.get(3).data["tool_calls"] == [{"id": "c1", "name": "read"}]
        assert fork.get(fork.last_seq).data["privacy"]["mode"] == mode


def test_redaction_privacy_mode_of_other_identities(tmp_path):
    store = _open(tmp_path, RedactionPolicy(scanners=(), privacy={"acme": "none",
                                                                  "*": "metadata"}))
    a = store.create_session(metadata={"tenant": "acme", "user": "bob"})
    b = store.create_session(metadata={"tenant": "other"})
    plain = trajlog.api.open(str(tmp_path / "p.db"), repack=False,
                             redaction=RedactionPolicy(scanners=(), privacy={"acme": "none"}))
    c = plain.create_session()
    assert a.append("note/x", {"t": "x"}).data["privacy"]["mode"] == "none"
    assert b.append("note/x", {"t": "x"}).data["privacy"]["mode"] == "metadata"
    assert c.append("note/x", {"t": "x"}).data == {"t": "x"}
