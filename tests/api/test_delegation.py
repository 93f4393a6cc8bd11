"""Delegation inherits identity, not the working set (docs/delegation.md): a
child run pins its parent run's tenant, user, policy version and privacy mode;
a subagent's result is typed, provenanced and classed, and enters durable
memory only through the promotion gates.

Each test names, in its docstring, the rule whose removal makes it fail."""

from __future__ import annotations

import pytest

import trajlog
from trajlog import errors

APPROVED = {"kind": "human_approval", "by": "human:lead"}


@pytest.fixture
def parent(store):
    return store.create_session(cwd="/r", metadata={"tenant": "acme", "user": "ann"})


def test_a_child_run_that_states_nothing_inherits_the_parent_runs_pins(parent):
    """run_scope.started_data -> delegation.pin: without it the child's run
    records privacy 'full' and no policy version."""
    with parent.run(model="big", policy_version="p7", privacy_mode="metadata") as pr:
        child = parent.spawn_subagent("look it up")
        with child.run(model="small") as cr:
            pass
    d = cr.started.data
    assert (d["policy_version"], d["privacy_mode"], d["parent_run"]) == (
        "p7", "metadata", pr.id)
    assert (d["identity"]["tenant"], d["identity"]["user"]) == ("acme", "ann")
    assert d["pinned_by"] == {"session": parent.id, "seq": pr.started.seq}
    assert child.header.metadata["parent_run"] == pr.id   # recorded at the spawn
    assert child.get(cr.started.seq).data == d   # the log says so


@pytest.mark.parametrize(("kw", "field"), [
    ({"policy_version": "p8"}, "policy_version"),
    ({"privacy_mode": "full"}, "privacy_mode"),
])
def test_a_child_run_leaving_its_pins_is_refused_and_writes_nothing(parent, kw, field):
    """delegation.pin: another policy version or a weaker privacy mode."""
    with parent.run(model="big", policy_version="p7", privacy_mode="metadata"):
        child = parent.spawn_subagent("look it up")
        before = (child.last_seq, parent.last_seq)
        with pytest.raises(errors.DelegationPinError) as exc, child.run(model="s", **kw):
            pass
        assert exc.value.field == field and exc.value.session == child.id
        assert (child.last_seq, parent.last_seq) == before


def test_a_child_of_another_tenant_or_user_is_refused(parent):
    """delegation.pin's identity check: a subagent spawned with another
    tenant (or user) in its metadata cannot run under the parent's run."""
    with parent.run(model="big") as pr:
        other = parent.spawn_subagent("t", metadata={"tenant": "globex"})
        who = parent.spawn_subagent("t", metadata={"user": "bob"})
        for child, field in ((other, "tenant"), (who, "user")):
            last = child.last_seq
            with pytest.raises(errors.DelegationPinError) as exc, child.run(model="s"):
                pass
            assert (exc.value.field, exc.value.parent_run) == (field, pr.id)
            assert child.last_seq == last


def test_a_stronger_privacy_mode_and_the_same_policy_are_allowed(parent):
    """STRENGTH orders the modes: keeping less than the parent is fine."""
    with parent.run(model="big", policy_version="p7", privacy_mode="metadata"):
        child = parent.spawn_subagent("t")
        # a run nested in a delegated run keeps what that run pinned
        with child.run(model="s", policy_version="p7", privacy_mode="none") as cr, \
                child.run(model="s") as inner:
            pass
    assert cr.started.data["privacy_mode"] == "none"
    assert inner.started.data["privacy_mode"] == "none"
    assert inner.started.data["policy_version"] == "p7"
    with pytest.raises(errors.DelegationPinError), child.run(
            model="s", parent_run=cr.id, privacy_mode="metadata"):
        pass


def test_the_parent_run_is_found_in_the_log_by_its_id(parent):
    """parent_started's log scan: a child run naming its parent's run
    outside the context that opened it (another process, a later call)."""
    with parent.run(model="big", policy_version="p2", privacy_mode="none") as pr:
        pass
    child = parent.spawn_subagent("later")   # no run open: no header pin
    assert "parent_run" not in child.header.metadata
    with child.run(model="s", parent_run=pr.id) as cr:
        pass
    assert (cr.started.data["privacy_mode"], cr.started.data["policy_version"]) == ("none",
                                                                                     "p2")
    with pytest.raises(errors.DelegationPinError), child.run(model="s", parent_run=pr.id,
                                                             policy_version="p3"):
        pass


def test_a_forked_subagent_pins_the_run_in_its_inherited_prefix(parent):
    """parent_started: a run/started below the child's seed is its parent's."""
    with parent.run(model="big", policy_version="p5", privacy_mode="metadata") as pr:
        with parent.turn():
            parent.append("user/message", {"content": "hi"})
        child = parent.fork_subagent("t")
        with child.run(model="s") as cr:
            pass
    assert cr.started.data["pinned_by"]["seq"] == pr.started.seq < child.header.seed_length
    assert cr.started.data["privacy_mode"] == "metadata"


def test_runs_of_one_root_session_pin_nothing(store):
    """A run nested in a root run is the host's own structure: no pins."""
    s = store.create_session(cwd="/r")
    with s.run(model="a", policy_version="p1", privacy_mode="none"), s.run(
            model="b", policy_version="p2") as inner:
        pass
    assert inner.started.data["privacy_mode"] == "full"
    assert "pinned_by" not in inner.started.data


# -- results ----------------------------------------------------------------------


def _reported(parent, kind="fact", content=None, sensitivity="internal"):
    with parent.run(model="big", policy_version="p1"):
        child = parent.spawn_subagent("t")
        with child.run(model="small") as cr:
            ev = child.report(kind, content if content is not None else {"x": 1},
                              sensitivity=sensitivity)
    return child, cr, ev


def test_a_result_is_typed_provenanced_and_classed_in_the_parent(parent):
    """Session.report: a subagent/result in the parent log."""
    child, cr, ev = _reported(parent, "tool_result", {"rows": 3}, "restricted")
    assert parent.get(ev.seq) == ev and ev.type == "subagent/result"
    assert ev.data["kind"] == "tool_result" and ev.data["sensitivity"] == "restricted"
    assert ev.data["provenance"] == {"session": child.id, "run_id": cr.id, "model": "small"}
    assert ev.data_class == "restricted" and ev.source == f"subagent:{child.id}"
    assert trajlog.event_types.source_class(ev) == "tool"   # input, never system


def test_untyped_or_unprovenanced_results_are_refused(parent):
    """delegation.result_data: kind, a run of the subagent, a model."""
    with parent.run(model="big"):
        child = parent.spawn_subagent("t")
        last = parent.last_seq
        with child.run(model="s") as cr:
            with pytest.raises(errors.SubagentResultError):
                child.report("opinion", "x")           # untyped
            with pytest.raises(errors.InvalidArgumentError):
                child.report("fact", "x", sensitivity="secret")
        with pytest.raises(errors.SubagentResultError):
            child.report("fact", "x")                   # no run open: no provenance
        with pytest.raises(errors.SubagentResultError):
            child.report("fact", "x", run="no-such-run")
        other = parent.spawn_subagent("u")
        with pytest.raises(errors.SubagentResultError):
            other.report("fact", "x", run=cr.id)        # a run of another session
        with pytest.raises(errors.SubagentResultError):
            parent.report("fact", "x", run=cr)          # not a subagent
        with pytest.raises(errors.SubagentResultError):
            other.report("fact", "x", run=cr)           # ... given as the Run itself
        assert parent.last_seq == last                   # nothing reached the parent
        assert child.report("fact", "x", run=cr).data["provenance"]["run_id"] == cr.id


def test_a_result_enters_memory_in_session_scope_and_only_promotion_moves_it(store, parent):
    """remember_result writes provisional session items; the gates hold."""
    _, _, fact = _reported(parent, "fact", {"db": "postgres 15"})
    _, _, tip = _reported(parent, "suggestion", {"do": "drop the index"})
    mem = store.memory(trajlog.Identity(tenant="acme", user="ann", session=parent.id))
    item = parent.remember_result(mem, fact.seq)
    assert (item.scope, item.type, item.state, item.source) == (
        "session", "fact", "provisional", (parent.id, fact.seq))
    with pytest.raises(errors.UnverifiedFactError):
        mem.promote(item.id, "tenant")                  # a fact needs evidence
    with pytest.raises(errors.InstructionPoisoningError):
        mem.promote(item.id, "tenant", as_type="policy", evidence=APPROVED)
    assert mem.promote(item.id, "tenant", evidence=APPROVED).scope == "tenant"
    sug = parent.remember_result(mem, tip.seq)
    assert sug.type == "trajectory"                     # a suggestion never becomes a fact
    for to, ev in (("user", None), ("tenant", APPROVED)):
        with pytest.raises(errors.PromotionRefusedError):
            mem.promote(sug.id, to, evidence=ev)
    with pytest.raises(errors.PromotionRefusedError):
        mem.promote(sug.id, "tenant", as_type="fact", evidence=APPROVED)


@pytest.mark.parametrize(("scope", "type_"), [
    ("tenant", "fact"), ("tenant", "policy"), ("user", "fact"), ("global", "fact")])
def test_smuggling_a_result_past_session_scope_is_refused(store, parent, scope, type_):
    """gates.check_write's DELEGATED rule (tenant policy and global scope
    also fall to the older gates)."""
    _, _, fact = _reported(parent)
    mem = store.memory(trajlog.Identity(tenant="acme", user="ann", session=parent.id))
    before = mem.list(scopes=[scope])
    with pytest.raises(errors.PromotionRefusedError):
        mem.remember(scope, type_, {"x": 1}, source=(parent.id, fact.seq), evidence=APPROVED)
    assert mem.list(scopes=[scope]) == before


def test_only_a_typed_result_is_remembered_and_only_in_its_sessions_scope(store, parent):
    """remember_result's checks."""
    _, _, fact = _reported(parent)
    other = store.create_session(cwd="/r", metadata={"tenant": "acme", "user": "ann"})
    mem = store.memory(trajlog.Identity(tenant="acme", user="ann", session=parent.id))
    with pytest.raises(errors.SubagentResultError):
        parent.remember_result(mem, 0)                  # run/started, not a result
    wrong = store.memory(trajlog.Identity(tenant="acme", user="ann", session=other.id))
    with pytest.raises(errors.InvalidArgumentError):
        parent.remember_result(wrong, fact.seq)


def test_the_asyncio_session_pins_and_reports_the_same(store, parent):
    """AsyncSession.run shares started_data (run off the loop, in a copy of
    the context: the parent's open run is seen); report and remember_result
    are the sync ones off the loop."""
    import asyncio

    from trajlog import aio
    from trajlog.api.async_store import AsyncStore

    async def main() -> None:
        astore = AsyncStore(store)
        ap = await astore.session(parent.id)
        async with ap.run(model="big", policy_version="p9", privacy_mode="metadata") as pr:
            child = await ap.spawn_subagent("t")
            async with child.run(model="s") as cr:
                ev = await child.report("episode", {"what": "fixed"})
            with pytest.raises(errors.DelegationPinError):
                async with child.run(model="s", privacy_mode="full"):
                    pass
        assert (cr.started.data["policy_version"], cr.started.data["parent_run"]) == (
            "p9", pr.id)
        view = await astore.memory(trajlog.Identity(tenant="acme", user="ann",
                                                     session=parent.id))
        item = await ap.remember_result(view, ev.seq)
        assert (item.type, item.state) == ("episode", "provisional")
        assert isinstance(view, aio.AsyncMemoryView)

    asyncio.run(main())


def test_a_parent_run_whose_record_is_erased_pins_nothing_silently(store, parent):
    """delegation.pin: an erased run/started (its identity gone) refuses the
    child run rather than let it run under no pins."""
    with parent.run(model="big", policy_version="p1") as pr:
        pass
    child = parent.spawn_subagent("t")
    store.erase(parent.id, pr.started.seq, reason="test", actor="human:t")
    with pytest.raises(errors.DelegationPinError) as exc, child.run(model="s",
                                                                    parent_run=pr.id):
        pass
    assert exc.value.field == "identity"


def test_the_spawn_records_where_the_parent_run_started_and_a_later_run_reads_it_there(
        tmp_path):
    """lineage.spawn's ``parent_run_seq`` and delegation._at_spawn: a run of
    the child started where the parent run is open in no context (a store
    reopened, as another process) is pinned to the run/started at that seq;
    the key is trajlog's own (a caller's is refused)."""
    path = str(tmp_path / "spawn.db")
    with trajlog.open(path) as store:
        parent = store.create_session(cwd="/r", metadata={"tenant": "acme"})
        parent.append("user/message", {"content": "before the run"})
        with parent.run(model="big", policy_version="p7") as pr:
            child = parent.spawn_subagent("look it up")
            with pytest.raises(errors.InvalidArgumentError, match="parent_run_seq"):
                parent.spawn_subagent("t", metadata={"parent_run_seq": 0})
        assert child.header.metadata["parent_run_seq"] == pr.started.seq
    with trajlog.open(path) as store, store.session(child.id).run(model="small") as cr:
        pass
    assert cr.started.data["pinned_by"] == {"session": parent.id, "seq": pr.started.seq}
    assert cr.started.data["policy_version"] == "p7"
@pytest.mark.parametrize("made_up", ["bogus", "ffffffff-0000-4000-8000-000000000000"])
def test_a_made_up_parent_run_in_a_child_is_refused_not_unpinned(parent, made_up):
    """parent_started's _MISSING: an explicit parent_run naming no run of the
    lineage was taken as 'no parent run' and the child escaped its pins."""
    with parent.run(model="big", policy_version="p7", privacy_mode="metadata"):
        child = parent.spawn_subagent("t")
        later = parent.spawn_subagent("u", call_id=None)
    with parent.run(model="big", policy_version="p7") as pr:
        pass
    for kid in (child, later):
        before = kid.last_seq
        with pytest.raises(errors.DelegationPinError) as exc, kid.run(
                model="s", privacy_mode="full", policy_version="p8", parent_run=made_up):
            pass
        assert (exc.value.field, exc.value.parent_run) == ("parent_run", made_up)
        assert kid.last_seq == before
    # a child spawned with no run open names none: a made-up one is refused too
    unspawned = parent.spawn_subagent("v")
    assert "parent_run" not in unspawned.header.metadata
    with pytest.raises(errors.DelegationPinError), unspawned.run(model="s", parent_run=made_up):
        pass
    with unspawned.run(model="s", parent_run=pr.id) as ok:
        pass
    assert ok.started.data["pinned_by"] == {"session": parent.id, "seq": pr.started.seq}


def test_a_run_nested_in_an_unpinned_own_run_keeps_the_spawns_pins(parent):
    """parent_started's fallback to the header's parent_run: naming an own
    run that pins nothing (written before pins held) does not drop the
    spawn's run."""
    with parent.run(model="big", policy_version="p7", privacy_mode="metadata") as pr:
        child = parent.spawn_subagent("t")
    own = child.append("run/started", {"run_id": "old-run", "model": "s",
                                       "identity": {"session": child.id}})
    assert "pinned_by" not in child.get(own.seq).data
    with pytest.raises(errors.DelegationPinError) as exc, child.run(
            model="s", privacy_mode="full", parent_run="old-run"):
        pass
    assert exc.value.field == "privacy_mode" and exc.value.parent_run == pr.id


def test_a_forged_result_is_not_remembered(store, parent):
    """delegation._check_reporter: the source, the subagent and its run."""
    child, cr, real = _reported(parent)
    mem = store.memory(trajlog.Identity(tenant="acme", user="ann", session=parent.id))
    stranger = store.create_session(cwd="/r", metadata={"tenant": "acme", "user": "ann"})
    forged = [
        ({"session": "nobody", "run_id": "nope", "model": "x"}, "web:evil"),
        ({"session": child.id, "run_id": cr.id, "model": "x"}, "web:evil"),
        ({"session": stranger.id, "run_id": cr.id, "model": "x"}, f"subagent:{stranger.id}"),
        ({"session": child.id, "run_id": "no-such-run", "model": "x"}, f"subagent:{child.id}"),
    ]
    for prov, source in forged:
        ev = parent.append("subagent/result", {"kind": "fact", "content": {"db": "FORGED"},
                                               "sensitivity": "public", "provenance": prov},
                           source=source)
        with pytest.raises(errors.SubagentResultError):
            parent.remember_result(mem, ev.seq)
    for bad in ("x", None, 1.0):
        with pytest.raises(errors.InvalidArgumentError):
            parent.remember_result(mem, bad)
    assert mem.list(scopes=["session"]) == []
    assert parent.remember_result(mem, real.seq).source == (parent.id, real.seq)


def test_naming_a_looser_run_of_the_parent_does_not_loosen_the_spawns_pins(parent):
    """run_scope.started_data -> delegation.spawn_run: a child spawned under a
    run that keeps metadata only names a later, looser run of its parent as its
    parent run -- its data came under the spawn's run, so that run's pins hold
    too; naming a run that agrees with the spawn's is taken."""
    with parent.run(model="big", policy_version="p7", privacy_mode="metadata") as strict:
        child = parent.spawn_subagent("look it up")
    with parent.run(model="big", policy_version="p7") as loose:   # privacy "full"
        pass
    with parent.run(model="big", policy_version="p7", privacy_mode="none") as stricter:
        pass
    before = child.last_seq
    with pytest.raises(errors.DelegationPinError) as exc, child.run(
            model="s", parent_run=loose.id):
        pass
    assert exc.value.field == "privacy_mode" and child.last_seq == before
    with child.run(model="s", parent_run=stricter.id) as ok:
        pass
    assert ok.started.data["privacy_mode"] == "none"
    assert ok.started.data["pinned_by"] == {"session": parent.id, "seq": stricter.started.seq}
    assert strict.started.data["privacy_mode"] == "metadata"
