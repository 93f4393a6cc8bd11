"""The PostgreSQL schema: tables, row-level security, and the triggers that
keep the log's guarantees in the database (whatever connects to it).

The tables mirror the SQLite schema's final shape (:mod:`.schema`), with
``tenant_id`` leading every key (row-level security, and ready for Citus
co-location by tenant).  Keys, chains and checks are ``bigint`` (u64 <-> i64
through :mod:`.keys`); frames, bodies and marks are ``bytea``, stored exactly
as the codec made them.

What the triggers stop (each raises SQLSTATE ``TL001``; tested from a raw
connection as the app role in ``tests/postgres/``):
  an UPDATE or DELETE of a session, an index row, a call row, a tombstone;
  a chunk that does not start at its head's next seq (a gap, an overlap);
  a head moved other than to the end of the chunk just appended, with that
  chunk's last chain; a head made twice or not at its session's seed; an
  UPDATE of a chunk other than a repack (the row grows over the rows after
  it, keeping its key and seed chain, to end where a stored row ends, with its
  chain) or an erasure (same row, frames and chains, a tombstone in it); a
  DELETE of a chunk that no earlier row of its session covers; an index row
  past the head or before its session's last chunk row; a memory version that
  is not its item's next or not the tenant's next id; an UPDATE of a version
  other than blanking a revoked item's payload; a tombstone that is not the
  tenant's next; a memory head that moves other than with its rows; TRUNCATE
  of every table that holds history.
Every function runs with the search path it was made with (the schema, then
``pg_temp``): a caller's own tables of the same names are never consulted.
Every trigger is order-free: PostgreSQL visits the rows of a multi-row
statement in heap order, not key order, so no check depends on which row of
the statement ran first (a repack's delete asks "does any earlier row of the
session reach past this one", not "does the row just before").

Privileges: the schema and its tables belong to the role that created them
(``trajlog migrate`` as the owner); the role ``trajlog_app`` (NOLOGIN; the
app's login roles are its members) gets exactly the DML the store runs, and
no UPDATE of a head's seq or chain (the append trigger moves it, as the
owner).  Row-level security is ENABLEd and FORCEd on every table of a tenant:
a row is visible and writable only when its ``tenant_id`` is the
transaction's ``trajlog.tenant`` setting.
"""

from __future__ import annotations

from . import postgres_deleted as deleted

PG_SCHEMA_VERSION = 1
APP_ROLE = "trajlog_app"
# tables whose rows are history: no TRUNCATE (derived tables may be emptied)
HISTORY = ("sessions", "session_heads", "chunks", "event_index", "call_index", "memories",
           "tombstones", "memory_head", "meta")
TENANT_TABLES = ("sessions", "session_heads", "chunks", "event_index", "call_index",
                 "projection_states", "memories", "tombstones", "memory_head", "memory_text",
                 "memory_text_state", "search_text", "search_marks")
TENANT = "tenant_id text NOT NULL DEFAULT current_setting('trajlog.tenant')"
REFUSE = "RAISE EXCEPTION USING ERRCODE = 'TL001', MESSAGE = "

TABLES = f"""
CREATE TABLE meta(
    one     integer PRIMARY KEY CHECK (one = 1),
    version integer NOT NULL
);
CREATE SEQUENCE sid_seq AS integer MINVALUE 1 MAXVALUE 2147483647 NO CYCLE;

CREATE TABLE sessions(
    {TENANT},
    sid              bigint  NOT NULL DEFAULT nextval('sid_seq')
                             CHECK (sid BETWEEN 1 AND 2147483647),
    id               text    NOT NULL CHECK (length(id) = 36),
    session_key      bigint  NOT NULL,
    created_ms       bigint  NOT NULL,
    cwd              text    NOT NULL,
    parent_sid       bigint,
    seed_length      bigint  NOT NULL DEFAULT 0 CHECK (seed_length >= 0),
    seed_chain       bigint  NOT NULL,
    origin           text    CHECK (origin IS NULL OR origin = 'subagent'),
    delegation_depth integer NOT NULL DEFAULT 0 CHECK (delegation_depth >= 0),
    agent_preset     text,
    metadata         bytea   NOT NULL,
    header_check     bigint  NOT NULL,
    PRIMARY KEY (tenant_id, sid),
    UNIQUE (tenant_id, id),
    FOREIGN KEY (tenant_id, parent_sid) REFERENCES sessions(tenant_id, sid),
    CHECK (seed_length = 0 OR parent_sid IS NOT NULL)
);

CREATE TABLE session_heads(
    {TENANT},
    sid                bigint NOT NULL,
    last_seq           bigint NOT NULL CHECK (last_seq >= -1),
    chain_head         bigint NOT NULL,
    lease_owner        text,
    lease_host         text,
    lease_pid          bigint,
    lease_started_ms   bigint,
    lease_heartbeat_ms bigint,
    PRIMARY KEY (tenant_id, sid),
    FOREIGN KEY (tenant_id, sid) REFERENCES sessions(tenant_id, sid)
);

CREATE TABLE chunks(
    {TENANT},
    cid        bigint   NOT NULL CHECK (cid >= 4294967296),  -- (sid << 32) + first_seq
    n          bigint   NOT NULL CHECK (n >= 1),
    raw_len    bigint   NOT NULL CHECK (raw_len >= 40),
    codec      smallint NOT NULL CHECK (codec IN (0, 1)),
    body_check bigint   NOT NULL,
    seed_chain bigint   NOT NULL,
    last_chain bigint   NOT NULL,
    body       bytea    NOT NULL,
    marks      bytea,
    last_seq   bigint   GENERATED ALWAYS AS ((cid & 4294967295) + n - 1) STORED,
    PRIMARY KEY (tenant_id, cid)
);
-- (bodies are compressed by the codec already: no second compression)
ALTER TABLE chunks ALTER COLUMN body SET STORAGE EXTERNAL;

CREATE TABLE event_index(
    {TENANT},
    rid                bigint NOT NULL CHECK (rid >= 4294967296),  -- (sid << 32) + seq
    type               text   NOT NULL,
    time_ms            bigint NOT NULL,
    source             text,
    causal_parent      bigint,
    workspace_revision text,
    data_class         text,
    idempotency_key    text,
    PRIMARY KEY (tenant_id, rid)
);
CREATE UNIQUE INDEX event_index_idempotency ON event_index(tenant_id, (rid >> 32), idempotency_key)
    WHERE idempotency_key IS NOT NULL;
CREATE INDEX event_index_markers ON event_index(tenant_id, type, rid)
    WHERE type IN ('turn/start', 'turn/end', 'sandbox/mode', 'redaction/paused',
                   'redaction/resumed');

CREATE TABLE call_index(
    {TENANT},
    sid     bigint NOT NULL,
    call_id text   NOT NULL,
    seq     bigint NOT NULL CHECK (seq >= 0),
    PRIMARY KEY (tenant_id, sid, call_id)
);

CREATE TABLE projection_states(
    {TENANT},
    sid     bigint NOT NULL,
    name    text   NOT NULL,
    version bigint NOT NULL,
    seq     bigint NOT NULL,
    chain   bigint NOT NULL,
    state   bytea  NOT NULL,
    PRIMARY KEY (tenant_id, sid, name, version),
    FOREIGN KEY (tenant_id, sid) REFERENCES sessions(tenant_id, sid)
);

CREATE TABLE memories(
    {TENANT},
    mid         bigint NOT NULL CHECK (mid >= 1),
    item_id     text   NOT NULL CHECK (length(item_id) = 36),
    version     bigint NOT NULL CHECK (version >= 1),
    tenant      text   NOT NULL,
    scope       text   NOT NULL CHECK (scope IN ('global', 'tenant', 'user', 'session')),
    scope_key   text   NOT NULL,
    type        text   NOT NULL
                CHECK (type IN ('policy', 'preference', 'fact', 'episode', 'trajectory')),
    state       text   NOT NULL
                CHECK (state IN ('provisional', 'active', 'quarantined', 'revoked')),
    key         text,
    digest      bytea  NOT NULL CHECK (length(digest) = 32),
    source_sid  bigint,
    source_seq  bigint,
    expires_ms  bigint,
    until_event text,
    sensitivity text   NOT NULL,
    created_ms  bigint NOT NULL,
    frame       bytea  NOT NULL CHECK (length(frame) >= 40),
    PRIMARY KEY (tenant_id, mid),
    UNIQUE (tenant_id, item_id, version),
    FOREIGN KEY (tenant_id, source_sid) REFERENCES sessions(tenant_id, sid)
);
CREATE INDEX memories_scope ON memories(tenant_id, tenant, scope, scope_key, type, state);
CREATE INDEX memories_merge ON memories(tenant_id, digest);
CREATE INDEX memories_key ON memories(tenant_id, tenant, key) WHERE key IS NOT NULL;
CREATE INDEX memories_expiry ON memories(tenant_id, expires_ms) WHERE expires_ms IS NOT NULL;
CREATE INDEX memories_until ON memories(tenant_id, until_event) WHERE until_event IS NOT NULL;

CREATE TABLE tombstones(
    {TENANT},
    tid         bigint NOT NULL CHECK (tid >= 1),
    target_kind text   NOT NULL CHECK (target_kind IN ('event', 'memory')),
    target_sid  bigint,
    target_seq  bigint,
    target_item text,
    reason      text   NOT NULL,
    actor       text,
    created_ms  bigint NOT NULL,
    frame       bytea  NOT NULL CHECK (length(frame) >= 40),
    PRIMARY KEY (tenant_id, tid),
    FOREIGN KEY (tenant_id, target_sid) REFERENCES sessions(tenant_id, sid),
    CHECK ((target_kind = 'event') = (target_sid IS NOT NULL AND target_seq IS NOT NULL)),
    CHECK ((target_kind = 'memory') = (target_item IS NOT NULL))
);
CREATE UNIQUE INDEX tombstones_event ON tombstones(tenant_id, target_sid, target_seq)
    WHERE target_kind = 'event';
CREATE UNIQUE INDEX tombstones_memory ON tombstones(tenant_id, target_item)
    WHERE target_kind = 'memory';

-- the watermark of a tenant's memory logs (made at its first memory write;
-- its row lock reserves the next ids until the transaction ends)
CREATE TABLE memory_head(
    {TENANT},
    last_mid bigint NOT NULL CHECK (last_mid >= 0),
    last_tid bigint NOT NULL CHECK (last_tid >= 0),
    PRIMARY KEY (tenant_id)
);

-- the derived full-text index of active memory versions (always there;
-- memory_text_state says whether it is in use)
CREATE TABLE memory_text(
    {TENANT},
    mid       bigint   NOT NULL,
    tenant    text     NOT NULL,
    scope     text     NOT NULL,
    scope_key text     NOT NULL,
    type      text     NOT NULL,
    tsv       tsvector NOT NULL,
    PRIMARY KEY (tenant_id, mid)
);
CREATE INDEX memory_text_tsv ON memory_text USING gin (tsv);
CREATE TABLE memory_text_state(
    {TENANT},
    present boolean NOT NULL,
    PRIMARY KEY (tenant_id)
);
"""

# The derived event search index (derived: rows deleted at will, so no
# append-only trigger): a document per indexed event (body: the text a
# snippet is cut from) and, per session, the last seq indexed.
SEARCH = f"""
CREATE TABLE search_text(
    {TENANT},
    sid        bigint   NOT NULL,
    seq        bigint   NOT NULL,
    ms         bigint   NOT NULL,
    type       text     NOT NULL,
    branch     text,
    data_class text,
    tenant     text,
    "user"     text,
    body       text     NOT NULL,
    tsv        tsvector NOT NULL,
    PRIMARY KEY (tenant_id, sid, seq)
);
CREATE INDEX search_text_tsv ON search_text USING gin (tsv);
CREATE TABLE search_marks(
    {TENANT},
    sid bigint NOT NULL,
    seq bigint NOT NULL,
    PRIMARY KEY (tenant_id, sid)
);
"""

# Trigger functions.  Each filters on NEW/OLD.tenant_id itself (a superuser
# bypasses row-level security; the checks must not depend on it).
FUNCTIONS = f"""
CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    {REFUSE} 'trajlog: ' || TG_ARGV[0];
END $$;

CREATE FUNCTION chunks_append() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
DECLARE head bigint;
BEGIN
    SELECT last_seq INTO head FROM session_heads
     WHERE tenant_id = NEW.tenant_id AND sid = NEW.cid >> 32;
    IF head IS NULL OR (NEW.cid & 4294967295) <> head + 1 THEN
        {REFUSE} 'trajlog: a chunk starts at its head''s next seq';
    END IF;
    RETURN NEW;
END $$;

-- (as the owner: the app role may not move a head itself)
CREATE FUNCTION chunks_advance_head() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER
SET search_path FROM CURRENT AS $$
BEGIN
    UPDATE session_heads SET last_seq = NEW.last_seq, chain_head = NEW.last_chain
     WHERE tenant_id = NEW.tenant_id AND sid = NEW.cid >> 32;
    IF NOT FOUND THEN
        {REFUSE} 'trajlog: a chunk starts at its head''s next seq';
    END IF;
    RETURN NULL;
END $$;

CREATE FUNCTION chunks_change() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
DECLARE first bigint := OLD.cid & 4294967295;
BEGIN
    IF NEW.tenant_id = OLD.tenant_id AND NEW.cid = OLD.cid
       AND NEW.seed_chain = OLD.seed_chain AND (
         -- an erasure: same row, frames and chains, a tombstone inside it
         (NEW.n = OLD.n AND NEW.raw_len = OLD.raw_len AND NEW.last_chain = OLD.last_chain
          AND NEW.marks IS NOT DISTINCT FROM OLD.marks
          AND EXISTS (SELECT 1 FROM tombstones
                       WHERE tenant_id = OLD.tenant_id AND target_kind = 'event'
                         AND target_sid = OLD.cid >> 32
                         AND target_seq BETWEEN first AND first + OLD.n - 1))
         -- a repack: the row grows to end where a stored row ends, with its chain
      OR (NEW.n > OLD.n
          AND EXISTS (SELECT 1 FROM chunks c
                       WHERE c.tenant_id = OLD.tenant_id AND c.cid > OLD.cid
                         AND c.cid <= ((OLD.cid >> 32) << 32) + 4294967295
                         AND c.last_seq = first + NEW.n - 1
                         AND c.last_chain = NEW.last_chain))) THEN
        RETURN NEW;
    END IF;
    {REFUSE} 'trajlog: a chunk changes only by a repack or an erasure';
END $$;

-- order-free: any earlier row of the session that reaches this row's end
CREATE FUNCTION chunks_covered_delete() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM chunks c
                WHERE c.tenant_id = OLD.tenant_id AND c.cid < OLD.cid
                  AND c.cid >= (OLD.cid >> 32) << 32 AND c.last_seq >= OLD.last_seq) THEN
        RETURN OLD;
    END IF;
    {REFUSE} 'trajlog: a chunk row goes only when a repacked row holds it';
END $$;

CREATE FUNCTION event_index_append() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
DECLARE head bigint; top bigint; s bigint := NEW.rid >> 32;
BEGIN
    SELECT last_seq INTO head FROM session_heads WHERE tenant_id = NEW.tenant_id AND sid = s;
    SELECT max(cid) INTO top FROM chunks
     WHERE tenant_id = NEW.tenant_id AND cid BETWEEN s << 32 AND (s << 32) + 4294967295;
    IF head IS NULL OR (NEW.rid & 4294967295) > head OR top IS NULL OR NEW.rid < top THEN
        {REFUSE} 'trajlog: index rows are appended with their events';
    END IF;
    RETURN NEW;
END $$;

CREATE FUNCTION heads_insert() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM sessions WHERE tenant_id = NEW.tenant_id AND sid = NEW.sid
                                             AND seed_length - 1 = NEW.last_seq
                                             AND seed_chain = NEW.chain_head) THEN
        {REFUSE} 'trajlog: a head is made once, at its session''s seed';
    END IF;
    RETURN NEW;
END $$;

CREATE FUNCTION heads_change() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    IF NEW.tenant_id <> OLD.tenant_id OR NEW.sid <> OLD.sid THEN
        {REFUSE} 'trajlog: heads are permanent';
    END IF;
    IF (NEW.last_seq, NEW.chain_head) IS DISTINCT FROM (OLD.last_seq, OLD.chain_head) AND (
         NEW.last_seq <= OLD.last_seq
         OR NOT EXISTS (SELECT 1 FROM chunks
                         WHERE tenant_id = NEW.tenant_id
                           AND cid = (NEW.sid << 32) + OLD.last_seq + 1
                           AND last_seq = NEW.last_seq AND last_chain = NEW.chain_head)) THEN
        {REFUSE} 'trajlog: a head only advances with its log';
    END IF;
    RETURN NEW;
END $$;

CREATE FUNCTION memories_append() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    IF NEW.version <> coalesce((SELECT max(version) FROM memories
                                 WHERE tenant_id = NEW.tenant_id AND item_id = NEW.item_id), 0) + 1
       OR NEW.mid <> coalesce((SELECT max(mid) FROM memories
                                WHERE tenant_id = NEW.tenant_id), 0) + 1 THEN
        {REFUSE} 'trajlog: a memory version is the item''s next one, made once';
    END IF;
    RETURN NEW;
END $$;

CREATE FUNCTION tombstones_append() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    IF NEW.tid <> coalesce((SELECT max(tid) FROM tombstones
                             WHERE tenant_id = NEW.tenant_id), 0) + 1 THEN
        {REFUSE} 'trajlog: tombstones are append-only';
    END IF;
    RETURN NEW;
END $$;

CREATE FUNCTION memory_head_advance() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    INSERT INTO memory_head(tenant_id, last_mid, last_tid) VALUES (NEW.tenant_id, 0, 0)
        ON CONFLICT DO NOTHING;
    IF TG_TABLE_NAME = 'memories' THEN
        UPDATE memory_head SET last_mid = NEW.mid WHERE tenant_id = NEW.tenant_id;
    ELSE
        UPDATE memory_head SET last_tid = NEW.tid WHERE tenant_id = NEW.tenant_id;
    END IF;
    RETURN NULL;
END $$;

CREATE FUNCTION memory_head_insert() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    IF NEW.last_mid <> 0 OR NEW.last_tid <> 0 THEN
        {REFUSE} 'trajlog: the memory head only advances with its rows';
    END IF;
    RETURN NEW;
END $$;

CREATE FUNCTION memory_head_change() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    IF NEW.tenant_id <> OLD.tenant_id OR NEW.last_mid < OLD.last_mid
       OR NEW.last_tid < OLD.last_tid
       OR NEW.last_mid <> coalesce((SELECT max(mid) FROM memories
                                     WHERE tenant_id = NEW.tenant_id), 0)
       OR NEW.last_tid <> coalesce((SELECT max(tid) FROM tombstones
                                     WHERE tenant_id = NEW.tenant_id), 0) THEN
        {REFUSE} 'trajlog: the memory head only advances with its rows';
    END IF;
    RETURN NEW;
END $$;

CREATE FUNCTION memories_blank_only() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM tombstones WHERE tenant_id = OLD.tenant_id
                                           AND target_kind = 'memory'
                                           AND target_item = OLD.item_id)
       AND (NEW.tenant_id, NEW.mid, NEW.item_id, NEW.version, NEW.tenant, NEW.scope,
            NEW.scope_key, NEW.type, NEW.state, NEW.key, NEW.digest, NEW.source_sid,
            NEW.source_seq, NEW.expires_ms, NEW.until_event, NEW.sensitivity, NEW.created_ms)
           IS NOT DISTINCT FROM
           (OLD.tenant_id, OLD.mid, OLD.item_id, OLD.version, OLD.tenant, OLD.scope,
            OLD.scope_key, OLD.type, OLD.state, OLD.key, OLD.digest, OLD.source_sid,
            OLD.source_seq, OLD.expires_ms, OLD.until_event, OLD.sensitivity, OLD.created_ms)
       AND length(NEW.frame) = length(OLD.frame)
       AND substr(NEW.frame, 1, 40) = substr(OLD.frame, 1, 40)
       AND substr(NEW.frame, 41) = decode(repeat('00', length(OLD.frame) - 40), 'hex') THEN
        RETURN NEW;
    END IF;
    {REFUSE} 'trajlog: memory versions are append-only (blanked if revoked)';
END $$;
"""


def _trigger(name: str, when: str, table: str, fn: str, level: str = "ROW") -> str:
    return f"CREATE TRIGGER {name} {when} ON {table} FOR EACH {level} EXECUTE FUNCTION {fn};\n"


TRIGGERS = "".join([
    _trigger("chunks_append", "BEFORE INSERT", "chunks", "chunks_append()"),
    _trigger("chunks_advance_head", "AFTER INSERT", "chunks", "chunks_advance_head()"),
    _trigger("chunks_change", "BEFORE UPDATE", "chunks", "chunks_change()"),
    _trigger("chunks_delete", "BEFORE DELETE", "chunks", "chunks_covered_delete()"),
    _trigger("event_index_append", "BEFORE INSERT", "event_index", "event_index_append()"),
    _trigger("event_index_fixed", "BEFORE UPDATE OR DELETE", "event_index",
             "refuse('index rows are append-only')"),
    _trigger("call_index_fixed", "BEFORE UPDATE OR DELETE", "call_index",
             "refuse('call rows are append-only')"),
    _trigger("sessions_fixed", "BEFORE UPDATE OR DELETE", "sessions",
             "refuse('session headers are immutable')"),
    _trigger("heads_insert", "BEFORE INSERT", "session_heads", "heads_insert()"),
    _trigger("heads_change", "BEFORE UPDATE", "session_heads", "heads_change()"),
    _trigger("heads_no_delete", "BEFORE DELETE", "session_heads",
             "refuse('heads are permanent')"),
    _trigger("memories_append", "BEFORE INSERT", "memories", "memories_append()"),
    _trigger("memories_advance_head", "AFTER INSERT", "memories", "memory_head_advance()"),
    _trigger("memories_blank_only", "BEFORE UPDATE", "memories", "memories_blank_only()"),
    _trigger("memories_no_delete", "BEFORE DELETE", "memories",
             "refuse('memory versions are append-only')"),
    _trigger("tombstones_append", "BEFORE INSERT", "tombstones", "tombstones_append()"),
    _trigger("tombstones_advance_head", "AFTER INSERT", "tombstones", "memory_head_advance()"),
    _trigger("tombstones_fixed", "BEFORE UPDATE OR DELETE", "tombstones",
             "refuse('tombstones are append-only')"),
    _trigger("memory_head_insert", "BEFORE INSERT", "memory_head", "memory_head_insert()"),
    _trigger("memory_head_change", "BEFORE UPDATE", "memory_head", "memory_head_change()"),
    _trigger("memory_head_no_delete", "BEFORE DELETE", "memory_head",
             "refuse('the memory head only advances with its rows')"),
    _trigger("meta_fixed", "BEFORE UPDATE OR DELETE", "meta",
             "refuse('the schema version is set by a migration')"),
    *(_trigger(f"{t}_no_truncate", "BEFORE TRUNCATE", t, f"refuse('{t} is append-only')",
               "STATEMENT") for t in HISTORY),
])

POLICIES = "".join(
    f"ALTER TABLE {t} ENABLE ROW LEVEL SECURITY;\n"
    f"ALTER TABLE {t} FORCE ROW LEVEL SECURITY;\n"
    f"CREATE POLICY tenant_rows ON {t} "
    "USING (tenant_id = current_setting('trajlog.tenant', true)) "
    "WITH CHECK (tenant_id = current_setting('trajlog.tenant', true));\n"
    for t in TENANT_TABLES)

# What the app role may do: exactly the DML the store runs, every change
# guarded by the triggers above (no UPDATE of a head's seq or chain at all).
GRANTS = f"""
GRANT USAGE ON SCHEMA {{schema}} TO {APP_ROLE};
GRANT SELECT ON ALL TABLES IN SCHEMA {{schema}} TO {APP_ROLE};
GRANT USAGE ON SEQUENCE sid_seq TO {APP_ROLE};
GRANT INSERT ON sessions, session_heads, chunks, event_index, call_index, projection_states,
    memories, tombstones, memory_head, memory_text, memory_text_state TO {APP_ROLE};
GRANT UPDATE (lease_owner, lease_host, lease_pid, lease_started_ms, lease_heartbeat_ms)
    ON session_heads TO {APP_ROLE};
GRANT UPDATE (n, raw_len, codec, body_check, last_chain, body, marks), DELETE ON chunks
    TO {APP_ROLE};
GRANT UPDATE (frame) ON memories TO {APP_ROLE};
GRANT UPDATE (last_mid, last_tid) ON memory_head TO {APP_ROLE};
GRANT UPDATE (present) ON memory_text_state TO {APP_ROLE};
GRANT DELETE ON projection_states, memory_text TO {APP_ROLE};
GRANT INSERT, DELETE ON search_text, search_marks TO {APP_ROLE};
GRANT UPDATE (seq) ON search_marks TO {APP_ROLE};
"""


def ident(name: str) -> str:
    """``name`` as a quoted SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


def ddl() -> str:
    """The whole schema's statements (run with ``search_path`` set to the
    schema, which the caller made)."""
    return "\n".join([TABLES, SEARCH, FUNCTIONS, TRIGGERS, POLICIES, deleted.DDL,
                      f"INSERT INTO meta VALUES (1, {PG_SCHEMA_VERSION});"])


def grants(schema: str) -> str:
    """The app role's privileges on ``schema``'s tables."""
    return (GRANTS.replace("{schema}", ident(schema))
            + deleted.GRANTS.replace("{role}", APP_ROLE))


__all__ = ["APP_ROLE", "HISTORY", "PG_SCHEMA_VERSION", "TENANT_TABLES", "ddl", "grants", "ident"]
