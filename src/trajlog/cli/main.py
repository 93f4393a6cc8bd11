"""The ``trajlog`` command line: ``trajlog demo`` and the inspection tools."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence

from .._version import __version__
from ..errors import TrajlogError
from ..interop.store import open as trajlog_open
from . import interop
from .demo import demo, summary
from .forget import add_commands, run


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="trajlog", description=__doc__)
    parser.add_argument("--version", action="version", version=f"trajlog {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("demo", help="record a session in a store, verify it, damage a log")
    p.add_argument("--db", default="trajlog.db", help="store path (default ./trajlog.db)")
    p = sub.add_parser("ls", help="list the sessions of a store")
    p.add_argument("--db", default="trajlog.db")
    p.add_argument("--all", action="store_true", help="include subagent sessions")
    p = sub.add_parser("show", help="print a session's events")
    p.add_argument("session")
    p.add_argument("--db", default="trajlog.db")
    p = sub.add_parser("verify", help="verify every frame and the chain of sessions, or an "
                       "export file on its own")
    p.add_argument("session", nargs="?", help="one session, or an export file (.tlog, "
                   ".jsonl, .jsonl.zst, .zip); default: every session")
    p.add_argument("--db", default="trajlog.db")
    add_commands(sub)
    interop.add_commands(sub)
    args = parser.parse_args(argv)
    if args.command == "demo":
        return demo(args.db)
    if args.command == "verify" and args.session and interop.is_export(args.session):
        return interop.verify_export(args.session)
    if args.command in ("memory", "erase", "retention", "export", "import"):
        if args.command != "import" and not os.path.exists(args.db):
            print(f"trajlog: no store at {args.db} (give one with --db)", file=sys.stderr)
            return 2
        try:
            with trajlog_open(args.db) as store:
                if args.command in ("export", "import"):
                    return interop.run(args, store)
                return run(args, store)
        except TrajlogError as exc:
            return interop.failed(exc)
    with trajlog_open(args.db) as store:
        if args.command == "ls":
            for h in store.sessions(include_subagents=args.all):
                print(f"{h.id}  {h.cwd}  {h.agent_preset or '-'}  "
                      f"{json.dumps(dict(h.metadata))}")
            return 0
        if args.command == "show":
            for ev in store.session(args.session).events():
                print(f"{ev.seq:>6}  {ev.type:<20} {summary(ev.data, 100)}")
            return 0
        ids = [args.session] if args.session else [h.id for h in
                                                   store.sessions(include_subagents=True)]
        failed = 0
        for sid in ids:
            try:  # one session's damage never stops the others' verification
                report = store.session(sid).verify()
            except TrajlogError as exc:
                failed += 1
                print(f"{sid}  ERROR: {type(exc).__name__}: {exc}")
                continue
            failed += not report.ok
            print(f"{sid}  {'ok' if report.ok else 'CORRUPT: ' + str(report.scan.error(sid))}")
        if not args.session:   # and the memory versions and tombstones
            audit = store.verify_memory()
            print(f"memory  {'ok' if audit.ok else 'CORRUPT'} ({audit.items} items, "
                  f"{audit.versions} versions, {audit.tombstones} tombstones)")
            for defect in audit.defects:
                print(f"memory  {defect}")
            failed += not audit.ok
        return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
