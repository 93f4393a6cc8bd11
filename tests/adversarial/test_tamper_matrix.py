"""The tamper matrix (matrix_kit.py): every UPDATE / DELETE / REPLACE /
upsert / DROP / ALTER of every table, head moves, swapped and relabelled
rows, dropped index rows -- each run from a plain connection with SQLite's
defaults, with triggers switched off, or with writable_schema -- against its
expected outcome: refused by a trigger, refused at open, found by verify()
(session, seq and offset; every read raises rather than hides), or harmless.

No row may hide acknowledged events or accept corruption.  A failing row is
a defect of the store, not of the test: it is left failing, never xfailed.
``python tests/adversarial/matrix.py`` prints the whole table.
"""

from __future__ import annotations

import apsw
import pytest
from matrix_kit import (
    APSW,
    HARMLESS,
    INDEXES,
    MODE_TEXT,
    OUTCOMES,
    ROWS,
    TRIGGERS,
    Case,
    Row,
    Template,
    build_template,
    run_row,
)

import trajlog

SQLITE_APSW = "tampers with the store through an apsw connection of its own"
pytestmark = pytest.mark.sqlite_only(reason=SQLITE_APSW)


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Template:
    """The store every row copies, built once."""
    return build_template(str(tmp_path_factory.mktemp("matrix") / "template.db"))


@pytest.mark.parametrize("row", ROWS, ids=[r.id for r in ROWS])
def test_tamper_matrix(row: Row, template: Template, tmp_path) -> None:
    result = run_row(row, template, tmp_path)
    assert result.actual == row.expected, (
        f"{row.case.table}: {row.case.name} ({MODE_TEXT[row.mode]}): expected "
        f"{row.expected}, got {result.actual} -- {result.detail}")


def test_tamper_matrix_template_is_sound(template: Template, tmp_path) -> None:
    """The copy of an untouched template passes every check (so that every
    other row measures its mutation, not the fixture)."""
    untouched = Row(Case("-", "nothing", lambda db, t: None, {APSW: HARMLESS}), APSW)
    result = run_row(untouched, template, tmp_path)
    assert (result.actual, result.detail) == (HARMLESS, "nothing changed")
    with trajlog.open(template.path, repack=False) as store:
        kinds = {c.codec for rows in template.rows.values() for c in rows}
        assert kinds == {0, 1}, "single appends stored raw, batches and repacks compressed"
        assert max(c.n for c in template.rows["P"]) > 20, "a repacked row"
        assert store.session(template.id["F"]).header.seed_length == template.fork_seed == 8
        assert store.session(template.id["S"]).header.origin == "subagent"


def test_tamper_matrix_covers_the_schema(template: Template) -> None:
    """Every trigger and index of the schema has its rows, every table its
    cases, and every expected outcome is one of the five."""
    conn = apsw.Connection(template.path, flags=apsw.SQLITE_OPEN_READONLY)
    try:
        schema = conn.execute("SELECT type, name FROM sqlite_schema WHERE name NOT LIKE "
                              "'sqlite_%'").fetchall()
    finally:
        conn.close()
    assert sorted(n for t, n in schema if t == "trigger") == sorted(TRIGGERS)
    assert sorted(n for t, n in schema if t == "index") == sorted(INDEXES)
    tables = {n for t, n in schema if t == "table"} | {"sqlite_schema"}
    assert tables == {r.case.table for r in ROWS}
    assert {r.expected for r in ROWS} <= set(OUTCOMES)
    assert len({r.id for r in ROWS}) == len(ROWS)
