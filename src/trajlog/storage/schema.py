"""The SQLite schema: migrations, triggers, and what the authorizer refuses.

Migration n takes ``user_version`` from n-1 to n, in one transaction
(:func:`trajlog.storage.sqlite.migrate`).  Everything here is SQLite's; the
statements trajlog runs are in :mod:`.sqlite`.
"""

from __future__ import annotations

import apsw

MIN_SQLITE = (3, 51, 3)  # WAL-reset race fixed in 3.51.3 (sqlite.org/wal.html, section 11)
SCHEMA_VERSION = 8
APPLICATION_ID = 0x74726A6C  # "trjl"

# ---------------------------------------------------------------------------
# Schema.  Migration n takes user_version from n-1 to n, in one transaction.
#
# What the triggers stop (each has a test in tests/storage/test_storage.py):
#   UPDATE or DELETE of an event, a session header or a session head row;
#   INSERT OR REPLACE / OR IGNORE / upsert over an existing event (the seq
#   guard fires first, and with recursive_triggers the implied delete too);
#   an event whose seq is not exactly the head's last_seq + 1 (gap, duplicate,
#   regression); moving a head other than by the append trigger (it must
#   advance by exactly one, to the chain of a stored event);
#   UPDATE or DELETE of memories and tombstones (append-only versions).
# What they cannot stop, and what does:
#   DROP TRIGGER / DROP TABLE / ALTER TABLE -- the authorizer refuses them on
#   every connection trajlog opens (migrations use their own connection; a
#   reader connection is opened read-only instead);
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

# 4: storage v2 -- chunk rows and the sparse event index replace the events
# table (one row per frame).  Run in three parts by migrate.py: the tables
# (V4_TABLES), the copy of every session's frames, then V4_FINISH in one
# transaction (old table, indexes and triggers gone; the new triggers made).
#
# What the triggers stop, on any connection with default settings (no
# recursive_triggers needed -- every guard is a BEFORE INSERT / UPDATE /
# DELETE trigger of its own statement, so INSERT OR REPLACE, OR IGNORE and
# upserts meet them before any conflict is resolved):
#   a chunk that does not start at its head's next seq (a gap, an overlap, a
#   replaced row); a head moved other than to the end of the chunk just
#   appended, with that chunk's last chain; a head inserted twice or not at
#   its session's seed; a session inserted twice; an UPDATE of a chunk other
#   than a repack (the row grows over the rows after it, keeping its key and
#   seed chain, to end exactly where a stored row ends, with its chain); a
#   DELETE of a chunk not covered by the row before it (so only the rows a
#   repack merged may go); any change to an index row, a session, a head's
#   seq or key, a memory version or a tombstone.
# What they cannot stop: a foreign connection that switches triggers off or
# edits the file outside SQLite, and a repack whose merged body differs from
# the rows it replaced -- verify() finds these (every body check, frame
# check and chain; the head against the last row; every index row against
# its frame), and the repack itself verifies the merged row before it writes.
V4_TABLES = """
    CREATE TABLE chunks(
        cid        INTEGER PRIMARY KEY,  -- (sid << 32) + first_seq
        sid        INTEGER GENERATED ALWAYS AS (cid >> 32) VIRTUAL,
        first_seq  INTEGER GENERATED ALWAYS AS (cid & 4294967295) VIRTUAL,
        last_seq   INTEGER GENERATED ALWAYS AS ((cid & 4294967295) + n - 1) VIRTUAL,
        n          INTEGER NOT NULL CHECK (n >= 1),
        raw_len    INTEGER NOT NULL CHECK (raw_len >= 40),
        codec      INTEGER NOT NULL CHECK (codec IN (0, 1)),
        body_check INTEGER NOT NULL,
        seed_chain INTEGER NOT NULL,
        last_chain INTEGER NOT NULL,
        body       BLOB    NOT NULL,
        marks      BLOB,            -- the dense index: see storage/event_index.py
        CHECK (cid >= 4294967296)
    ) STRICT;

    CREATE TABLE event_index(
        rid                INTEGER PRIMARY KEY,  -- (sid << 32) + seq
        sid                INTEGER GENERATED ALWAYS AS (rid >> 32) VIRTUAL,
        seq                INTEGER GENERATED ALWAYS AS (rid & 4294967295) VIRTUAL,
        type               TEXT    NOT NULL,
        time_ms            INTEGER NOT NULL,
        source             TEXT,
        causal_parent      INTEGER,
        workspace_revision TEXT,
        data_class         TEXT,
        idempotency_key    TEXT,
        CHECK (rid >= 4294967296)
    ) STRICT;

    CREATE TABLE migration_v4(sid INTEGER PRIMARY KEY, frames INTEGER NOT NULL) STRICT;
"""

V4_FINISH = """
    DROP TABLE migration_v4;
    DROP TRIGGER events_no_update;
    DROP TRIGGER events_no_delete;
    DROP TRIGGER events_seq_next;
    DROP TRIGGER events_advance_head;
    DROP TRIGGER heads_forward_only;
    DROP INDEX events_turn_start;
    DROP INDEX events_turn_end;
    DROP INDEX events_sandbox;
    DROP INDEX events_idempotency;
    DROP TABLE events;

    CREATE UNIQUE INDEX event_index_idempotency ON event_index(sid, idempotency_key)
        WHERE idempotency_key IS NOT NULL;
    CREATE INDEX event_index_markers ON event_index(type, rid)
        WHERE type IN ('turn/start', 'turn/end', 'sandbox/mode');

    CREATE TRIGGER chunks_append BEFORE INSERT ON chunks
    WHEN (NEW.cid & 4294967295) IS NOT
         (SELECT last_seq + 1 FROM session_heads WHERE sid = NEW.cid >> 32)
    BEGIN SELECT RAISE(ABORT, 'trajlog: a chunk starts at its head''s next seq'); END;
    CREATE TRIGGER chunks_advance_head AFTER INSERT ON chunks
    BEGIN
        UPDATE session_heads SET last_seq = (NEW.cid & 4294967295) + NEW.n - 1,
                                 chain_head = NEW.last_chain
        WHERE sid = NEW.cid >> 32;
    END;
    CREATE TRIGGER chunks_repack BEFORE UPDATE ON chunks
    WHEN NEW.cid IS NOT OLD.cid OR NEW.seed_chain IS NOT OLD.seed_chain OR NEW.n <= OLD.n
      OR NOT EXISTS (SELECT 1 FROM chunks c
                     WHERE c.cid > OLD.cid AND c.cid <= ((OLD.cid >> 32) << 32) + 4294967295
                       AND c.last_seq = (OLD.cid & 4294967295) + NEW.n - 1
                       AND c.last_chain = NEW.last_chain)
    BEGIN SELECT RAISE(ABORT, 'trajlog: a chunk changes only by a repack'); END;
    CREATE TRIGGER chunks_covered_delete BEFORE DELETE ON chunks
    WHEN NOT EXISTS (SELECT 1 FROM chunks c
                     WHERE c.cid = (SELECT max(cid) FROM chunks
                                    WHERE cid < OLD.cid AND cid >= (OLD.cid >> 32) << 32)
                       AND c.last_seq >= OLD.last_seq)
    BEGIN SELECT RAISE(ABORT, 'trajlog: a chunk row goes only when a repacked row holds it');
    END;

    CREATE TRIGGER event_index_append BEFORE INSERT ON event_index
    WHEN EXISTS (SELECT 1 FROM event_index WHERE rid = NEW.rid)
      OR (NEW.idempotency_key IS NOT NULL AND EXISTS (
            SELECT 1 FROM event_index WHERE sid = NEW.rid >> 32
                                        AND idempotency_key = NEW.idempotency_key))
      OR (NEW.rid & 4294967295) >
         coalesce((SELECT last_seq FROM session_heads WHERE sid = NEW.rid >> 32), -1)
    BEGIN SELECT RAISE(ABORT, 'trajlog: index rows are appended with their events'); END;
    CREATE TRIGGER event_index_no_update BEFORE UPDATE ON event_index
    BEGIN SELECT RAISE(ABORT, 'trajlog: index rows are append-only'); END;
    CREATE TRIGGER event_index_no_delete BEFORE DELETE ON event_index
    BEGIN SELECT RAISE(ABORT, 'trajlog: index rows are append-only'); END;

    CREATE TRIGGER heads_forward_only BEFORE UPDATE OF last_seq, chain_head ON session_heads
    WHEN NEW.last_seq <= OLD.last_seq
      OR NOT EXISTS (SELECT 1 FROM chunks WHERE cid = (NEW.sid << 32) + OLD.last_seq + 1
                                            AND last_seq = NEW.last_seq
                                            AND last_chain = NEW.chain_head)
    BEGIN SELECT RAISE(ABORT, 'trajlog: a head only advances with its log'); END;
    CREATE TRIGGER heads_insert_once BEFORE INSERT ON session_heads
    WHEN EXISTS (SELECT 1 FROM session_heads WHERE sid = NEW.sid)
      OR NOT EXISTS (SELECT 1 FROM sessions WHERE sid = NEW.sid
                                              AND seed_length - 1 = NEW.last_seq
                                              AND seed_chain = NEW.chain_head)
    BEGIN SELECT RAISE(ABORT, 'trajlog: a head is made once, at its session''s seed'); END;
    CREATE TRIGGER sessions_insert_once BEFORE INSERT ON sessions
    WHEN EXISTS (SELECT 1 FROM sessions WHERE id = NEW.id OR sid = NEW.sid)
    BEGIN SELECT RAISE(ABORT, 'trajlog: a session is made once'); END;
"""

# The cleanup when a v3 -> v4 migration fails: the v3 schema, exactly.
V4_ABANDON = """
    DROP TABLE IF EXISTS chunks;
    DROP TABLE IF EXISTS event_index;
    DROP TABLE IF EXISTS migration_v4;
"""

# 5: guards that hold against INSERT OR REPLACE on a default connection too
# (the implied delete of REPLACE fires no trigger without recursive_triggers):
# a memory version and a tombstone are made once; an index row belongs to its
# session's last chunk row (the one its append just made -- appends insert a
# chunk's index rows right after it), so a row forged later for an older,
# unindexed seq is refused.  (One forged for a seq of the last row still gets
# in: no trigger can read a frame; verify() and every decision that uses an
# index row check it against its frame.)
V5 = """
    CREATE TRIGGER memories_insert_once BEFORE INSERT ON memories
    WHEN EXISTS (SELECT 1 FROM memories WHERE mid = NEW.mid
                                           OR (item_id = NEW.item_id AND version = NEW.version))
    BEGIN SELECT RAISE(ABORT, 'trajlog: memory versions are append-only'); END;
    CREATE TRIGGER tombstones_insert_once BEFORE INSERT ON tombstones
    WHEN EXISTS (SELECT 1 FROM tombstones WHERE tid = NEW.tid)
    BEGIN SELECT RAISE(ABORT, 'trajlog: tombstones are append-only'); END;

    DROP TRIGGER event_index_append;
    CREATE TRIGGER event_index_append BEFORE INSERT ON event_index
    WHEN EXISTS (SELECT 1 FROM event_index WHERE rid = NEW.rid)
      OR (NEW.idempotency_key IS NOT NULL AND EXISTS (
            SELECT 1 FROM event_index WHERE sid = NEW.rid >> 32
                                        AND idempotency_key = NEW.idempotency_key))
      OR (NEW.rid & 4294967295) >
         coalesce((SELECT last_seq FROM session_heads WHERE sid = NEW.rid >> 32), -1)
      OR NEW.rid < (SELECT max(cid) FROM chunks
                    WHERE cid BETWEEN (NEW.rid >> 32) << 32
                                  AND ((NEW.rid >> 32) << 32) + 4294967295)
    BEGIN SELECT RAISE(ABORT, 'trajlog: index rows are appended with their events'); END;
"""

# 6: memory and erasure.  The empty tables of schema 1 are
# made again in their final shape (nothing wrote them before: the migration
# refuses a store where something did).  Every memory version and every
# tombstone is a frame (FORMAT.md 4.6): a version is checked and chained to
# the item's earlier versions, a tombstone to the tombstones before it.
# What the triggers stop, on any connection with triggers on:
#   a version that is not the item's next one, or made twice (REPLACE too);
#   any UPDATE of a version except blanking the payload of a revoked item's
#   frame (its 40 header bytes kept, the payload zeroed: the frame's
#   payload_check stays as the proof of what was erased); any DELETE;
#   a tombstone that is not the next one, made twice, changed or deleted;
#   an UPDATE of a chunk other than a repack or the blanking of an erased
#   event's payload (same row, frames and chains; it needs the tombstone).
# verify() checks what a trigger cannot read: that only tombstoned payloads
# are blank, and every check and chain of every other frame.
# memory_fts is derived (rebuilt from the versions, dropped at will, searched
# around when missing): the schema check does not count its tables.
V6 = """
    DROP TRIGGER memories_no_update;
    DROP TRIGGER memories_no_delete;
    DROP TRIGGER memories_insert_once;
    DROP TRIGGER tombstones_no_update;
    DROP TRIGGER tombstones_no_delete;
    DROP TRIGGER tombstones_insert_once;
    DROP TABLE memories;
    DROP TABLE tombstones;

    CREATE TABLE memories(
        mid         INTEGER PRIMARY KEY CHECK (mid >= 1),
        item_id     TEXT    NOT NULL CHECK (length(item_id) = 36),
        version     INTEGER NOT NULL CHECK (version >= 1),
        tenant      TEXT    NOT NULL,
        scope       TEXT    NOT NULL CHECK (scope IN ('global', 'tenant', 'user', 'session')),
        scope_key   TEXT    NOT NULL,
        type        TEXT    NOT NULL
                    CHECK (type IN ('policy', 'preference', 'fact', 'episode', 'trajectory')),
        state       TEXT    NOT NULL
                    CHECK (state IN ('provisional', 'active', 'quarantined', 'revoked')),
        key         TEXT,
        digest      BLOB    NOT NULL CHECK (length(digest) = 32),
        source_sid  INTEGER REFERENCES sessions(sid),
        source_seq  INTEGER,
        expires_ms  INTEGER,
        until_event TEXT,
        sensitivity TEXT    NOT NULL,
        created_ms  INTEGER NOT NULL,
        frame       BLOB    NOT NULL CHECK (length(frame) >= 40),
        UNIQUE (item_id, version)
    ) STRICT;
    CREATE INDEX memories_scope ON memories(tenant, scope, scope_key, type, state);
    CREATE INDEX memories_merge ON memories(digest, scope, scope_key, type);
    CREATE INDEX memories_key ON memories(tenant, key) WHERE key IS NOT NULL;
    CREATE INDEX memories_source ON memories(source_sid, source_seq)
        WHERE source_sid IS NOT NULL;
    CREATE INDEX memories_expiry ON memories(expires_ms) WHERE expires_ms IS NOT NULL;
    CREATE INDEX memories_until ON memories(until_event) WHERE until_event IS NOT NULL;

    CREATE TABLE tombstones(
        tid         INTEGER PRIMARY KEY CHECK (tid >= 1),
        target_kind TEXT    NOT NULL CHECK (target_kind IN ('event', 'memory')),
        target_sid  INTEGER REFERENCES sessions(sid),
        target_seq  INTEGER,
        target_item TEXT,
        reason      TEXT    NOT NULL,
        actor       TEXT,
        created_ms  INTEGER NOT NULL,
        frame       BLOB    NOT NULL CHECK (length(frame) >= 40),
        CHECK ((target_kind = 'event') = (target_sid IS NOT NULL AND target_seq IS NOT NULL)),
        CHECK ((target_kind = 'memory') = (target_item IS NOT NULL))
    ) STRICT;
    CREATE UNIQUE INDEX tombstones_event ON tombstones(target_sid, target_seq)
        WHERE target_kind = 'event';
    CREATE UNIQUE INDEX tombstones_memory ON tombstones(target_item)
        WHERE target_kind = 'memory';

    -- the watermark of both logs: how many versions and tombstones were made
    -- (a version or tombstone deleted at the end is found against it)
    CREATE TABLE memory_head(
        one       INTEGER PRIMARY KEY CHECK (one = 1),
        last_mid  INTEGER NOT NULL CHECK (last_mid >= 0),
        last_tid  INTEGER NOT NULL CHECK (last_tid >= 0)
    ) STRICT;
    INSERT INTO memory_head VALUES (1, 0, 0);
    CREATE TRIGGER memories_advance_head AFTER INSERT ON memories
    BEGIN UPDATE memory_head SET last_mid = NEW.mid; END;
    CREATE TRIGGER tombstones_advance_head AFTER INSERT ON tombstones
    BEGIN UPDATE memory_head SET last_tid = NEW.tid; END;
    CREATE TRIGGER memory_head_forward BEFORE UPDATE ON memory_head
    WHEN NEW.one IS NOT 1
      OR NEW.last_mid IS NOT coalesce((SELECT max(mid) FROM memories), 0)
      OR NEW.last_tid IS NOT coalesce((SELECT max(tid) FROM tombstones), 0)
      OR NEW.last_mid < OLD.last_mid OR NEW.last_tid < OLD.last_tid
    BEGIN SELECT RAISE(ABORT, 'trajlog: the memory head only advances with its rows'); END;
    CREATE TRIGGER memory_head_no_delete BEFORE DELETE ON memory_head
    BEGIN SELECT RAISE(ABORT, 'trajlog: the memory head only advances with its rows'); END;
    CREATE TRIGGER memory_head_once BEFORE INSERT ON memory_head
    BEGIN SELECT RAISE(ABORT, 'trajlog: the memory head only advances with its rows'); END;

    CREATE TRIGGER memories_append BEFORE INSERT ON memories
    WHEN EXISTS (SELECT 1 FROM memories WHERE mid = NEW.mid)
      OR NEW.version IS NOT coalesce((SELECT max(version) FROM memories
                                      WHERE item_id = NEW.item_id), 0) + 1
      OR NEW.mid IS NOT coalesce((SELECT max(mid) FROM memories), 0) + 1
    BEGIN SELECT RAISE(ABORT, 'trajlog: a memory version is the item''s next one, made once');
    END;
    CREATE TRIGGER memories_blank_only BEFORE UPDATE ON memories
    WHEN NOT EXISTS (SELECT 1 FROM tombstones WHERE target_kind = 'memory'
                                                AND target_item = OLD.item_id)
      OR NEW.mid IS NOT OLD.mid OR NEW.item_id IS NOT OLD.item_id
      OR NEW.version IS NOT OLD.version OR NEW.tenant IS NOT OLD.tenant
      OR NEW.scope IS NOT OLD.scope OR NEW.scope_key IS NOT OLD.scope_key
      OR NEW.type IS NOT OLD.type OR NEW.state IS NOT OLD.state OR NEW.key IS NOT OLD.key
      OR NEW.digest IS NOT OLD.digest OR NEW.source_sid IS NOT OLD.source_sid
      OR NEW.source_seq IS NOT OLD.source_seq OR NEW.expires_ms IS NOT OLD.expires_ms
      OR NEW.until_event IS NOT OLD.until_event
      OR NEW.sensitivity IS NOT OLD.sensitivity OR NEW.created_ms IS NOT OLD.created_ms
      OR length(NEW.frame) IS NOT length(OLD.frame)
      OR substr(NEW.frame, 1, 40) IS NOT substr(OLD.frame, 1, 40)
      OR substr(NEW.frame, 41) IS NOT zeroblob(length(OLD.frame) - 40)
    BEGIN SELECT RAISE(ABORT, 'trajlog: memory versions are append-only (blanked if revoked)');
    END;
    CREATE TRIGGER memories_no_delete BEFORE DELETE ON memories
    BEGIN SELECT RAISE(ABORT, 'trajlog: memory versions are append-only'); END;

    CREATE TRIGGER tombstones_append BEFORE INSERT ON tombstones
    WHEN NEW.tid IS NOT coalesce((SELECT max(tid) FROM tombstones), 0) + 1
      OR EXISTS (SELECT 1 FROM tombstones WHERE tid = NEW.tid)
    BEGIN SELECT RAISE(ABORT, 'trajlog: tombstones are append-only'); END;
    CREATE TRIGGER tombstones_no_update BEFORE UPDATE ON tombstones
    BEGIN SELECT RAISE(ABORT, 'trajlog: tombstones are append-only'); END;
    CREATE TRIGGER tombstones_no_delete BEFORE DELETE ON tombstones
    BEGIN SELECT RAISE(ABORT, 'trajlog: tombstones are append-only'); END;

    DROP TRIGGER chunks_repack;
    CREATE TRIGGER chunks_repack BEFORE UPDATE ON chunks
    WHEN NOT (
        (NEW.cid IS OLD.cid AND NEW.n IS OLD.n AND NEW.raw_len IS OLD.raw_len
         AND NEW.seed_chain IS OLD.seed_chain AND NEW.last_chain IS OLD.last_chain
         AND NEW.marks IS OLD.marks
         AND EXISTS (SELECT 1 FROM tombstones
                     WHERE target_kind = 'event' AND target_sid = OLD.cid >> 32
                       AND target_seq BETWEEN OLD.cid & 4294967295
                                          AND (OLD.cid & 4294967295) + OLD.n - 1))
     OR (NEW.cid IS OLD.cid AND NEW.seed_chain IS OLD.seed_chain AND NEW.n > OLD.n
         AND EXISTS (SELECT 1 FROM chunks c
                     WHERE c.cid > OLD.cid AND c.cid <= ((OLD.cid >> 32) << 32) + 4294967295
                       AND c.last_seq = (OLD.cid & 4294967295) + NEW.n - 1
                       AND c.last_chain = NEW.last_chain)))
    BEGIN SELECT RAISE(ABORT, 'trajlog: a chunk changes only by a repack or an erasure'); END;

    CREATE VIRTUAL TABLE memory_fts USING fts5(
        text, tenant UNINDEXED, scope UNINDEXED, scope_key UNINDEXED, type UNINDEXED);
    INSERT INTO memory_fts(memory_fts, rank) VALUES ('secure-delete', 1);

    -- the erasure's free-page scrub: a blob of zeros over the free list, then gone
    CREATE TABLE scrub(b BLOB) STRICT;
"""

# The derived full-text index of active memory versions (rowid = mid).
MEMORY_FTS = """
    CREATE VIRTUAL TABLE memory_fts USING fts5(
        text, tenant UNINDEXED, scope UNINDEXED, scope_key UNINDEXED, type UNINDEXED);
    INSERT INTO memory_fts(memory_fts, rank) VALUES ('secure-delete', 1);
"""

# 7: what a fork's first write -- and the first write after a reopen -- needs
# to know of the log before it, found by index instead of by reading the log:
# call_index has one row per tool call id a session's own log requests (a
# fork may not request an id its prefix used; where the id's marks begin),
# and event_index_pauses finds the redaction pause in force at a seq (the
# pause events get index rows from schema 7 on: migrate.py adds those of the
# logs written before, and call_index's rows from the marks).
# What the triggers stop: any UPDATE or DELETE of a call row; the key, a
# second row for an id.  No insert trigger (measured: ~2 us a row, on every
# append that requests a tool call): a row forged by INSERT OR REPLACE or
# for another seq gets in, and is found where it matters -- a decision that
# rests on a call row checks it against the marks first, and verify()
# checks every row against the frames' requests and counts them.
V7 = """
    CREATE TABLE call_index(
        sid     INTEGER NOT NULL,
        call_id TEXT    NOT NULL,
        seq     INTEGER NOT NULL CHECK (seq >= 0),
        PRIMARY KEY (sid, call_id)
    ) STRICT, WITHOUT ROWID;
    CREATE INDEX event_index_pauses ON event_index(type, rid)
        WHERE type IN ('redaction/paused', 'redaction/resumed');
"""

V7_TRIGGERS = """
    CREATE TRIGGER call_index_no_update BEFORE UPDATE ON call_index
    BEGIN SELECT RAISE(ABORT, 'trajlog: call rows are append-only'); END;
    CREATE TRIGGER call_index_no_delete BEFORE DELETE ON call_index
    BEGIN SELECT RAISE(ABORT, 'trajlog: call rows are append-only'); END;
"""

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
GUARDED_PRAGMAS = {"secure_delete", "writable_schema", "journal_mode", "synchronous",
                   "recursive_triggers", "foreign_keys", "trusted_schema", "schema_version",
                   "user_version", "application_id", "cell_size_check",
                   "ignore_check_constraints", "locking_mode", "query_only",
                   "defer_foreign_keys"}
PROTECTED_TABLES = {"sqlite_master", "sqlite_schema", "sqlite_temp_master"}


def authorizer(action: int, p1: str | None, p2: str | None, dbname: str | None,
               trigger: str | None) -> int:
    """The authorizer of every write connection but the migration one (reader
    connections refuse the same by their open mode: :func:`.sqlite.open_connection`)."""
    if action in DENIED_ACTIONS:
        return apsw.SQLITE_DENY
    if action == apsw.SQLITE_PRAGMA and p1 is not None and p2 is not None and (
            p1.lower() in GUARDED_PRAGMAS):
        return apsw.SQLITE_DENY
    if action in (apsw.SQLITE_INSERT, apsw.SQLITE_UPDATE, apsw.SQLITE_DELETE) and (
            p1 or "").lower() in PROTECTED_TABLES:
        return apsw.SQLITE_DENY
    return apsw.SQLITE_OK


__all__ = [
    "APPLICATION_ID",
    "DENIED_ACTIONS",
    "GUARDED_PRAGMAS",
    "MEMORY_FTS",
    "MIGRATIONS",
    "MIN_SQLITE",
    "PROTECTED_TABLES",
    "SCHEMA_VERSION",
    "V4_ABANDON",
    "V4_FINISH",
    "V4_TABLES",
    "V5",
    "V6",
    "authorizer",
]
