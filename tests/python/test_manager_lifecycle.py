"""The request lifecycle through kvtier.Manager: prefix reuse seen in block
tables, finish and preemption, capacity exhaustion, the MoveBlock level and
the G2 tier, on the host runtime (real pages, no GPU needed)."""
import uuid

import pytest

import kvtier

BS = 4


def manager(**kw):
    kw.setdefault("capacity", 64)
    kw.setdefault("block_size", BS)
    kw.setdefault("device", "host")
    return kvtier.Manager(**kw)


def prefill(m, r):
    assert m.allocate(r).ready
    m.finalize(r, len(r))


def test_native_prefix_reuse_is_visible_in_block_tables():
    m = manager(backend="native")
    shared = list(range(100, 112))  # three full blocks
    a = m.add_request(shared + [1, 2, 3, 4, 5])
    prefill(m, a)
    b = m.add_request(shared + [9, 9])
    cost = m.prefill_cost(b)
    assert cost.cached_tokens == 12 and cost.new_blocks == 1
    assert m.resident_prefix(b) == 3
    prefill(m, b)
    ta, tb = list(m.block_table(a)), list(m.block_table(b))
    assert tb[:3] == ta[:3], "the shared prefix is the same physical pages"
    assert tb[3] not in ta
    assert b.blocks[:3] == a.blocks[:3]
    metrics = m.metrics()
    assert metrics["active"] == len(set(ta) | set(tb))
    assert metrics["active_refs"] == len(ta) + len(tb)


def test_native_blocks_are_visible_only_once_computed():
    m = manager(backend="native")
    a = m.add_request(list(range(8)))
    assert m.allocate(a).ready
    assert m.prefill_cost(m.add_request(list(range(8)))).cached_tokens == 0
    m.finalize(a, 8)
    assert m.prefill_cost(m.add_request(list(range(8)))).cached_tokens == 8


@pytest.mark.parametrize("eviction", ["lineage", "lru", "multi_lru"])
def test_kvbm_blocks_are_visible_at_allocation(eviction):
    m = manager(backend="kvbm", eviction=eviction)
    assert m.eviction == eviction
    a = m.add_request(list(range(8)) + [7])
    assert m.allocate(a).ready  # no finalize: KVBM registers at Use
    b = m.add_request(list(range(8)) + [5])
    assert m.prefill_cost(b).cached_tokens == 8
    assert m.allocate(b).ready
    assert list(m.block_table(b))[:2] == list(m.block_table(a))[:2]
    m.audit()


@pytest.mark.parametrize("backend", ["native", "kvbm"])
def test_generate_to_completion_releases_every_block(backend):
    m = manager(backend=backend)
    r = m.add_request(list(range(6)), max_output_tokens=7, planned_output=[50, 51, 52])
    prefill(m, r)
    steps = []
    while not r.finished:
        step = m.generate(r)
        assert step.result == "ready"
        steps.append(step)
    assert r.tokens[6:9] == [50, 51, 52]
    assert r.generated_tokens == 7 and steps[-1].finished
    assert "deref" in steps[-1].signals
    assert any("promote" in s.signals for s in steps), "a partial block filled up on the way"
    metrics = m.metrics()
    assert metrics["active"] == 0 and metrics["inactive"] == 3  # 12 tokens = 3 full blocks cached
    with pytest.raises(kvtier.ContractError):
        m.generate(r)
    m.audit()


def test_preempt_then_resume_reuses_the_cached_pages():
    m = manager(backend="native")
    r = m.add_request(list(range(10)), max_output_tokens=4)
    prefill(m, r)
    m.generate(r)
    before = list(m.block_table(r))
    m.preempt(r)
    assert r.allocated_tokens == 0 and r.computed_tokens == 0 and not r.finished
    assert not m.has_owner(r.owner) or len(m.block_table(r)) == 0
    assert len(r) == 11, "the generated token stays"
    assert m.allocate(r).ready
    after = list(m.block_table(r))
    assert after[:2] == before[:2], "full blocks come back from the cache"
    m.finalize(r, len(r))
    assert m.generate(r).result == "ready"


def test_capacity_exhaustion_changes_nothing():
    m = manager(capacity=4)
    big = m.add_request(list(range(40)))
    before = m.metrics()
    acquire = m.allocate(big)
    assert acquire.result == "capacity_exhausted" and not acquire
    assert m.metrics() == before
    assert big.allocated_tokens == 0
    small = m.add_request(list(range(8)))
    assert m.allocate(small).ready


def test_chunked_prefill_allocates_and_finalizes_in_steps():
    m = manager()
    r = m.add_request(list(range(20)))
    for end in (8, 16, 20):
        assert m.allocate(r, end).ready
        m.finalize(r, end)
    assert r.computed_tokens == 20 and len(m.block_table(r)) == 5


def test_move_block_level_use_promote_deref():
    m = manager(backend="native")
    owner = 7
    partial = uuid.uuid4()
    assert m.use(owner, [11, 22, partial]).count == 3
    assert m.owned_blocks(owner) == [11, 22, partial]
    m.finalize_blocks(owner, 0, 8)
    assert m.is_cached(11) and m.is_cached(22)
    m.promote(owner, partial, 33, parent=22)
    assert m.owned_blocks(owner) == [11, 22, 33]
    events = m.take_events()
    assert [e["type"] for e in events] == ["stored", "stored"]
    assert events[1]["parent"] == 22 and events[1]["blocks"][0]["hash"] == 33
    m.deref(owner, [33, 22, 11])
    assert not m.has_owner(owner)
    assert m.metrics()["inactive"] == 3


def test_decode_reservation_feeds_a_use():
    m = manager(backend="kvbm", capacity=8)
    reservation = m.reserve_decode(2)
    assert reservation is not None and reservation.live
    assert m.decode_use(5, reservation, [uuid.uuid4()]).ready
    m.release_decode(reservation)
    assert not reservation.live
    with pytest.raises(kvtier.ContractError, match="already released"):
        m.release_decode(reservation)
    assert m.reserve_decode(100) is None


def test_destination_reservation_allocates_the_prompt_on_activation():
    m = manager(backend="native")
    r = m.add_request(list(range(9)), max_output_tokens=2)
    reservation = m.reserve_destination(r)
    assert reservation is not None and reservation.transferable_prompt_tokens == 12  # 3 fresh blocks
    m.activate_destination(reservation)
    assert r.allocated_tokens == 9 and len(m.block_table(r)) == 3
    assert m.generate(r).result == "ready"


def test_offload_swap_out_and_back_in_keeps_the_bytes():
    m = manager(backend="kvbm", eviction="lru", capacity=8, host_blocks=32, verify_swaps=True)
    first = m.add_request(list(range(16)))  # four full blocks
    prefill(m, first)
    m.write_pattern(first)
    hashes = first.blocks
    plhs = first.plhs
    m.finish(first)
    # Another request of eight blocks evicts all four into G2.
    other = m.add_request(list(range(1000, 1032)))
    while m.allocate(other).result == "blocked_on_offload":
        m.collect_offloads(wait=True)
    m.collect_offloads(wait=True)
    assert all(m.is_host_cached(h) for h in hashes)
    assert not any(m.is_cached(h) for h in hashes)
    m.finish(other)
    start = m.swap_in(plhs)
    while start["status"] == "blocked_on_offload":  # making room in G1 offloads `other`'s blocks first
        m.collect_offloads(wait=True)
        start = m.swap_in(plhs)
    assert start["status"] == "scheduled" and start["count"] == 4
    assert m.register_swap_in(start["swap_in_id"]) == {"failed": False, "registered": 4}
    assert all(m.is_cached(h) for h in hashes)
    again = m.add_request(list(range(16)))
    prefill(m, again)
    assert m.verify(again) == [], "the swapped-in pages hold the bytes written before eviction"
    metrics = m.metrics()
    assert metrics["host_capacity"] == 32 and metrics["swap_verify_failures"] == 0
    tiers = {e["tier"] for e in m.take_events()}
    assert tiers == {"device", "host_pinned"}
