"""The eventsourcing recorders under a redaction policy and under erasure, on
a real ``Application``: a masked secret never corrupts a stored state (the
scanners work on the decoded JSON, not on its text), state the recorder
cannot open is refused rather than stored with a secret the policy would
mask, and an erased event reads as a typed error, not a crash."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("eventsourcing")

from eventsourcing.application import Application
from eventsourcing.domain import Aggregate, event
from eventsourcing.persistence import StoredEvent

import trajlog
from trajlog.adapters.eventsourcing import EVENT, NOTIFICATION, TrajlogApplicationRecorder
from trajlog.errors import ErasedEventError, UnredactableValueError
from trajlog.redaction import RedactionPolicy

AWS = "AKIA" + "Q4ZJ7W2XK9LM3NPR"
MASK = "[REDACTED:aws_access_key]"


class Note(Aggregate):
    @event("Created")
    def __init__(self, text: str) -> None:
        self.text = text

    @event("Edited")
    def edit(self, text: str) -> None:
        self.text = text


def app(db: str, **env: str) -> Application:
    a = Application(env={"PERSISTENCE_MODULE": "trajlog.adapters.eventsourcing",
                         "TRAJLOG_DBNAME": db, **env})
    a.factory.store.redaction = RedactionPolicy()   # type: ignore[attr-defined]
    return a


def everything(store: trajlog.Store) -> str:
    return "\n".join(json.dumps(ev.data, default=repr) for h in store.sessions()
                     for ev in store.session(h.id).events())


@pytest.mark.parametrize("text", [
    f"use {AWS} please",
    # a credential whose value runs up to an escaped quote: masking it in the
    # JSON text took the backslash, and the quote then closed the string
    'password=Xy9kLm2Qp7Tz\\"tail',
    'password=Xy9kLm2Qp7Tz"tail',
    # a private key block with no end: the rule masks to the end of the text
    "-----BEGIN RSA PRIVATE KEY-----\nMIIEow...",
])
def test_a_masked_secret_leaves_the_aggregate_readable(tmp_path: Path, text: str) -> None:
    a = app(str(tmp_path / "es.db"))
    note = Note(text)
    note.edit(f"then {text}")
    a.save(note)
    got = a.repository.get(note.id)            # every stored state decodes
    assert got.text.startswith("then ") and "[REDACTED:" in got.text
    assert AWS not in everything(a.factory.store)    # type: ignore[attr-defined]
    notes = a.recorder.select_notifications(1, 10)   # type: ignore[attr-defined]
    assert len(notes) == 2
    a.close()


def test_state_without_findings_is_stored_as_before(tmp_path: Path) -> None:
    a = app(str(tmp_path / "es.db"))
    note = Note("plain")
    a.save(note)
    store = a.factory.store   # type: ignore[attr-defined]
    evs = [ev for h in store.sessions() for ev in store.session(h.id).events()
           if ev.type == EVENT]
    assert "state" in evs[0].data and a.repository.get(note.id).text == "plain"
    a.close()


def test_binary_state_with_a_finding_in_its_text_is_kept_intact(tmp_path: Path) -> None:
    with trajlog.open(str(tmp_path / "es.db"), redaction=RedactionPolicy()) as store:
        rec = TrajlogApplicationRecorder(store)
        # bytes that are not UTF-8 whose base64 holds an AWS key id
        raw = base64.b64decode("////" + AWS + "////")
        assert AWS in base64.b64encode(raw).decode()
        rec.insert_events([StoredEvent(originator_id=Note.create_id(), originator_version=1,
                                       topic="t", state=raw)])
        (stored,) = rec.select_notifications(1, 1)
        assert stored.state == raw


def test_state_the_recorder_cannot_open_is_refused(tmp_path: Path) -> None:
    with trajlog.open(str(tmp_path / "es.db"), redaction=RedactionPolicy()) as store:
        rec = TrajlogApplicationRecorder(store)
        oid: Any = Note.create_id()
        with pytest.raises(UnredactableValueError):   # (UTF-8, not JSON)
            rec.insert_events([StoredEvent(originator_id=oid, originator_version=1,
                                           topic="t", state=f"{AWS} {{".encode())])
        assert rec.select_notifications(1, 10) == []
        rec.insert_events([StoredEvent(originator_id=oid, originator_version=1, topic="t",
                                       state=b"not json, nothing found")])
        assert rec.select_notifications(1, 10)[0].state == b"not json, nothing found"


def test_an_erased_event_is_a_typed_error(tmp_path: Path) -> None:
    db = str(tmp_path / "es.db")
    a = app(db)
    note = Note("secret")
    a.save(note)
    store = a.factory.store   # type: ignore[attr-defined]
    for h in store.sessions():
        for ev in store.session(h.id).events():
            if ev.type in (EVENT, NOTIFICATION):
                store.erase(h.id, ev.seq, reason="user asked")
    with pytest.raises(ErasedEventError):
        a.repository.get(note.id)
    with pytest.raises(ErasedEventError):
        a.recorder.select_notifications(1, 10)   # type: ignore[attr-defined]
    a.close()
