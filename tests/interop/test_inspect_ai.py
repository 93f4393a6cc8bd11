"""Golden tests of the Inspect AI importer on the three real logs of
tests/realdata/inspect-ai (see MANIFEST.md): every expectation is computed
from the raw files with ``json`` / ``zipfile`` here, or written down from the
manifest, never copied from the importer's output."""

from __future__ import annotations

import json
import shutil
import zipfile
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import trajlog
from trajlog.errors import ImportFormatError
from trajlog.interop.mapping import MappedEvent, Notes, epoch_ms
from trajlog.interop.sources import inspect_ai
from trajlog.projections import model_history, trajectory

DATA = Path(__file__).resolve().parents[1] / "realdata" / "inspect-ai"
BROWSER = DATA / "2025-05-12T20-27-36-04-00_browser.json"
POPULARITY = DATA / "2025-05-12T20-28-13-04-00_popularity.json"
EVAL = DATA / "log_message_deduplication.eval"
FILES = (BROWSER, POPULARITY, EVAL)


def raw_log(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(header, samples) read straight from the file."""
    if path.suffix == ".json":
        doc = json.loads(path.read_text())
        return {k: v for k, v in doc.items() if k != "samples"}, doc["samples"]
    with zipfile.ZipFile(path) as zf:
        header = json.loads(zf.read("header.json"))
        samples = [json.loads(zf.read(n)) for n in zf.namelist() if n.startswith("samples/")]
    return header, samples


def mapped(path: Path) -> tuple[list[tuple[Any, list[MappedEvent]]], Notes]:
    notes = Notes()
    out = [(s, list(s.events)) for s in inspect_ai.read(path, notes)]
    return out, notes


def has_ref(value: Any) -> bool:
    if isinstance(value, str):
        return value.startswith("attachment://")
    if isinstance(value, dict):
        return any(has_ref(v) for v in value.values())
    if isinstance(value, list):
        return any(has_ref(v) for v in value)
    return False


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Any:
    st = trajlog.open(str(tmp_path_factory.mktemp("inspect") / "t.db"))
    yield st
    st.close()


@pytest.fixture(scope="module")
def imported(store: Any) -> dict[Path, Any]:
    return {p: store.import_path(p, format="inspect-ai") for p in FILES}


# ---------------------------------------------------------------------------
# Sniffing

def test_sniff() -> None:
    for p in FILES:
        assert inspect_ai.sniff(p), p
    other = Path(__file__).resolve().parents[1] / "realdata"
    assert not inspect_ai.sniff(other / "aider" / "chat-history.md")
    assert not inspect_ai.sniff(other / "openhands" / "legacy-v0" / "basic_gui_mode.json")
    assert not inspect_ai.sniff(other / "swe-agent" / "swe-agent__test-repo-i1.traj")
    assert not inspect_ai.sniff(DATA)


# ---------------------------------------------------------------------------
# The mapping, checked against the raw files

@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_every_event_and_message_is_carried(path: Path) -> None:
    header, samples = raw_log(path)
    sessions, notes = mapped(path)
    assert len(sessions) == len(samples)
    assert notes.torn == [] and notes.warnings == []
    for (session, events), sample in zip(sessions, samples, strict=True):
        run = header["eval"]["run_id"]
        assert session.key == f"inspect-ai:{run}/{sample['id']}/{sample['epoch']}"
        types = Counter(e.type for e in events)
        # every Inspect event, once, as inspect-ai/<its type>, in the file's order
        want = Counter(f"inspect-ai/{e['event']}" for e in sample["events"])
        assert {t: n for t, n in types.items() if t.startswith("inspect-ai/")
                and t not in ("inspect-ai/system_message", "inspect-ai/sample_end")} == want
        carried = [e.data["event"] for e in events if e.type.startswith("inspect-ai/")
                   and "event" in e.data]
        assert carried == [e["event"] for e in sample["events"]]
        # every message, once
        roles = Counter(m["role"] for m in sample["messages"])
        assert types["user/message"] == roles["user"]
        assert types["assistant/message"] == roles["assistant"]
        assert types["tool/result"] == types["tool/call"] == roles["tool"]
        assert types["inspect-ai/system_message"] == roles["system"]
        assert types["inspect-ai/sample_end"] == 1
        assert types["turn/start"] == types["turn/end"] == 1
        assert events[0].type == "turn/start" and events[-1].type == "turn/end"
        # attachments resolved everywhere, none left unused
        assert not any(has_ref(e.data) for e in events)
        end = next(e.data for e in events if e.type == "inspect-ai/sample_end")
        assert "unreferenced_attachments" not in end
        assert "unreferenced_message_pool" not in end
        assert end["scores"] == sample["scores"]
        assert end["eval_status"] == header["status"]
        # times kept: every carried Inspect event has its own timestamp
        for ev in events:
            if ev.type.startswith("inspect-ai/") and "timestamp" in ev.data:
                assert ev.time == epoch_ms(ev.data["timestamp"])
        assert session.created_ms == epoch_ms(sample["events"][0]["timestamp"])


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_tool_calls_pair_with_their_results(path: Path) -> None:
    _, samples = raw_log(path)
    sessions, _ = mapped(path)
    for (_, events), sample in zip(sessions, samples, strict=True):
        requested = [c["id"] for m in sample["messages"] if m["role"] == "assistant"
                     for c in m.get("tool_calls") or []]
        answered = [m["tool_call_id"] for m in sample["messages"] if m["role"] == "tool"]
        assert sorted(requested) == sorted(answered)   # no orphans in these files
        results = [(i, e) for i, e in enumerate(events) if e.type == "tool/result"]
        assert [e.data["call_id"] for _, e in results] == answered
        for i, result in results:
            call = events[result.cause]
            assert result.cause == i - 1 and call.type == "tool/call"
            assert call.data["call_id"] == result.data["call_id"]
        # the assistant message requesting a call comes before it
        asked = {c["id"]: i for i, e in enumerate(events) if e.type == "assistant/message"
                 for c in e.data["tool_calls"]}
        for i, e in enumerate(events):
            if e.type == "tool/call":
                assert asked[e.data["call_id"]] < i


def test_manifest_numbers() -> None:
    ((_, events),) = mapped(BROWSER)[0]
    types = Counter(e.type for e in events)
    assert (types["user/message"], types["assistant/message"], types["tool/result"]) == (1, 5, 4)
    assert {t[len("inspect-ai/"):]: n for t, n in types.items() if t.startswith("inspect-ai/")
            } == {"model": 5, "tool": 4, "sandbox": 10, "store": 4, "state": 2,
                  "span_begin": 8, "span_end": 8, "sample_init": 1, "score": 1,
                  "sample_end": 1}
    assert {e.data["name"] for e in events if e.type == "tool/call"} == {
        "web_browser_go", "web_browser_click"}
    pop, _ = mapped(POPULARITY)
    assert len(pop) == 3
    for session, evs in pop:
        assert session.metadata["import"]["status"] == "cancelled"
        assert [e.type for e in evs if e.type in ("inspect-ai/system_message", "user/message",
                                                  "assistant/message")] == [
            "inspect-ai/system_message", "user/message", "assistant/message"]
        end = next(e for e in evs if e.type == "inspect-ai/sample_end")
        assert end.data["eval_status"] == "cancelled" and end.data["scores"]
        assert evs[-1].data == {"interrupted": False}   # the samples themselves completed
    (ev_session, ev_events), = mapped(EVAL)[0]
    types = Counter(e.type for e in ev_events)
    assert (types["assistant/message"], types["tool/call"], types["tool/result"]) == (6, 5, 5)
    assert ev_session.metadata["import"]["header"] == "header.json"


def test_message_pool_refs_resolve_to_the_history_so_far() -> None:
    """Each model event's input, rebuilt from input_refs and the message pool,
    is exactly the sample's messages before that event's output (by id)."""
    _, (sample,) = raw_log(EVAL)
    assert all(e.get("input_refs") for e in sample["events"] if e["event"] == "model")
    ids = [m["id"] for m in sample["messages"]]
    (_, events), = mapped(EVAL)[0]
    models = [e.data for e in events if e.type == "inspect-ai/model"]
    assert len(models) == 6
    for data in models:
        out = data["output"]["choices"][0]["message"]["id"]
        assert [m["id"] for m in data["input"]] == ids[:ids.index(out)]
        assert data["input_resolved_from_pool"] is True
        assert data["input_refs"]    # kept as written


def test_model_event_precedes_the_message_it_produced() -> None:
    for path in FILES:
        for _, events in mapped(path)[0]:
            for i, e in enumerate(events):
                if e.type == "assistant/message":
                    before = events[i - 1]
                    assert before.type == "inspect-ai/model"
                    assert before.data["output"]["choices"][0]["message"]["id"] == \
                        e.data["inspect"]["id"]
                    if "usage" in before.data["output"]:
                        assert e.data["usage"] == before.data["output"]["usage"]
                    else:
                        assert "usage" not in e.data


# ---------------------------------------------------------------------------
# Through a store: the model history is Inspect's own `messages` view

@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_model_history_is_inspects_messages(store: Any, imported: dict[Path, Any],
                                            path: Path) -> None:
    report = imported[path]
    _, samples = raw_log(path)
    assert [s.status for s in report.sessions] == ["created"] * len(samples)
    if path == EVAL:   # the run-level summaries, derived from the samples
        assert sorted(u.file.rsplit("!", 1)[1] for u in report.unmapped) == [
            "_journal/summaries/1.json", "summaries.json"]
        assert all("summaries" in u.reason for u in report.unmapped)
    else:
        assert report.unmapped == []
    for result, sample in zip(report.sessions, samples, strict=True):
        session = store.session(result.session_id)
        history = model_history(session)
        want = [m for m in sample["messages"] if m["role"] != "system"]
        assert [h.role for h in history] == [m["role"] for m in want]
        assert [h.content for h in history] == [m["content"] for m in want]
        assert [[c["id"] for c in h.tool_calls or []] for h in history] == [
            [c["id"] for c in m.get("tool_calls") or []] for m in want]
        assert [h.tool_call_id for h in history] == [m.get("tool_call_id") for m in want]
        assert [h.is_error for h in history if h.role == "tool"] == [
            m.get("error") is not None for m in want if m["role"] == "tool"]
        # the system messages, kept in order with their text
        systems = [e.data["content"] for e in session.events()
                   if e.type == "inspect-ai/system_message"]
        assert systems == [m["content"] for m in sample["messages"] if m["role"] == "system"]
        # one turn per sample, the model calls with their token counts
        (turn,) = trajectory(session)
        requests = [r for s in turn.steps for r in s.requests]
        assert len(requests) == sum(m["role"] == "assistant" for m in want)
        tools = [t for s in turn.steps for t in s.tools]
        assert all(t.status == "done" for t in tools)


def test_import_is_idempotent(store: Any, imported: dict[Path, Any]) -> None:
    for path in FILES:
        again = store.import_path(path, format="inspect-ai")
        assert again.events == 0
        assert [s.session_id for s in again.sessions] == [
            s.session_id for s in imported[path].sessions]
        assert {s.status for s in again.sessions} == {"unchanged"}


# ---------------------------------------------------------------------------
# Damaged and unfinished logs

@pytest.mark.parametrize("path", (BROWSER, POPULARITY), ids=lambda p: p.name)
def test_cut_json_raises_with_line_and_offset(tmp_path: Path, path: Path) -> None:
    data = path.read_bytes()
    end = len(data.rstrip())
    cuts = sorted({*range(1, end, max(1, end // 30)), end - 1, end - 2, end - 40})
    for cut in cuts:
        target = tmp_path / path.name
        target.write_bytes(data[:cut])
        with pytest.raises(ImportFormatError) as info:
            list(inspect_ai.read(target, Notes()))
        assert info.value.line is not None and info.value.offset is not None, cut
        assert 0 <= info.value.offset <= cut
        assert info.value.line == data[:info.value.offset].count(b"\n") + 1


def test_truncated_eval_zip_raises_with_offset(tmp_path: Path) -> None:
    data = EVAL.read_bytes()
    with zipfile.ZipFile(EVAL) as zf:
        spans = sorted((i.header_offset, i.header_offset + 30 + len(i.filename.encode())
                        + len(i.extra) + i.compress_size) for i in zf.infolist())
    for cut in sorted({*range(10, len(data), len(data) // 12), len(data) - 1, 0}):
        target = tmp_path / "cut.eval"
        target.write_bytes(data[:cut])
        with pytest.raises(ImportFormatError) as info:
            list(inspect_ai.read(target, Notes()))
        err = info.value
        assert err.file == str(target)
        # the offset is where the first entry that is not whole begins (the end
        # of the last one when the cut is in the central directory)
        whole = [(a, b) for a, b in spans if b <= cut]
        broken = [a for a, b in spans if b > cut]
        assert err.offset == (broken[0] if broken else whole[-1][1]), cut
        assert err.valid == len(whole)


def test_damaged_eval_member_raises(tmp_path: Path) -> None:
    data = bytearray(EVAL.read_bytes())
    with zipfile.ZipFile(EVAL) as zf:
        info = zf.getinfo("samples/0_epoch_1.json")
    body = info.header_offset + 30 + len(info.filename) + len(info.extra)
    for i in range(body + 100, body + 120):
        data[i] ^= 0xFF
    target = tmp_path / "damaged.eval"
    target.write_bytes(bytes(data))
    with pytest.raises(ImportFormatError) as err:
        list(inspect_ai.read(target, Notes()))
    assert "samples/0_epoch_1.json" in err.value.file
    assert err.value.offset == info.header_offset


def test_headerless_eval_imports_finished_samples(tmp_path: Path) -> None:
    """A crashed run: the journal and the finished samples, no header.json."""
    target = tmp_path / "crashed.eval"
    with zipfile.ZipFile(EVAL) as src, zipfile.ZipFile(target, "w",
                                                       zipfile.ZIP_DEFLATED) as dst:
        for name in src.namelist():
            if name not in ("header.json", "summaries.json", "reductions.json"):
                dst.writestr(name, src.read(name))
    notes = Notes()
    assert inspect_ai.sniff(target)
    sessions = [(s, list(s.events)) for s in inspect_ai.read(target, notes)]
    assert len(sessions) == 1
    assert any("no header.json" in w for w in notes.warnings)
    session, events = sessions[0]
    meta = session.metadata["import"]
    assert meta["header"] == "_journal/start.json" and "status" not in meta
    intact, _ = mapped(EVAL)
    assert session.key == intact[0][0].key   # the same sample, the same identity
    assert [e.type for e in events] == [e.type for e in intact[0][1]]
    store = trajlog.open(str(tmp_path / "t.db"))
    try:
        report = store.import_path(target, format="inspect-ai")
        assert len(report.sessions) == 1 and report.warnings
        _, (sample,) = raw_log(EVAL)
        history = model_history(store.session(report.sessions[0].session_id))
        assert [h.content for h in history] == [m["content"] for m in sample["messages"]]
    finally:
        store.close()


def test_orphan_result_and_reused_call_id_are_carried(tmp_path: Path) -> None:
    doc = json.loads(BROWSER.read_text())
    sample = doc["samples"][0]
    msgs = sample["messages"]
    # a result for a call nobody requested, and a second request of a used id
    msgs.insert(3, {"id": "orphan", "role": "tool", "tool_call_id": "call_nobody",
                    "function": "web_browser_go", "content": "stray"})
    reuse = dict(msgs[1], id="again")
    msgs.insert(4, reuse)
    target = tmp_path / "edited.json"
    target.write_text(json.dumps(doc))
    notes = Notes()
    ((_, events),) = [(s, list(s.events)) for s in inspect_ai.read(target, notes)]
    stray = [e for e in events if e.type == "inspect-ai/tool_message"]
    assert [e.data["tool_call_id"] for e in stray] == ["call_nobody"]
    again = next(e for e in events if e.type == "assistant/message"
                 and e.data["inspect"]["id"] == "again")
    assert again.data["tool_calls"] == []
    assert [c["id"] for c in again.data["refused_tool_calls"]] == [
        msgs[1]["tool_calls"][0]["id"]]
    assert len(notes.warnings) == 2
    assert any("call_nobody" in w for w in notes.warnings)
    store = trajlog.open(str(tmp_path / "t.db"))
    try:
        report = store.import_path(target, format="inspect-ai")
        assert report.sessions[0].status == "created"
        history = model_history(store.session(report.sessions[0].session_id))
        assert sum(h.role == "tool" for h in history) == 4
    finally:
        store.close()


def test_wrong_shapes_raise_import_format_error(tmp_path: Path) -> None:
    doc = json.loads(POPULARITY.read_text())
    for edit in (lambda d: d["samples"][0].update(messages={}),
                 lambda d: d["samples"][0]["messages"].__setitem__(0, "text"),
                 lambda d: d["samples"][0]["messages"][1].update(content=7),
                 lambda d: d.update(eval=None),
                 lambda d: d.update(samples=3)):
        bad = json.loads(json.dumps(doc))
        edit(bad)
        target = tmp_path / "bad.json"
        target.write_text(json.dumps(bad))
        with pytest.raises(ImportFormatError):
            for s in inspect_ai.read(target, Notes()):
                list(s.events)


def test_sample_ids_are_stable_across_copies(tmp_path: Path) -> None:
    copy = tmp_path / "elsewhere.json"
    shutil.copy(POPULARITY, copy)
    first = [s.id for s in inspect_ai.read(POPULARITY, Notes())]
    second = [s.id for s in inspect_ai.read(copy, Notes())]
    assert first == second and len(set(first)) == 3


def test_failed_sample_and_a_sample_without_events(tmp_path: Path) -> None:
    doc = json.loads(POPULARITY.read_text())
    doc["status"] = "error"
    doc["error"] = {"message": "boom", "traceback": "..."}
    doc["samples"][0]["error"] = {"message": "the sandbox died"}
    doc["samples"][1]["limit"] = {"type": "message", "limit": 2}
    doc["samples"][2]["events"] = []   # an older log: the messages alone
    target = tmp_path / "failed.json"
    target.write_text(json.dumps(doc))
    sessions, notes = mapped(target)
    assert notes.warnings == []
    ends = [evs[-1].data for _, evs in sessions]
    assert ends == [{"interrupted": True}, {"interrupted": True}, {"interrupted": False}]
    first, events = sessions[0]
    assert "sample_error" not in first.metadata["import"]   # no payload text in a header
    end = next(e.data for e in events if e.type == "inspect-ai/sample_end")
    assert end["error"] == {"message": "the sandbox died"}
    assert end["eval_status"] == "error" and end["eval_error"]["message"] == "boom"
    _, bare = sessions[2]
    assert [e.type for e in bare] == ["turn/start", "inspect-ai/system_message",
                                      "user/message", "assistant/message",
                                      "inspect-ai/sample_end", "turn/end"]
    assert sessions[2][0].created_ms == epoch_ms(doc["eval"]["created"])
