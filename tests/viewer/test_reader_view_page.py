"""The viewer page and the export as a reader view shows them (no browser):
the same rows by seq, a withheld payload saying so, no secret."""

from __future__ import annotations

import json

import pytest

from trajlog.errors import InvalidArgumentError
from trajlog.viewer import build_document, render_html, write_html
from trajlog.viewer.page import read_document

SECRET = "AKIAIOSFODNN7EXAMPLE"


def logged(store):
    s = store.create_session(cwd="/w", metadata={"title": "views"})
    s.append("user/message", {"content": "fix it"}, data_class="public")
    s.append("tool/note", {"text": f"token {SECRET}"}, data_class="internal")
    s.append("user/message", {"content": "ssn 078-05-1120"}, data_class="restricted")
    child = s.fork(2)
    child.append("assistant/message", {"content": f"found {SECRET}"})
    return s, child


@pytest.mark.parametrize("role", ["developer", "auditor", "external-model"])
def test_the_page_by_view_has_every_row_and_no_secret(store, role):
    s, _ = logged(store)
    s.append("model/switch", {"old": None, "new": "ext", "reason": "start"})
    plain = read_document(render_html(store, s.id))
    html = render_html(store, s.id, view=role)
    doc = read_document(html)
    assert doc["view"] == role and f"({role} view)" in html
    assert SECRET not in html and "078-05-1120" not in html
    for mine, theirs in zip(doc["sessions"], plain["sessions"], strict=True):
        assert [r[0] for r in mine["ev"]] == [r[0] for r in theirs["ev"]]
    rows = {r[0]: r for r in doc["sessions"][0]["ev"]}
    assert rows[2][4]["withheld"]["view"] == role
    # the fork's own event: the auditor withholds its content, the others mask the secret
    said = {r[0]: r for r in doc["sessions"][1]["ev"]}[3][4]
    assert said == ({"content": "[withheld from the auditor view: auditor.content]",
                     "withheld": {"view": "auditor", "reason": "auditor.content"}}
                    if role == "auditor" else {"content": "found [REDACTED:aws_access_key]"})


def test_the_external_model_page_is_for_a_named_model(store, tmp_path):
    from trajlog.projections.reader_views import ReaderView

    s, _ = logged(store)
    with pytest.raises(InvalidArgumentError, match="names no model"):
        render_html(store, s.id, view="external-model")
    s.append("model/policy", {"model": "ext", "allowed_data_classes": ["public"]})
    report = write_html(store, s.id, tmp_path / "ext.html",
                        view=ReaderView("external-model", "ext"))
    doc = read_document((tmp_path / "ext.html").read_text())
    rows = {r[0]: r for r in doc["sessions"][0]["ev"]}
    assert rows[0][4] == {"content": "fix it"}
    assert rows[1][4]["withheld"]["reason"] == "data_class.not_allowed_for_model"
    assert report.events == sum(len(x["ev"]) for x in doc["sessions"])
    with pytest.raises(InvalidArgumentError):
        build_document(store, s.id, view="admin")


def test_an_export_by_view(store, tmp_path):
    s, _ = logged(store)
    report = store.export(s.id, tmp_path / "dev.jsonl", view="developer")
    lines = [json.loads(x) for x in (tmp_path / "dev.jsonl").read_text().splitlines()]
    assert report.events == 3 and lines[0]["view"] == "developer"
    assert [x["seq"] for x in lines[1:-1]] == [0, 1, 2]
    assert lines[2]["data"] == {"text": "token [REDACTED:aws_access_key]"}
    assert lines[3]["data"]["withheld"]["reason"] == "data_class.restricted"
    assert lines[-1] == {"end": {"events": 3, "withheld": 1, "last_seq": 2}}
    for fmt in ("a.tlog", "a.zip"):
        with pytest.raises(InvalidArgumentError, match="exports as jsonl"):
            store.export(s.id, tmp_path / fmt, view="auditor")
        assert not (tmp_path / fmt).exists()
