"""The SQLite schema: migrations, triggers, and what the authorizer refuses.

Migration n takes ``user_version`` from n-1 to n, in one transaction
(:func:`trajlog.storage.sqlite.migrate`).  Everything here is SQLite's; the
statements trajlog runs are in :mod:`.sqlite`.
"""

from __future__ import annotations

import apsw

MIN_SQLITE = (3, 51, 3)  # WAL-reset race fixed in 3.51.3 (sqlite.org/wal.html, section 11)
SCHEMA_VERSION = 3
APPLICATION_ID = 0x74726A6C  # "trjl"

# ---------------------------------------------------------------------------
# Schema.  Migration n takes user_version from n-1 to n, in one transaction.
#
# What the triggers stop (each has a test in tests/test_storage.py):
#   UPDATE or DELETE of an event, a session header or a session head row;
#   INSERT OR REPLACE / OR IGNORE / upsert over an existing event (the seq
#   guard fires first, and with recursive_triggers the implied delete too);
#   an event whose seq is not exactly the head's last_seq + 1 (gap, duplicate,
#   regression); moving a head other than by the append trigger (it must
#   advance by exactly one, to the chain of a stored event);
#   UPDATE or DELETE of memories and tombstones (append-only versions).
# What they cannot stop, and what does:
#   DROP TRIGGER / DROP TABLE / ALTER TABLE -- the authorizer refuses them on
#   every connection trajlog opens (migrations use their own connection);
#   PRAGMA writable_schema edits of sqlite_schema -- defensive mode;
#   sqlite3_db_config(ENABLE_TRIGGER, 0) on a foreign connection, and any
#   edit of the file's bytes outside SQLite -- only verify() detects these,
#   by recomputing every frame check and the chain against the head.

MIGRATIONS: list[str] = [
    # 1: sessions, heads, events, memories, tombstones, append-only triggers.
    """
    CREATE TABLE sessions(
        sid              INTEGER PRIMARY KEY CHECK (sid BETWEEN 1 AND 2147483647),
        id               TEXT    NOT NULL UNIQUE CHECK (length(id) = 36),
        session_key      INTEGER NOT NULL,
        created_ms       INTEGER NOT NULL,
        cwd              TEXT    NOT NULL,
        parent_sid       INTEGER REFERENCES sessions(sid),
        seed_length      INTEGER NOT NULL DEFAULT 0 CHECK (seed_length >= 0),
        seed_chain       INTEGER NOT NULL,
        origin           TEXT    CHECK (origin IS NULL OR origin = 'subagent'),
        delegation_depth INTEGER NOT NULL DEFAULT 0 CHECK (delegation_depth >= 0),
        agent_preset     TEXT,
        metadata         BLOB    NOT NULL,
        header_check     INTEGER NOT NULL,
        CHECK (seed_length = 0 OR parent_sid IS NOT NULL)
    ) STRICT;

    CREATE TABLE session_heads(
        sid                INTEGER PRIMARY KEY REFERENCES sessions(sid),
        last_seq           INTEGER NOT NULL CHECK (last_seq >= -1),
        chain_head         INTEGER NOT NULL,
        lease_owner        TEXT,
        lease_host         TEXT,
        lease_pid          INTEGER,
        lease_started_ms   INTEGER,
        lease_heartbeat_ms INTEGER
    ) STRICT;

    CREATE TABLE events(
        rid                INTEGER PRIMARY KEY,  -- (sid << 32) + seq: the key, no extra index
        -- derived from rid and not stored; an event of an unknown session is
        -- refused by events_seq_next (its head row does not exist)
        sid                INTEGER GENERATED ALWAYS AS (rid >> 32) VIRTUAL,
        seq                INTEGER GENERATED ALWAYS AS (rid & 4294967295) VIRTUAL,
        type               TEXT    NOT NULL,
        time_ms            INTEGER NOT NULL,
        source             TEXT,
        causal_parent      INTEGER,
        workspace_revision TEXT,
        data_class         TEXT,
        idempotency_key    TEXT,
        chain              INTEGER NOT NULL,
        frame              BLOB    NOT NULL CHECK (length(frame) >= 40),
        CHECK (rid >= 4294967296)
    ) STRICT;
    CREATE UNIQUE INDEX events_idempotency ON events(sid, idempotency_key)
        WHERE idempotency_key IS NOT NULL;

    CREATE TABLE memories(
        mid            INTEGER PRIMARY KEY,
        item_id        TEXT    NOT NULL,
        version        INTEGER NOT NULL CHECK (version >= 1),
        scope          TEXT    NOT NULL CHECK (scope IN ('global', 'tenant', 'user', 'session')),
        scope_key      TEXT    NOT NULL,
        type           TEXT    NOT NULL
                       CHECK (type IN ('policy', 'preference', 'fact', 'episode', 'trajectory')),
        state          TEXT    NOT NULL
                       CHECK (state IN ('provisional', 'active', 'quarantined', 'revoked')),
        content        BLOB    NOT NULL,
        content_digest BLOB    NOT NULL,
        source_sid     INTEGER REFERENCES sessions(sid),
        source_seq     INTEGER,
        retention_ms   INTEGER,
        sensitivity    TEXT,
        created_ms     INTEGER NOT NULL,
        frame          BLOB    NOT NULL,
        UNIQUE (item_id, version)
    ) STRICT;

    CREATE TABLE tombstones(
        tid         INTEGER PRIMARY KEY,
        target_kind TEXT    NOT NULL CHECK (target_kind IN ('event', 'memory')),
        target_sid  INTEGER REFERENCES sessions(sid),
        target_seq  INTEGER,
        target_item TEXT,
        reason      TEXT    NOT NULL,
        actor       TEXT,
        created_ms  INTEGER NOT NULL,
        frame       BLOB    NOT NULL
    ) STRICT;

    CREATE TRIGGER events_no_update BEFORE UPDATE ON events
    BEGIN SELECT RAISE(ABORT, 'trajlog: events are append-only'); END;
    CREATE TRIGGER events_no_delete BEFORE DELETE ON events
    BEGIN SELECT RAISE(ABORT, 'trajlog: events are append-only'); END;
    CREATE TRIGGER events_seq_next BEFORE INSERT ON events
    WHEN NEW.seq IS NOT (SELECT last_seq + 1 FROM session_heads WHERE sid = NEW.sid)
    BEGIN SELECT RAISE(ABORT, 'trajlog: seq must be exactly the next one'); END;
    CREATE TRIGGER events_advance_head AFTER INSERT ON events
    BEGIN
        UPDATE session_heads SET last_seq = NEW.seq, chain_head = NEW.chain WHERE sid = NEW.sid;
    END;

    CREATE TRIGGER heads_forward_only BEFORE UPDATE OF last_seq, chain_head ON session_heads
    WHEN NEW.last_seq IS NOT OLD.last_seq + 1
      OR NEW.chain_head IS NOT (SELECT chain FROM events WHERE rid = (NEW.sid << 32) + NEW.last_seq)
    BEGIN SELECT RAISE(ABORT, 'trajlog: a head only advances with its log'); END;
    CREATE TRIGGER heads_no_rebind BEFORE UPDATE OF sid ON session_heads
    BEGIN SELECT RAISE(ABORT, 'trajlog: heads are permanent'); END;
    CREATE TRIGGER heads_no_delete BEFORE DELETE ON session_heads
    BEGIN SELECT RAISE(ABORT, 'trajlog: heads are permanent'); END;

    CREATE TRIGGER sessions_no_update BEFORE UPDATE ON sessions
    BEGIN SELECT RAISE(ABORT, 'trajlog: session headers are immutable'); END;
    CREATE TRIGGER sessions_no_delete BEFORE DELETE ON sessions
    BEGIN SELECT RAISE(ABORT, 'trajlog: session headers are immutable'); END;

    CREATE TRIGGER memories_no_update BEFORE UPDATE ON memories
    BEGIN SELECT RAISE(ABORT, 'trajlog: memory versions are append-only'); END;
    CREATE TRIGGER memories_no_delete BEFORE DELETE ON memories
    BEGIN SELECT RAISE(ABORT, 'trajlog: memory versions are append-only'); END;
    CREATE TRIGGER tombstones_no_update BEFORE UPDATE ON tombstones
    BEGIN SELECT RAISE(ABORT, 'trajlog: tombstones are append-only'); END;
    CREATE TRIGGER tombstones_no_delete BEFORE DELETE ON tombstones
    BEGIN SELECT RAISE(ABORT, 'trajlog: tombstones are append-only'); END;
    """,
    # 2: small partial indexes over the events forks and subagents look for, so
    # that finding a turn's end or the latest sandbox settings is O(log n)
    # whatever the log's length (one entry per matching event only).
    """
    CREATE INDEX events_turn_start ON events(sid, seq) WHERE type = 'turn/start';
    CREATE INDEX events_turn_end ON events(sid, seq) WHERE type = 'turn/end';
    CREATE INDEX events_sandbox ON events(sid, seq) WHERE type = 'sandbox/mode';
    """,
    # 3: derived, rebuildable projection states (never authoritative; no
    # append-only triggers: a newer state replaces an older one).
    """
    CREATE TABLE projection_states(
        sid     INTEGER NOT NULL REFERENCES sessions(sid),
        name    TEXT    NOT NULL,
        version INTEGER NOT NULL,
        seq     INTEGER NOT NULL,
        chain   INTEGER NOT NULL,
        state   BLOB    NOT NULL,
        PRIMARY KEY (sid, name, version)
    ) STRICT;
    """,
]

# Authorizer: action codes refused on every non-migration connection.
DENIED_ACTIONS = {
    apsw.SQLITE_CREATE_INDEX, apsw.SQLITE_CREATE_TABLE, apsw.SQLITE_CREATE_TEMP_INDEX,
    apsw.SQLITE_CREATE_TEMP_TABLE, apsw.SQLITE_CREATE_TEMP_TRIGGER,
    apsw.SQLITE_CREATE_TEMP_VIEW, apsw.SQLITE_CREATE_TRIGGER, apsw.SQLITE_CREATE_VIEW,
    apsw.SQLITE_DROP_INDEX, apsw.SQLITE_DROP_TABLE, apsw.SQLITE_DROP_TEMP_INDEX,
    apsw.SQLITE_DROP_TEMP_TABLE, apsw.SQLITE_DROP_TEMP_TRIGGER, apsw.SQLITE_DROP_TEMP_VIEW,
    apsw.SQLITE_DROP_TRIGGER, apsw.SQLITE_DROP_VIEW, apsw.SQLITE_ALTER_TABLE,
    apsw.SQLITE_CREATE_VTABLE, apsw.SQLITE_DROP_VTABLE, apsw.SQLITE_ATTACH,
    apsw.SQLITE_DETACH,
}
# Pragmas that may be read but never set outside set-up.
GUARDED_PRAGMAS = {"writable_schema", "journal_mode", "synchronous", "recursive_triggers",
                    "foreign_keys", "trusted_schema", "schema_version", "user_version",
                    "application_id", "cell_size_check", "ignore_check_constraints",
                    "locking_mode", "query_only", "defer_foreign_keys"}
PROTECTED_TABLES = {"sqlite_master", "sqlite_schema", "sqlite_temp_master"}


def authorizer(action: int, p1: str | None, p2: str | None, dbname: str | None,
               trigger: str | None) -> int:
    """The authorizer of every connection but the migration one."""
    if action in DENIED_ACTIONS:
        return apsw.SQLITE_DENY
    if action == apsw.SQLITE_PRAGMA and p1 is not None and p2 is not None and (
            p1.lower() in GUARDED_PRAGMAS):
        return apsw.SQLITE_DENY
    if action in (apsw.SQLITE_INSERT, apsw.SQLITE_UPDATE, apsw.SQLITE_DELETE) and (
            p1 or "").lower() in PROTECTED_TABLES:
        return apsw.SQLITE_DENY
    return apsw.SQLITE_OK


__all__ = ["APPLICATION_ID", "DENIED_ACTIONS", "GUARDED_PRAGMAS", "MIGRATIONS", "MIN_SQLITE",
           "PROTECTED_TABLES", "SCHEMA_VERSION", "authorizer"]
