"""Redaction of JSON held in a string (a tool call's ``arguments`` as
OpenAI-style hosts write them): the scanners see its values and keys, one by
one, and a masked value is encoded again, so the stored text stays valid JSON
of the same structure.  A span of the text itself is never cut (a match
swallowing an escape or a quote would corrupt it)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import trajlog
from trajlog.errors import RedactionPausedError, RedactionRefusedError, UnredactableValueError
from trajlog.redaction import RedactionPolicy, Redactor

AWS = "AKIA" + "Q4ZJ7W2XK9LM3NPR"
CARD = "4111 1111 1111 1111"
PASSWORD = "Zq8xWv3Lk9"
KEY_BLOCK = ("-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAx7\nq9Lw3Yz\n"
             "-----END RSA PRIVATE KEY-----")


def _call(arguments: str) -> dict[str, Any]:
    return {"content": "", "tool_calls": [{"id": "c1", "name": "sh", "arguments": arguments}]}


def _stored_arguments(path: Path, arguments: str, policy: RedactionPolicy | None = None,
                      ) -> tuple[Any, str | None]:
    """Append an assistant message requesting one call with ``arguments``;
    what the log holds (decoded: it must be JSON) and the data class."""
    with trajlog.open(str(path), redaction=policy or RedactionPolicy()) as store:
        s = store.create_session(cwd=".")
        s.append("assistant/message", _call(arguments))
        ev = s.get(s.last_seq)
        return json.loads(ev.data["tool_calls"][0]["arguments"]), ev.data_class


def test_a_match_swallowing_an_escape_leaves_valid_json(tmp_path: Path) -> None:
    arguments = json.dumps({"cmd": f'login password={PASSWORD}"x'})
    stored, cls = _stored_arguments(tmp_path / "s.db", arguments)
    assert PASSWORD not in json.dumps(stored)
    assert stored == {"cmd": 'login password=[REDACTED:credential]"x'}
    assert cls == "internal-redacted"


@pytest.mark.parametrize(("value", "kind"), [
    (f"aws {AWS} here", "aws_access_key"),
    (f"card {CARD}", "credit_card"),
    ("write to bob@example.com now", "email"),
    (KEY_BLOCK, "private_key"),           # spans lines: "\n" escapes in the text
    (f"say \"hi\"\\ and {AWS}\t", "aws_access_key"),
])
def test_every_rule_inside_a_json_string(tmp_path: Path, value: str, kind: str) -> None:
    arguments = json.dumps({"args": ["-x", {"text": value, "n": 3}], "flag": True})
    stored, _ = _stored_arguments(tmp_path / "s.db", arguments)
    assert stored["args"][0] == "-x" and stored["flag"] is True and stored["args"][1]["n"] == 3
    text = stored["args"][1]["text"]
    assert f"[REDACTED:{kind}]" in text
    for secret in (AWS, CARD, "bob@example.com", "MIIEowIBAAKCAQEAx7"):
        assert secret not in text


def test_escapes_do_not_hide_a_secret(tmp_path: Path) -> None:
    # "\u0040" is "@" and "\u0041" is "A": the text never shows the secret
    arguments = '{"to": "bob\\u0040example.com", "key": "\\u0041KIAQ4ZJ7W2XK9LM3NPR"}'
    stored, _ = _stored_arguments(tmp_path / "s.db", arguments)
    assert stored == {"to": "[REDACTED:email]", "key": "[REDACTED:aws_access_key]"}


def test_keys_are_scanned_and_name_the_credential(tmp_path: Path) -> None:
    arguments = json.dumps({"password": PASSWORD, "bob@example.com": 1,
                            "carol@example.com": 2, "nested": {"api_key": "k" + PASSWORD}})
    stored, _ = _stored_arguments(tmp_path / "s.db", arguments)
    # a key that holds an address is masked; two such keys stay two keys
    assert list(stored) == ["password", "[REDACTED:email]", "[REDACTED:email]#2", "nested"]
    assert stored["password"] == "[REDACTED:credential]"
    assert stored["nested"] == {"api_key": "[REDACTED:credential]"}
    assert stored["[REDACTED:email]"] == 1 and stored["[REDACTED:email]#2"] == 2


def test_a_number_that_is_a_card_becomes_a_masked_string(tmp_path: Path) -> None:
    stored, _ = _stored_arguments(tmp_path / "s.db", '{"card": 4111111111111111, "n": 7}')
    assert stored == {"card": "[REDACTED:credit_card]", "n": 7}


def test_top_level_array_and_untouched_text(tmp_path: Path) -> None:
    stored, _ = _stored_arguments(tmp_path / "a.db", json.dumps([1, f"x {AWS}", None]))
    assert stored == [1, "x [REDACTED:aws_access_key]", None]
    # nothing found: the text is stored as written (spacing, order, escapes)
    text = '{ "b": "caf\\u00e9",  "a": [1, 2.50] }'
    with trajlog.open(str(tmp_path / "b.db"), redaction=RedactionPolicy()) as store:
        s = store.create_session(cwd=".")
        s.append("assistant/message", _call(text))
        assert s.get(s.last_seq).data["tool_calls"][0]["arguments"] == text


def test_text_that_is_not_json_is_scanned_as_text() -> None:
    text = '{not json: ' + AWS + '"'
    out = Redactor().redact("assistant/message", _call(text), None)
    assert out.data["tool_calls"][0]["arguments"] == '{not json: [REDACTED:aws_access_key]"'
    assert out.findings == (("aws_access_key", "$.tool_calls[0].arguments"),)


def test_refuse_names_the_path_inside_and_writes_nothing(tmp_path: Path) -> None:
    policy = RedactionPolicy(actions={"aws_access_key": "refuse"})
    with trajlog.open(str(tmp_path / "s.db"), redaction=policy) as store:
        s = store.create_session(cwd=".")
        before = s.last_seq
        with pytest.raises(RedactionRefusedError) as err:
            s.append("assistant/message", _call(json.dumps({"env": {"K": AWS}})))
        assert err.value.path == "$.tool_calls[0].arguments.env.K"
        assert AWS not in str(err.value) and s.last_seq == before


def test_a_key_finding_is_named_by_position_not_by_its_text() -> None:
    policy = RedactionPolicy(actions={"email": "refuse"})
    with pytest.raises(RedactionRefusedError) as err:
        Redactor(policy).redact("assistant/message",
                                _call(json.dumps({"a": {"x": 1, "bob@example.com": 2}})), None)
    assert err.value.path == "$.tool_calls[0].arguments.a.<key 1>"
    assert "bob" not in str(err.value)


def test_hash_pauses_and_keeps_json(tmp_path: Path) -> None:
    policy = RedactionPolicy(actions={"aws_access_key": "hash"})
    with trajlog.open(str(tmp_path / "s.db"), redaction=policy) as store:
        s = store.create_session(cwd=".")
        s.append("assistant/message", _call(json.dumps({"k": AWS, "q": "x\"y"})))
        ev = s.get(s.last_seq - 1)
        stored = json.loads(ev.data["tool_calls"][0]["arguments"])
        assert stored["q"] == "x\"y" and stored["k"].startswith("sha256:")
        assert ev.data_class == "restricted"
        paused = s.get(s.last_seq)
        assert paused.type == "redaction/paused"
        assert paused.data["events"][0]["findings"] == [
            ["aws_access_key", "$.tool_calls[0].arguments.k"]]
        with pytest.raises(RedactionPausedError):
            s.append("user/message", {"content": "more"})


def test_too_deep_to_open_is_refused_not_corrupted(tmp_path: Path) -> None:
    deep = "[" * 1200 + json.dumps(f"x {AWS}") + "]" * 1200
    with trajlog.open(str(tmp_path / "s.db"), redaction=RedactionPolicy()) as store:
        s = store.create_session(cwd=".")
        before = s.last_seq
        with pytest.raises(UnredactableValueError) as err:
            s.append("assistant/message", _call(deep))
        assert err.value.format == "json" and s.last_seq == before


def test_json_in_any_string_of_any_type() -> None:
    # a tool's output, a user's message: the same rule everywhere
    out = Redactor().redact("tool/result", {"call_id": "c1", "output": json.dumps(
        {"log": f'token="{AWS}\\"'})}, None)
    assert json.loads(out.data["output"]) == {"log": 'token="[REDACTED:aws_access_key]\\"'}
    out = Redactor().redact("user/message", {"content": f' [ "{AWS}" ] '}, None)
    assert json.loads(out.data["content"]) == ["[REDACTED:aws_access_key]"]


def test_a_long_text_is_opened_when_its_text_holds_a_finding(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from trajlog.redaction import embedded
    monkeypatch.setattr(embedded, "MAX_TEXT", 16)
    text = json.dumps({"cmd": f'login password={PASSWORD}"x', "k": AWS})
    out = Redactor().redact("assistant/message", _call(text), None)
    assert json.loads(out.data["tool_calls"][0]["arguments"]) == {
        "cmd": 'login password=[REDACTED:credential]"x', "k": "[REDACTED:aws_access_key]"}
    assert sorted(out.findings) == [("aws_access_key", "$.tool_calls[0].arguments.k"),
                                    ("credential", "$.tool_calls[0].arguments.cmd")]
    clean = json.dumps({"cmd": "ls -la", "n": 1})
    assert Redactor().redact("assistant/message", _call(clean), None).findings == ()


def test_an_open_key_block_masks_its_value_only() -> None:
    # the block never ends: as text it would run over every later value
    text = json.dumps({"a": "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAx7",
                       "b": "plain", "c": f"aws {AWS}"})
    out = Redactor().redact("assistant/message", _call(text), None)
    assert json.loads(out.data["tool_calls"][0]["arguments"]) == {
        "a": "[REDACTED:private_key]", "b": "plain", "c": "aws [REDACTED:aws_access_key]"}
