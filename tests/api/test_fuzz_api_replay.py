"""CI replay of the API fuzzer's corpus, without atheris.

Every file of ``fuzz/corpus/api`` goes through ``check_input`` of
``fuzz/fuzz_api.py`` (imported by path): the public API against the harness's
model of the log, with every invariant the fuzzer checks -- in both of the
harness's modes: a fresh store per input, and fast mode (``FUZZ_API_MODE=fast``:
":memory:" stores shared by the inputs, each in sessions of its own).  The corpus holds the
hand-written seeds of ``fuzz_api.seeds()`` (one or more operations each) and any
input a fuzzing run found worth keeping.

``FINDINGS`` are hand-written inputs that reproduce bugs the fuzzer found,
fixed since: each must pass.  ``OPEN_FINDINGS`` holds those not fixed yet,
expected to fail (not strictly: once fixed, move the case to ``FINDINGS``).
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "fuzz" / "corpus" / "api"


def _harness() -> ModuleType:
    spec = importlib.util.spec_from_file_location("fuzz_api", ROOT / "fuzz" / "fuzz_api.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("fuzz_api", module)
    spec.loader.exec_module(module)
    return module


harness = _harness()
frame = harness.frame


@pytest.fixture(autouse=True)
def _raise_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    # a finding must fail the test, not be recorded and skipped
    monkeypatch.delenv("FUZZ_API_FINDINGS", raising=False)


MODES = ("fresh", "fast")


@pytest.fixture(scope="module", autouse=True)
def _shared_stores() -> Iterator[None]:
    yield
    harness.Shared.drain()


def _check(data: bytes, mode: str = "fresh") -> None:
    found = harness.run_guarded(data, mode == "fast")
    if found:
        raise found[-1]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("path", sorted(CORPUS.iterdir()), ids=lambda p: p.name)
def test_fuzz_api_corpus(path: Path, mode: str) -> None:
    _check(path.read_bytes(), mode)


def test_fast_mode_shares_one_store_between_inputs() -> None:
    """Fast mode: inputs of one configuration share a store, each in sessions
    of its own; the model knows the ids taken before it (a fixed session id
    the first input created is refused to the second), and every store-wide
    listing is compared without the earlier inputs' sessions."""
    harness.Shared.drain()
    braces = 3, 2   # create(session_id="{12345678-...}"), then lineage and a check
    lineage = bytes([harness.OPS.index("lineage"), 0])
    data = b"\x00" + frame("create", 0, 0, 0, 0, *braces) + frame(
        "append") + lineage + frame("create") + frame("check")
    _check(data, "fast")
    (shared,) = harness.Shared.pool.values()
    first = set(shared.ids)
    assert "12345678-1234-5678-1234-567812345678" in first
    assert len(first) == 2 and shared.inputs == 1
    _check(data, "fast")   # the create is refused, the append makes a session of its own
    (again,) = harness.Shared.pool.values()
    assert again is shared and shared.inputs == 2
    assert len(shared.ids) == 4 and first < shared.ids
    assert len(shared.store.sessions(include_subagents=True)) == 4


def test_fast_mode_drops_a_store_an_input_closed() -> None:
    harness.Shared.drain()
    _check(b"\x00" + frame("create") + frame("append") + frame("close", 7) + frame(
        "append"), "fast")
    assert harness.Shared.pool == {}
    _check(b"\x00" + frame("create") + frame("append") + frame("check"), "fast")
    (shared,) = harness.Shared.pool.values()
    assert shared.inputs == 1


def test_a_fast_mode_finding_says_whether_it_fails_alone(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FUZZ_API_FINDINGS", str(tmp_path))
    monkeypatch.setenv("FUZZ_API_MODE", "fast")
    harness.record(harness.Finding("sig-a", "d"), b"\x00" + frame("create"))
    assert "on a store of its own: passes" in (tmp_path / "sig-a.txt").read_text()
    monkeypatch.delenv("FUZZ_API_MODE")
    harness.record(harness.Finding("sig-b", "d"), b"\x00")
    assert "mode: fresh store" in (tmp_path / "sig-b.txt").read_text()


def test_fast_mode_puts_the_repackers_wait_back() -> None:
    from trajlog.api import repack

    before = repack._IDLE_SECONDS
    _check(b"\x48" + frame("create") + frame("append") + frame("append") + frame("repack"),
           "fast")
    assert repack._IDLE_SECONDS == before != harness.FAST_REPACK_IDLE_S


@pytest.mark.parametrize("inputs", [1, harness.SHARED_INPUTS])
def test_fast_mode_replaces_a_store_after_its_share_of_inputs(inputs: int) -> None:
    harness.Shared.drain()
    data = b"\x00" + frame("create") + frame("append")
    for _ in range(inputs):
        _check(data, "fast")
    pooled = list(harness.Shared.pool.values())
    assert [sh.inputs for sh in pooled] == ([] if inputs == harness.SHARED_INPUTS else [1])


def test_fuzz_api_seeds_are_in_the_corpus() -> None:
    for name, data in harness.seeds().items():
        assert (CORPUS / name).read_bytes() == data, f"{name}: run fuzz_api.py --write-seeds"


# (store config byte, frames): one per finding of the fuzzer's report, each
# fixed since; they stay here as regression cases.
FINDINGS = {
    "F1-metadata-lone-surrogate-UnicodeEncodeError":
        b"\x00" + frame("create", 0, 0, 0, 3, 7, 0, 2, 0),
    "F2-get-2**64-OverflowError":
        b"\x00" + frame("create") + frame("append") + frame("read", 0, 0, 0, 0, 4),
    "F3-subclass-and-cycle-RecursionError":
        b"\x00" + frame("create") + frame("append", 0, 0, 4, 7, 11, 2, 14, 0, 0, 22, 0, 1, 0),
    "F4-tuple-in-metadata-verify-corrupt":
        b"\x00" + frame("create", 0, 0, 0, 3, 10, 1, 3, 5) + frame("check"),
    "F5-envelope-str-subclass-lies-about-len":
        b"\x00" + frame("create") + frame("append", 0, 0, 4, 0, 0, 0, 0, 9, 0, 0, 0, 0),
    "F6-retried-batch-before-seq-0-AssertionError":
        b"\x00" + frame("create") + frame("append", 0, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0)
        + frame("batch", 0, 0, 3, 4, 0, 0, 0, 0, 4, 0, 0, 0, 0, 4, 0, 0, 0, 1,
                0, 0, 0, 0, 0, 1, 0),
    "F8-set-accepted-beside-a-subclass":
        b"\x00" + frame("create") + frame("append", 0, 0, 4, 7, 12, 2, 14, 1, 0, 21, 0, 0, 1,
                                           1, 0),
    # a tuple is a JSON array everywhere else (and a tuple subclass was taken):
    # assistant/message content () was refused as "must be str or list"
    "F9-tuple-content-refused-by-the-shape-check":
        b"\x00" + frame("create") + frame("append", 0, 0, 1, 3, 8, 0, 0, 0xCA),
    # a deduplicated retry appends its request/retry record (the model wrote nothing):
    # the same keyed append three times, then a subagent's finish() twice
    "F10-a-retry-is-recorded":
        b"\x00" + frame("create") + b"".join(frame("append", 0, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0,
                                                    1, 0) for _ in range(3)) + frame("check"),
    "F10-a-repeated-finish-is-recorded":
        b"\x00" + frame("create") + frame("subagent", 0, 0, 0, 0, 0, 0, 1) + frame(
            "finish") + frame("finish") + frame("check"),
    # the parent's latest sandbox/mode holds a str (any JSON value is valid data for
    # it): spawn_subagent / fork_subagent copied it with {**data} and raised a bare
    # TypeError from api/lineage.py _sandbox_snapshot; now kept whole under "value"
    "sandbox-mode-not-an-object":
        b"\x00" + frame("create") + frame("append", 0, 0, 11, 7, 6, 1, 0) + frame("subagent"),
}


# Findings not fixed yet: expected to fail (move them to FINDINGS once fixed).
OPEN_FINDINGS: dict[str, bytes] = {}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", sorted(FINDINGS))
def test_fuzz_api_fixed_findings(name: str, mode: str) -> None:
    _check(FINDINGS[name], mode)


@pytest.mark.parametrize("name", sorted(OPEN_FINDINGS) or [pytest.param(
    "none", marks=pytest.mark.skip(reason="no open finding"))])
def test_fuzz_api_open_findings(name: str) -> None:
    try:
        _check(OPEN_FINDINGS[name])
    except harness.Finding as exc:
        pytest.xfail(f"open finding: {exc.sig}")
