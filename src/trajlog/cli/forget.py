"""``trajlog memory ...``, ``trajlog erase`` and ``trajlog retention``."""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from typing import Any

from ..api import Store
from ..memory import Identity, MemoryItem
from .demo import summary


def add_commands(sub: Any) -> None:
    """Register the commands on the main parser's subparsers."""
    p = sub.add_parser("memory", help="list, show and search scoped memory")
    msub = p.add_subparsers(dest="memory_command", required=True)
    for name, text in (("ls", "list the items an identity may see"),
                       ("show", "one item and its versions"),
                       ("search", "full-text search within an identity's scopes")):
        q = msub.add_parser(name, help=text)
        if name == "show":
            q.add_argument("item")
        if name == "search":
            q.add_argument("query")
            q.add_argument("--limit", type=int, default=10)
        q.add_argument("--db", default="trajlog.db")
        q.add_argument("--tenant", required=True)
        q.add_argument("--user")
        q.add_argument("--session")
        q.add_argument("--type", action="append", help="only this type (repeatable)")
        if name == "ls":
            q.add_argument("--state", action="append", help="only this state (repeatable)")
        q.add_argument("--json", action="store_true", help="one JSON object per line")
    p = sub.add_parser("erase", help="erase event payloads under a tombstone, and purge")
    p.add_argument("session")
    p.add_argument("seq", type=int, nargs="+")
    p.add_argument("--reason", required=True)
    p.add_argument("--actor")
    p.add_argument("--db", default="trajlog.db")
    p = sub.add_parser("retention", help="show (or --apply) what retention policies remove")
    p.add_argument("--apply", action="store_true", help="revoke and erase now")
    p.add_argument("--now-ms", type=int, help="the time to apply them at (default: now)")
    p.add_argument("--db", default="trajlog.db")


def _line(item: MemoryItem, as_json: bool) -> str:
    if as_json:
        return json.dumps(dataclasses.asdict(item), default=str)
    return (f"{item.id}  v{item.version}  {item.scope:<7} {item.type:<10} {item.state:<11} "
            f"{item.key or '-':<12} {summary(item.content, 70)}")


def run(args: argparse.Namespace, store: Store) -> int:
    if args.command == "memory":
        view = store.memory(Identity(args.tenant, user=args.user, session=args.session))
        if args.memory_command == "ls":
            items = view.list(types=args.type, states=args.state or (
                "provisional", "active", "quarantined"))
        elif args.memory_command == "show":
            items = view.history(args.item)
        else:
            items = view.search(args.query, limit=args.limit, types=args.type)
        for item in items:
            print(_line(item, args.json))
        return 0
    if args.command == "erase":
        report = store.erase(args.session, args.seq, reason=args.reason, actor=args.actor)
        for name, value in dataclasses.asdict(report).items():
            print(f"{name:<26} {value}")
        return 0
    now = args.now_ms if args.now_ms is not None else time.time_ns() // 1_000_000
    if not args.apply:
        due_items, due_events = store.retention_plan(now)
        for item_id, reason in due_items:
            print(f"would revoke item {item_id}  ({reason})")
        for session_id, seqs, why in due_events:
            print(f"would erase {len(seqs)} event(s) of {session_id}  ({why})")
        if not due_items and not due_events:
            print("nothing is due")
        return 0
    done = store.apply_retention(now)
    print(f"revoked {len(done.items_revoked)} item(s), erased {len(done.events_erased)} "
          f"event payload(s), {len(done.purges)} purge(s)")
    return 0


__all__ = ["add_commands", "run"]
