"""The backend factory: what a location names, redaction, and the refusals
that come before any backend opens."""

from __future__ import annotations

import pytest

import trajlog
from trajlog.errors import InvalidArgumentError
from trajlog.storage.factory import exists, is_server, kind, redact, schema_version_of
from trajlog.storage.schema import SCHEMA_VERSION

SQLITE_FACTORY = "checks what the factory opens for a file: the SQLite backend, the file's size"


@pytest.mark.parametrize(("location", "shown"), [
    ("postgresql://app:s3cret@db1:5432,db2:5432/agents?sslmode=require",
     "postgresql://app:***@db1:5432,db2:5432/agents?sslmode=require"),
    ("postgres://app:p%40ss@localhost/db", "postgres://app:***@localhost/db"),
    ("postgresql://localhost/db?user=app&password=s3cret&sslmode=disable",
     "postgresql://localhost/db?user=app&password=***&sslmode=disable"),
    ("postgresql://app@localhost/db", "postgresql://app@localhost/db"),
    ("/var/lib/agents/trajlog.db", "/var/lib/agents/trajlog.db"),
])
def test_a_location_prints_without_its_password(location, shown):
    assert redact(location) == shown
    assert "s3cret" not in redact(location)


def test_schemes_name_the_backend(tmp_path):
    assert is_server("postgresql://h/db") and is_server("POSTGRES://h/db")
    assert not is_server(str(tmp_path / "postgresql.db"))
    assert kind(str(tmp_path / "x.db")) == ("sqlite", SCHEMA_VERSION)
    assert exists("postgresql://h/db") and not exists(str(tmp_path / "none.db"))


def test_tenant_is_refused_on_a_file(tmp_path):
    with pytest.raises(InvalidArgumentError, match="tenant"):
        trajlog.open(str(tmp_path / "s.db"), tenant="acme")
    assert not (tmp_path / "s.db").exists()   # refused before anything was made


@pytest.mark.sqlite_only(reason=SQLITE_FACTORY)
def test_lock_timeout_and_its_former_name(tmp_path):
    path = str(tmp_path / "s.db")
    with trajlog.open(path, lock_timeout_ms=1234) as st:
        assert st._e.backend._busy == 1234
    with trajlog.open(path, busy_timeout_ms=4321) as st:
        assert st._e.backend._busy == 4321
    with pytest.raises(InvalidArgumentError, match="lock_timeout_ms"):
        trajlog.open(path, lock_timeout_ms=-1)


@pytest.mark.sqlite_only(reason=SQLITE_FACTORY)
def test_size_and_schema_come_from_the_backend(tmp_path):
    path = str(tmp_path / "s.db")
    with trajlog.open(path) as st:
        st.create_session().append("note", {"x": "y" * 5000})
        size = st._e.backend.size()
        assert size == sum(p.stat().st_size for p in tmp_path.iterdir())
        assert st.stats().file_bytes == size
    assert schema_version_of(path) == SCHEMA_VERSION
