"""atheris harness: trajlog's public API against an in-memory model of the log.

    PYTHONPATH=src python fuzz/fuzz_api.py -atheris_runs=1000000 fuzz/corpus/api
    FUZZ_API_MODE=fast PYTHONPATH=src python fuzz/fuzz_api.py -atheris_runs=1000000 ...
    PYTHONPATH=src python fuzz/fuzz_api.py --replay fuzz/corpus/api/*    # no atheris needed
    PYTHONPATH=src python fuzz/fuzz_api.py --write-seeds fuzz/corpus/api

Every input is a store configuration byte followed by *frames*, one operation
each: ``op, n, n argument bytes`` (an argument read past the end of its frame is
0, and 0 always means the most ordinary choice, so a seed is easy to write by
hand).  The operations (:data:`OPS`) are create_session, append, append_batch,
turn() / step() / lease() blocks holding the next frames (left normally, or by
an exception), tool-call lifecycles in valid and invalid orders (a request,
its start, its result or the host's ``tool/cancel``; a late result after a
cancel is refused), fork,
spawn_subagent / fork_subagent, finish, compact, mark, load, inspect, get /
tail / events, verify, repack, new handles, views (incremental fold against a
fold from scratch), close / reopen / a second store on the same file,
appends from two threads, and erasure (the event reads back as its
tombstone's view in every session that reads it).  Data and arguments come from hostile values:
nested dicts and lists, huge ints, NaN and infinities, lone surrogates, bytes,
tuples, non-str keys, dict / list / tuple / str / int / float subclasses whose
methods lie about their content, cycles, deep nesting, long strings, a dict
whose ``get`` appends to the session again, wrong types everywhere.

The model keeps, per session, the events that were acknowledged (type, data as
the JSON value the store must give back, envelope, time) with a fork's
inherited prefix, the tool-call lifecycle, the compactions and the
idempotency keys; it decides for every write whether it must be refused, may
be refused (a subclass, an ambiguous rule) or must be accepted, and what it
appends.  After every operation:

1. it succeeded, or raised a :class:`trajlog.errors.TrajlogError` -- or
   ``TypeError`` where an argument had the wrong type, or the caller's own
   exception (a hostile object raising); anything else is a finding, and so is
   a hang (a watchdog thread);
2. a failed write changed nothing (the heads of the sessions it touches);
3. what a write appended is exactly what the model expects, and the events
   of the session equal the model (contiguous seqs; type, data, envelope,
   time), checked for the touched session after writes and for every session
   at the end;
4. ``verify().ok`` for every session;
5. ``load()`` appends exactly the closers the model predicts, and a second
   load writes nothing.

A finding raises :class:`Finding`, so atheris saves the input.  With
``FUZZ_API_FINDINGS=<dir>`` findings are instead recorded there, deduplicated
by signature (``<sig>.txt`` with the first traceback and ``<sig>-<sha1>.bin``
with its input; ``occurrences.log`` counts them all), and the run goes on.
``FUZZ_API_STATS=<file>`` gets a line ``time pid executions`` every 1000
inputs.  ``FUZZ_API_FILE_DIR`` is where file stores go (default /dev/shm).

``FUZZ_API_MODE=fast`` (also ``check_input(data, fast=True)``): an input whose
configuration names a ":memory:" store (bits 0-2 not 7) runs on one shared by
the inputs of its configuration, in sessions of its own -- the model counts the
sessions the inputs before left there as taken ids and leaves them out of every
store-wide listing; the store is replaced after ``FUZZ_API_SHARED_INPUTS``
inputs (8) and after any finding.  The background repacker's batching wait is
shortened.  A store's schema and connections were a third of an input's time,
and the repacker's wait most of the time of inputs that repack in the background.

The input is read by :class:`Args`, not atheris.FuzzedDataProvider, so that a
corpus file means the same with and without atheris (tests/api/test_fuzz_api_replay.py
replays the corpus in CI through :func:`check_input`).
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import hashlib
import math
import os
import re
import shutil
import struct
import sys
import tempfile
import threading
import time
import traceback
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from enum import IntEnum
from types import MappingProxyType
from typing import Any, ClassVar

# Bound by _load(), so that atheris can instrument trajlog when it imports it.
trajlog: Any = None
errors: Any = None
projections: Any = None
from_scratch: Any = None
TrajlogError: Any = Exception
# The JSON object and array types a read may hand back: also trajlog's read-only
# forms of them (events.FrozenDict / FrozenList, where it has them), bound by _load().
DICTS: tuple[type, ...] = (dict,)
LISTS: tuple[type, ...] = (list,)

MAX_OPS = 40
MAX_HANDLES = 3
MAX_SESSIONS = 12
SHARED_INPUTS = int(os.environ.get("FUZZ_API_SHARED_INPUTS", "8"))
WATCHDOG_S = float(os.environ.get("FUZZ_API_WATCHDOG", "30"))
TRACE = bool(os.environ.get("FUZZ_API_TRACE"))   # print every operation and its outcome
REENTER_WAIT_S = 1.0
STATUSES = ("active", "superseded", "rejected", "expired", "audit-only")
DATA_CLASSES = ("public", "internal", "internal-redacted", "restricted")
ENVELOPE = ("source", "causal_parent", "workspace_revision", "data_class", "idempotency_key")
RECOVERY_SOURCE = "trajlog.recovery"
GUIDANCE = {
    "TOOL_NOT_STARTED": ("The session ended before this tool call was started, so it did not "
                         "run. It is safe to request it again."),
    "TOOL_OUTCOME_UNKNOWN": ("The session ended while this tool call was running: the tool may "
                             "have run. Check the real state before retrying; read-only and "
                             "idempotent tools are safe to retry."),
}
KNOWN_SHAPES = ("user/message", "assistant/message", "tool/call", "tool/result", "turn/end",
                "tool/cancel")
CALL_TYPES = ("tool/call", "tool/result", "tool/cancel")
INHERITED = ("identity", "tenant", "user")


def _load() -> None:
    global trajlog, errors, projections, from_scratch, TrajlogError, DICTS, LISTS
    import trajlog as tl
    from trajlog import errors as er
    from trajlog import events as ev
    from trajlog import projections as pr
    from trajlog.projections.engine import from_scratch as fs

    trajlog, errors, projections, from_scratch, TrajlogError = tl, er, pr, fs, er.TrajlogError
    DICTS = (dict, *[t for t in (getattr(ev, "FrozenDict", None),) if isinstance(t, type)])
    LISTS = (list, *[t for t in (getattr(ev, "FrozenList", None),) if isinstance(t, type)])


# ---------------------------------------------------------------------------
# Findings


class Finding(AssertionError):
    """An invariant broken: ``sig`` names the bug (deduplicated), ``detail`` says more."""

    def __init__(self, sig: str, detail: str) -> None:
        self.sig = sig
        self.detail = detail
        super().__init__(f"[{sig}] {detail}")


class HostileError(Exception):
    """Raised by the harness's own hostile objects: the caller's exception."""


class Abort(BaseException):
    """A BaseException leaving a block (like KeyboardInterrupt)."""


# ---------------------------------------------------------------------------
# Reading the input


class Args:
    """The argument bytes of one frame; reads past the end give 0."""

    __slots__ = ("data", "i")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.i = 0

    def byte(self) -> int:
        i = self.i
        self.i = i + 1
        return self.data[i] if i < len(self.data) else 0

    def int(self, lo: int, hi: int) -> int:
        n = hi - lo + 1
        v = self.byte()
        if n > 256:
            v = v << 8 | self.byte()
        if n > 65536:
            v = v << 16 | self.byte() << 8 | self.byte()
        return lo + v % n

    def pick(self, seq: Any) -> Any:
        return seq[self.int(0, len(seq) - 1)]

    def flag(self) -> bool:
        return bool(self.byte() & 1)


def parse_frames(data: bytes) -> list[tuple[int, bytes]]:
    frames = []
    i = 0
    while i < len(data) and len(frames) < MAX_OPS:
        op = data[i]
        n = data[i + 1] if i + 1 < len(data) else 0
        frames.append((op, data[i + 2:i + 2 + n]))
        i += 2 + n
    return frames


# ---------------------------------------------------------------------------
# Hostile values.  Each lies about its content in a different way; the model
# always uses the real content (what the base type's own methods see).

_hook: list[Callable[[], None] | None] = [None]   # the reentrant append, set per operation


class DictSub(dict):  # type: ignore[type-arg]
    """A dict subclass that overrides nothing."""


class DictHide(dict):  # type: ignore[type-arg]
    """Iteration, keys(), items() and len() hide some of the stored entries."""

    def __init__(self, items: Any, hidden: Any) -> None:
        dict.__init__(self, items)
        self._hidden = hidden

    def __iter__(self) -> Iterator[Any]:
        return iter([k for k in dict.__iter__(self) if not any(k is h for h in self._hidden)])

    def keys(self) -> Any:
        return list(self)

    def items(self) -> Any:
        return [(k, dict.__getitem__(self, k)) for k in self]

    def values(self) -> Any:
        return [dict.__getitem__(self, k) for k in self]

    def __len__(self) -> int:
        return sum(1 for _ in self)


class DictRaise(dict):  # type: ignore[type-arg]
    """Every way of looking at its content raises the caller's exception."""

    def _raise(self, *a: Any, **k: Any) -> Any:
        raise HostileError("DictRaise")

    __iter__ = keys = items = values = get = __getitem__ = __contains__ = _raise


class DictReenter(dict):  # type: ignore[type-arg]
    """``get`` and ``[]`` append to the session being written (once)."""

    def _fire(self) -> None:
        hook = _hook[0]
        if hook is not None and not getattr(self, "_fired", False):
            self._fired = True
            hook()

    def get(self, key: Any, default: Any = None) -> Any:
        self._fire()
        return dict.get(self, key, default)

    def __getitem__(self, key: Any) -> Any:
        self._fire()
        return dict.__getitem__(self, key)


class ListSub(list):  # type: ignore[type-arg]
    """A list subclass that overrides nothing."""


class ListHide(list):  # type: ignore[type-arg]
    """Iteration and len() skip the hidden positions."""

    def __init__(self, items: Any, hidden: Any) -> None:
        list.__init__(self, items)
        self._hidden = set(hidden)

    def __iter__(self) -> Iterator[Any]:
        return iter([v for i, v in enumerate(list.__iter__(self)) if i not in self._hidden])

    def __len__(self) -> int:
        return sum(1 for _ in self)


class TupleHide(tuple):  # type: ignore[type-arg]
    """A tuple whose iteration shows only its first element."""

    def __iter__(self) -> Iterator[Any]:
        return iter(tuple.__getitem__(self, slice(0, 1)))

    def __len__(self) -> int:
        return min(1, tuple.__len__(self))


class StrSub(str):
    """A str subclass that overrides nothing."""


class StrLie(str):
    """str(), len(), == and hash() describe ``pretend``; the content is other."""

    pretend = "x"

    def __new__(cls, real: str, pretend: str) -> StrLie:
        obj = str.__new__(cls, real)
        obj.pretend = pretend
        return obj

    def __str__(self) -> str:
        return self.pretend

    def __len__(self) -> int:
        return len(self.pretend)

    def __eq__(self, other: object) -> bool:
        return other == self.pretend

    def __ne__(self, other: object) -> bool:
        return other != self.pretend

    def __hash__(self) -> int:
        return hash(self.pretend)


class IntLie(int):
    """int(), index and comparisons describe 3; the value is other."""

    def __int__(self) -> int:
        return 3

    __index__ = __int__

    def __lt__(self, other: Any) -> bool:
        return other > 3

    def __le__(self, other: Any) -> bool:
        return other >= 3

    def __gt__(self, other: Any) -> bool:
        return other < 3

    def __ge__(self, other: Any) -> bool:
        return other <= 3

    __hash__ = int.__hash__


class FloatLie(float):
    """float() and subtraction describe 1.0; the value is other (NaN, inf)."""

    def __float__(self) -> float:
        return 1.0

    def __sub__(self, other: Any) -> float:
        return 0.0

    __hash__ = float.__hash__


class Color(IntEnum):
    RED = 1
    BIG = 2**63 - 1


class Opaque:
    def __repr__(self) -> str:
        return "<Opaque>"


SPECIAL_INTS = (0, -1, 2**31, 2**53 + 1, 2**63 - 1, 2**63, 2**64 - 1, 2**64, -(2**63),
                -(2**63) - 1, 10**20, -(10**20))
SPECIAL_FLOATS = (0.0, -0.0, 1.5, 1e308, 5e-324, math.nan, math.inf, -math.inf, 2.5e-10)
UNICODE = ("é", "\u2028", "\ud800", "a\udfffb", "\x00", "😀", "\ufffe", "\U0010ffff", "\ud83d",
           "日本語")
BAD_KEYS: tuple[Any, ...] = (1, None, True, 1.5, (1, 2), b"k", StrSub("sk"), math.nan)
WORDS = ("content", "x", "name", "id", "call_id", "output", "op", "target", "status", "is_error",
         "synthetic", "interrupted", "tool_calls", "from_seq", "to_seq", "summary", "mode")
ALPHABET = "abcxyz019 _-/.:"


class Gen:
    """Values for one operation, from its argument bytes, with a size budget."""

    def __init__(self, a: Args, run: Run | None = None) -> None:
        self.a = a
        self.run = run
        self.nodes = 40

    def text(self, maxlen: int = 12) -> str:
        n = self.a.int(0, maxlen)
        return "".join(ALPHABET[self.a.int(0, len(ALPHABET) - 1)] for _ in range(n))

    def key(self) -> str:
        k = self.a.int(0, 23)
        return WORDS[k] if k < len(WORDS) else self.text(6) or "k"

    def children(self, depth: int) -> list[Any]:
        n = self.a.int(0, 4)
        out = []
        for _ in range(n):
            if self.nodes <= 0:
                break
            out.append(self.value(depth + 1))
        return out

    def mapping(self, depth: int) -> dict[str, Any]:
        return {self.key(): v for v in self.children(depth)}

    def long_text(self) -> str:
        n = self.a.int(0, 255) * 300
        if self.run is not None:
            n = min(n, self.run.long_budget)
            self.run.long_budget -= n
        return ("long-" * (n // 5 + 1))[:n]

    def value(self, depth: int = 0) -> Any:
        self.nodes -= 1
        a = self.a
        k = a.int(0, 31)
        if self.nodes <= 0 and k >= 9:
            k = 6
        if k == 0 or k >= 28:
            return {"content": self.text()}
        if k == 1:
            return None
        if k == 2:
            return a.flag()
        if k == 3:
            return a.int(0, 255) - 128
        if k == 4:
            return a.pick(SPECIAL_INTS)
        if k == 5:
            return a.pick(SPECIAL_FLOATS)
        if k == 6:
            return self.text()
        if k == 7:
            return self.text(3) + a.pick(UNICODE) + self.text(3)
        if k == 8:
            return self.long_text()
        if k == 9:
            return a.pick((b"raw", bytearray(b"ba"), memoryview(b"mv"), b""))
        if k == 10:
            return tuple(self.children(depth))
        if k == 11:
            return self.children(depth)
        if k == 12:
            return self.mapping(depth)
        if k == 13:
            d: dict[Any, Any] = self.mapping(depth)
            d[a.pick(BAD_KEYS)] = self.text()
            return d
        if k == 14:
            return a.pick((DictSub, OrderedDict))(self.mapping(depth))
        if k == 15:
            d = self.mapping(depth)
            bad = a.pick(BAD_KEYS)
            d[bad] = a.pick((1, math.nan, b"x", Opaque()))
            extra = "hidden"
            d[extra] = a.pick((math.inf, 2**70, b"y", {1: 2}))
            return DictHide(d, (bad, extra) if a.flag() else (bad,))
        if k == 16:
            items = self.children(depth)
            pos = len(items)
            items.append(a.pick((math.nan, b"z", 2**65, {1: 1}, Opaque())))
            return ListHide(items, [pos])
        if k == 17:
            c = a.int(0, 3)
            if c == 0:
                return StrSub(self.text())
            if c == 1:
                return StrLie(self.text(3) + "\ud800", "clean")
            if c == 2:
                return StrLie("x" * 600, "short")
            return StrLie("Bad Type!", "x/y")
        if k == 18:
            return a.pick((IntLie(2**70), IntLie(-5), IntLie(2**63), Color.RED, Color.BIG,
                           IntLie(7)))
        if k == 19:
            return a.pick((FloatLie(math.nan), FloatLie(math.inf), FloatLie(2.5)))
        if k == 20:
            depth_n = a.int(60, 70)
            v: Any = self.text(2)
            for i in range(depth_n):
                v = [v] if i % 2 else {"d": v}
            return v
        if k == 21:
            return a.pick(({1, 2}, frozenset(), 1j, Opaque(), Ellipsis, print, range(3),
                           MappingProxyType({"a": 1})))
        if k == 22:
            cyc: list[Any] = [1]
            cyc.append(cyc)
            cd: dict[str, Any] = {"a": 1}
            cd["self"] = cd
            return a.pick((cyc, cd))
        if k == 23:
            return DictReenter(self.mapping(depth))
        if k == 24:
            return DictRaise(self.mapping(depth))
        if k == 25:
            return TupleHide((self.text(), a.pick((math.nan, b"t", 2**66))))
        if k == 26:
            return ListSub(self.children(depth))
        return {"content": self.text(), "n": a.int(0, 255), "list": [1, "two", None, 2.5],
                "nested": {"ok": True, "deeper": [{"x": self.text()}]}}


# ---------------------------------------------------------------------------
# The model's view of a value: its real content as plain JSON, and whether it
# is valid JSON (what the store must refuse otherwise) and plain (exact types:
# only then must the store accept it).


class Norm:
    __slots__ = ("broken", "plain", "seen", "valid", "why")

    def __init__(self) -> None:
        self.valid = True
        self.plain = True
        self.broken = False   # a hostile object that may raise or confuse the check
        self.why = ""
        self.seen: set[int] = set()

    def bad(self, why: str, via: str) -> None:
        if self.valid:
            self.valid = False
            self.why = why + (f" (inside {via})" if via else "")


def _utf8(s: str) -> bool:
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


INVALID = ("<invalid>",)


def _norm(v: Any, depth: int, st: Norm, via: str) -> Any:
    t = type(v)
    if v is None or t is bool:
        return v
    if t is int:
        if not -(2**63) <= v < 2**64:
            st.bad("integer outside 64 bits", via)
        return v
    if t is float:
        if not math.isfinite(v):
            st.bad(f"{v!r} float", via)
        return v
    if t is str:
        if not _utf8(v):
            st.bad("lone surrogate", via)
        return v
    if isinstance(v, (int, float, str, dict, list, tuple)) and t not in (dict, list, tuple):
        st.plain = False
        via = t.__name__
        if t in (DictRaise, DictReenter, StrLie, IntLie, FloatLie):
            st.broken = True
    if isinstance(v, int):
        x = int.__int__(v)
        if not -(2**63) <= x < 2**64:
            st.bad("integer outside 64 bits", via)
        return x
    if isinstance(v, float):
        f = float.__float__(v)
        if not math.isfinite(f):
            st.bad(f"{f!r} float", via)
        return f
    if isinstance(v, str):
        s = str.__str__(v)
        if not _utf8(s):
            st.bad("lone surrogate", via)
        return s
    if not isinstance(v, (dict, list, tuple)):
        st.bad(f"{t.__name__} value", via)
        if isinstance(v, Mapping):
            st.plain = False
        return INVALID
    if depth >= 64:
        st.bad("nesting deeper than 64", via)
        return INVALID
    if id(v) in st.seen:
        st.bad("a cycle", via)
        return INVALID
    st.seen.add(id(v))
    try:
        if isinstance(v, dict):
            out: dict[Any, Any] = {}
            for k, x in dict.items(v):
                if isinstance(k, str):
                    if type(k) is not str:
                        st.plain = False
                    nk: Any = str.__str__(k)
                    if not _utf8(nk):
                        st.bad("lone surrogate in a key", via)
                else:
                    st.bad(f"dict key {k!r}", via)
                    nk = ("<key>", repr(k))
                out[nk] = _norm(x, depth + 1, st, via)
            return out
        items = list.__iter__(v) if isinstance(v, list) else tuple.__iter__(v)
        return [_norm(x, depth + 1, st, via) for x in items]
    finally:
        st.seen.discard(id(v))


def norm(v: Any) -> tuple[Any, Norm]:
    st = Norm()
    return _norm(v, 0, st, ""), st


class NotPlain(Exception):
    pass


def canon(v: Any) -> Any:
    """A type-exact, order-exact comparable form of a JSON value (NaN equal to itself)."""
    t = type(v)
    if v is None:
        return None
    if t is bool:
        return ("b", v)
    if t is int:
        return ("i", v)
    if t is float:
        return ("f", struct.pack("<d", v))
    if t is str:
        return ("s", v)
    if t in LISTS:
        return ("l", tuple(canon(x) for x in v))
    if t in DICTS:
        return ("d", tuple((canon(k), canon(x)) for k, x in v.items()))
    if t is tuple:   # only from the model's placeholders
        return ("t", tuple(canon(x) for x in v))
    raise NotPlain(f"{t.__name__} value {v!r:.80}")


def plain_json(v: Any, depth: int = 0) -> str | None:
    """Why ``v`` (as the store gave it back) is not plain JSON, or None."""
    t = type(v)
    if v is None or t in (bool, str):
        return None if t is not str or _utf8(v) else "lone surrogate"
    if t is int:
        return None if -(2**63) <= v < 2**64 else "integer outside 64 bits"
    if t is float:
        return None if math.isfinite(v) else f"{v!r}"
    if depth >= 64:
        return "nesting deeper than 64"
    if t in LISTS:
        for x in v:
            why = plain_json(x, depth + 1)
            if why:
                return why
        return None
    if t in DICTS:
        for k, x in v.items():
            if type(k) is not str:
                return f"dict key {k!r}"
            why = plain_json(x, depth + 1)
            if why:
                return why
        return None
    return f"{t.__name__} value"


# ---------------------------------------------------------------------------
# The model of one session


REQUESTED, STARTED, FINISHED = 1, 2, 3


class MEv:
    __slots__ = ("data", "env", "time", "type")

    def __init__(self, type_: str, data: Any, env: dict[str, Any], time_: int | None) -> None:
        self.type = type_
        self.data = data
        self.env = env
        self.time = time_

    def key(self) -> Any:
        return (self.type, canon(self.data), tuple(sorted((k, canon(v))
                                                          for k, v in self.env.items())))

    def __repr__(self) -> str:
        return f"MEv({self.type!r}, {self.data!r:.200}, {self.env!r}, {self.time})"


class Tracker:
    """The lifecycle, as trajlog.lifecycle.Tracker.feed follows a stored log."""

    def __init__(self) -> None:
        self.turn: int | None = None
        self.step: int | None = None
        self.open: dict[str, tuple[int, str]] = {}
        self.finished: set[str] = set()

    def copy(self) -> Tracker:
        t = Tracker()
        t.turn, t.step, t.open, t.finished = self.turn, self.step, dict(self.open), set(
            self.finished)
        return t

    def phase(self, cid: str) -> int | None:
        e = self.open.get(cid)
        if e is not None:
            return e[0]
        return FINISHED if cid in self.finished else None

    def feed(self, ev: MEv, seq: int) -> None:
        t, d = ev.type, ev.data
        if t == "turn/start":
            self.turn = seq
        elif t == "turn/end":
            self.turn = self.step = None
        elif t == "step/start":
            self.step = seq
        elif t == "step/end":
            self.step = None
        elif t == "assistant/message" and isinstance(d, dict):
            for c in d.get("tool_calls") or ():
                if isinstance(c, dict) and isinstance(c.get("id"), str):
                    self.open[c["id"]] = (REQUESTED, str(c.get("name", "")))
        elif t in CALL_TYPES and isinstance(d, dict):
            cid = d.get("call_id")
            if not isinstance(cid, str):
                return
            if t != "tool/call":   # a result or a cancel closes the call
                self.open.pop(cid, None)
                self.finished.add(cid)
                return
            name = str(d.get("name", ""))
            known = self.open.get(cid)
            if known is not None and known[1]:
                name = known[1]
            self.open[cid] = (STARTED, name)

    def boundary(self, t: str) -> str | None:
        """Why ``t`` cannot be the next turn / step marker (markers nest)."""
        if t == "turn/start" and self.turn is not None:
            return "turn/start inside an open turn"
        if t == "turn/end" and self.turn is None:
            return "turn/end with no open turn"
        if t == "step/start" and (self.turn is None or self.step is not None):
            return "step/start outside a turn or inside a step"
        if t == "step/end" and self.step is None:
            return "step/end with no open step"
        return None

    def refuse(self, ev: MEv) -> str | None:
        """Why the write path must refuse ``ev`` here (its lifecycle rule), if it must."""
        t, d = ev.type, ev.data
        why = self.boundary(t)
        if why:
            return why
        if t == "assistant/message" and isinstance(d, dict):
            for c in d.get("tool_calls") or ():
                cid = c.get("id") if isinstance(c, dict) else None
                if isinstance(cid, str) and self.phase(cid) is not None:
                    return f"tool call id {cid!r} reused"
        elif t in CALL_TYPES and isinstance(d, dict):
            cid = d.get("call_id")
            if not isinstance(cid, str):
                return None
            before = self.phase(cid)
            if t == "tool/cancel":   # the host gives up a requested or started call
                return None if before in (REQUESTED, STARTED) else (
                    f"tool/cancel {cid!r} in phase {before}")
            if t == "tool/call" and before != REQUESTED:
                return f"tool/call {cid!r} in phase {before}"
            if t == "tool/result" and before != STARTED and not (
                    before == REQUESTED and d.get("synthetic")):
                return f"tool/result {cid!r} in phase {before}"
        return None


def compaction_range(ev: MEv) -> tuple[Any, Any] | None:
    d = ev.data
    if not ev.type.startswith("compaction/") or not isinstance(d, dict) or d.get(
            "op") != "surface-replace":
        return None
    return d.get("from_seq"), d.get("to_seq")


class MSess:
    """One session of the model."""

    def __init__(self, sid: str, header: dict[str, Any], events: list[MEv], seed: int,
                 parent: MSess | None) -> None:
        self.id = sid
        self.header = header          # expected header fields (metadata as plain JSON)
        self.events = events          # the whole view: inherited prefix, then its own
        self.seed = seed
        self.parent = parent
        self.handles: list[tuple[int, Any]] = []
        self.rebuild()

    def rebuild(self) -> None:
        self.defect: str | None = None
        self.tracker = Tracker()
        self.compactions: list[tuple[int, int]] = []
        self.keys: dict[str, int] = {}
        for seq, ev in enumerate(self.events):
            self.advance(ev, seq)

    def advance(self, ev: MEv, seq: int) -> None:
        if self.defect is None:
            self.defect = self.tracker.boundary(ev.type)
        self.tracker.feed(ev, seq)
        r = compaction_range(ev)
        if r is not None:
            lo, hi = r
            if isinstance(lo, int) and isinstance(hi, int) and lo <= hi:
                self.compactions.append((lo, hi))
        k = ev.env.get("idempotency_key")
        if k is not None and seq >= self.seed:
            self.keys.setdefault(k, seq)

    def add(self, ev: MEv) -> None:
        self.events.append(ev)
        self.advance(ev, len(self.events) - 1)

    @property
    def last(self) -> int:
        return len(self.events) - 1

    @property
    def fixed_approvals(self) -> bool:
        return (self.header["origin"] == "subagent"
                and self.header["metadata"].get("approval_policy") == "never")

    def closers(self) -> list[MEv]:
        out = []
        when = self.events[-1].time if self.events else None
        env = {"source": RECOVERY_SOURCE}
        for cid, (phase, name) in self.tracker.open.items():
            kind = "TOOL_NOT_STARTED" if phase == REQUESTED else "TOOL_OUTCOME_UNKNOWN"
            out.append(MEv("tool/result", {"call_id": cid, "name": name, "status": kind,
                                           "synthetic": True, "is_error": True,
                                           "output": GUIDANCE[kind]}, env, when))
        if self.tracker.step is not None:
            out.append(MEv("step/end", {"synthetic": True, "interrupted": True}, env, when))
        if self.tracker.turn is not None:
            out.append(MEv("turn/end", {"synthetic": True, "interrupted": True}, env, when))
        return out

    def cut_for(self, at: int) -> int | None:
        """Where fork(at) cuts (None: the turn is open), as Lineage.turn_end_of."""
        start = end = None
        for seq in range(at, -1, -1):
            t = self.events[seq].type
            if t == "turn/start" and start is None:
                start = seq
            if t == "turn/end" and end is None:
                end = seq
            if start is not None and end is not None:
                break
        if start is None or (end is not None and end > start):
            return at
        for seq in range(at + 1, len(self.events)):
            if self.events[seq].type == "turn/end":
                return seq
        return None

    def last_turn_end(self) -> int:
        for seq in range(len(self.events) - 1, -1, -1):
            if self.events[seq].type == "turn/end":
                return seq
        return -1

    def final_output(self) -> str:
        for ev in reversed(self.events[self.seed:]):
            if ev.type == "assistant/message" and isinstance(ev.data, dict):
                content = ev.data.get("content")
                return content if isinstance(content, str) else str(content or "")
        return ""


# ---------------------------------------------------------------------------
# What the model expects of a write


class Plan:
    """The model's verdict on one write."""

    def __init__(self) -> None:
        self.must: list[str] = []      # reasons it must be refused
        self.may: list[str] = []       # reasons a refusal is acceptable
        self.typeerr = False           # a TypeError is an acceptable refusal
        self.hostile = False           # the caller's HostileError may come out
        self.events: list[MEv] = []    # what an acceptance appends
        self.given_time: list[int | None] = []
        self.replay: list[int] | None = None   # a retry returns these seqs, and appends
        self.retry: MEv | None = None           # only its record (request/retry)
        self.sources: list[Any] = []   # the caller's data objects, for the sharing check

    def must_refuse(self, why: str, typeerr: bool = False) -> None:
        self.must.append(why)
        self.typeerr |= typeerr


_TYPE_CHARS = set("abcdefghijklmnopqrstuvwxyz0123456789_.-")


@functools.lru_cache(maxsize=4096)
def type_ok(t: str) -> bool:
    """trajlog's event type rule: ``[a-z][a-z0-9_.-]*(/[a-z0-9_.*-]+)*``, <= 128 chars."""
    if not t or len(t) > 128 or not ("a" <= t[0] <= "z"):
        return False
    head, *rest = t.split("/")
    return set(head) <= _TYPE_CHARS and all(seg and set(seg) <= _TYPE_CHARS | {"*"}
                                            for seg in rest)


def shape_refusal(t: str, d: Any) -> str | None:
    if t not in KNOWN_SHAPES:
        return None
    if not isinstance(d, dict):
        return f"{t} data must be a dict"

    def need(obj: dict[str, Any], key: str, kinds: tuple[type, ...]) -> str | None:
        if key not in obj:
            return f"{t} needs {key!r}"
        v = obj[key]
        if not isinstance(v, kinds) or (bool not in kinds and isinstance(v, bool)
                                        and int in kinds):
            return f"{t} field {key!r} has the wrong type"
        return None

    if t == "user/message":
        return need(d, "content", (str, list))
    if t == "assistant/message":
        if "content" in d and not isinstance(d["content"], (str, list, type(None))):
            return "assistant/message content"
        calls = d.get("tool_calls", [])
        if not isinstance(calls, list):
            return "assistant/message tool_calls must be a list"
        seen: set[str] = set()
        for c in calls:
            if not isinstance(c, dict):
                return "a tool call must be a dict"
            why = need(c, "id", (str,)) or need(c, "name", (str,))
            if why:
                return why
            if c["id"] in seen:
                return "a tool call id twice in one message"
            seen.add(c["id"])
        return None
    if t == "tool/call":
        return need(d, "call_id", (str,)) or need(d, "name", (str,))
    if t == "tool/result":
        why = need(d, "call_id", (str,))
        if why:
            return why
        if "is_error" in d and not isinstance(d["is_error"], bool):
            return "tool/result is_error must be bool"
        return None
    if t == "tool/cancel":
        why = need(d, "call_id", (str,))
        if why or "reason" not in d:
            return why
        return need(d, "reason", (str,))
    if not isinstance(d.get("interrupted", False), bool):
        return "turn/end interrupted must be bool"
    return None


def envelope_of(plan: Plan, fields: Mapping[str, Any]) -> dict[str, Any]:
    """The envelope the store must record, from the caller's fields (None: unset)."""
    env: dict[str, Any] = {}
    for name in ENVELOPE:
        v = fields.get(name)
        if v is None:
            continue
        if name == "causal_parent":
            if not isinstance(v, int) or isinstance(v, bool):
                plan.must_refuse(f"causal_parent of type {type(v).__name__}", typeerr=True)
                continue
            x = int.__int__(v)
            if type(v) is not int:
                plan.may.append("an int subclass in the envelope")
            if not 0 <= x < 2**63:
                plan.must_refuse(f"causal_parent {x}")
            env[name] = x
        elif name == "data_class":
            if not isinstance(v, str):
                plan.must_refuse(f"data_class of type {type(v).__name__}", typeerr=True)
                continue
            x = str.__str__(v)
            if type(v) is not str:
                plan.may.append("a str subclass in the envelope")
            if x not in DATA_CLASSES:
                plan.must_refuse(f"data_class {x!r:.40}")
            env[name] = x
        else:
            if not isinstance(v, str):
                plan.must_refuse(f"{name} of type {type(v).__name__}", typeerr=True)
                continue
            x = str.__str__(v)
            if type(v) is not str:
                plan.may.append("a str subclass in the envelope")
            if not 1 <= len(x) <= 512:
                plan.must_refuse(f"{name} of {len(x)} characters")
            if not _utf8(x):
                plan.must_refuse(f"{name} with a lone surrogate")
            env[name] = x
    return env


# ---------------------------------------------------------------------------
# One input


class Run:
    """One input: a store (or two, on one file), the model, the operations.

    Stores are named by their index in ``self.stores``, every store opened in
    this input (never reused): a handle remembers the store it came from, so a
    handle of a closed store stays closed after a reopen."""

    def __init__(self, data: bytes, fast: bool = False) -> None:
        # The configuration byte: bits 0-2 the store (0: ":memory:", else a file on
        # tmpfs), bit 4 durability "normal", bit 5 a reopen and check at the end
        # (file), bit 7 a delegation limit of bits 5-6 (0..2); bits 3 and 6 set and 4
        # clear: background repack (1/8 only: store.repack() and close() then wait for
        # the worker, which idles 0.2 s first).  Fast mode: bits 0-2 = 7 a file, else
        # a ":memory:" store shared with the inputs before (:class:`Shared`).
        cfg = data[0] if data else 0
        self.file = cfg % 8 == 7 if fast else cfg % 8 != 0
        self.repack = cfg & 0x58 == 0x48
        self.durability = "normal" if cfg & 16 else "full"
        self.reopen_at_end = bool(cfg & 32)
        self.max_depth = (cfg >> 5) % 3 if cfg & 128 else 4
        self.frames = parse_frames(data[1:])
        self.pos = 0
        self.budget = MAX_OPS
        self.long_budget = 150_000
        self.tmp: str | None = None
        self.path = ":memory:"
        self.stores: list[Any] = []
        self.closed: set[int] = set()
        self.slot: list[int | None] = [None, None]   # primary and secondary store
        self.sessions: list[MSess] = []
        self.erased: set[tuple[str, int]] = set()   # (id of the log holding it, seq)
        # The writer leases the stores hold, per (store, session): the depth of
        # lease() / turn() blocks, and the lease a raw turn/start took (held
        # until a turn/end appended through the same store).
        self.blocks: dict[tuple[int, str], int] = {}
        self.turn_lease: set[tuple[int, str]] = set()
        self.hstate: dict[int, list[bool]] = {}          # id(handle) -> [turn open, step open]
        self.keep: list[Any] = []                        # handles, kept alive for hstate
        self.inner: list[tuple[MSess, threading.Thread, list[Any], bool]] = []
        self.soft: list[Finding] = []
        self.flagged = False
        self.call_counter = 0
        # Fast mode: the shared store (slot 0), the sessions earlier inputs left
        # in it (every store-wide listing is compared without them), and this
        # input's number in it (explicit session ids are made distinct with it).
        self.fast = fast
        self.shared: Shared | None = None
        self.base: frozenset[str] = frozenset()
        self.serial = 0

    # -- stores ------------------------------------------------------------------

    def open_store(self, slot: int) -> int:
        st = trajlog.open(self.path, self.durability, repack=self.repack,
                          max_delegation_depth=self.max_depth)
        self.stores.append(st)
        idx = len(self.stores) - 1
        self.slot[slot] = idx
        return idx

    def setup(self) -> None:
        if self.file:
            self.tmp = tempfile.mkdtemp(prefix="fuzz_api_", dir=file_dir())
            self.path = os.path.join(self.tmp, "store.db")
            shutil.copyfile(template(), self.path)   # an empty store, half the cost of one
        elif self.fast:
            key = (self.durability, self.repack, self.max_depth)
            self.shared = Shared.take(key, lambda: trajlog.open(
                ":memory:", self.durability, repack=self.repack,
                max_delegation_depth=self.max_depth))
            self.stores.append(self.shared.store)
            self.slot[0] = 0
            self.base = frozenset(self.shared.ids)
            self.serial = self.shared.inputs
            return
        self.open_store(0)

    def teardown(self, healthy: bool = False) -> None:
        """Close this input's stores; give a shared store back if the input
        left it open and in step with the model (``healthy``)."""
        sh = self.shared
        keep = sh is not None and healthy and 0 not in self.closed
        if keep:
            sh.give_back({s.id for s in self.sessions})   # type: ignore[union-attr]
        for i, st in enumerate(self.stores):
            if i not in self.closed and not (keep and i == 0):
                with contextlib.suppress(Exception):
                    st.close()
        if self.tmp:
            shutil.rmtree(self.tmp, ignore_errors=True)

    def is_open(self, idx: int) -> bool:
        return idx not in self.closed

    def open_stores(self) -> list[int]:
        return [i for i in self.slot if i is not None and i not in self.closed]

    def any_store(self) -> int | None:
        o = self.open_stores()
        return o[0] if o else None

    def pick_store(self, a: Args) -> int:
        """An open store mostly; sometimes a closed one (every call must fail)."""
        o = self.open_stores()
        k = a.int(0, 15)
        if k == 15 or not o:
            return a.int(0, len(self.stores) - 1)
        return o[k % len(o)]

    def handle(self, s: MSess, idx: int) -> Any:
        h = self.stores[idx].session(s.id)
        self.keep.append(h)
        return h

    def live_handle(self, s: MSess) -> Any:
        """A handle on an open store (None if every store is closed)."""
        for idx, h in s.handles:
            if self.is_open(idx):
                return h
        idx = self.any_store()
        if idx is None:
            return None
        h = self.handle(s, idx)
        s.handles.append((idx, h))
        return h

    def holds(self, store_idx: int, s: MSess) -> bool:
        key = (store_idx, s.id)
        return self.is_open(store_idx) and (self.blocks.get(key, 0) > 0
                                            or key in self.turn_lease)

    def foreign_lease(self, store_idx: int, s: MSess) -> bool:
        return any(self.holds(i, s) for i in range(len(self.stores)) if i != store_idx)

    def in_block(self, store_idx: int, s: MSess) -> bool:
        return self.blocks.get((store_idx, s.id), 0) > 0

    def note_markers(self, store_idx: int, s: MSess, evs: list[MEv]) -> None:
        """A write that ended with a turn marker takes or gives back the turn's lease."""
        marker = next((e.type for e in reversed(evs) if e.type in ("turn/start", "turn/end")),
                      None)
        key = (store_idx, s.id)
        if marker == "turn/start" and not self.holds(store_idx, s):
            self.turn_lease.add(key)
        elif marker == "turn/end":
            self.turn_lease.discard(key)

    # -- checks --------------------------------------------------------------------

    def fail(self, sig: str, detail: str) -> None:
        raise Finding(sig, detail)

    def soft_fail(self, sig: str, detail: str) -> None:
        """A finding after which the model is still in step with the store: in
        continue mode the input goes on.  (A refusal already reported as an
        unexpected exception is not reported again as a spurious refusal.)"""
        if sig.startswith("spurious-refusal") and self.flagged:
            return
        f = Finding(sig, detail)
        if not os.environ.get("FUZZ_API_FINDINGS"):
            raise f
        self.flagged = sig.startswith("unexpected-exception")
        self.soft.append(f)

    def allowed(self, exc: BaseException, op: str, typeerr: bool, hostile: bool) -> None:
        """Invariant 1: only typed errors (and documented TypeErrors) come out."""
        if isinstance(exc, Finding):
            raise exc
        cause = exc.__cause__
        if isinstance(exc, errors.StoreError) and cause is not None and not isinstance(
                cause, (TrajlogError, HostileError, OSError)) and type(
                cause).__module__.partition(".")[0] not in ("apsw", "psycopg"):
            # group commit wraps what a request raised: a bug of trajlog's own code (a
            # database driver's error, SQLite's or PostgreSQL's, is the backend's to type)
            self.soft_fail(f"wrapped-internal-error:{op}:{type(cause).__name__}@"
                           f"{where(cause)}", f"{op} raised {exc!r:.200}, caused by "
                           f"{type(cause).__name__}: {cause!s:.200}\n{tb_text(cause)}")
            return
        if isinstance(exc, TrajlogError):
            return
        if hostile and isinstance(exc, (HostileError, Abort)):
            return
        if typeerr and type(exc) is TypeError:
            return
        # the caller then checks that nothing was written, as for a refusal
        self.soft_fail(f"unexpected-exception:{op}:{type(exc).__name__}@{where(exc)}",
                       f"{op} raised {type(exc).__name__}: {exc!s:.300}\n{tb_text(exc)}")

    def heads(self, sessions: list[MSess]) -> dict[str, int | None]:
        out: dict[str, int | None] = {}
        for s in sessions:
            h = self.live_handle(s)
            out[s.id] = None if h is None else h.last_seq
        return out

    def check_heads(self, sessions: list[MSess], op: str) -> None:
        for s in sessions:
            h = self.live_handle(s)
            if h is not None and h.last_seq != s.last:
                self.fail(f"head-mismatch:{op}", f"after {op}: session {s.id} last_seq "
                          f"{h.last_seq}, the model {s.last}")

    def stored(self, s: MSess, from_seq: int = 0) -> list[Any]:
        h = self.live_handle(s)
        return [] if h is None else list(h.events(from_seq))

    def compare(self, s: MSess, got: list[Any], from_seq: int, op: str,
                expected: list[MEv] | None = None) -> None:
        """Invariant 3: stored events equal the model's (and are plain JSON)."""
        want = s.events[from_seq:] if expected is None else expected
        if len(got) != len(want):
            self.fail(f"events-count:{op}", f"after {op}: session {s.id} has "
                      f"{len(got)} events from seq {from_seq}, the model {len(want)}\n"
                      f"got  {[e.type for e in got]}\nwant {[e.type for e in want]}")
        for i, (ev, m) in enumerate(zip(got, want, strict=True)):
            seq = from_seq + i
            if ev.seq != seq:
                self.fail(f"seq-gap:{op}", f"event {i} from {from_seq} has seq {ev.seq}")
            self.same_event(s, ev, m, seq, op)

    def same_event(self, s: MSess, ev: Any, m: MEv, seq: int, op: str) -> None:
        why = plain_json(ev.data)
        if why:
            self.fail(f"non-json-stored:{op}", f"session {s.id} seq {seq} ({ev.type}) holds "
                      f"{why}: {ev.data!r:.200}")
        if type(ev.type) is not str or not type_ok(ev.type):
            self.fail(f"invalid-type-stored:{op}", f"seq {seq} type {ev.type!r:.60}")
        env = stored_env(ev)
        try:
            same = stored_key(ev.type, ev.data, env) == m.key()
        except NotPlain as exc:
            self.fail(f"non-json-stored:{op}", f"seq {seq}: {exc}")
        if not same:
            self.fail(f"event-differs:{op}", f"session {s.id} seq {seq}:\n stored "
                      f"{ev.type!r} {ev.data!r:.300} {env}\n model  {m!r:.400}")
        if m.time is not None and ev.time != m.time:
            self.fail(f"time-differs:{op}", f"seq {seq} time {ev.time}, model {m.time}")

    def check_session(self, s: MSess, op: str, verify: bool = True) -> None:
        h = self.live_handle(s)
        if h is None:
            return
        self.compare(s, self.stored(s), 0, op)
        if verify:
            rep = h.verify()
            if not rep.ok:
                idx = self.any_store()
                fresh = None if idx is None else self.stores[idx].session(s.id).verify()
                if fresh is not None and fresh.ok and "header" in str(rep.scan.reason):
                    self.soft_fail("verify-corrupt-through-creating-handle",
                                   f"session {s.id}: verify() through the handle create/fork/"
                                   f"spawn returned says {rep.scan.reason!r}; a fresh handle "
                                   "verifies clean")
                else:
                    self.fail(f"verify-failed:{op}", f"session {s.id}: {rep.scan!r:.300}")
            if rep.last_seq != s.last:
                self.fail(f"verify-last-seq:{op}", f"verify says {rep.last_seq}, "
                          f"model {s.last}")

    def check_header(self, s: MSess, op: str) -> None:
        idx = self.any_store()
        if idx is None:
            return
        hd = self.stores[idx].session(s.id).header
        for k, v in s.header.items():
            got = getattr(hd, k)
            if k == "metadata":
                got = dict(got)
                try:
                    ok = plain_json(got) is None and canon(got) == canon(v)
                except NotPlain:
                    ok = False
            else:
                ok = got == v and type(got) is type(v)
            if not ok:
                self.fail(f"header-differs:{op}:{k}", f"session {s.id} header {k} = "
                          f"{got!r:.200}, model {v!r:.200}")

    def no_new_session(self, op: str) -> None:
        """After a refused create / fork / spawn: the store holds the model's sessions."""
        idx = self.any_store()
        if idx is not None and len(self.stores[idx].sessions(
                include_subagents=True)) != len(self.base) + len(self.sessions):
            self.fail(f"failed-write-wrote:{op}", f"{op} failed but a session was created")

    # -- writes ---------------------------------------------------------------------

    def data_of(self, plan: Plan, data: Any) -> Any:
        """The model's value of an event's data, and what it makes the plan expect."""
        if data is None:
            data = {}
        plan.sources.append(data)
        return judge(plan, data, "data")

    def plan_event(self, plan: Plan, s: MSess, t: Any, data: Any, time_: Any,
                   fields: Mapping[str, Any]) -> MEv:
        """One event's checks before the transaction (type, JSON, shape, time, envelope)."""
        if isinstance(t, str) and str.__str__(t).startswith("approval/") and s.fixed_approvals:
            plan.must_refuse("approval/* in a forked subagent")
        if not isinstance(t, str):
            plan.must_refuse(f"type of type {type(t).__name__}", typeerr=True)
            tt = "<not a str>"
        else:
            tt = str.__str__(t)
            if type(t) is not str:
                plan.may.append("a str subclass as the type")
            if not type_ok(tt):
                plan.must_refuse(f"type {tt!r:.40}")
        d = self.data_of(plan, data)
        if not plan.must and (why := shape_refusal(tt, d)):
            plan.must_refuse(why)
        if time_ is not None and (type(time_) is not int or not 0 <= time_ < 2**63):
            plan.must_refuse(f"time {time_!r:.30}")
        env = envelope_of(plan, fields)
        if tt == "event/status" and (str(env.get("source", "")).startswith((
                "web:", "external:")) or (isinstance(d, dict) and d.get("trust") == "untrusted")):
            plan.must_refuse("untrusted-status")
        return MEv(tt, d, env, time_ if type(time_) is int else None)

    def plan_apply(self, plan: Plan, s: MSess, evs: list[MEv], store_idx: int) -> None:
        """The checks inside the transaction: lease, idempotent retry, lifecycle,
        compactions, status targets."""
        if not self.is_open(store_idx):
            plan.must_refuse("closed store")
            return
        if self.foreign_lease(store_idx, s):
            plan.must_refuse("lease held by another store")
            return
        keyed = [(i, ev.env["idempotency_key"]) for i, ev in enumerate(evs)
                 if "idempotency_key" in ev.env]
        if len({k for _, k in keyed}) != len(keyed):
            plan.must_refuse("a batch repeats an idempotency key")
            return
        found = [(i, s.keys[k]) for i, k in keyed if k in s.keys]
        if found:
            if len(found) != len(keyed):
                plan.must_refuse("mixes used and new idempotency keys")
                return
            start = found[0][1] - found[0][0]
            if start < 0 or start + len(evs) > len(s.events):
                plan.must_refuse("a retried batch longer than the original")
                return
            for i, ev in enumerate(evs):
                if s.events[start + i].key() != ev.key():
                    plan.must_refuse("an idempotency key reused for a different event")
                    return
            plan.replay = list(range(start, start + len(evs)))
            plan.retry = retry_record(s, keyed[0][1], start + keyed[0][0], start, len(evs))
            return
        tr = s.tracker.copy()
        first = len(s.events)
        added: list[tuple[int, int]] = []
        for i, ev in enumerate(evs):
            why = tr.refuse(ev)
            if why:
                plan.must_refuse(why)
                return
            tr.feed(ev, first + i)
            if ev.type == "event/status" and isinstance(ev.data, dict):
                target = ev.data.get("target")
                if isinstance(target, int) and not isinstance(target, bool) and not (
                        0 <= target < first + i):
                    plan.must_refuse(f"status target {target}")
                    return
            r = compaction_range(ev)
            if r is not None:
                why = self.compaction_refusal(s, r, first - 1, added, plan)
                if why:
                    plan.must_refuse(why)
                    return
                added.append(r)
        plan.events = evs

    def compaction_refusal(self, s: MSess, r: tuple[Any, Any], last: int,
                           added: list[tuple[int, int]], plan: Plan) -> str | None:
        lo, hi = r
        if type(lo) is not int or type(hi) is not int:
            return "compaction bounds not int"
        if not 0 <= lo <= hi <= last:
            return f"compaction {lo}..{hi} outside 0..{last}"
        req: set[str] = set()
        ans: set[str] = set()
        for e in s.events[lo:hi + 1]:
            d = e.data
            if e.type == "assistant/message" and isinstance(d, dict):
                req |= {c["id"] for c in d.get("tool_calls") or ()
                        if isinstance(c, dict) and isinstance(c.get("id"), str)}
            elif e.type in ("tool/result", "tool/cancel") and isinstance(d, dict) and isinstance(
                    d.get("call_id"), str):
                ans.add(d["call_id"])
        if req != ans:
            return f"compaction {lo}..{hi} splits calls {sorted(req ^ ans)}"
        for a, b in s.compactions + added:
            overlap = not (b < lo or a > hi)
            contains = lo <= a and b <= hi
            inside = a <= lo and hi <= b
            if overlap and not contains and not inside:
                return f"compaction {lo}..{hi} overlaps {a}..{b}"
            if inside and not contains:
                # checks.py says "disjoint, or containing, or contained"; the code
                # refuses a range inside an earlier one: either outcome is taken.
                plan.may.append("compaction inside an earlier one")
        return None

    def write(self, op: str, s: MSess, store_idx: int, plan: Plan, call: Callable[[], Any],
              batch: bool, touched: list[MSess] | None = None) -> Any:
        """Run one write and check it against the plan (invariants 1-3)."""
        touched = touched or [s]
        # (fast mode: the model's heads, equal to the store's after every operation)
        before = {x.id: x.last for x in touched} if self.fast else self.heads(touched)
        base = s.last
        self.inner = []
        _hook[0] = self.reenter_hook(s, store_idx)
        t0 = now_ms()
        try:
            result = call()
            exc: BaseException | None = None
        except BaseException as e:
            result, exc = None, e
        finally:
            _hook[0] = None
        t1 = now_ms()
        if TRACE:
            print(f"    {op}: {'ok ' + repr(result)[:150] if exc is None else repr(exc)[:150]}"
                  f"  must={plan.must} may={plan.may}", file=sys.stderr)
        inner = self.settle_inner()
        if exc is not None:
            self.allowed(exc, op, plan.typeerr, plan.hostile)
            self.take_inner(s, inner, base, [])
            after = self.heads(touched)
            for x in touched:
                b, a = before[x.id], after[x.id]
                if b is not None and a is not None and a != b + (len(inner) if x is s else 0):
                    self.fail(f"failed-write-wrote:{op}", f"{op} failed "
                              f"({type(exc).__name__}: {exc!s:.200}) but session {x.id} "
                              f"moved from {b} to {a}")
            if not plan.must and not plan.may and not (plan.hostile and isinstance(
                    exc, HostileError)):
                self.soft_fail(f"spurious-refusal:{op}:{type(exc).__name__}",
                               f"{op} refused a write the model accepts: {type(exc).__name__}:"
                               f" {exc!s:.300}\nplan {plan.events or plan.replay}")
            return None
        events = result if batch else [result]
        if plan.must:
            self.adopt(s)
            self.soft_fail("accepted-invalid:" + _reason_sig(plan.must[0]),
                           f"{op} accepted what must be refused ({'; '.join(plan.must)}): "
                           f"{events!r:.400}")
            return result
        if plan.replay is not None:
            assert plan.retry is not None
            for g in self.take_inner(s, inner, base, [plan.retry]):
                if not t0 - 5 <= g.time <= t1 + 5:
                    self.fail(f"time-not-now:{op}-retry", f"seq {g.seq} time {g.time} not in "
                              f"[{t0}, {t1}]")
            seqs = [getattr(e, "seq", None) for e in events]
            if seqs != plan.replay:
                self.fail(f"replay-differs:{op}", f"an idempotent retry returned seqs {seqs}, "
                          f"want {plan.replay}")
            self.check_heads([s], op)
            return result
        got = self.take_inner(s, inner, base, plan.events)
        self.note_markers(store_idx, s, plan.events)
        for ev, g in zip(plan.events, got, strict=True):
            if ev.time is None and not t0 - 5 <= g.time <= t1 + 5:
                self.fail(f"time-not-now:{op}", f"seq {g.seq} time {g.time} not in "
                          f"[{t0}, {t1}]")
        self.check_returned(op, events, got, plan)
        return result

    def take_inner(self, s: MSess, inner: list[Any], base: int, evs: list[MEv]) -> list[Any]:
        """Check and take the events a write appended: ``evs``, with the reentrant
        appends made meanwhile before or after them.  Returns the stored events of
        ``evs``."""
        first = base + 1
        if not inner:
            got = self.stored(s, first) if True else []
            self.compare(s, got, first, "write", evs)
            for ev, g in zip(evs, got, strict=True):
                ev.time = g.time
                s.add(ev)
            return got
        got = self.stored(s, first)
        k = len(inner)
        re = MEv("x/reenter", {"from": "get"}, {}, None)
        if len(got) != len(evs) + k:
            self.fail("events-count:reentrant", f"{len(got)} new events, expected "
                      f"{len(evs)} and {k} reentrant")
        lead = 0
        while lead < k and got[lead].type == "x/reenter" and (
                len(got) - lead > len(evs)):
            lead += 1
        order = [re] * lead + evs + [re] * (k - lead)
        self.compare(s, got, first, "write-reentrant", order)
        mine = []
        for ev, g in zip(order, got, strict=True):
            e = MEv(ev.type, ev.data, ev.env, g.time)
            if ev is not re:
                ev.time = g.time
                e = ev
                mine.append(g)
            s.add(e)
        return mine

    def check_returned(self, op: str, events: Any, got: list[Any], plan: Plan) -> None:
        if not isinstance(events, list) or len(events) != len(got):
            self.fail(f"append-return-shape:{op}", f"{op} returned {events!r:.200}")
        for ev, g in zip(events, got, strict=True):
            if ev.seq != g.seq or str.__str__(ev.type) != g.type or ev.time != g.time:
                self.fail(f"append-return-differs:{op}", f"returned {ev!r:.200}, stored "
                          f"{g!r:.200}")
            n, _ = norm(ev.data)
            try:
                same = canon(n) == canon(g.data)
            except NotPlain:
                same = False
            if not same:
                self.fail(f"append-return-differs:{op}", f"returned data {ev.data!r:.200}, "
                          f"stored {g.data!r:.200}")
        for ev, src in zip(events, plan.sources, strict=False):
            if isinstance(src, (dict, list)) and ev.data is src:
                self.soft_fail("append-event-shares-caller-data",
                               f"{op}: the returned Event's data is the caller's "
                               f"{type(src).__name__} object: mutating it changes the "
                               "'immutable' Event")
                break

    def adopt(self, s: MSess) -> None:
        """After an acceptance the model refused: take what the store holds."""
        for _s, th, _box, _blocked in self.inner:
            th.join(5)
        s.events = [MEv(e.type, e.data, stored_env(e), e.time) for e in self.stored(s, 0)]
        s.rebuild()

    # -- the reentrant append: data whose get() appends to the session again -------

    def reenter_hook(self, s: MSess, store_idx: int) -> Callable[[], None] | None:
        h = next((h for i, h in s.handles if i == store_idx), None)
        if h is None:
            return None

        def hook() -> None:
            box: list[Any] = []

            def go() -> None:
                try:
                    box.append(h.append("x/reenter", {"from": "get"}))
                except BaseException as e:
                    box.append(e)

            th = threading.Thread(target=go, name="reentrant-append", daemon=True)
            th.start()
            th.join(REENTER_WAIT_S)
            blocked = th.is_alive()
            stacks = ""
            if blocked:
                f = sys._current_frames().get(th.ident or -1)
                inner = "".join(traceback.format_stack(f)) if f is not None else ""
                if "submit" in inner:
                    stacks = ("--- the reentrant append (waits for the commit its caller "
                              "leads)\n" + inner[-2500:] + "--- its caller (inside the "
                              "transaction)\n" + "".join(traceback.format_stack()[-12:]))
            self.inner.append((s, th, box, bool(stacks)))
            if stacks:
                self.pending = Finding(
                    "reentrant-append-deadlocks",
                    "trajlog calls the data's get() inside the write transaction; an append "
                    "made from there (as a synchronous callback would) waits for the commit "
                    "its own caller leads: a deadlock\n" + stacks)
        return hook

    def settle_inner(self) -> list[Any]:
        """Wait for the reentrant appends; their events (errors are judged)."""
        out = []
        pending = getattr(self, "pending", None)
        self.pending = None
        for _s, th, box, _blocked in self.inner:
            th.join(WATCHDOG_S / 3)
            if th.is_alive():
                self.fail("reentrant-append-hangs", "a reentrant append never returned\n"
                          + thread_stacks())
            res = box[0]
            if isinstance(res, BaseException):
                self.allowed(res, "reentrant append", False, False)
                continue
            out.append(res)
        self.inner = []
        if pending is not None:
            self.soft.append(pending) if os.environ.get("FUZZ_API_FINDINGS") else None
            self.deferred = pending
        return out

    # -- the operations ----------------------------------------------------------------

    def pick_session(self, a: Args) -> MSess | None:
        if not self.sessions:
            idx = self.any_store()
            if idx is None:
                return None
            h = self.stores[idx].create_session()   # an operation needs a session
            self.new_session(h.id, {"cwd": ".", "agent_preset": None, "origin": None,
                                    "parent_session": None, "seed_length": 0,
                                    "delegation_depth": 0, "metadata": {}}, [], 0, None, idx, h)
        return self.sessions[-1 - a.int(0, 255) % len(self.sessions)]

    def pick_handle(self, a: Args, s: MSess) -> tuple[int, Any]:
        return s.handles[a.int(0, 255) % len(s.handles)]

    def next_frame(self) -> tuple[int, bytes] | None:
        if self.pos >= len(self.frames) or self.budget <= 0:
            return None
        f = self.frames[self.pos]
        self.pos += 1
        self.budget -= 1
        return f

    def run_ops(self, limit: int | None = None, depth: int = 0) -> None:
        n = 0
        while limit is None or n < limit:
            f = self.next_frame()
            if f is None:
                return
            n += 1
            op = OPS[f[0] % len(OPS)]
            if TRACE:
                print(f"{'  ' * depth}{op} {f[1].hex()}", file=sys.stderr)
            self.deferred: Finding | None = None
            self.flagged = False
            getattr(self, "op_" + op)(Args(f[1]), depth)
            if self.deferred is not None and not os.environ.get("FUZZ_API_FINDINGS"):
                raise self.deferred

    def new_session(self, sid: str, header: dict[str, Any], events: list[MEv], seed: int,
                    parent: MSess | None, store_idx: int, h: Any) -> MSess:
        ms = MSess(sid, header, events, seed, parent)
        ms.handles.append((store_idx, h))
        self.keep.append(h)
        self.sessions.append(ms)
        return ms

    def op_create(self, a: Args, depth: int) -> None:
        if len(self.sessions) >= MAX_SESSIONS:
            return
        g = Gen(a, self)
        store_idx = self.pick_store(a)
        plan = Plan()
        c = a.int(0, 7)
        cwd: Any = "/repo" if c < 4 else ("" if c == 4 else a.pick((1, None, StrSub("/s"),
                                                                     b"/b", "/a\udc80")))
        if not isinstance(cwd, str) or not cwd:
            plan.must_refuse("cwd", typeerr=True)
        else:
            if type(cwd) is not str:
                plan.may.append("cwd subclass")
            if not _utf8(str.__str__(cwd)):
                plan.must_refuse("cwd with a lone surrogate")
        preset: Any = a.pick((None, "coder-v1", 5, StrSub("p"), "p\ud800", None, None, None))
        if preset is not None and not isinstance(preset, str):
            plan.must_refuse("agent_preset", typeerr=True)
        elif preset is not None and type(preset) is not str:
            plan.may.append("preset subclass")
        elif preset is not None and not _utf8(preset):
            plan.must_refuse("agent_preset with a lone surrogate")
        m = a.int(0, 7)
        meta: Any = None
        if m == 1:
            meta = {"title": g.text(), "identity": "alice", "user": "u1"}
        elif m == 2:
            meta = g.value()
        elif m == 3:
            meta = {"tenant": "t", "x": g.value()}
        elif m == 4:
            meta = [("a", 1)]
        elif m == 5:
            meta = MappingProxyType({"k": g.value()})
        k = a.int(0, 7)
        sid: Any = None
        if k == 1:
            sid = str(uuid.UUID(int=a.int(0, 2**32 - 1) + 1 + (self.serial << 32)))
        elif k == 2 and self.sessions:
            sid = self.pick_session(a).id  # type: ignore[union-attr]
        elif k == 3:
            sid = a.pick(("not-a-uuid", "", "{12345678-1234-5678-1234-567812345678}",
                          "urn:uuid:12345678-1234-5678-1234-567812345679"))
        elif k == 4:
            sid = a.pick((5, b"x", StrSub(str(uuid.UUID(int=77)))))
        if sid is not None and not isinstance(sid, str):
            plan.must_refuse("session id type", typeerr=True)
        elif isinstance(sid, str):
            try:
                canonical = str(uuid.UUID(str.__str__(sid)))
            except ValueError:
                plan.must_refuse("session id not a uuid")
            else:
                if canonical in self.base or any(canonical == x.id for x in self.sessions):
                    plan.must_refuse("a session id taken")
                if type(sid) is not str:
                    plan.may.append("session id subclass")
        expected_meta: Any = {}
        if meta is not None and not isinstance(meta, Mapping):
            plan.must_refuse("metadata not a mapping", typeerr=True)
        elif meta is not None:
            try:
                copy = dict(meta or {})
            except HostileError:
                copy = {}
                plan.hostile = True
                plan.may.append("hostile metadata")
            expected_meta = judge(plan, copy, "metadata")
        if not self.is_open(store_idx):
            plan.must_refuse("closed store")
        try:
            h = self.stores[store_idx].create_session(cwd=cwd, agent_preset=preset,
                                                      metadata=meta, session_id=sid)
        except BaseException as e:
            self.allowed(e, "create_session", plan.typeerr, plan.hostile)
            self.no_new_session("create")
            if not plan.must and not plan.may:
                self.soft_fail(f"spurious-refusal:create_session:{type(e).__name__}",
                               f"create_session refused: {e!s:.300}")
            return
        if plan.must:
            self.fail("accepted-invalid:create:" + _reason_sig(plan.must[0]),
                      f"create_session accepted although {plan.must}: {h.header!r:.300}")
        header = {"cwd": str.__str__(cwd), "agent_preset": None if preset is None else
                  str.__str__(preset), "origin": None, "parent_session": None,
                  "seed_length": 0, "delegation_depth": 0, "metadata": expected_meta}
        ms = self.new_session(h.id, header, [], 0, None, store_idx, h)
        self.check_header(ms, "create_session")

    # appends

    TYPES = ("user/message", "assistant/message", "tool/call", "tool/result", "x/custom",
             "turn/start", "turn/end", "step/start", "step/end", "event/status",
             "compaction/apply", "sandbox/mode", "approval/grant", "subagent/notification",
             "a", "custom.thing/a-b/*", "request/header", "goal/set")
    BAD_TYPES: tuple[Any, ...] = ("", "Bad/Type", "a//b", "x" * 129, "/x", "tool/result\n",
                                  "\ud800", 1, None, b"x/y", StrSub("x/y"),
                                  StrLie("Bad Type!", "x/custom"), ["x/y"], "9a")

    def gen_type(self, a: Args) -> Any:
        k = a.int(0, 31)
        if k < len(self.TYPES):
            return self.TYPES[k]
        return self.BAD_TYPES[k - len(self.TYPES)]

    def gen_data(self, g: Gen, t: Any) -> Any:
        """Data for type ``t``: its valid shape, with a hostile value somewhere."""
        a = g.a
        how = a.int(0, 7)
        if how == 7:
            return g.value()
        if how == 6:
            return None
        cid = self.call_id(a)
        base: dict[str, Any]
        if t == "user/message":
            base = {"content": a.pick((g.text(), [{"type": "text", "text": "hi"}], 5, None))}
        elif t == "assistant/message":
            base = {"content": a.pick(("answer", None, ["x"], 3))}
            if a.flag():
                base["tool_calls"] = [{"id": cid, "name": "read", "arguments": {"p": "x"}}]
        elif t == "tool/call":
            base = {"call_id": cid, "name": a.pick(("read", 5))}
        elif t == "tool/result":
            base = {"call_id": cid, "output": g.text(), "is_error": a.pick((False, True, "no"))}
            if a.int(0, 7) == 0:
                base["synthetic"] = True
        elif t == "turn/end":
            base = {"interrupted": a.pick((False, True, 1))}
        elif t == "event/status":
            base = {"target": a.int(-1, 40), "status": a.pick(STATUSES), "reason": "r"}
        elif t == "compaction/apply":
            base = {"op": "surface-replace", "from_seq": a.int(-1, 20),
                    "to_seq": a.int(-1, 30), "summary": "s"}
        elif t == "sandbox/mode":
            base = {"mode": a.pick(("read-only", "workspace-write"))}
        else:
            base = {"content": g.text()}
        if how >= 3:
            base[g.key()] = g.value()
        if how in (1, 4):
            return a.pick((DictSub, OrderedDict, DictReenter, DictRaise, DictSub, OrderedDict,
                           DictSub, DictReenter))(base)
        return base

    def call_id(self, a: Args) -> str:
        k = a.int(0, 7)
        if k < 4:
            return f"c{k}"
        return self.fresh_id()

    def fresh_id(self) -> str:
        self.call_counter += 1
        return f"f{self.call_counter}"

    def gen_fields(self, g: Gen) -> dict[str, Any]:
        a = g.a
        out: dict[str, Any] = {}
        if a.int(0, 3):
            return out
        for name in ENVELOPE:
            k = a.int(0, 15)
            if k == 0 or k > 9:
                continue
            if name == "causal_parent":
                v: Any = (0, 3, -1, 2**63, True, "1", 1.0, IntLie(-5), 2**63 - 1)[k - 1]
            elif name == "data_class":
                v = (*DATA_CLASSES, "secret", 1, StrLie("evil", "public"), StrSub("public"),
                     "")[k - 1]
            elif name == "idempotency_key":
                v = ("k1", "k2", "k3", "", "x" * 513, 5, StrSub("k1"), "\ud800",
                     StrLie("y" * 600, "k"))[k - 1]
            else:
                v = ("model", "human:alice", "web:forum.example", "external:api", "tool", "",
                     "z" * 513, 7, StrLie("q" * 600, "model"))[k - 1]
            out[name] = v
        return out

    def op_append(self, a: Args, depth: int) -> None:
        s = self.pick_session(a)
        if s is None:
            return
        store_idx, h = self.pick_handle(a, s)
        g = Gen(a, self)
        t = self.gen_type(a)
        data = self.gen_data(g, t)
        fields = self.gen_fields(g)
        time_: Any = None
        if a.int(0, 7) == 7:
            time_ = a.pick((1_700_000_000_000, 0, -1, 2**63, True, 1.5, "1", IntLie(5)))
        self.do_append(s, store_idx, h, t, data, time_, fields, "append")

    def do_append(self, s: MSess, store_idx: int, h: Any, t: Any, data: Any, time_: Any,
                  fields: dict[str, Any], op: str) -> Any:
        plan = Plan()
        ev = self.plan_event(plan, s, t, data, time_, fields)
        if not plan.must:
            self.plan_apply(plan, s, [ev], store_idx)
        kwargs = {k: v for k, v in fields.items() if v is not None}
        return self.write(op, s, store_idx, plan,
                          lambda: h.append(t, data, time=time_, **kwargs), batch=False)

    def op_batch(self, a: Args, depth: int) -> None:
        s = self.pick_session(a)
        if s is None:
            return
        store_idx, h = self.pick_handle(a, s)
        g = Gen(a, self)
        plan = Plan()
        items: list[Any] = []
        evs: list[MEv] = []
        for _ in range(a.int(0, 6)):
            t = self.gen_type(a)
            data = self.gen_data(g, t)
            form = a.int(0, 15)
            if form >= 8:
                form = 0
            if form == 0:
                items.append((t, data))
                evs.append(self.plan_event(plan, s, t, data, None, {}))
            elif form == 1:
                fields = self.gen_fields(g)
                items.append((t, data, fields))
                evs.append(self.plan_event(plan, s, t, data, None, fields))
            elif form == 2:
                items.append([t, data])
                evs.append(self.plan_event(plan, s, t, data, None, {}))
            elif form == 3:
                when = a.pick((1_700_000_000_000, -5, None, True, 2**63))
                items.append((t, data, {"time": when}))
                evs.append(self.plan_event(plan, s, t, data, when, {}))
            elif form == 4:
                items.append(a.pick(("x/y", {"type": "x/y"}, None, 5)))
                plan.must_refuse("a batch item that is not a tuple", typeerr=True)
            elif form == 5:
                items.append(a.pick(((t,), (t, data, {}, 1))))
                plan.must_refuse("a batch item of the wrong length", typeerr=True)
            elif form == 6:
                items.append((t, data, a.pick((["source"], None, "e"))))
                plan.must_refuse("a batch envelope that is not a mapping", typeerr=True)
            else:
                fields = {"sauce": "x"} if a.flag() else {"seq": 3, "source": "model"}
                items.append((t, data, fields))
                plan.must_refuse("an unknown envelope field", typeerr=True)
        shape = a.int(0, 7)
        arg: Any = items
        if shape == 1:
            arg = tuple(items)
        elif shape == 2:
            arg = iter(items)
        elif shape == 3:
            def gen() -> Iterator[Any]:
                yield from items
                raise HostileError("the caller's iterator failed")
            arg = gen()
            plan.hostile = True
            plan.must_refuse("the iterator raises")
        elif shape == 4:
            arg = a.pick((5, None))
            plan.must_refuse("items not iterable", typeerr=True)
        if not plan.must and evs:
            self.plan_apply(plan, s, evs, store_idx)
        self.write("append_batch", s, store_idx, plan, lambda: h.append_batch(arg), batch=True)

    def op_tools(self, a: Args, depth: int) -> None:
        """A tool-call lifecycle: request, start, finish, in an order from the input."""
        s = self.pick_session(a)
        if s is None:
            return
        store_idx, h = self.pick_handle(a, s)
        ids: list[str] = []
        for _ in range(a.int(1, 6)):
            step = a.int(0, 7)
            if step in (0, 5) or not ids:
                new = [self.call_id(a) if a.int(0, 3) == 0 else self.fresh_id()
                       for _ in range(a.int(1, 3))]
                ids.extend(new)
                data: Any = {"content": "calling", "tool_calls": [
                    {"id": c, "name": "tool" + c, "arguments": {"i": i}}
                    for i, c in enumerate(new)]}
                self.do_append(s, store_idx, h, "assistant/message", data, None, {}, "tools")
            elif step == 6:   # the host cancels: refused unless the call is open
                c = a.pick(ids)
                data = {"call_id": c, **({"reason": "stopped"} if a.flag() else {})}
                self.do_append(s, store_idx, h, "tool/cancel", data, None, {}, "tools")
            elif step in (1, 2):
                c = a.pick(ids)
                self.do_append(s, store_idx, h, "tool/call",
                               {"call_id": c, "name": a.pick(("", "t", "other"))}, None, {},
                               "tools")
            elif step in (3, 4):
                c = a.pick(ids)
                data = {"call_id": c, "output": "ok", "is_error": a.flag()}
                if a.int(0, 3) == 0:
                    data["synthetic"] = True
                self.do_append(s, store_idx, h, "tool/result", data, None, {}, "tools")
            else:
                c = a.pick(ids)
                items = [("tool/call", {"call_id": c, "name": "b"}),
                         ("tool/result", {"call_id": c, "output": "o"})]
                plan = Plan()
                evs = [self.plan_event(plan, s, t, d, None, {}) for t, d in items]
                if not plan.must:
                    self.plan_apply(plan, s, evs, store_idx)
                self.write("tools-batch", s, store_idx, plan,
                           lambda items=items: h.append_batch(items), batch=True)

    # blocks: turn(), step(), lease() around the next frames

    def op_turn(self, a: Args, depth: int) -> None:
        self.block("turn", a, depth)

    def op_step(self, a: Args, depth: int) -> None:
        self.block("step", a, depth)

    def op_lease(self, a: Args, depth: int) -> None:
        self.block("lease", a, depth)

    def block(self, kind: str, a: Args, depth: int) -> None:
        n = a.int(0, 7)
        how = a.int(0, 7)    # 0-4: leave normally; 5: HostileError; 6: Abort; 7: close the store
        s = self.pick_session(a)
        if s is None or depth >= 3:
            self.run_ops(n, depth + 1)
            return
        store_idx, h = self.pick_handle(a, s)
        state = self.hstate.setdefault(id(h), [False, False])
        wait: Any = a.pick((False, False, False, 0, 0.02)) if kind != "step" else False
        with contextlib.suppress(HostileError, Abort):
            self._block(kind, s, store_idx, h, state, wait, n, how, depth)

    def _block(self, kind: str, s: MSess, store_idx: int, h: Any, state: list[bool],
               wait: Any, n: int, how: int, depth: int) -> None:
        op = kind
        must: list[str] = []
        if not self.is_open(store_idx):
            must.append("closed store")
        if kind == "turn" and state[0]:
            must.append("a turn already open on this handle")
        if kind == "turn" and s.tracker.turn is not None:
            must.append("a turn is open in the log")
        if kind == "step" and (not state[0] or state[1]):
            must.append("a step outside a turn, or inside a step, on this handle")
        if kind == "step" and (s.tracker.turn is None or s.tracker.step is not None):
            must.append("a step outside a turn, or inside a step, in the log")
        if kind != "step" and self.foreign_lease(store_idx, s):
            must.append("lease held by another store")
        cm = h.turn(wait=wait) if kind == "turn" else (h.step() if kind == "step" else
                                                       h.lease(wait=wait))
        before = self.heads([s])
        try:
            cm.__enter__()
        except BaseException as e:
            self.allowed(e, f"{op}-enter", False, False)
            if self.heads([s]) != before:
                self.fail(f"failed-write-wrote:{op}-enter", f"{op}() failed but wrote")
            if not must:
                self.soft_fail(f"spurious-refusal:{op}-enter:{type(e).__name__}",
                               f"{op}() refused: {e!s:.300}")
            self.run_ops(n, depth + 1)
            return
        if must:
            self.fail(f"accepted-invalid:{op}-enter", f"{op}() entered although {must}")
        key = (store_idx, s.id)
        if kind != "step":
            self.blocks[key] = self.blocks.get(key, 0) + 1
        if kind == "turn":
            state[0] = True
            self.expect_tail(s, [MEv("turn/start", {}, {}, None)], f"{op}-enter")
        elif kind == "step":
            state[1] = True
            self.expect_tail(s, [MEv("step/start", {}, {}, None)], f"{op}-enter")
        exc: BaseException | None = None
        reopen = False
        try:
            self.run_ops(n, depth + 1)
            if how == 5:
                raise HostileError("raised inside the block")
            if how == 6:
                raise Abort("a BaseException inside the block")
            if how == 7 and self.file and self.is_open(store_idx):
                slot = self.slot.index(store_idx) if store_idx in self.slot else 0
                self.close_store(store_idx)
                reopen = True
        except (HostileError, Abort) as e:
            exc = e
        # what leaving the block appends: the ends of what is still open in the log
        closing: list[MEv] = []
        refused = False
        log = s.tracker
        if kind == "turn":
            if exc is None:
                if log.turn is not None:
                    closing.append(MEv("turn/end", {"interrupted": False}, {}, None))
                else:
                    refused = True
            elif state[1]:
                if log.step is not None:
                    closing.append(MEv("step/end", {"interrupted": True}, {}, None))
                    if log.turn is not None:
                        closing.append(MEv("turn/end", {"interrupted": True}, {}, None))
            elif log.turn is not None:
                closing.append(MEv("turn/end", {"interrupted": True}, {}, None))
            state[0] = False
            if exc is not None:
                state[1] = False
        elif kind == "step":
            if log.step is not None:
                closing.append(MEv("step/end", {"interrupted": True} if exc else {}, {}, None))
            elif exc is None:
                refused = True
            state[1] = False
        still_open = self.is_open(store_idx)
        before = self.heads([s])
        out: BaseException | None = None
        try:
            if exc is None:
                cm.__exit__(None, None, None)
            else:
                cm.__exit__(type(exc), exc, exc.__traceback__)
        except BaseException as e:
            out = e
        if kind != "step":
            self.blocks[key] = max(0, self.blocks.get(key, 0) - 1)
        if out is not None and out is not exc:
            self.allowed(out, f"{op}-exit", False, True)
            if still_open and not refused:
                self.fail(f"spurious-refusal:{op}-exit:{type(out).__name__}",
                          f"leaving {op}() raised {out!s:.300}")
        elif refused and still_open:
            self.fail(f"accepted-invalid:{op}-exit", f"leaving {op}() ended what the log "
                      "had already ended")
        if still_open:
            if closing:
                self.expect_tail(s, closing, f"{op}-exit")
                self.note_markers(store_idx, s, closing)
            self.check_heads([s], f"{op}-exit")
        elif self.heads([s]) != before:
            self.fail(f"failed-write-wrote:{op}-exit", "a closed store's handle wrote")
        if reopen:
            self.reopen(slot)
        if exc is not None:
            raise exc

    def expect_tail(self, s: MSess, evs: list[MEv], op: str) -> None:
        first = s.last + 1
        got = self.stored(s, first)
        self.compare(s, got, first, op, evs)
        for ev, g in zip(evs, got, strict=True):
            ev.time = g.time
            s.add(ev)

    # lineage

    def op_fork(self, a: Args, depth: int) -> None:
        s = self.pick_session(a)
        if s is None or len(self.sessions) >= MAX_SESSIONS:
            return
        store_idx, h = self.pick_handle(a, s)
        g = Gen(a, self)
        k = a.int(0, 15)
        at: Any = s.last - a.int(0, 7) if k < 10 else a.pick(
            (-1, s.last + 1, s.last + 5, True, 1.0, "1", None, 2**64))
        plan = Plan()
        m = a.int(0, 7)
        meta: Any = None
        if m == 1:
            meta = {"note": g.text()}
        elif m == 2:
            meta = {"forked_at": 1}
            plan.must_refuse("reserved metadata key")
        elif m == 3:
            meta = {"x": g.value()}
        elif m == 4:
            meta = a.pick((5, ["x"]))
            plan.must_refuse("metadata not a mapping", typeerr=True)
        expected_meta = {k2: s.header["metadata"][k2] for k2 in INHERITED
                         if k2 in s.header["metadata"]}
        if isinstance(meta, Mapping):
            expected_meta.update(judge(plan, dict(meta), "metadata"))
        cut = None
        if not isinstance(at, int) or isinstance(at, bool):
            plan.must_refuse("at_seq type", typeerr=True)
        elif not 0 <= at <= s.last:
            plan.must_refuse("at_seq out of range")
        else:
            cut = s.cut_for(at)
            if cut is None:
                plan.must_refuse("the turn is open")
        expected_meta["forked_at"] = at
        judge(plan, expected_meta, "metadata")
        if not self.is_open(store_idx):
            plan.must_refuse("closed store")
        try:
            child = h.fork(at, metadata=meta)
        except BaseException as e:
            self.allowed(e, "fork", plan.typeerr, plan.hostile)
            self.no_new_session("fork")
            if not plan.must and not plan.may:
                self.soft_fail(f"spurious-refusal:fork:{type(e).__name__}",
                               f"fork({at!r}) refused: {e!s:.300}")
            return
        if plan.must:
            self.fail("accepted-invalid:fork:" + _reason_sig(plan.must[0]),
                      f"fork({at!r}) accepted although {plan.must}")
        assert cut is not None
        header = {"cwd": s.header["cwd"], "agent_preset": s.header["agent_preset"],
                  "origin": None, "parent_session": s.id, "seed_length": cut + 1,
                  "delegation_depth": s.header["delegation_depth"], "metadata": expected_meta}
        ms = self.new_session(child.id, header, [MEv(e.type, e.data, e.env, e.time)
                                                 for e in s.events[:cut + 1]], cut + 1, s,
                              store_idx, child)
        self.check_header(ms, "fork")
        self.check_session(ms, "fork", verify=False)

    def op_subagent(self, a: Args, depth: int) -> None:
        s = self.pick_session(a)
        if s is None or len(self.sessions) >= MAX_SESSIONS:
            return
        store_idx, h = self.pick_handle(a, s)
        g = Gen(a, self)
        seeded = a.flag()
        plan = Plan()
        task: Any = a.pick(("review auth.ts", "review auth.ts", "t", "", 5, StrSub("sub")))
        if not isinstance(task, str) or not task:
            plan.must_refuse("task", typeerr=True)
        elif type(task) is not str:
            plan.may.append("task subclass")
        preset: Any = a.pick((None, None, "reviewer", 3))
        if preset is not None and not isinstance(preset, str):
            plan.must_refuse("agent_preset type", typeerr=True)
        started = [c for c, (ph, _) in s.tracker.open.items() if ph == STARTED]
        kc = a.int(0, 7)
        call_id: Any = None
        if kc in (1, 2) and started:
            call_id = a.pick(started)
        elif kc == 3:
            call_id = self.call_id(a)
        elif kc == 4:
            call_id = 9
            plan.must_refuse("call_id type", typeerr=True)
        background: Any = a.pick((False, True, 1, ""))
        ks = a.int(0, 7)
        sandbox: Any = None
        if ks == 1:
            sandbox = {"mode": "read-only"}
        elif ks == 2:
            sandbox = {"mode": g.value()}
        elif ks == 3:
            sandbox = a.pick(("ro", ["ro"]))
            plan.must_refuse("sandbox not a mapping", typeerr=True)
        elif ks == 4:
            sandbox = MappingProxyType({"mode": "ro", "snapshot_of": "forged"})
        km = a.int(0, 7)
        meta: Any = None
        if km == 1:
            meta = {"note": "n", "identity": "mallory"}
        elif km == 2:
            meta = {a.pick(("task", "task_seq", "spawned_at", "background", "kind",
                            "parent_call_id", "approval_policy")): "forged"}
            plan.must_refuse("reserved metadata key")
        elif km == 3:
            meta = 7
            plan.must_refuse("metadata type", typeerr=True)
        depth_child = s.header["delegation_depth"] + 1
        if depth_child > self.max_depth:
            plan.must_refuse("delegation limit")
        if not self.is_open(store_idx):
            plan.must_refuse("closed store")
        seed = s.last_turn_end() + 1 if seeded else 0
        initial: list[MEv] = []
        src = {"source": f"session:{s.id}"}
        if seeded:
            initial.append(MEv("approval/policy", {"policy": "never", "fixed": True}, src, None))
        snap: Any = None
        if isinstance(sandbox, Mapping):
            snap = {**judge(plan, dict(sandbox), "sandbox"),
                    "snapshot_of": {"session": s.id, "explicit": True}}
        elif sandbox is None:
            for seq in range(s.last, -1, -1):
                if s.events[seq].type == "sandbox/mode":
                    d = s.events[seq].data
                    # data that is not an object is snapshotted whole under "value"
                    d = d if isinstance(d, dict) else {"value": d}
                    snap = {**d, "snapshot_of": {"session": s.id, "seq": seq}}
                    break
        if snap is not None:
            initial.append(MEv("sandbox/mode", snap, src, None))
        content = str.__str__(task) if isinstance(task, str) else task
        initial.append(MEv("user/message", {"content": content}, src, None))
        extra: dict[str, Any] = {}
        if isinstance(meta, Mapping):
            extra.update(judge(plan, dict(meta), "metadata"))
        extra.update({"background": bool(background), "kind": "forked" if seeded else "spawned"})
        if call_id is not None:
            extra["parent_call_id"] = call_id
        if seeded:
            extra["approval_policy"] = "never"
        else:
            extra["spawned_at"] = s.last   # where it joins its parent's history
        extra["task_seq"] = seed + len(initial) - 1   # the header points at the task event
        expected_meta = {k2: s.header["metadata"][k2] for k2 in INHERITED
                         if k2 in s.header["metadata"]}
        expected_meta.update(extra)
        answer = bool(background) and isinstance(call_id, str)
        if answer and not plan.must:
            if self.foreign_lease(store_idx, s):
                plan.must_refuse("parent leased by another store")
            elif s.tracker.phase(call_id) != STARTED:
                plan.must_refuse("the spawning call is not started in the parent")
        heads = self.heads([s])
        fn = h.fork_subagent if seeded else h.spawn_subagent
        try:
            child = fn(task, preset, call_id=call_id, background=background, sandbox=sandbox,
                       metadata=meta)
        except BaseException as e:
            self.allowed(e, "subagent", plan.typeerr, plan.hostile)
            self.no_new_session("subagent")
            if self.heads([s]) != heads:
                self.fail("failed-write-wrote:subagent", "a refused subagent wrote")
            if not plan.must and not plan.may:
                self.soft_fail(f"spurious-refusal:subagent:{type(e).__name__}",
                               f"{'fork' if seeded else 'spawn'}_subagent refused: {e!s:.300}")
            return
        if plan.must:
            self.fail("accepted-invalid:subagent:" + _reason_sig(plan.must[0]),
                      f"subagent accepted although {plan.must}")
        header = {"cwd": s.header["cwd"], "agent_preset": preset or s.header["agent_preset"],
                  "origin": "subagent", "parent_session": s.id, "seed_length": seed,
                  "delegation_depth": depth_child, "metadata": expected_meta}
        ms = self.new_session(child.id, header, [MEv(e.type, e.data, e.env, e.time)
                                                 for e in s.events[:seed]], seed, s,
                              store_idx, child)
        self.expect_tail(ms, initial, "subagent")
        self.check_header(ms, "subagent")
        if answer:
            ev = MEv("tool/result", {
                "call_id": call_id, "job_id": child.id, "child_session": child.id,
                "status": "running", "output": f"subagent {child.id} started in the background",
                "is_error": False}, {"source": f"session:{child.id}",
                                     "idempotency_key": f"subagent:{child.id}:job"}, None)
            self.expect_tail(s, [ev], "subagent-answer")
        self.check_heads([s], "subagent")

    def op_finish(self, a: Args, depth: int) -> None:
        s = self.pick_session(a)
        if s is None:
            return
        store_idx, h = self.pick_handle(a, s)
        status: Any = a.pick(("done", "done", "failed", "", 5, ["x"], math.nan))
        plan = Plan()
        parent = s.parent
        meta = s.header["metadata"]
        target = s
        if s.header["origin"] != "subagent" or parent is None:
            plan.must_refuse("not a subagent")
        elif not meta.get("background") and meta.get("parent_call_id") is None:
            plan.must_refuse("no call_id to answer")
        else:
            target = parent
            out = s.final_output()
            if meta.get("background"):
                t = "subagent/notification"
                data: dict[str, Any] = {"job_id": s.id, "child_session": s.id,
                                        "status": status, "output": out}
                fields = {"source": f"session:{s.id}",
                          "idempotency_key": f"subagent:{s.id}:notification"}
            else:
                t = "tool/result"
                data = {"call_id": meta["parent_call_id"], "output": out, "child_session": s.id,
                        "status": status, "is_error": status != "done"}
                fields = {"source": f"session:{s.id}",
                          "idempotency_key": f"subagent:{s.id}:result"}
            ev = self.plan_event(plan, parent, t, data, None, fields)
            plan.sources = []
            if not plan.must:
                self.plan_apply(plan, parent, [ev], store_idx)
        if not self.is_open(store_idx):
            plan.must_refuse("closed store")
        self.write("finish", target, store_idx, plan, lambda: h.finish(status), batch=False,
                   touched=[s, target])

    # compaction and status

    def op_compact(self, a: Args, depth: int) -> None:
        s = self.pick_session(a)
        if s is None:
            return
        store_idx, h = self.pick_handle(a, s)
        lo: Any
        hi: Any
        if a.int(0, 7) < 6:
            lo = a.int(-1, s.last + 1)
            hi = a.int(-1, s.last + 2) if a.flag() else a.int(max(lo, 0), s.last + 1)
        else:
            lo, hi = a.pick(((True, 2), (0, "3"), (1.0, 2), (None, None), (0, 2**70)))
        summary: Any = a.pick(("summary", "summary", "", 5, StrSub("s"), "\ud800"))
        source: Any = a.pick(("model", "model", None, "web:evil", 7, "human:bob"))
        plan = Plan()
        if not isinstance(summary, str) or not summary:
            plan.must_refuse("summary", typeerr=True)
        elif not all(isinstance(x, int) and not isinstance(x, bool) for x in (lo, hi)):
            plan.must_refuse("bounds type", typeerr=True)
        else:
            data = {"op": "surface-replace", "from_seq": lo, "to_seq": hi, "summary": summary}
            ev = self.plan_event(plan, s, "compaction/apply", data, None, {"source": source})
            plan.sources = []
            if not plan.must:
                self.plan_apply(plan, s, [ev], store_idx)
        self.write("compact", s, store_idx, plan,
                   lambda: h.compact(lo, hi, summary, source=source), batch=False)

    def op_mark(self, a: Args, depth: int) -> None:
        s = self.pick_session(a)
        if s is None:
            return
        store_idx, h = self.pick_handle(a, s)
        seq: Any = a.int(0, max(s.last, 0)) if a.int(0, 7) < 5 else a.pick(
            (-1, s.last + 1, True, "3", 2**63, None))
        status: Any = a.pick((*STATUSES, "bogus", "", None, StrSub("rejected")))
        reason: Any = a.pick(("wrong diagnosis", "r", "", 5))
        source: Any = a.pick(("human:alice", "human:alice", "web:forum.example", "external:x",
                              "model", "tool", None, "", "s" * 600, 5))
        plan = Plan()
        if status not in STATUSES:
            plan.must_refuse("status")
        elif not isinstance(seq, int) or isinstance(seq, bool) or seq < 0:
            plan.must_refuse("seq")
        elif not isinstance(reason, str) or not reason:
            plan.must_refuse("reason", typeerr=True)
        else:
            data = {"target": seq, "status": status, "reason": reason}
            ev = self.plan_event(plan, s, "event/status", data, None, {"source": source})
            plan.sources = []
            if not plan.must:
                self.plan_apply(plan, s, [ev], store_idx)
        self.write("mark", s, store_idx, plan,
                   lambda: h.mark(seq, status, reason, source=source), batch=False)

    # recovery

    def op_load(self, a: Args, depth: int) -> None:
        k = a.int(0, 7)
        store_idx = self.pick_store(a)
        st = self.stores[store_idx]
        if k >= 6:
            bad = a.pick((5, None, "nope", str(uuid.uuid4()), b"x"))
            try:
                st.load(bad)
            except BaseException as e:
                self.allowed(e, "load", not isinstance(bad, str), False)
                return
            self.fail("accepted-invalid:load", f"load({bad!r}) returned")
        s = self.pick_session(a)
        if s is not None:
            self.do_load(s, st, store_idx, "load")

    def live_refusal(self, s: MSess, store_idx: int) -> bool:
        """load() / inspect() refuse: markers that do not nest, or an open log
        whose writer is live (a lease block of this store, any lease of another)."""
        if s.defect is not None:
            return True
        if s.tracker.turn is None and s.tracker.step is None and not s.tracker.open:
            return False
        return self.in_block(store_idx, s) or self.foreign_lease(store_idx, s)

    def do_load(self, s: MSess, st: Any, store_idx: int, op: str) -> None:
        closers = s.closers()
        refuse = self.live_refusal(s, store_idx) or not self.is_open(store_idx)
        before = self.heads([s])
        try:
            st.load(s.id)
        except BaseException as e:
            self.allowed(e, op, False, False)
            if self.heads([s]) != before:
                self.fail(f"failed-write-wrote:{op}", "a refused load wrote")
            if not refuse:
                self.soft_fail(f"spurious-refusal:{op}:{type(e).__name__}",
                               f"load refused: {e!s:.300}")
            return
        if refuse:
            self.fail(f"accepted-invalid:{op}-live-writer",
                      "load closed a log whose writer holds the lease, or on a closed store")
        self.expect_tail(s, closers, op)
        self.note_markers(store_idx, s, closers)
        if closers:   # (a balanced log's load was itself the idempotence check)
            st.load(s.id)
            if self.heads([s]) != {s.id: s.last}:
                self.fail(f"load-not-idempotent:{op}", "a second load wrote")

    def op_inspect(self, a: Args, depth: int) -> None:
        s = self.pick_session(a)
        if s is None:
            return
        store_idx, h = self.pick_handle(a, s)
        before = self.heads([s])
        try:
            view, rep = h.inspect()
            events = list(view.events()) if a.flag() else None
        except BaseException as e:
            self.allowed(e, "inspect", False, False)
            if self.is_open(store_idx):
                self.soft_fail(f"spurious-refusal:inspect:{type(e).__name__}", str(e)[:300])
            return
        if not self.is_open(store_idx):
            self.fail("closed-store-read:inspect", "inspect() on a closed store returned")
        if self.heads([s]) != before:
            self.fail("inspect-wrote", "inspect() wrote")
        closers = s.closers()
        if self.live_refusal(s, store_idx):
            if rep.outcome != "refused":
                self.fail("inspect-outcome", f"outcome {rep.outcome}, expected refused")
            return
        if rep.outcome == "refused" and "changed since this handle was made" in str(
                rep.refusal):
            self.soft_fail("verify-corrupt-through-creating-handle",
                           f"inspect() through the handle create/fork/spawn returned is "
                           f"refused: {rep.refusal!s:.200}")
            return
        want = "balanced" if not closers else "repair"
        if rep.outcome != want:
            self.fail("inspect-outcome", f"outcome {rep.outcome!r}, want {want!r}: "
                      f"{rep.refusal!r:.200}")
        self.compare(s, list(rep.closers), s.last + 1, "inspect-closers", closers)
        if events is not None:
            self.compare(s, events, 0, "inspect-view", s.events + closers)

    # reads

    def op_read(self, a: Args, depth: int) -> None:
        s = self.pick_session(a)
        if s is None:
            return
        store_idx, h = self.pick_handle(a, s)
        open_ = self.is_open(store_idx)
        k = a.int(0, 7)
        last = s.last
        typeerr = False
        valid = True
        call: Callable[[], Any]
        if k <= 1:
            seq: Any = a.int(-2, last + 2) if a.int(0, 3) else a.pick(
                (True, "1", 1.5, None, 2**64, -(2**64)))
            typeerr = not isinstance(seq, int) or isinstance(seq, bool)
            valid = not typeerr and 0 <= seq <= last
            op, call = "get", lambda: [h.get(seq)]
            first, want = (seq, [s.events[seq]]) if valid else (0, [])
        elif k == 2:
            n: Any = a.int(0, last + 3) if a.int(0, 3) else a.pick((-1, True, "2", None, 2**64))
            valid = isinstance(n, int) and not isinstance(n, bool) and n >= 0
            op, call = "tail", lambda: h.tail(n)
            first = max(0, last - n + 1) if valid and n else last + 1
            want = s.events[first:] if valid and n else []
        else:
            lo: Any = a.int(-1, last + 2)
            hi: Any = None if a.flag() else a.int(-2, last + 2)
            if a.int(0, 7) == 0:
                lo, hi = a.pick(((True, None), ("0", None), (0, "3"), (1.5, None),
                                 (2**64, None), (0, 2**64)))
            lazy = k >= 6
            typeerr = not isinstance(lo, int) or not isinstance(hi, (int, type(None)))
            valid = not typeerr and lo >= 0
            op = "events-lazy" if lazy else "events"
            call = (lambda: [e.event() for e in h.events(lo, hi, lazy=True)]) if lazy else (
                lambda: list(h.events(lo, hi)))
            first = int(lo) if valid else 0
            end = last if hi is None else min(hi, last) if valid else -1
            want = s.events[first:end + 1] if valid and end >= first else []
        try:
            got = call()
        except BaseException as e:
            self.allowed(e, op, typeerr, False)
            if open_ and valid:
                self.soft_fail(f"spurious-refusal:{op}:{type(e).__name__}",
                               f"{op} failed: {e!s:.300}")
            return
        if not open_ and not (op == "tail" and want == [] and got == []):  # tail(0): []
            self.fail(f"closed-store-read:{op}", f"{op} on a closed store's handle returned")
        if not valid:
            self.fail(f"accepted-invalid:{op}", f"{op} with bad arguments returned "
                      f"{got!r:.200}")
        self.compare(s, got, first, op, want)

    def op_verify(self, a: Args, depth: int) -> None:
        s = self.pick_session(a)
        if s is None:
            return
        store_idx, h = self.pick_handle(a, s)
        try:
            rep = h.verify()
        except BaseException as e:
            self.allowed(e, "verify", False, False)
            if self.is_open(store_idx):
                self.fail(f"spurious-refusal:verify:{type(e).__name__}", str(e)[:300])
            return
        if not self.is_open(store_idx):
            self.fail("closed-store-read:verify", "verify() on a closed store returned")
        if not rep.ok or rep.last_seq != s.last:
            self.fail("verify-failed:verify", f"{rep!r:.300} (model last {s.last})")

    def op_lineage(self, a: Args, depth: int) -> None:
        """children(), parent(), tree(), dependents() and sessions() against the model."""
        s = self.pick_session(a)
        if s is None:
            return
        store_idx, h = self.pick_handle(a, s)
        if not self.is_open(store_idx):
            return
        st = self.stores[store_idx]
        subs = a.flag()
        kids = {x.id for x in self.sessions if x.parent is s and (
            subs or x.header["origin"] is None)}
        got = [c.id for c in h.children(include_subagents=subs)]
        if set(got) != kids or len(got) != len(kids):
            self.fail("lineage-differs:children", f"children({subs}) {got}, model {kids}")
        parent = h.parent()
        want_parent = s.parent.id if s.parent is not None else None
        if (parent.id if parent is not None else None) != want_parent:
            self.fail("lineage-differs:parent", f"parent() {parent!r}, model {want_parent}")
        below = {s.id}
        for x in self.sessions:
            if x.parent is not None and x.parent.id in below:
                below.add(x.id)
        walked = [hd.id for _, hd in h.tree().walk()]
        if set(walked) != below or len(walked) != len(below):
            self.fail("lineage-differs:tree", f"tree() {walked}, model {below}")
        deps = {hd.id for hd in st.dependents(s.id)}
        want = {x.id for x in self.sessions if x.parent is s and x.seed > 0}
        if deps != want:
            self.fail("lineage-differs:dependents", f"dependents() {deps}, model {want}")
        tops = {hd.id for hd in st.sessions() if hd.id not in self.base}
        if tops != {x.id for x in self.sessions if x.header["origin"] is None}:
            self.fail("lineage-differs:sessions", "sessions() lists other sessions")

    def op_check(self, a: Args, depth: int) -> None:
        s = self.pick_session(a)
        if s is not None:
            self.check_session(s, "check")

    def op_repack(self, a: Args, depth: int) -> None:
        store_idx = self.pick_store(a)
        st = self.stores[store_idx]
        k = a.int(0, 7)
        s = self.pick_session(a)
        bad: Any = None
        try:
            if k < 3 or s is None:
                st.repack()
            elif k < 6:
                st.repack(s.id)
            else:
                bad = a.pick(("nope", 5, str(uuid.uuid4())))
                st.repack(bad)
        except BaseException as e:
            self.allowed(e, "repack", bad is not None and not isinstance(bad, str), False)
            if self.is_open(store_idx) and bad is None:
                self.fail(f"spurious-refusal:repack:{type(e).__name__}", str(e)[:300])
        else:
            if bad is not None:
                self.fail("accepted-invalid:repack", f"repack({bad!r}) returned")
            if not self.is_open(store_idx):
                self.fail("closed-store-repack", "repack on a closed store returned")
        if s is not None:
            self.check_session(s, "repack")

    def op_erase(self, a: Args, depth: int) -> None:
        """store.erase(): the event (in whichever log holds it) reads back as
        its tombstone's view in every session that reads it; the log verifies."""
        s = self.pick_session(a)
        if s is None or s.last < 0:
            return
        store_idx = self.pick_store(a)
        st = self.stores[store_idx]
        seq: Any = a.int(0, s.last) if a.int(0, 7) < 6 else a.pick(
            (-1, s.last + 1, True, "3", None, 2**64))
        reason: Any = a.pick(("gdpr", "user request", "", " ", 5, None))
        valid = (type(seq) is int and 0 <= seq <= s.last and isinstance(reason, str)
                 and bool(reason.strip()))
        try:
            st.erase(s.id, seq, reason=reason, actor="human:fuzz")
        except BaseException as e:
            self.allowed(e, "erase", not isinstance(seq, (int, list)), False)
            if self.is_open(store_idx) and valid:
                self.fail(f"spurious-refusal:erase:{type(e).__name__}", str(e)[:300])
            return
        if not valid:
            self.fail("accepted-invalid:erase", f"erase({seq!r}, reason={reason!r}) returned")
        if not self.is_open(store_idx):
            self.fail("closed-store-erase", "erase on a closed store returned")
        owner = s
        while seq < owner.seed and owner.parent is not None:
            owner = owner.parent
        if (owner.id, seq) in self.erased:   # idempotent: its first tombstone stands
            self.check_session(s, "erase-again")
            return
        self.apply_erasure(owner, seq, reason)
        for x in self.sessions:
            x.rebuild()
        self.check_session(s, "erase")

    def apply_erasure(self, owner: MSess, seq: int, reason: str) -> None:
        """``owner``'s event at ``seq`` reads back as its tombstone's view in
        every session that reads it; then each copy trajlog made of it in
        another log (a sandbox snapshot, a subagent's answer in its parent) is
        erased the same way, under ``<reason> (a copy of seq N of session S)``."""
        if (owner.id, seq) in self.erased:
            return
        self.erased.add((owner.id, seq))
        source = owner.events[seq]
        copies = self.copies_of(owner, seq, source)
        for x in self.sessions:
            y = x   # x reads the owner's frame if every log between them inherits seq
            while y is not owner and y.parent is not None and seq < y.seed:
                y = y.parent
            if y is not owner or seq > x.last:
                continue
            h = self.live_handle(x)
            if h is None:
                continue
            got = h.get(seq)
            old = x.events[seq]
            stone = got.data.get("erased") if isinstance(got.data, dict) else None
            if not isinstance(stone, dict) or stone.get("reason") != reason:
                self.fail("erase-not-applied", f"session {x.id} seq {seq}: {got.data!r:.200}")
            want = erased_view(old.type, old.data, stone)
            if canon(want) != canon(got.data) or got.type != old.type or (
                    old.time is not None and got.time != old.time):
                self.fail("erase-view-differs", f"seq {seq}: stored {got.data!r:.200}, "
                          f"expected {want!r:.200}")
            x.events[seq] = MEv(old.type, got.data, erased_env(old.type, old.env),
                                old.time)
        for log, at in copies:
            self.apply_erasure(log, at, f"{reason} (a copy of seq {seq} of session {owner.id})")

    def copies_of(self, owner: MSess, seq: int, source: MEv) -> list[tuple[MSess, int]]:
        """The events trajlog copied ``owner``'s ``seq`` into: the first
        ``sandbox/mode`` of a subagent of ``owner`` whose ``snapshot_of`` names
        it, and the parent's answer of a subagent whose ``finish`` copied this
        assistant message's text (``Lineage.final_output``)."""
        found: list[tuple[MSess, int]] = []
        if source.type == "sandbox/mode":
            for x in self.sessions:
                if x.parent is not owner or x.header["origin"] != "subagent":
                    continue
                first = next((j for j in range(x.seed, x.last + 1)
                              if x.events[j].type == "sandbox/mode"), None)
                data = None if first is None else x.events[first].data
                of = data.get("snapshot_of") if isinstance(data, dict) else None
                if isinstance(of, dict) and of.get("session") == owner.id and (
                        of.get("seq") == seq and type(of.get("seq")) is int):
                    found.append((x, first))   # type: ignore[arg-type]
        parent = owner.parent
        if source.type == "assistant/message" and owner.header["origin"] == "subagent" and (
                parent is not None):
            content = source.data.get("content") if isinstance(source.data, dict) else None
            text = content if isinstance(content, str) else str(content or "")
            for what in ("result", "notification"):
                at = parent.keys.get(f"subagent:{owner.id}:{what}")
                data = None if at is None else parent.events[at].data
                out = data.get("output") if isinstance(data, dict) else None
                if isinstance(out, str) and out and out == text:
                    found.append((parent, at))   # type: ignore[arg-type]
        return found

    def op_handle(self, a: Args, depth: int) -> None:
        k = a.int(0, 7)
        store_idx = self.pick_store(a)
        st = self.stores[store_idx]
        if k >= 6:
            bad = a.pick((5, None, "nope", str(uuid.uuid4())))
            try:
                st.session(bad)
            except BaseException as e:
                self.allowed(e, "session", not isinstance(bad, str), False)
                return
            self.fail("accepted-invalid:session", f"store.session({bad!r}) returned")
        s = self.pick_session(a)
        if s is None or not self.is_open(store_idx):
            return
        h = self.handle(s, store_idx)
        if len(s.handles) >= MAX_HANDLES:
            s.handles.pop(0)
        s.handles.append((store_idx, h))
        self.check_header(s, "session")

    def op_views(self, a: Args, depth: int) -> None:
        s = self.pick_session(a)
        if s is None:
            return
        store_idx, h = self.pick_handle(a, s)
        if not self.is_open(store_idx):
            return
        name = a.pick(sorted(projections.FOLDS))
        fold = projections.FOLDS[name]
        k = a.int(0, 7)
        try:
            if k == 1:
                projections.checkpoint(h)
            elif k == 2:
                projections.rebuild(h)
            inc = projections.project(h, fold)
            scratch = from_scratch(h.events(), fold)
        except BaseException as e:
            self.allowed(e, f"view:{name}", False, False)
            return
        if inc != scratch:
            self.fail(f"view-incremental-differs:{name}", f"{name}: incremental "
                      f"{inc!r:.300}\nfrom scratch {scratch!r:.300}")

    def op_close(self, a: Args, depth: int) -> None:
        k = a.int(0, 7)
        p, q = self.slot
        if not self.file:
            if k == 7 and p is not None and self.is_open(p):
                self.close_store(p)
            return
        if k < 3:                                   # close and reopen the primary
            if p is not None and self.is_open(p):
                self.close_store(p)
            self.reopen(0)
        elif k < 6:                                 # a second store on the same file
            if q is None or not self.is_open(q):
                self.reopen(1)
        elif q is not None and self.is_open(q):     # close the second
            self.close_store(q)

    def close_store(self, idx: int) -> None:
        st = self.stores[idx]
        try:
            st.close()
        except BaseException as e:
            self.allowed(e, "close", False, False)
        self.closed.add(idx)
        for key in list(self.blocks):
            if key[0] == idx:
                self.blocks[key] = 0
        self.turn_lease = {k for k in self.turn_lease if k[0] != idx}
        try:
            st.close()
        except BaseException as e:
            self.fail("close-not-idempotent", f"a second close raised {e!r}")

    def reopen(self, slot: int) -> None:
        try:
            idx = self.open_store(slot)
        except BaseException as e:
            self.allowed(e, "open", False, False)
            self.fail(f"reopen-failed:{type(e).__name__}", str(e)[:300])
        for s in self.sessions:
            s.handles = [(i, h) for i, h in s.handles if self.is_open(i)]
            s.handles.append((idx, self.handle(s, idx)))
            if len(s.handles) > MAX_HANDLES:
                s.handles.pop(0)
        for s in self.sessions[-2:]:
            self.check_session(s, "reopen", verify=False)

    def op_threads(self, a: Args, depth: int) -> None:
        sa, sb = self.pick_session(a), self.pick_session(a)
        if sa is None or sb is None:
            return
        ia, ha = self.pick_handle(a, sa)
        ib, hb = self.pick_handle(a, sb)
        if not (self.is_open(ia) and self.is_open(ib)) or self.foreign_lease(
                ia, sa) or self.foreign_lease(ib, sb):
            return
        n = a.int(1, 4)
        results: list[list[Any]] = [[], []]

        def work(h: Any, tag: int) -> None:
            try:
                for i in range(n):
                    results[tag].append(h.append("x/thread", {"t": tag, "i": i}))
            except BaseException as e:
                results[tag].append(e)

        firsts = {sa.id: sa.last + 1, sb.id: sb.last + 1}
        ths = [threading.Thread(target=work, args=(ha, 0), daemon=True),
               threading.Thread(target=work, args=(hb, 1), daemon=True)]
        for th in ths:
            th.start()
        for th in ths:
            th.join(WATCHDOG_S / 3)
            if th.is_alive():
                self.fail("threads-hang", "two threads appending did not finish\n"
                          + thread_stacks())
        for r in results:
            for x in r:
                if isinstance(x, BaseException):
                    self.allowed(x, "threads", False, False)
                    self.fail(f"spurious-refusal:threads:{type(x).__name__}", str(x)[:300])
        for s in {sa.id: sa, sb.id: sb}.values():
            got = self.stored(s, firsts[s.id])
            mine = [(t, i) for t in (0, 1) for i in range(n) if (sa, sb)[t] is s]
            seen = [(e.data.get("t"), e.data.get("i")) for e in got
                    if e.type == "x/thread" and isinstance(e.data, dict)]
            if sorted(seen) != sorted(mine) or len(got) != len(mine):
                self.fail("threads-events", f"threads appended {seen}, expected {mine}")
            for t in (0, 1):
                order = [i for tt, i in seen if tt == t]
                if order != sorted(order):
                    self.fail("threads-order", f"thread {t}'s events out of order: {order}")
            for e in got:
                s.add(MEv("x/thread", {"t": e.data["t"], "i": e.data["i"]}, {}, e.time))
        self.check_heads([sa, sb], "threads")

    # -- the end ----------------------------------------------------------------------

    def finish_checks(self) -> None:
        """Invariants 3-5 for every session, then (file stores) across a reopen."""
        idx = self.any_store()
        if idx is None:
            return
        st = self.stores[idx]
        for s in self.sessions:
            self.check_session(s, "end")
        ids = sorted(h.id for h in st.sessions(include_subagents=True) if h.id not in self.base)
        if ids != sorted(s.id for s in self.sessions):
            self.fail("sessions-differ", f"store lists {len(ids)} sessions, the model "
                      f"{len(self.sessions)}")
        for i, s in enumerate(self.sessions):
            # load every open log; of the balanced ones (a load writes nothing) one
            if s.closers() or s.defect or i == len(self.sessions) - 1:
                self.do_load(s, st, idx, "end-load")
        if self.file and self.reopen_at_end:
            for i in self.open_stores():
                self.close_store(i)
            self.slot = [None, None]
            idx = self.open_store(0)
            for s in self.sessions:
                s.handles = [(idx, self.handle(s, idx))]
                self.check_session(s, "end-reopen", verify=False)


class Shared:
    """Fast mode: a ":memory:" store reused by the inputs of one configuration,
    each in sessions of its own.  Opening a store (its schema) cost a third of an
    input; a shared one is replaced after :data:`SHARED_INPUTS` inputs (store-wide
    listings and repack grow with it) and after any finding (it may then hold
    what no model knows)."""

    pool: ClassVar[dict[tuple[Any, ...], Shared]] = {}
    lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, key: tuple[Any, ...], store: Any) -> None:
        self.key = key
        self.store = store
        self.ids: set[str] = set()   # the sessions the inputs before left in it
        self.inputs = 0

    @classmethod
    def take(cls, key: tuple[Any, ...], opener: Callable[[], Any]) -> Shared:
        """The pooled store of ``key`` (removed from the pool while in use), or a new one."""
        with cls.lock:
            sh = cls.pool.pop(key, None)
        return sh if sh is not None else Shared(key, opener())

    def give_back(self, ids: set[str]) -> None:
        self.ids |= ids
        self.inputs += 1
        with Shared.lock:
            if self.inputs < SHARED_INPUTS and self.key not in Shared.pool:
                Shared.pool[self.key] = self
                return
        with contextlib.suppress(Exception):
            self.store.close()

    @classmethod
    def drain(cls) -> None:
        """Close every pooled store (a test, or the end of a replay)."""
        with cls.lock:
            pooled = list(cls.pool.values())
            cls.pool.clear()
        for sh in pooled:
            with contextlib.suppress(Exception):
                sh.store.close()


def file_dir() -> str | None:
    base = os.environ.get("FUZZ_API_FILE_DIR", "/dev/shm")
    return base if os.path.isdir(base) else None


_template: list[str] = []


def template() -> str:
    """An empty store made once per process, copied for every file store."""
    if not _template:
        d = tempfile.mkdtemp(prefix="fuzz_api_template_", dir=file_dir())
        path = os.path.join(d, "empty.db")
        trajlog.open(path, repack=False).close()
        atexit.register(shutil.rmtree, d, True)
        _template.append(path)
    return _template[0]


def judge(plan: Plan, value: Any, what: str) -> Any:
    """The model's value of a JSON argument; what it makes ``plan`` expect."""
    n, st = norm(value)
    if not st.valid:
        plan.must_refuse(f"{what}: {st.why}")
    if not st.plain:
        plan.may.append(f"{what} holds a subclass or a mapping")
    if st.broken:
        plan.typeerr = plan.hostile = True
    return n


def stored_env(ev: Any) -> dict[str, Any]:
    return {k: v for k in ENVELOPE if (v := getattr(ev, k)) is not None}


def retry_record(s: MSess, key: str, original: int, first: int, n: int) -> MEv:
    """The record a deduplicated retry appends: named by the request's first
    key, numbered 2, 3, ... per key (each number's own key, in the session's
    keys); a batch's names the original's seq range."""
    attempt = 2
    while retry_key(key, attempt) in s.keys:
        attempt += 1
    data: dict[str, Any] = {"idempotency_key": key, "original": original,
                            "outcome": "deduplicated", "attempt": attempt, "synthetic": True}
    if n > 1:
        data["batch"] = [first, first + n - 1]
    return MEv("request/retry", data, {"source": "trajlog:retry", "causal_parent": original,
                                       "idempotency_key": retry_key(key, attempt)}, None)


def retry_key(key: str, attempt: int) -> str:
    digest = hashlib.blake2b(key.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()
    return f"trajlog:retry:{digest}:{attempt}"


def stored_key(t: str, data: Any, env: dict[str, Any]) -> Any:
    return (t, canon(data), tuple(sorted((k, canon(v)) for k, v in env.items())))


OPS = ("create", "append", "batch", "turn", "step", "tools", "fork", "subagent", "finish",
       "compact", "mark", "load", "inspect", "read", "verify", "repack", "handle", "views",
       "close", "threads", "lease", "check", "append", "lineage", "erase")


# What an erased event keeps of its data (trajlog.memory.replacement.KEEPS,
# restated here as the harness's own model of the rule): per event type, call
# ids as written, a run id and a tool name in a bounded form, the recovery
# closers' status values, booleans.
_RUN_ID = re.compile(r"[A-Za-z0-9_.:@/+=-]{1,128}")
_TOOL = re.compile(r"[A-Za-z0-9_.:@/-]{1,128}")
_CLOSER = ("TOOL_NOT_STARTED", "TOOL_OUTCOME_UNKNOWN")
_KEPT: dict[str, tuple[str, ...]] = {
    "tool/call": ("call_id", "name"),
    "tool/result": ("call_id", "name", "status", "is_error", "synthetic"),
    "tool/cancel": ("call_id",),
    "turn/end": ("interrupted", "synthetic"), "step/end": ("interrupted", "synthetic"),
    "run/started": ("run_id",), "run/finalized": ("run_id",),
}


def _kept_value(k: str, v: Any) -> bool:
    if k == "call_id":
        return type(v) is str
    if k == "name":
        return type(v) is str and _TOOL.fullmatch(v) is not None
    if k == "run_id":
        return type(v) is str and _RUN_ID.fullmatch(v) is not None
    if k == "status":
        return v in _CLOSER
    return type(v) is bool


def erased_view(type_: str, data: Any, stone: dict[str, Any]) -> dict[str, Any]:
    d = data if isinstance(data, dict) else {}
    out = {k: d[k] for k in _KEPT.get(type_, ()) if k in d and _kept_value(k, d[k])}
    calls = d.get("tool_calls")
    if type_ == "assistant/message" and type(calls) in LISTS:
        out["tool_calls"] = [{"id": c["id"], **({"name": c["name"]} if _kept_value(
            "name", c.get("name")) else {})} for c in calls
            if type(c) in DICTS and type(c.get("id")) is str]
    out["erased"] = stone
    return out


def erased_env(type_: str, env: dict[str, Any]) -> dict[str, Any]:
    """What an erased event keeps of its envelope: its seqs and data class;
    its branch id in the form of an id; its free text (source, workspace
    revision, idempotency key) only when it has an index row (a sparse type
    or a key: trajlog.storage.event_index), which holds that text anyway."""
    from trajlog.storage.event_index import PREFIXES, SPARSE

    indexed = "idempotency_key" in env or type_ in SPARSE or type_.startswith(PREFIXES)
    out = {k: v for k, v in env.items() if k in ("causal_parent", "supersedes", "data_class")
           or (indexed and k in ("source", "workspace_revision", "idempotency_key"))}
    branch = env.get("branch_id")
    if type(branch) is str and _RUN_ID.fullmatch(branch):
        out["branch_id"] = branch
    return out


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def _reason_sig(reason: str) -> str:
    """A short, stable signature of a must-refuse reason (ids and values left out)."""
    head, _, via = reason.partition(" (inside ")
    head = re.sub(r"'[^']*'|\"[^\"]*\"|\{.*?\}|\[.*?\]|-?\d+", "", head)
    letters = "".join(c if c.isalpha() else "-" for c in head)
    base = "-".join(w for w in letters.split("-") if w)[:48]
    return base + (f"-via-{via.rstrip(')')}" if via else "")


def where(exc: BaseException) -> str:
    """The innermost trajlog frame of a traceback (file:function: stable while
    the source is edited)."""
    tb = exc.__traceback__
    found = "?"
    while tb is not None:
        code = tb.tb_frame.f_code
        if "trajlog" in code.co_filename and "fuzz_api" not in code.co_filename:
            found = f"{code.co_filename.split('trajlog/')[-1]}:{code.co_name}"
        tb = tb.tb_next
    return found


def tb_text(exc: BaseException) -> str:
    return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))[-3000:]


def thread_stacks() -> str:
    frames = sys._current_frames()
    out = []
    for th in threading.enumerate():
        f = frames.get(th.ident or -1)
        if f is not None:
            out.append(f"--- thread {th.name}\n" + "".join(traceback.format_stack(f)[-12:]))
    return "\n".join(out)[-8000:]


# ---------------------------------------------------------------------------
# Entry points


def fast_mode() -> bool:
    """``FUZZ_API_MODE=fast``: ":memory:" stores shared across inputs (:class:`Shared`)."""
    return os.environ.get("FUZZ_API_MODE", "") == "fast"


# Fast mode: the background repacker waits this long (not 0.2 s) for a burst of
# appends to end before each session it merges.  A tuning value, not behaviour:
# a shared store's repack() drains the queue of every input before, and the
# inputs of that configuration spent their time asleep in that wait.
FAST_REPACK_IDLE_S = 0.002


@contextlib.contextmanager
def _fast_repacker() -> Iterator[None]:
    """The shorter wait for one input (put back after it: a test process goes on)."""
    from trajlog.api import repack

    before = repack._IDLE_SECONDS
    repack._IDLE_SECONDS = FAST_REPACK_IDLE_S
    try:
        yield
    finally:
        repack._IDLE_SECONDS = before


def check_input(data: bytes, fast: bool | None = None) -> list[Finding]:
    """Run one input against a fresh store (``fast``: a shared one, in sessions of
    its own); raise :class:`Finding` on a broken invariant.  Returns the findings
    continue mode let the input go on after."""
    if trajlog is None:
        _load()
    run = Run(data, fast_mode() if fast is None else fast)
    healthy = False
    try:
        with _fast_repacker() if run.fast else contextlib.nullcontext():
            run.setup()
            run.run_ops()
            run.finish_checks()
        healthy = not run.soft
    except BaseException as e:
        e.soft = run.soft  # type: ignore[attr-defined]
        raise
    finally:
        for _s, th, _box, _blocked in run.inner:
            th.join(5)
            healthy = healthy and not th.is_alive()
        run.teardown(healthy)
    return run.soft


def run_guarded(data: bytes, fast: bool | None = None) -> list[BaseException]:
    """check_input on a watchdog thread (a hang becomes a Finding); every finding."""
    box: list[list[BaseException]] = [[]]

    def go() -> None:
        try:
            box[0] = list(check_input(data, fast))
        except BaseException as e:
            box[0] = [*getattr(e, "soft", []), e]

    th = threading.Thread(target=go, name="fuzz-input", daemon=True)
    th.start()
    th.join(WATCHDOG_S)
    if th.is_alive():
        return [Finding("hang", f"an input ran for more than {WATCHDOG_S} s\n"
                        + thread_stacks())]
    return box[0]


_stats = {"n": 0, "stuck": 0}


def record(exc: BaseException, data: bytes) -> None:
    """Continue mode: keep the first input of each signature, count them all."""
    out = os.environ["FUZZ_API_FINDINGS"]
    os.makedirs(out, exist_ok=True)
    sig = exc.sig if isinstance(exc, Finding) else f"harness:{type(exc).__name__}@{where(exc)}"
    name = "".join(c if c.isalnum() or c in "-_.@" else "_" for c in sig)[:150]
    digest = hashlib.sha1(data).hexdigest()
    with open(os.path.join(out, "occurrences.log"), "a") as f:
        f.write(f"{time.time():.0f} {os.getpid()} {name} {digest}\n")
    txt = os.path.join(out, name + ".txt")
    if not os.path.exists(txt):
        with open(os.path.join(out, f"{name}-{digest}.bin"), "wb") as f:
            f.write(data)
        with open(txt, "w") as f:
            f.write(f"{sig}\ninput: {name}-{digest}.bin\n{alone(data)}\n\n{exc}\n\n"
                    f"{tb_text(exc)}\n")


def alone(data: bytes) -> str:
    """Fast mode: whether a finding's input also fails on a store of its own
    (if not, the inputs the shared store served before it are part of it)."""
    if not fast_mode():
        return "mode: fresh store"
    found = run_guarded(data, False)
    return ("mode: fast; on a store of its own: " + (
        f"fails too ({getattr(found[-1], 'sig', type(found[-1]).__name__)})" if found else
        "passes (the store's earlier inputs are part of the finding)"))


def one_input(data: bytes) -> None:
    found = run_guarded(data)
    _stats["n"] += 1
    stats = os.environ.get("FUZZ_API_STATS")
    if stats and _stats["n"] % 1000 == 0:
        with open(stats, "a") as f:
            f.write(f"{time.time():.0f} {os.getpid()} {_stats['n']}\n")
    if not found:
        return
    if not os.environ.get("FUZZ_API_FINDINGS"):
        raise found[-1]
    for exc in found:
        record(exc, data)
        if isinstance(exc, Finding) and exc.sig in ("hang", "reentrant-append-hangs",
                                                    "threads-hang"):
            _stats["stuck"] += 1
    if _stats["stuck"] >= 50:   # threads leaked by hangs: let the driver restart us
        os._exit(3)


# ---------------------------------------------------------------------------
# Seeds: one per operation, written by hand as (op, argument bytes) frames.

OP = {name: i for i, name in enumerate(OPS[:22])}


def frame(op: str, *args: int) -> bytes:
    return bytes([OP[op], len(args), *args])


def seeds() -> dict[str, bytes]:
    c = frame("create")
    return {
        "append_plain": b"\x00" + c + frame("append") + frame("append", 0, 0, 4) + frame(
            "check"),
        "append_known_types": b"\x00" + c + b"".join(frame("append", 0, 0, t, 0) for t in
                                                       range(0, 18)),
        "append_hostile": b"\x00" + c + b"".join(frame("append", 0, 0, 4, 7, v, 1, 2, 3)
                                                   for v in range(0, 28)),
        "append_bad_types": b"\x00" + c + b"".join(frame("append", 0, 0, t) for t in
                                                     range(18, 32)),
        "envelope": b"\x00" + c + b"".join(frame("append", 0, 0, 4, 0, 0, 0, 0, 0, 0, v, v, v,
                                                 v, v) for v in range(0, 10)),
        "batch": b"\x00" + c + frame("batch") + frame("batch", 0, 0, 3, 4, 0, 0, 0, 0, 0, 1, 0,
                                                       0) + frame("batch", 0, 0, 2, 4, 0, 0,
                                                                  0, 0, 4) + frame("check"),
        "turn_step": b"\x00" + c + frame("turn", 3) + frame("append") + frame("step", 1) +
        frame("append", 0, 0, 1) + frame("append") + frame("check"),
        "turn_raises": b"\x00" + c + frame("turn", 2, 5) + frame("step", 1, 0) + frame(
            "append") + frame("turn", 1, 6) + frame("append") + frame("load"),
        "tools": b"\x00" + c + frame("tools", 5, 0, 1, 1, 1, 0, 3, 0, 0, 7, 0, 4, 0, 0) +
        frame("tools", 6, 0, 2, 0, 0, 1, 0, 3, 0, 0, 4, 0, 0, 6, 0) + frame("load"),
        # request f1 and f2; cancel f1; its late result refused; start f2, cancel it;
        # a second cancel of f1 refused; load closes nothing
        "tools_cancel": b"\x00" + c + frame("tools", 0, 0, 5, 0, 1, 1, 1, 6, 0, 1, 3, 0, 0, 1,
                                             1, 1, 0, 6, 1, 0, 6, 0, 0) + frame("load") +
        frame("views"),
        "fork": b"\x00" + c + frame("turn", 2) + frame("append") + frame("append") + frame(
            "fork") + frame("fork", 0, 0, 0, 1) + frame("fork", 0, 0, 12) + frame("append") +
        frame("check"),
        "subagent": b"\x00" + c + frame("subagent") + frame("subagent", 1, 0, 1, 0, 0, 1, 0,
                                                            1, 1) + frame("finish") +
        frame("append", 0, 0, 1, 0) + frame("finish", 1),
        "compact_mark": b"\x00" + c + frame("append") + frame("append") + frame("append") +
        frame("compact", 0, 0, 0, 1, 0, 0, 0) + frame("mark", 0, 0, 0, 0, 1, 0, 0) + frame(
            "mark", 0, 0, 0, 0, 1, 0, 2),
        "load_inspect": b"\x00" + c + frame("turn", 1, 7) + frame("append") + frame(
            "inspect") + frame("load") + frame("load", 6, 1),
        "reads": b"\x00" + c + frame("append") + frame("append") + frame("read") + frame(
            "read", 0, 0, 2, 2) + frame("read", 0, 0, 3, 1, 1) + frame("read", 0, 0, 6, 0, 1) +
        frame("verify"),
        "repack_views": b"\x08" + c + b"".join(frame("append") for _ in range(6)) + frame(
            "repack") + frame("repack", 4) + frame("views") + frame("views", 0, 0, 1) + frame(
            "views", 0, 0, 2, 1),
        "background_repack": b"\x48" + c + b"".join(frame("append") for _ in range(4)) +
        frame("turn", 2) + frame("append") + frame("append") + frame("repack") + frame("check"),
        "file_reopen": b"\x07" + c + frame("turn", 2) + frame("append") + frame("close", 0) +
        frame("append") + frame("close", 4) + frame("handle", 0, 1) + frame("load"),
        "two_stores_lease": b"\x07" + c + frame("close", 4) + frame("handle", 0, 1) + frame(
            "lease", 2, 0, 0, 0) + frame("append", 0, 1) + frame("append", 0, 0) + frame(
            "load", 0, 1),
        "threads": b"\x00" + c + c + frame("threads", 0, 1, 0, 0, 3) + frame("threads", 0, 0,
                                                                              0, 0, 2),
        # event/status data in a dict whose get() appends (trajlog reads its target
        # inside the write transaction: the append must not deadlock)
        "reentrant_get": b"\x00" + c + frame("append") + frame(
            "append", 0, 0, 9, 1, 0, 1, 0, 2, 1, 0) + frame("check"),
        "closed_memory_store": b"\x00" + c + frame("append") + frame("close", 7) + frame(
            "append") + frame("read") + frame("load") + frame("turn"),
    }


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--replay":
        _load()
        bad = 0
        for path in sys.argv[2:]:
            with open(path, "rb") as f:
                found = run_guarded(f.read())
            print(f"{path}: {'ok' if not found else found[-1]}")
            bad += bool(found)
        sys.exit(1 if bad else 0)
    if len(sys.argv) > 2 and sys.argv[1] == "--write-seeds":
        os.makedirs(sys.argv[2], exist_ok=True)
        for name, data in seeds().items():
            with open(os.path.join(sys.argv[2], name), "wb") as f:
                f.write(data)
        return
    import atheris

    # Not the byte-level hot loops (fuzzed on their own: fuzz_differential.py and the
    # C harnesses): instrumenting them costs ~10 % of the rate for no API coverage.
    with atheris.instrument_imports(include=["trajlog"], exclude=[
            "trajlog.codec.stream", "trajlog.codec.chunks", "trajlog.codec.frames",
            "trajlog.codec.compression", "trajlog._kernel_c", "trajlog._kernel_py"]):
        _load()
    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
