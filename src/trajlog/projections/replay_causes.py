"""The drift causes a replay names beyond model, policy, builder, log and
artifact (:mod:`.replay` calls these):

* ``memory`` -- a memory item a call read changed since: a new version
  (corrected, renewed), quarantined, revoked by hand, gone or out of scope;
  or the memory read now holds an item the call did not read (one written or
  promoted since).  A call that read memory is rebuilt from the item
  versions its ``context/injection`` recorded (read back from the given
  view's history), and the input "now" from the view as it is;
* ``static_prefix`` -- the static prefix a replay is given hashes otherwise
  than the one the run recorded (``run/started`` ``static_prefix_hash``);
* ``lifecycle`` -- time or retention changed what is visible: a memory item
  that expired by the replay's ``now``, or that retention revoked; an
  approval or lease the call saw that lapsed by then
  (``permission.expired``); an event before the call that a retention rule
  erased (a tombstone whose actor is retention's -- an erasure by anyone
  else stays cause ``log``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..errors import ArgumentTypeError, MemoryAccessError, MemoryNotFoundError
from ..events import Event
from ..memory.retention import ACTOR as RETENTION
from .context import ContextBuild
from .context_memory import RecordedMemory
from .envelopes import prefix_hash

NEW_CAUSES = ("memory", "static_prefix", "lifecycle")
_LAPSED = ("permission.expired", "memory.expired")


def recorded(data: dict[str, Any]) -> list[dict[str, Any]] | None:
    """The memory item versions a ``context/injection`` recorded (None: it
    was built without memory)."""
    rec = data.get("memory")
    return [r for r in rec if isinstance(r, dict)] if isinstance(rec, list) else None


def pinned(view: Any, data: dict[str, Any]) -> RecordedMemory | None:
    """The versions the call read, to rebuild its input exactly (None: no
    view given, or the call read no memory)."""
    if view is not None and not callable(getattr(view, "history", None)):
        raise ArgumentTypeError(f"memory must be a trajlog MemoryView, not "
                                f"{type(view).__name__}")
    rec = recorded(data)
    return None if view is None or rec is None else RecordedMemory.of(view, rec)


def _ref(rec: dict[str, Any]) -> str:
    return f"MEM-{rec.get('id')}@v{rec.get('version')} ({rec.get('layer')})"


def fate(view: Any, rec: dict[str, Any], at: int) -> tuple[str, str] | None:
    """What happened to one recorded item since, as (cause, words), or None."""
    try:
        cur = view.get(str(rec.get("id")))
    except MemoryNotFoundError:
        return "memory", "gone from the store"
    except MemoryAccessError:
        return "memory", "no longer visible to this identity"
    why = (cur.decision or {}).get("reason")
    if cur.state == "revoked":
        if (cur.decision or {}).get("actor") == RETENTION:
            return "lifecycle", f"revoked by retention ({why})"
        return "memory", f"revoked ({why})"
    if cur.expires_ms is not None and cur.expires_ms <= at:
        return "lifecycle", f"expired at {cur.expires_ms}"
    if cur.version != rec.get("version"):
        return "memory", f"now v{cur.version}, {cur.state} ({why})"
    return None


def memory_drift(view: Any, data: dict[str, Any], now: ContextBuild,
                 at: int) -> list[tuple[str, str]]:
    """(cause, detail) of each change of the memory a call read: its recorded
    items' fates, then the items the build now reads that it did not."""
    rec = recorded(data)
    if view is None or rec is None:
        return []
    out = [(f[0], f"{_ref(r)}: {f[1]}") for r in rec if (f := fate(view, r, at)) is not None]
    ids = {r.get("id") for r in rec}   # (a recorded item's new version is its fate)
    for use in now.memory.used if now.memory is not None else ():
        if use.id not in ids:
            origin = f", promoted from {use.item.promoted_from}" if use.item.promoted_from else ""
            out.append(("memory", f"now read: {use.ref} ({use.layer}{origin})"))
    return out


def unpinned(data: dict[str, Any], memory: RecordedMemory | None,
             view: Any) -> tuple[str, str] | None:
    """Why a call that read memory is not rebuilt exactly, or None."""
    rec = recorded(data)
    if not rec:
        return None
    if memory is None:
        return "memory", (f"the call read memory ({', '.join(map(_ref, rec))}); pass "
                          "memory= (a MemoryView) to rebuild it")
    if memory.missing:
        return "memory", f"memory version(s) {', '.join(memory.missing)} are gone"
    blank = [r for r in rec if any(i.id == r.get("id") and i.content is None
                                   for items in memory.layers.values() for i in items)]
    if blank:
        fates = [fate(view, r, 0) for r in blank]
        cause = "lifecycle" if all(f and f[0] == "lifecycle" for f in fates) else "memory"
        return cause, f"the content of {', '.join(map(_ref, blank))} was erased since"
    return None


def erasure_cause(erased: Sequence[Event]) -> str:
    """``lifecycle`` when a retention rule erased every one of these events
    (a tombstone naming retention's actor), else ``log``."""
    actors = {(ev.data.get("erased") or {}).get("actor") for ev in erased
              if isinstance(ev.data, dict)}
    return "lifecycle" if erased and actors == {RETENTION} else "log"


def context_cause(removed: dict[int, str], found: list[tuple[str, str]]) -> str | None:
    """The cause of a context drift the policy does not explain: an approval
    or lease that lapsed (``lifecycle``), else the memory's own changes."""
    if any(reason in _LAPSED for reason in removed.values()):
        return "lifecycle"
    return found[0][0] if found else None


def static_prefix_drift(run_data: dict[str, Any], given: Any) -> str | None:
    """The static prefix given to the replay against the run's recorded hash."""
    if given is None:
        return None
    then, now = run_data.get("static_prefix_hash"), prefix_hash(given)
    if then == now:
        return None
    return (f"the static prefix hashes {str(now)[:16]}... now; the run recorded "
            f"{str(then)[:16] + '...' if then else 'none'}")


__all__ = ["NEW_CAUSES", "context_cause", "erasure_cause", "fate", "memory_drift", "pinned",
           "recorded", "static_prefix_drift", "unpinned"]
