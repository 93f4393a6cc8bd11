"""The document and the page, without a browser: escaping, tombstones,
folded ranges, the session tree, long strings moved out of the JSON, the
atomic write."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

import pytest
import sample

from trajlog.errors import SessionNotFoundError
from trajlog.viewer import ViewReport, build_document, render_html, write_html
from trajlog.viewer.page import embed_json, read_document

SQLITE_APSW = "tampers with the store through an apsw connection of its own"


def _json_part(html: str) -> str:
    found = re.search(r'id="trajlog-data">(.*?)</script>', html, re.S)
    assert found is not None
    return found.group(1)


def _row(doc: dict[str, Any], session: int, seq: int) -> list[Any]:
    s = doc["sessions"][session]
    return next(r for r in s["ev"] if r[0] == seq)


def test_content_that_closes_the_script_stays_inside_it(recorded):
    store, s = recorded
    html = render_html(store, s.root.id)
    assert sample.XSS not in html and "<img" not in html
    # the page has exactly its own three script elements plus the blobs
    assert html.count("</script>") == 2 + html.count('class="trajlog-blob"')
    doc = read_document(html)
    assert _row(doc, 0, s.xss_seq)[4]["content"] == sample.XSS


def test_embed_json_escapes_html_and_js_line_separators():
    out = embed_json({"a": "</script><!-- & \u2028\u2029 >"}).decode()
    assert not set("<>&") & set(out) and "\u2028" not in out and "\u2029" not in out
    assert json.loads(out) == {"a": "</script><!-- & \u2028\u2029 >"}


def test_an_erased_event_is_a_tombstone_and_its_text_is_nowhere(recorded):
    store, s = recorded
    html = render_html(store, s.root.id)
    # (a piece of the card number, not "4111" alone: a millisecond time may hold that)
    assert sample.SECRET not in html and "4111-1111" not in read_document(html).__repr__()
    erased = _row(read_document(html), 0, s.erased_seq)[4]["erased"]
    assert erased["reason"] == "customer data in a tool output"
    assert erased["actor"] == "human:dpo"


def test_a_compacted_range_is_one_summary_entry_with_its_bounds(recorded):
    store, s = recorded
    hist = build_document(store, s.root.id)["sessions"][0]["hist"]
    summaries = [h for h in hist if h[0] == "s"]
    assert len(summaries) == 1 and summaries[0][1:3] == list(s.compacted)
    assert summaries[0][3].startswith("The user reported the login bug")
    # the hidden messages are not listed beside their summary
    lo, hi = s.compacted
    assert not [h for h in hist if h[0] != "s" and lo <= h[1] <= hi]


def test_the_tree_holds_the_fork_and_the_subagent_and_shares_the_prefix(recorded):
    store, s = recorded
    doc = build_document(store, s.root.id)
    ids = [x["id"] for x in doc["sessions"]]
    assert ids[0] == s.root.id and set(ids) == {s.root.id, s.fork.id, s.sub.id}
    assert doc["root_parent"] is None
    root = doc["sessions"][0]
    assert sorted(doc["sessions"][k]["id"] for k in root["kids"]) == sorted([s.fork.id,
                                                                               s.sub.id])
    fork = doc["sessions"][ids.index(s.fork.id)]
    seed = s.fork.header.seed_length
    # the fork's inherited events are embedded once, in the root
    assert fork["inh"] == 0 and fork["base"] == seed and seed > 0
    assert [r[0] for r in fork["ev"]] == list(range(seed, s.fork.last_seq + 1))
    sub = doc["sessions"][ids.index(s.sub.id)]
    assert sub["origin"] == "subagent" and sub["depth"] == 1 and sub["inh"] == -1
    # a view of the subagent alone notes its parent
    assert build_document(store, s.sub.id)["root_parent"] == s.root.id


def test_views_refer_to_events_by_seq_and_long_strings_leave_the_json(recorded):
    store, s = recorded
    html = render_html(store, s.root.id)
    part = _json_part(html)
    assert "export function checkToken" not in part     # gzipped in a blob
    doc = read_document(html)
    huge = _row(doc, 0, s.huge_result_seq)[4]["output"]
    assert huge.count("\n") == sample.HUGE_LINES
    root = doc["sessions"][0]
    cards = {n[2]: n for n in root["chat"] if n[0] == 1}
    assert cards["call_3"][4] == "error" and cards["call_3"][5] == s.error_result_seq
    assert cards["call_1"][4] == "done" and cards["call_1"][5] == s.huge_result_seq
    assert [n for n in root["chat"] if n[0] == 2] == []   # no erased message here
    assert root["goals"] == list(s.goal_seqs) and list(root["skipped"]) == [str(s.goal_seqs[1])]
    assert len(root["ctx"]) == 1


def test_an_erased_message_keeps_its_place_in_the_chat(tmp_path):
    import trajlog

    with trajlog.open(str(tmp_path / "s.db")) as store:
        s = store.create_session()
        s.append("user/message", {"content": "my password is hunter2"})
        s.append("assistant/message", {"content": "noted"})
        store.erase(s.id, [0], reason="secret", actor="human:bob")
        chat = build_document(store, s.id)["sessions"][0]["chat"]
        assert chat == [[2, 0, "user"], [0, 1, "assistant"]]
        assert "hunter2" not in render_html(store, s.id)


def test_write_html_is_atomic_and_reports_what_it_wrote(recorded, tmp_path):
    store, s = recorded
    out = tmp_path / "v.html"
    out.write_text("old")
    report = write_html(store, s.root.id, out)
    assert isinstance(report, ViewReport)
    assert report.path == str(out) and report.sessions == 3
    own = (s.root.last_seq + 1) + (s.fork.last_seq + 1 - s.fork.header.seed_length) + (
        s.sub.last_seq + 1)
    assert report.events == own and report.bytes == out.stat().st_size
    assert out.read_text().startswith("<!DOCTYPE html>")
    assert [p.name for p in tmp_path.iterdir()] == ["v.html"]   # no temporary left
    with pytest.raises(dataclasses.FrozenInstanceError):
        report.bytes = 0  # type: ignore[misc]


def test_the_page_forbids_the_network_and_names_no_remote_resource(recorded):
    store, s = recorded
    html = render_html(store, s.root.id)
    assert ("default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
            "img-src data:") in html
    head = html.split('id="trajlog-data"')[0]
    assert not re.search(r"(src|href)=[\"']?(https?:)?//", head)
    assets = Path(__file__).parents[2] / "src" / "trajlog" / "viewer" / "assets"
    scripts = sorted(assets.glob("*.js"))
    assert scripts
    code = "".join(js.read_text() for js in scripts)
    assert "innerHTML" not in code and "insertAdjacentHTML" not in code
    assert "fetch(" not in code and "XMLHttpRequest" not in code


def test_an_unknown_session_is_refused(recorded):
    store, _ = recorded
    with pytest.raises(SessionNotFoundError):
        render_html(store, "no-such-session")


def test_the_page_holds_exactly_the_document_once_its_blobs_are_decoded(recorded):
    store, s = recorded
    plain = build_document(store, s.root.id)
    back = read_document(render_html(store, s.root.id))
    for a, b in zip(plain["sessions"], back["sessions"], strict=True):
        assert a["ev"] == b["ev"]
        assert {k: v for k, v in a.items() if k != "ev"} == {
            k: v for k, v in b.items() if k != "ev"}


@pytest.mark.sqlite_only(reason=SQLITE_APSW)
def test_a_damaged_session_in_the_tree_is_flagged_and_the_rest_still_shown(tmp_path):
    """Found in review: one damaged header in the middle of a tree made the
    whole tree unviewable (its seeded child reads through it)."""
    import trajlog
    from kits.tamper import foreign
    db = str(tmp_path / "d.db")
    with trajlog.open(db) as st:
        root = st.create_session(cwd="/r", metadata={"title": "root"})
        with root.turn():
            root.append("user/message", {"content": "root msg"})
        f1 = root.fork(0)
        with f1.turn():
            f1.append("user/message", {"content": "f1 turn"})
        f2 = f1.fork(f1.last_seq)
        f2.append("user/message", {"content": "f2 msg"})
        conn = foreign(st)
        conn.execute("UPDATE sessions SET cwd = '/tampered' WHERE id = ?", (f1.id,))
        conn.close()
    with trajlog.open(db) as st:
        doc = read_document(render_html(st, root.id))
    by_id = {x["id"]: x for x in doc["sessions"]}
    assert by_id[root.id]["damage"] is None and len(by_id[root.id]["ev"]) == 3
    assert "check mismatch" in by_id[f1.id]["damage"]
    assert by_id[f2.id]["damage"] and by_id[f2.id]["ev"] == []


def test_only_a_tombstone_is_erased_and_big_integers_stay_exact(tmp_path):
    import trajlog
    with trajlog.open(str(tmp_path / "e.db")) as st:
        s = st.create_session(cwd="/e")
        s.append("user/message", {"content": "I am not erased", "erased": False})
        s.append("note", {"v": 2**63 - 1, "w": [9007199254740993, 5], "x": -(2**60)})
        s.append("note", 9007199254740993)
        doc = read_document(render_html(st, s.id))
    (model,) = doc["sessions"]
    assert [n[0] for n in model["chat"]] == [0]          # one bubble, not a tombstone
    assert _row(doc, 0, 1)[4] == {"v": str(2**63 - 1), "w": ["9007199254740993", 5],
                                  "x": str(-(2**60))}
    assert _row(doc, 0, 2)[4] == "9007199254740993"
