"""Redaction before write and privacy modes (trajlog.redaction): every rule
of the built-in scanner, every policy action and every privacy mode, proven
on what the store returns and on the raw bytes of the database files."""

from __future__ import annotations

import re

import pytest

import trajlog
import trajlog.api
from kits.tamper import file_bytes
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

SQLITE_ERASED = "proves what is gone on the bytes of the SQLite file and its WAL"

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
    # (set after opening: the same as trajlog.open(..., redaction=policy))
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


@pytest.mark.sqlite_only(reason=SQLITE_ERASED)
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


@pytest.mark.sqlite_only(reason=SQLITE_ERASED)
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

@pytest.mark.sqlite_only(reason=SQLITE_ERASED)
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

@pytest.mark.sqlite_only(reason=SQLITE_ERASED)
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


@pytest.mark.sqlite_only(reason=SQLITE_ERASED)
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


# -- trajlog's own machine fields are not scanned ------------------------------------

# a scanner that takes every long hex run or UUID for a secret (as a generic
# high-entropy detector would): it would mask every digest and id trajlog writes
HEXISH = PatternScanner([Rule("hexish", re.compile(
    r"\b[0-9a-f]{32,}\b|\b[0-9a-f]{8}(?:-[0-9a-f]{4}){3}-[0-9a-f]{12}\b"))])
DIGEST = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
UUID = "0b6d6c1e-2f4a-4c1b-9a57-3e2d1f0c9b8a"


@pytest.mark.sqlite_only(reason=SQLITE_ERASED)
def test_redaction_machine_fields_of_a_run_are_left_intact(tmp_path):
    """run/started and run/finalized carry ids and digests trajlog made: a
    scanner that flags hex never masks them (the run's integrity still
    verifies), but a secret in a user-supplied field of the same events is
    masked.  Fails if MACHINE_FIELDS loses run/started or run/finalized."""
    store = _open(tmp_path, RedactionPolicy(scanners=(HEXISH, BUILTIN)))
    s = store.create_session()
    assert s.append("note/x", {"t": DIGEST}).data == {"t": "[REDACTED:hexish]"}
    with s.run(model=f"m {AWS}", run_id=UUID, static_prefix="system prompt") as run:
        s.append("user/message", {"content": "hi"})
        s.switch_model(old="a", new="b", reason=f"key {AWS}")
    started = next(e for e in s.events() if e.type == "run/started")
    finalized = next(e for e in s.events() if e.type == "run/finalized")
    switch = next(e for e in s.events() if e.type == "model/switch")
    assert started.data["run_id"] == UUID == finalized.data["run_id"] == run.id
    assert re.fullmatch(r"[0-9a-f]{64}", started.data["static_prefix_hash"])
    assert re.fullmatch(r"[0-9a-f]{64}", finalized.data["integrity"]["digest"])
    assert started.data["model"] == "m [REDACTED:aws_access_key]"      # user text: scanned
    assert switch.data["run_id"] == UUID
    assert switch.data["reason"] == "key [REDACTED:aws_access_key]"
    [envelope] = projections.runs(s)
    assert envelope.integrity == "ok"
    assert AWS.encode() not in file_bytes(store.path)


def test_redaction_machine_fields_are_skipped_only_in_their_format():
    """A machine path holding anything but an id or a digest (a secret, text,
    an all-digit "revision" that may be a card number) is scanned; the other
    fields of the event are scanned.  Fails without the format check."""
    red = trajlog.redaction.Redactor(RedactionPolicy(scanners=(HEXISH, BUILTIN)))
    out = red.redact("checkpoint/invalidated", {
        "recorded_revision": DIGEST[:40], "current_revision": f"{AWS}",
        "reason": f"mail {DIGEST}"}, None)
    assert out.data == {"recorded_revision": DIGEST[:40],
                        "current_revision": "[REDACTED:aws_access_key]",
                        "reason": "mail [REDACTED:hexish]"}
    out = red.redact("checkpoint/stage", {"workspace_revision": "4111111111111111"}, None)
    assert out.data == {"workspace_revision": "[REDACTED:credit_card]"}
    out = red.redact("run/fork", {"parent_session": f"{UUID} me@example.org"}, None)
    assert out.data == {"parent_session": "[REDACTED:hexish] [REDACTED:email]"}
    # the same fields of a type trajlog does not write are scanned
    out = red.redact("note/x", {"run_id": UUID, "integrity": {"digest": DIGEST}}, None)
    assert out.data == {"run_id": "[REDACTED:hexish]",
                        "integrity": {"digest": "[REDACTED:hexish]"}}


@pytest.mark.parametrize(("type_", "path"), sorted(
    (t, p) for t, spec in trajlog.redaction.MACHINE_FIELDS.items() for p in spec))
def test_redaction_every_machine_field_is_skipped(type_, path):
    """Each entry of MACHINE_FIELDS: its value (a UUID or a digest, as its
    format says) survives a scanner that flags it; removing the entry fails."""
    form = trajlog.redaction.MACHINE_FIELDS[type_][path]
    value = UUID if form.fullmatch(UUID) else DIGEST
    data: dict = {}
    node = data
    for key in path[:-1]:
        node = node.setdefault(key, {})
    node[path[-1]] = value
    red = trajlog.redaction.Redactor(RedactionPolicy(scanners=(HEXISH,)))
    assert red.redact(type_, data, None).data == data
    assert red.redact("note/x", data, None).data != data


# -- the prefilter: it skips rules that cannot match, never one that can ---------------

@pytest.mark.parametrize(("kind", "text", "span"), [
    ("github_token", "pat github_pat_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3", None),
    ("bearer_token", "authorization: bearer " + BEARER, BEARER),
    ("credential", f"PASSWORD : '{PASSWORD.replace('&', 'x')}'", PASSWORD.replace("&", "x")),
    ("credential", f"client-secret=\"{PASSWORD.replace('&', 'x')}\"", None),
    ("credit_card", "card 4111-1111-1111-1111.", "4111-1111-1111-1111"),
    ("phone", "call (415) 555-2671 now", "(415) 555-2671"),
    ("phone", "call 415-555-2671 now", "415-555-2671"),
    ("email", "x@y.io", "x@y.io"),                       # the shortest matches kept
    # (each string exactly the shortest match: a min_len one too long fails)
    ("phone", "+441234567", "+441234567"),
    ("phone", "415-555-2671", "415-555-2671"),
    ("credit_card", "4222222222222", "4222222222222"),
    ("private_key", "-----BEGIN PRIVATE KEY-----", "-----BEGIN PRIVATE KEY-----"),
    ("github_token", "github_pat_" + "a" * 22, "github_pat_" + "a" * 22),
    ("aws_access_key", AWS, AWS),
    ("slack_token", "xoxb-1234567890", "xoxb-1234567890"),
    ("email", "a@b.cc", "a@b.cc"),
    ("openai_key", "sk-" + "a" * 20, "sk-" + "a" * 20),
    ("github_token", "ghp_" + "a" * 36, "ghp_" + "a" * 36),
    ("bearer_token", "Bearer " + "Ab9" * 5 + "Z", "Ab9" * 5 + "Z"),
    ("credential", "pwd=Xy7#kP2q", "Xy7#kP2q"),
])
def test_redaction_prefilter_keeps_every_form_of_a_rule(kind, text, span):
    """Spellings each trigger must let through (case, separators, the
    shortest match): a trigger or min_len that is not a necessary condition
    of its pattern fails here."""
    found = BUILTIN.scan(text)
    assert [f.kind for f in found] == [kind]
    if span is not None:
        assert text[found[0].start:found[0].end] == span


def test_redaction_prefilter_triggers_hold_on_every_sample():
    for rule in BUILTIN.rules:
        text, _ = SAMPLES[rule.kind]
        match = rule.pattern.search(text)
        assert match is not None and rule.trigger is not None and rule.trigger(match.group(0))
        assert len(match.group(0)) >= rule.min_len


def test_redaction_prefilter_skips_what_cannot_match():
    """A rule whose trigger fails or whose min_len exceeds the string is not
    run (the skip is real, not a no-op)."""
    pattern = re.compile(r"secret")
    assert PatternScanner([Rule("k", pattern)]).scan({"a": "secret"}) != []
    assert PatternScanner([Rule("k", pattern, trigger=lambda t: False)]).scan("secret") == []
    assert PatternScanner([Rule("k", pattern, min_len=7)]).scan(["secret"]) == []
    assert PatternScanner([Rule("k", pattern, min_len=6)]).scan(["secret"]) != []


# -- a child of a paused session starts paused ---------------------------------------

def _paused_session(tmp_path):
    store = _open(tmp_path, RedactionPolicy(actions={"credit_card": "hash"}))
    s = store.create_session()
    with s.turn():
        s.append("user/message", {"content": "hello"})
    first = s.last_seq                                      # a turn end before the pause
    with s.turn():
        s.append("user/message", {"content": f"my card is {CARD}"})
    assert s.get(s.last_seq - 1).type == "redaction/paused"
    return store, s, first


def test_redaction_fork_of_a_paused_session_starts_paused(tmp_path):
    """Fails without the copy lineage.fork appends: the fork would take
    content the parent refuses."""
    _, s, _ = _paused_session(tmp_path)
    pause = s.get(s.last_seq - 1)
    fork = s.fork(at_seq=s.last_seq)
    own = fork.get(fork.last_seq)
    assert (own.type, own.seq) == ("redaction/paused", s.last_seq + 1)
    assert own.data["inherited"] == {"session": s.id, "seq": pause.seq}
    assert own.data["events"] == pause.data["events"]
    assert own.data["reason"] == pause.data["reason"]
    with pytest.raises(RedactionPausedError) as err:
        fork.append("user/message", {"content": "go on"})
    assert err.value.session == fork.id
    # another store on the file reads the fork's pause from its log
    other = _open(tmp_path)
    with pytest.raises(RedactionPausedError):
        other.session(fork.id).append("note/x", {})
    other.close()
    # resuming the fork resumes the fork only
    fork.append("redaction/resumed", {"by": "human:alice", "reason": "checked"})
    fork.append("user/message", {"content": "go on"})
    with pytest.raises(RedactionPausedError):
        s.append("user/message", {"content": "parent still paused"})
    # a fork of the paused fork before its resume is paused too
    assert fork.fork(at_seq=own.seq).get(own.seq + 1).type == "redaction/paused"


def test_redaction_parent_resume_does_not_resume_its_forks(tmp_path):
    """The pause is per log: a fork made while paused stays paused after the
    parent resumes; a fork cut after the resume is not paused, one cut
    inside the paused stretch is, one cut before the pause is not."""
    _, s, before = _paused_session(tmp_path)
    paused_end = s.last_seq
    early = s.fork(at_seq=paused_end)
    s.append("redaction/resumed", {"by": "human:alice", "reason": "checked"})
    with s.turn():
        s.append("user/message", {"content": "resumed"})
    with pytest.raises(RedactionPausedError):
        early.append("user/message", {"content": "x"})
    late = s.fork(at_seq=s.last_seq)
    assert late.append("user/message", {"content": "x"}).data == {"content": "x"}
    inside = s.fork(at_seq=paused_end)                    # a cut before the resume
    with pytest.raises(RedactionPausedError):
        inside.append("user/message", {"content": "x"})
    clean = s.fork(at_seq=before)                         # a cut before the pause
    assert clean.append("user/message", {"content": "x"}).seq == before + 1


def test_redaction_subagents_of_a_paused_session_start_paused(tmp_path):
    store, s, _ = _paused_session(tmp_path)
    for child in (s.spawn_subagent("look at the logs"), s.fork_subagent("summarise")):
        task, pause = child.get(child.last_seq - 1), child.get(child.last_seq)
        assert task.type == "user/message" and task.data == {"content": (
            "look at the logs" if child.header.metadata["kind"] == "spawned" else "summarise")}
        assert pause.type == "redaction/paused"
        assert pause.data["inherited"]["session"] == s.id
        with pytest.raises(RedactionPausedError):
            child.append("assistant/message", {"content": "working"})
        child.append("redaction/resumed", {"by": "human:alice", "reason": "ok"})
        child.append("assistant/message", {"content": "working"})
    # a background job's answer goes to the paused parent: refused, no child left
    before = len(list(store.sessions(include_subagents=True)))
    with pytest.raises(RedactionPausedError):
        s.spawn_subagent("bg", call_id="c9", background=True)
    assert len(list(store.sessions(include_subagents=True))) == before


def test_redaction_children_of_an_unpaused_session_get_no_pause(tmp_path):
    store = _open(tmp_path, RedactionPolicy(actions={"credit_card": "hash"}))
    s = store.create_session()
    with s.turn():
        s.append("user/message", {"content": "hello"})
    fork = s.fork(at_seq=s.last_seq)
    assert fork.last_seq == s.last_seq
    child = s.spawn_subagent("task")
    assert [e.type for e in child.events()] == ["user/message"]
