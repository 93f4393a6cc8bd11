"""A bad argument to a public entry point is a typed error from
:mod:`trajlog.errors` that names the argument -- never an ``AttributeError``,
a bare ``ValueError`` from deep inside, a ``UnicodeEncodeError`` at write
time, or an answer that differs by kernel.

A wrong type is :class:`ArgumentTypeError` (an ``InvalidArgumentError`` and a
``TypeError``), a wrong value :class:`InvalidArgumentError` (a
``ValueError``).  The codec's entry points are called with each kernel
explicitly, so both give the same error whichever one ``TRAJLOG_BACKEND``
selects; the rest runs under the selected one (the suite runs under both).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest

import trajlog
from trajlog import codec, projections
from trajlog._backend import load_kernel
from trajlog.codec import Cursor, Watermark
from trajlog.errors import (
    ArgumentTypeError,
    InvalidArgumentError,
    SerializationError,
    TrajlogError,
)
from trajlog.projections.context import ContextPolicy, build_context

KEY = codec.session_key(b"\x01" * 16)
FRAMES, AFTER = codec.encode([b"abc", b"def"], KEY, codec.start_cursor(KEY))
TYPE, VALUE = ArgumentTypeError, InvalidArgumentError


@pytest.fixture(params=["c", "python"])
def kernel(request):
    try:
        return load_kernel(request.param)
    except TrajlogError:
        pytest.skip(f"the {request.param} kernel is not available")


# (label, call(kernel), error, the argument the message names)
CODEC: list[tuple[str, Callable[[Any], Any], type[Exception], str]] = [
    ("scan watermark=1.0", lambda k: codec.scan(FRAMES, KEY, watermark=1.0, kernel=k),
     TYPE, "watermark"),
    ("scan watermark='x'", lambda k: codec.scan(FRAMES, KEY, watermark="x", kernel=k),
     TYPE, "watermark"),
    ("scan watermark=True", lambda k: codec.scan(FRAMES, KEY, watermark=True, kernel=k),
     TYPE, "watermark"),
    ("scan watermark=2**64", lambda k: codec.scan(FRAMES, KEY, watermark=2**64, kernel=k),
     VALUE, "watermark"),
    ("scan Watermark(2**64, 1)",
     lambda k: codec.scan(FRAMES, KEY, watermark=Watermark(2**64, 1), kernel=k),
     VALUE, "watermark"),
    ("scan Watermark(-2)", lambda k: codec.scan(FRAMES, KEY, watermark=Watermark(-2), kernel=k),
     VALUE, "watermark"),
    ("scan Watermark(1.5)",
     lambda k: codec.scan(FRAMES, KEY, watermark=Watermark(1.5), kernel=k),  # type: ignore
     TYPE, "watermark"),
    ("scan Watermark(1, 2**64)",
     lambda k: codec.scan(FRAMES, KEY, watermark=Watermark(1, 2**64), kernel=k),
     VALUE, "watermark"),
    ("scan Watermark(1, 'x')",
     lambda k: codec.scan(FRAMES, KEY, watermark=Watermark(1, "x"), kernel=k),  # type: ignore
     TYPE, "watermark"),
    ("verify watermark=1.0", lambda k: codec.verify(FRAMES, KEY, watermark=1.0, kernel=k),
     TYPE, "watermark"),
    ("verify Watermark(2**64, 1)",
     lambda k: codec.verify(FRAMES, KEY, watermark=Watermark(2**64, 1), kernel=k),
     VALUE, "watermark"),
    ("iter_frames watermark=1.0",
     lambda k: list(codec.iter_frames(FRAMES, KEY, watermark=1.0, kernel=k)), TYPE,
     "watermark"),
    ("iter_frames Watermark(2**64, 1)",
     lambda k: list(codec.iter_frames(FRAMES, KEY, watermark=Watermark(2**64, 1), kernel=k)),
     VALUE, "watermark"),
    ("classify watermark=1.0",
     lambda k: codec.classify(FRAMES, KEY, 1, AFTER, 0, 1.0, kernel=k),  # type: ignore
     TYPE, "watermark"),
    ("classify stop='x'",
     lambda k: codec.classify(FRAMES, KEY, 1, "x", 0, None, kernel=k),  # type: ignore
     TYPE, "stop"),
    ("scan cursor='x'", lambda k: codec.scan(FRAMES, KEY, "x", kernel=k),  # type: ignore
     TYPE, "cursor"),
    ("scan cursor seq 2**64",
     lambda k: codec.scan(FRAMES, KEY, Cursor(0, 2**64, 0), kernel=k), VALUE, "cursor"),
    ("scan key='x'", lambda k: codec.scan(FRAMES, "x", kernel=k), TYPE, "key"),  # type: ignore
    ("scan buf='x'", lambda k: codec.scan("x", KEY, kernel=k), TYPE, "buf"),
    ("session_key(16)", lambda k: codec.session_key(16, kernel=k),  # type: ignore
     TYPE, "session_uuid"),
    ("session_key('x' * 16)", lambda k: codec.session_key("x" * 16, kernel=k),  # type: ignore
     TYPE, "session_uuid"),
    ("session_key(15 bytes)", lambda k: codec.session_key(b"x" * 15, kernel=k),
     VALUE, "UUID"),
    ("decode_header offset='x'",
     lambda k: codec.decode_header(FRAMES, "x", kernel=k), TYPE, "offset"),  # type: ignore
    ("decode_header offset=1.0",
     lambda k: codec.decode_header(FRAMES, 1.0, kernel=k), TYPE, "offset"),  # type: ignore
    ("checksum seed='x'", lambda k: codec.checksum(b"a", "x", kernel=k),  # type: ignore
     TYPE, "seed"),
]


@pytest.mark.parametrize("label,call,error,names", CODEC, ids=[c[0] for c in CODEC])
def test_codec_entry_points_raise_the_same_typed_error_under_both_kernels(
        kernel, label, call, error, names):
    with pytest.raises(error, match=names) as err:
        call(kernel)
    assert isinstance(err.value, InvalidArgumentError)


def test_a_valid_watermark_still_scans_the_same_under_both_kernels():
    c, py = load_kernel("c"), load_kernel("python")
    for wm in (None, 1, Watermark(1), Watermark(1, AFTER.chain), Watermark(5), Watermark(-1)):
        got = [codec.scan(FRAMES, KEY, watermark=wm, kernel=k) for k in (c, py)]
        assert got[0].verdict == got[1].verdict and got[0].status == got[1].status


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    with trajlog.open(str(tmp_path_factory.mktemp("untyped") / "u.db")) as store:
        s = store.create_session(cwd="/r")
        s.append("user/message", {"content": "hi"})
        yield s


SURROGATE = "bad \ud800 text"

SESSIONS: list[tuple[str, Callable[[Any], Any], type[Exception], str]] = [
    # lease and turn: how long to wait
    ("lease wait='x'", lambda s: s.lease(wait="x").__enter__(), TYPE, "wait"),
    ("lease wait=-1", lambda s: s.lease(wait=-1).__enter__(), VALUE, "wait"),
    ("lease wait=nan", lambda s: s.lease(wait=math.nan).__enter__(), VALUE, "wait"),
    ("lease wait=[1]", lambda s: s.lease(wait=[1]).__enter__(), TYPE, "wait"),
    ("turn wait='x'", lambda s: s.turn(wait="x").__enter__(), TYPE, "wait"),
    # a context policy: every field checked when it is made
    ("ContextPolicy name surrogate", lambda s: ContextPolicy(name=SURROGATE),
     SerializationError, "name"),
    ("ContextPolicy name=5", lambda s: ContextPolicy(name=5), TYPE, "name"),  # type: ignore
    ("ContextPolicy include surrogate", lambda s: ContextPolicy(include=(SURROGATE,)),
     SerializationError, "include"),
    ("ContextPolicy include=5", lambda s: ContextPolicy(include=5), TYPE,  # type: ignore
     "include"),
    ("ContextPolicy include=(5,)", lambda s: ContextPolicy(include=(5,)), TYPE,  # type: ignore
     "include"),
    ("ContextPolicy exclude='abc'", lambda s: ContextPolicy(exclude="abc"), TYPE,  # type: ignore
     "exclude"),
    ("ContextPolicy require=5", lambda s: ContextPolicy(require=5), TYPE,  # type: ignore
     "require"),
    ("ContextPolicy require_for=None", lambda s: ContextPolicy(require_for=None),  # type: ignore
     TYPE, "require_for"),
    ("ContextPolicy layer_shares=5", lambda s: ContextPolicy(layer_shares=5),  # type: ignore
     TYPE, "layer_shares"),
    ("ContextPolicy layer_shares=(('a',),)",
     lambda s: ContextPolicy(layer_shares=(("a",),)), TYPE, "layer_shares"),  # type: ignore
    ("ContextPolicy layer_shares='ab'", lambda s: ContextPolicy(layer_shares="ab"),  # type: ignore
     TYPE, "layer_shares"),
    ("ContextPolicy layer_shares=(('a', 0.1, 2),)",
     lambda s: ContextPolicy(layer_shares=(("a", 0.1, 2),)), TYPE, "layer_shares"),  # type: ignore
    ("ContextPolicy layer_shares=((1, 0.1),)",
     lambda s: ContextPolicy(layer_shares=((1, 0.1),)), TYPE, "layer_shares"),  # type: ignore
    ("ContextPolicy layer_shares nan",
     lambda s: ContextPolicy(layer_shares=(("a", math.nan),)), VALUE, "layer share"),
    ("ContextPolicy layer name surrogate",
     lambda s: ContextPolicy(layer_shares=((SURROGATE, 0.1),)), SerializationError,
     "layer_shares"),
    ("ContextPolicy.from_config layer_shares=[['a']]",
     lambda s: ContextPolicy.from_config({"layer_shares": [["a"]]}), TYPE, "layer_shares"),
    ("ContextPolicy.from_config include=7",
     lambda s: ContextPolicy.from_config({"include": 7}), TYPE, "include"),
    # build_context: what it records is checked before it is built
    ("build_context('x')", lambda s: build_context("x"), TYPE, "session"),
    ("build_context policy='x'", lambda s: build_context(s, "x"), TYPE, "policy"),
    ("build_context target_model=5", lambda s: build_context(s, target_model=5),
     TYPE, "target_model"),
    ("build_context target_model surrogate",
     lambda s: build_context(s, target_model=SURROGATE), SerializationError,
     "target_model"),
    ("build_context workspace_revision=5",
     lambda s: build_context(s, workspace_revision=5, record=False), TYPE,
     "workspace_revision"),
    ("build_context workspace_revision surrogate",
     lambda s: build_context(s, workspace_revision=SURROGATE), SerializationError,
     "workspace_revision"),
    # the projections: a session, not anything else
    *[(f"projections.{name}('a string')", (lambda f: lambda s: f("a string"))(
        getattr(projections, name)), TYPE, "session")
      for name in ("model_history", "request_config", "chat", "trajectory", "goal", "status",
                   "stages", "runs", "run_tree", "checkpoint", "rebuild")],
    ("projections.project('a string', fold)",
     lambda s: projections.project("a string", projections.FOLDS["chat"]), TYPE, "session"),
    ("projections.project(s, 'chat')", lambda s: projections.project(s, "chat"), TYPE, "fold"),
    ("projections.model_history(None)", lambda s: projections.model_history(None), TYPE,
     "session"),
    ("replay('a string')", lambda s: trajlog.replay("a string", "r", lambda i: ""), TYPE,
     "session"),
    ("replay model='x'", lambda s: trajlog.replay(s, "r", "x"), TYPE, "model"),
    ("replay policy='x'", lambda s: trajlog.replay(s, "r", lambda i: "", policy="x"), TYPE,
     "policy"),
    ("replay run_id=5", lambda s: trajlog.replay(s, 5, lambda i: ""), TYPE, "run_id"),
]


@pytest.mark.parametrize("label,call,error,names", SESSIONS, ids=[c[0] for c in SESSIONS])
def test_session_and_projection_entry_points_raise_a_typed_error_naming_the_argument(
        session, label, call, error, names):
    head = session.last_seq
    with pytest.raises(error, match=names) as err:
        call(session)
    assert isinstance(err.value, InvalidArgumentError)
    assert session.last_seq == head                     # nothing written


def test_an_argument_type_error_is_both_a_type_error_and_an_invalid_argument():
    assert issubclass(ArgumentTypeError, TypeError)
    assert issubclass(ArgumentTypeError, InvalidArgumentError)
    assert issubclass(ArgumentTypeError, ValueError)


def test_valid_policies_and_waits_still_work(session):
    policy = ContextPolicy(include=["task.contract"], layer_shares=[["evidence", 1]])
    assert policy.include == ("task.contract",) and policy.layer_shares == (("evidence", 1),)
    assert ContextPolicy.from_config(policy.config()) == policy
    assert build_context(session, policy, record=False).messages
    with session.lease(wait=0.01), session.lease(wait=True), session.lease(wait=math.inf):
        pass
    with session.lease(wait=None):           # no wait, as False
        pass
