"""Who owns a scope, and what a merge may merge.

* A session scope belongs to its session: an identity names it only if the
  session exists and its header's tenant and user (metadata ``tenant`` and
  ``user``, inherited by forks and subagents) are the identity's.  Another
  user of the same tenant naming that session id gets MemoryAccessError, for
  every path (get, search, list, find, writes, state changes) -- the view is
  refused before any of them.  A user scope is the tenant's user: the same
  user name in another tenant sees nothing of it.
* A merge (the same content written again returns the first item) includes
  the key: the same content under another key is another item, so ``find``
  finds it and a later contradiction under that key is quarantined.  The same
  holds for a promotion and a deployed global item.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import trajlog
from trajlog import Identity
from trajlog.errors import MemoryAccessError

PLANNED = "0b7c1f7e-5d2a-4c1b-9f3e-2a6d8e4b1c90"


@pytest.fixture
def store(tmp_path: Path) -> Any:
    with trajlog.open(str(tmp_path / "scope.db")) as st:
        yield st


@pytest.fixture
def alices(store: Any) -> Any:
    """alice's session (her tenant and user in its header), with a session item."""
    s = store.create_session(cwd="/repo", metadata={"tenant": "acme", "user": "alice"})
    s.append("user/message", {"content": "my api host is internal.acme"})
    mem = store.memory(Identity("acme", user="alice", session=s.id))
    item = mem.remember("session", "fact", {"text": "api host internal acme"}, key="api_host",
                        source=(s.id, 0))
    assert item is not None
    return s, item


# -- 18: a session scope is its owner's ---------------------------------------------------

@pytest.mark.parametrize("who", [
    Identity("acme", user="bob"),          # another user of the same tenant
    Identity("acme"),                       # the tenant without a user
    Identity("globex", user="alice"),      # alice's name in another tenant
])
def test_an_identity_that_does_not_own_the_session_cannot_use_its_scope(
        store: Any, alices: Any, who: Identity) -> None:
    s, item = alices
    intruder = Identity(who.tenant, user=who.user, session=s.id)
    with pytest.raises(MemoryAccessError, match="session"):
        store.memory(intruder)
    # the owner still sees it, through every read
    mem = store.memory(Identity("acme", user="alice", session=s.id))
    assert mem.get(item.id).content == {"text": "api host internal acme"}
    assert [i.id for i in mem.search("internal")] == [item.id]
    assert mem.find("session", "api_host") is not None


def test_a_session_the_store_does_not_hold_lends_no_scope(store: Any) -> None:
    """No planting items under a session id before its session exists (an
    explicit session_id could then adopt them)."""
    with pytest.raises(MemoryAccessError, match="does not hold"):
        store.memory(Identity("acme", user="bob", session=PLANNED))
    s = store.create_session(session_id=PLANNED,
                             metadata={"tenant": "acme", "user": "alice"})
    assert store.memory(Identity("acme", user="alice", session=s.id)).list() == []


def test_forks_and_subagents_belong_to_the_same_owner(store: Any, alices: Any) -> None:
    s, _ = alices
    child = s.fork(0)
    assert store.memory(Identity("acme", user="alice", session=child.id)).list() == []
    with pytest.raises(MemoryAccessError):
        store.memory(Identity("acme", user="bob", session=child.id))


def test_a_header_naming_only_its_tenant_is_the_tenants(store: Any) -> None:
    s = store.create_session(metadata={"tenant": "acme"})
    store.memory(Identity("acme", user="bob", session=s.id)).remember(
        "session", "fact", {"text": "shared within acme"})
    assert len(store.memory(Identity("acme", user="alice", session=s.id)).list()) == 1
    with pytest.raises(MemoryAccessError):
        store.memory(Identity("globex", user="bob", session=s.id))


def test_a_session_header_naming_nobody_is_unowned(store: Any) -> None:
    """A session created without a tenant or user claims nobody: any identity
    may name it (its items stay within each identity's own tenant)."""
    s = store.create_session()
    store.memory(Identity("acme", user="alice", session=s.id)).remember(
        "session", "fact", {"text": "acme side"})
    assert store.memory(Identity("globex", user="bob", session=s.id)).search("acme") == []


def test_a_user_scope_is_the_tenants_user_not_the_name(store: Any) -> None:
    """Sibling: user scope is keyed by (tenant, user); the same user name in
    another tenant sees nothing of it -- by list, search, key or id."""
    acme = store.memory(Identity("acme", user="alice"))
    item = acme.remember("user", "preference", {"value": "pytest"}, key="runner")
    globex = store.memory(Identity("globex", user="alice"))
    assert globex.list() == [] and globex.search("pytest") == []
    assert globex.find("user", "runner") is None
    with pytest.raises(MemoryAccessError):
        globex.get(item.id)
    with pytest.raises(MemoryAccessError):
        globex.revoke(item.id, reason="not mine")
    with pytest.raises(MemoryAccessError):
        globex.correct(item.id, {"value": "nose"}, reason="not mine")


# -- 21: the merge identity includes the key ---------------------------------------------

def test_the_same_content_under_another_key_is_another_item(store: Any) -> None:
    mem = store.memory(Identity("acme", user="alice"))
    j = mem.remember("user", "preference", {"value": "dark"}, key="theme")
    k = mem.remember("user", "preference", {"value": "dark"}, key="editor_theme")
    assert j is not None and k is not None
    assert k.id != j.id and k.key == "editor_theme"
    found = mem.find("user", "editor_theme")
    assert found is not None and found.id == k.id
    # a later contradiction under K is quarantined, naming K's item
    late = mem.remember("user", "preference", {"value": "light"}, key="editor_theme")
    assert late is not None and late.state == "quarantined" and late.conflicts_with == (k.id,)
    # the same content under the same key still merges; under no key is its own item
    again = mem.remember("user", "preference", {"value": "dark"}, key="editor_theme")
    assert again is not None and again.id == k.id
    bare = mem.remember("user", "preference", {"value": "dark"})
    assert bare is not None and bare.id not in (j.id, k.id) and bare.key is None
    assert mem.remember("user", "preference", {"value": "dark"}).id == bare.id


def test_remember_many_keeps_each_key(store: Any) -> None:
    mem = store.memory(Identity("acme", user="alice"))
    a, b = mem.remember_many([
        {"scope": "user", "type": "fact", "content": {"text": "x"}, "key": "a"},
        {"scope": "user", "type": "fact", "content": {"text": "x"}, "key": "b"}])
    assert a is not None and b is not None and a.id != b.id
    assert [i.key for i in mem.list()] == ["a", "b"]


def test_a_promotion_keeps_its_key(store: Any) -> None:
    """Sibling: a promoted item whose content the target scope holds under
    another key is a new item under its own key."""
    s = store.create_session(metadata={"tenant": "acme", "user": "alice"})
    mem = store.memory(Identity("acme", user="alice", session=s.id))
    held = mem.remember("user", "fact", {"text": "ci runs linux"}, key="ci_os")
    local = mem.remember("session", "fact", {"text": "ci runs linux"}, key="build_os")
    assert held is not None and local is not None
    up = mem.promote(local.id, to="user")
    assert up.id != held.id and up.key == "build_os"
    found = mem.find("user", "build_os")
    assert found is not None and found.id == up.id
    assert mem.promote(local.id, to="user").id == up.id   # still idempotent


def test_a_deployed_global_item_keeps_its_key(store: Any) -> None:
    """Sibling: deploy_global merges on (content, type, key)."""
    a = store.deploy_global("policy", {"text": "no force push"}, key="git", actor="ops")
    b = store.deploy_global("policy", {"text": "no force push"}, key="vcs", actor="ops")
    assert a != b
    assert store.deploy_global("policy", {"text": "no force push"}, key="vcs",
                               actor="ops") == b
    mem = store.memory(Identity("acme"))
    found = mem.find("global", "vcs")
    assert found is not None and found.id == b


def test_put_of_a_new_key_with_a_held_value_stores_that_key(store: Any) -> None:
    """Sibling: the key-value path (LangGraph's store maps onto it) -- a put
    of a new key whose value another key holds is found under its key."""
    mem = store.memory(Identity("acme", user="alice"))
    a = mem.put("user", "fact", "ns/a", {"v": 1})
    b = mem.put("user", "fact", "ns/b", {"v": 1})
    assert a is not None and b is not None and a.id != b.id
    assert mem.keys("user", "ns/") == ["ns/a", "ns/b"]
    found = mem.find("user", "ns/b")
    assert found is not None and found.content == {"v": 1}


def test_a_correction_out_of_quarantine_quarantines_what_it_contradicted(store: Any) -> None:
    """correct() is a way out of quarantine, like restore(): the active item the quarantined
    one contradicted is quarantined in turn, so one key never holds two active truths."""
    mem = store.memory(Identity("acme", user="alice"))
    first = mem.remember("user", "preference", {"value": "pytest"}, key="runner")
    late = mem.remember("user", "preference", {"value": "nose"}, key="runner")
    assert first is not None and late is not None and late.state == "quarantined"
    mem.correct(late.id, {"value": "unittest"}, reason="the user said so")
    states = {item.id: item.state for item in mem.list(states=("active", "quarantined"))}
    assert states == {late.id: "active", first.id: "quarantined"}
    # correcting an active item leaves the others as they are
    mem.correct(late.id, {"value": "pytest -x"}, reason="refined")
    assert mem.get(first.id).state == "quarantined"
