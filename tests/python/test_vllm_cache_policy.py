"""kvtier's cache orders as vLLM 0.33.0 CPU-tier cache policies (issue 50), with
the real vLLM: loaded by vLLM's CachePolicyFactory from a module path, held to
the CachePolicy contract on their own and through vLLM's CPUOffloadingManager —
a randomized run checks the bookkeeping (residency, pinned and protected
chunks, evictions all or nothing, ref counts, several KV cache groups) with
the same checker that vLLM's own LRUCachePolicy passes —, and measured by
python -m kvtier.vllm.policy_bench."""
import json
import os
import random

import pytest

if os.environ.get("KVTIER_REQUIRE_VLLM_TESTS") != "1":
    pytest.importorskip("vllm")

from vllm.v1.kv_offload.base import LookupResult, ReqContext, make_offload_key  # noqa: E402
from vllm.v1.kv_offload.cpu.manager import CPUOffloadingManager  # noqa: E402
from vllm.v1.kv_offload.cpu.policies.base import CachePolicy, ChunkStatus  # noqa: E402
from vllm.v1.kv_offload.cpu.policies.factory import CachePolicyFactory  # noqa: E402

import kvtier  # noqa: E402
from kvtier.vllm import cache_policy, policy_bench  # noqa: E402

KVTIER_POLICIES = ["KvtierAdaptivePolicy", "KvtierLfuDaPolicy", "KvtierLru2Policy", "KvtierArcPolicy",
                   "KvtierS3FifoPolicy"]


def key(block: int, group: int = 0) -> bytes:
    return make_offload_key(block.to_bytes(8, "big"), group)


def context(name: str, keys=()) -> ReqContext:
    ctx = ReqContext(req_id=name)
    for position, k in enumerate(keys, 1):
        ctx.set_offload_key_position(k, position)
    return ctx


def store(policy: CachePolicy, keys, ctx, first_slot: int, ready: bool = True):
    """What the manager does for a store: observe, insert, complete."""
    policy.on_request_access(keys, ctx)
    for slot, k in enumerate(keys, first_slot):
        policy.insert(k, ChunkStatus(slot), ctx)
    if ready:
        for k in keys:
            policy.get(k).ref_cnt = 0
            policy.mark_evictable(k)


@pytest.mark.parametrize("name", KVTIER_POLICIES)
def test_vllms_factory_loads_each_policy_by_module_path(name):
    cls = CachePolicyFactory.get_cache_policy_cls(name, "kvtier.vllm")
    assert issubclass(cls, CachePolicy) and cls is getattr(cache_policy, name)
    manager = CPUOffloadingManager(8, cache_policy=name, cache_policy_module_path="kvtier.vllm")
    assert isinstance(manager._policy, cls) and manager._policy.cache_capacity == 8


def test_importing_kvtier_vllm_does_not_build_anything():
    import kvtier.vllm

    assert set(kvtier.vllm.__all__) >= set(KVTIER_POLICIES)
    with pytest.raises(AttributeError):
        kvtier.vllm.KvtierNoSuchPolicy  # noqa: B018


def test_a_policy_of_zero_chunks_or_an_unknown_order_is_a_clear_error():
    with pytest.raises(kvtier.ConfigError, match="0 chunks"):
        cache_policy.KvtierAdaptivePolicy(cache_capacity=0)
    with pytest.raises(kvtier.ConfigError, match="not a leaf-first order"):
        kvtier._kvtier.ChunkEviction("lru", 4)


@pytest.mark.parametrize("name", KVTIER_POLICIES)
def test_get_insert_remove_and_evict_exactly_n_or_none(name):
    policy = getattr(cache_policy, name)(cache_capacity=4)
    keys = [key(i) for i in range(4)]
    ctx = context("a", keys)
    store(policy, keys, ctx, 0)
    assert [policy.get(k).chunk_id for k in keys] == [0, 1, 2, 3]
    assert policy.get(key(99)) is None
    assert policy.evict(0, set()) == []
    # Three of four protected: two victims cannot be found, and nothing changes.
    assert policy.evict(2, set(keys[:3])) is None
    assert all(policy.get(k) is not None for k in keys)
    (victim, chunk), = policy.evict(1, set(keys[:3]))
    assert victim == keys[3] and chunk.chunk_id == 3 and policy.get(keys[3]) is None
    policy.remove(keys[0])
    assert policy.get(keys[0]) is None
    with pytest.raises(KeyError):
        policy.remove(keys[0])


@pytest.mark.parametrize("name", KVTIER_POLICIES)
def test_a_pinned_or_unready_chunk_is_never_a_victim(name):
    policy = getattr(cache_policy, name)(cache_capacity=4)
    keys = [key(i) for i in range(3)]
    ctx = context("a", keys)
    store(policy, keys[:2], ctx, 0)
    store(policy, keys[2:], ctx, 2, ready=False)  # a store in flight: ref_cnt -1
    policy.get(keys[1]).ref_cnt = 1
    policy.mark_non_evictable(keys[1])  # a load reads it
    assert policy.evict(2, set()) is None
    (victim, _), = policy.evict(1, set())
    assert victim == keys[0]  # its child is pinned: a parent with no evictable child is a leaf
    assert policy.evict(1, set()) is None
    policy.get(keys[1]).ref_cnt = 0
    policy.mark_evictable(keys[1])
    assert [k for k, _ in policy.evict(1, set())] == [keys[1]]


@pytest.mark.parametrize("name", KVTIER_POLICIES)
def test_a_parent_never_leaves_before_its_child_in_any_group(name):
    policy = getattr(cache_policy, name)(cache_capacity=9)
    # One request of a hybrid model: two groups, a chain of four and one of three.
    chain0 = [key(i, 0) for i in range(4)]
    chain1 = [key(i, 1) for i in range(3)]
    ctx = context("a", chain0 + chain1)
    store(policy, chain0 + chain1, ctx, 0)
    policy.on_request_finished((tuple(chain0), tuple(chain1)), set(chain0 + chain1), set(), ctx)
    # Then two unrelated single chunks, reused once.
    others = [key(100), key(101)]
    ctx2 = context("b", others)
    store(policy, others[:1], ctx2, 7)
    ctx3 = context("c", others[1:])
    store(policy, others[1:], ctx3, 8)
    resident = set(chain0 + chain1 + others)
    parent = {**{chain0[i]: chain0[i - 1] for i in range(1, 4)}, **{chain1[i]: chain1[i - 1] for i in range(1, 3)}}
    for _ in range(len(resident)):
        (victim, _), = policy.evict(1, set())
        resident.discard(victim)
        children = [child for child, p in parent.items() if p == victim]
        assert not any(child in resident for child in children), f"{victim.hex()} left before its child"
    assert policy.evict(1, set()) is None


def test_adaptive_keeps_a_reused_chunk_over_newer_ones_seen_once():
    policy = cache_policy.KvtierAdaptivePolicy(cache_capacity=3)
    old, new1, new2 = key(1), key(2), key(3)
    ctx = context("a", [old])
    store(policy, [old], ctx, 0)
    policy.on_request_finished(((old,),), {old}, set(), ctx)
    reuse = context("b", [old])
    policy.on_request_access([old], reuse)
    policy.on_request_finished(((old,),), set(), {old}, reuse)  # a second use
    for slot, k in ((1, new1), (2, new2)):
        ctx = context(f"n{slot}", [k])
        store(policy, [k], ctx, slot)
        policy.on_request_finished(((k,),), {k}, set(), ctx)
    assert [k for k, _ in policy.evict(2, set())] == [new1, new2]


@pytest.mark.parametrize("name", KVTIER_POLICIES)
def test_clear_forgets_everything_and_a_bad_call_changes_nothing(name):
    policy = getattr(cache_policy, name)(cache_capacity=2)
    ctx = context("a", [key(1)])
    store(policy, [key(1)], ctx, 0)
    with pytest.raises(ValueError, match="already cached"):
        policy.insert(key(1), ChunkStatus(1), ctx)
    with pytest.raises(ValueError, match="holds another key"):  # slot 0 holds key(1)
        policy.insert(key(2), ChunkStatus(0), ctx)
    assert policy.get(key(2)) is None and policy.get(key(1)).chunk_id == 0
    with pytest.raises(ValueError, match="outside the cache"):
        policy.insert(key(3), ChunkStatus(5), ctx)
    assert policy.get(key(3)) is None
    with pytest.raises(kvtier.ContractError, match="holds a key already"):  # the order itself checks too
        policy._order.stored(0, key(4), None)
    with pytest.raises(kvtier.ContractError, match="outside"):
        policy._order.stored(7, key(4), None)
    policy.clear()
    assert policy.get(key(1)) is None and policy.evict(1, set()) is None
    store(policy, [key(2)], context("b", [key(2)]), 0)
    assert [k for k, _ in policy.evict(1, set())] == [key(2)]


class Bookkeeping:
    """What the manager's results say is cached, checked against the manager
    and its policy after every call (the same for vLLM's LRU and kvtier's)."""

    def __init__(self, manager: CPUOffloadingManager, capacity: int):
        self.manager = manager
        self.capacity = capacity
        self.ref: dict[bytes, int] = {}  # key -> ref_cnt (-1: stored, not complete)

    def evictable(self, spared) -> int:
        return sum(1 for k, r in self.ref.items() if r == 0 and k not in spared)

    def check(self):
        policy = self.manager._policy
        for k, r in self.ref.items():
            chunk = policy.get(k)
            assert chunk is not None and chunk.ref_cnt == r, k.hex()
        assert len({policy.get(k).chunk_id for k in self.ref}) == len(self.ref) <= self.capacity
        assert self.manager._num_evictable_cache_chunks == self.evictable(())

    def store(self, keys, ctx, fail: bool):
        before = dict(self.ref)
        fresh = [k for k in dict.fromkeys(keys) if k not in self.ref]
        free = self.capacity - len(self.ref)
        possible = len(fresh) - free <= self.evictable(set(keys))
        out = self.manager.prepare_store(keys, ctx)
        if out is None:
            assert not possible and self.ref == before
            self.check()
            return
        assert possible and out.keys_to_store == fresh
        for victim in out.evicted_keys:
            assert victim not in keys and before[victim] == 0, "evicted a protected or pinned chunk"
            del self.ref[victim]
        for k in out.keys_to_store:
            self.ref[k] = -1
        self.check()
        self.manager.complete_store(out.keys_to_store, ctx, success=not fail)
        for k in out.keys_to_store:
            if fail:
                del self.ref[k]
            else:
                self.ref[k] = 0
        self.check()

    def lookup_prefix(self, keys, ctx):
        found = []
        for k in keys:
            result = self.manager.lookup(k, ctx)
            expected = (LookupResult.MISS if k not in self.ref else
                        LookupResult.HIT_PENDING if self.ref[k] < 0 else LookupResult.HIT)
            assert result == expected
            if result != LookupResult.HIT:
                break
            found.append(k)
        return found


@pytest.mark.parametrize("name", ["lru", *KVTIER_POLICIES])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_manager_bookkeeping_holds_under_random_requests_in_two_groups(name, seed):
    """vLLM's LRUCachePolicy ("lru") is the reference the checker is held to."""
    rng = random.Random(seed)
    capacity = 24
    manager = CPUOffloadingManager(capacity, cache_policy=name,
                                   cache_policy_module_path=None if name == "lru" else "kvtier.vllm")
    book = Bookkeeping(manager, capacity)
    loads_in_flight = []
    roots = [rng.randrange(10**6) for _ in range(6)]
    for step in range(400):
        # A request: a prefix of one of a few trees, in two KV cache groups.
        root = rng.choice(roots)
        depth = rng.randint(1, 10)
        branch = rng.randrange(3)
        blocks = [root * 100 + (i if i < depth // 2 else 50 + branch * 10 + i) for i in range(depth)]
        keys = [key(b, 0) for b in blocks] + [key(b, 1) for b in blocks[: depth // 2 + 1]]
        ctx = context(f"r{step}", keys)
        manager.on_new_request(ctx)
        hits = book.lookup_prefix(keys[:depth], ctx)
        if hits:
            manager.prepare_load(hits, ctx)
            for k in hits:
                book.ref[k] += 1
            book.check()
            loads_in_flight.append((hits, ctx))
        if loads_in_flight and rng.random() < 0.7:
            done, done_ctx = loads_in_flight.pop(rng.randrange(len(loads_in_flight)))
            manager.complete_load(done, done_ctx)
            for k in done:
                book.ref[k] -= 1
            book.check()
        for start in range(0, len(keys), rng.randint(2, 8)):
            book.store(keys[start:start + 8], ctx, fail=rng.random() < 0.1)
        manager.on_request_finished(ctx)
        book.check()
        if rng.random() < 0.01 and not loads_in_flight:
            manager.reset_cache()
            book.ref.clear()
            book.check()
    for done, done_ctx in loads_in_flight:
        manager.complete_load(done, done_ctx)
        for k in done:
            book.ref[k] -= 1
    book.check()


@pytest.mark.parametrize("name", KVTIER_POLICIES)
def test_without_evictions_the_manager_answers_as_with_vllms_lru(name):
    """Room for everything: the order never decides, so every answer of the
    manager — lookups, stores, evictions, events, stats — equals LRU's."""
    rng = random.Random(7)
    managers = [CPUOffloadingManager(4096, cache_policy=policy, cache_policy_module_path=path, enable_events=True)
                for policy, path in (("lru", None), (name, "kvtier.vllm"))]
    for step in range(150):
        blocks = [rng.randrange(40) * 100 + i for i in range(rng.randint(1, 12))]
        keys = [key(b, g) for g in (0, 1) for b in blocks]
        answers = []
        for manager in managers:
            ctx = context(f"r{step}", keys)
            manager.on_new_request(ctx)
            hits = [k for k in keys if manager.lookup(k, ctx) == LookupResult.HIT]
            if hits:
                manager.prepare_load(hits, ctx)
                manager.complete_load(hits, ctx)
            out = manager.prepare_store(keys, ctx)
            stored = list(out.keys_to_store)
            manager.complete_store(stored, ctx, success=step % 10 != 3)
            manager.on_request_finished(ctx)
            events = [(e.keys, e.removed) for e in manager.take_events()]
            answers.append((hits, stored, list(out.evicted_keys), events,
                            manager._num_evictable_cache_chunks, manager.get_stats().data))
        assert answers[0] == answers[1]


def test_the_primary_tier_of_vllms_tiering_runs_kvtier_policy_over_kvtier_g3(tmp_path):
    """vLLM's TieringOffloadingManager with KvtierAdaptivePolicy ordering its CPU
    primary tier: three times the primary's chunks stored, the primary evicts by
    kvtier's order, G3 keeps every row, and each comes back byte for byte."""
    import numpy as np
    import vllm_tiers as vt

    row = 4096
    m = vt.TieredManager([dict(vt.KVTIER_DISK, path=str(tmp_path), capacity_blocks=64)], num_chunks=8,
                         row_bytes=row, cache_policy="KvtierAdaptivePolicy", cache_policy_module_path="kvtier.vllm")
    assert isinstance(m.primary._policy, cache_policy.KvtierAdaptivePolicy)
    keys = [vt.key(n) for n in range(24)]
    payloads = {k: vt.row_bytes_of(n, row) for n, k in enumerate(keys)}
    for start in range(0, len(keys), 4):
        m.settle()  # the cascade releases its pins on the primary's rows
        ctx = m.request()
        m.store(ctx, keys[start:start + 4], payloads)
        with m.manager.lock:
            m.manager.on_request_finished(ctx)
    m.settle()
    probe = m.request()
    resident = [k for k in keys if m.primary.lookup(k, probe) == LookupResult.HIT]
    assert len(resident) == 8
    ctx = m.request()
    took = m.promote([(ctx, keys[:8])])  # the oldest rows: evicted from the primary, promoted from G3
    assert took["missed"] == []
    assert all(np.array_equal(r, payloads[k]) for r, k in zip(m.read_rows(ctx, keys[:8]), keys[:8]))
    m.shutdown()


def test_the_policy_bench_sets_policies_beside_the_bound(tmp_path, capsys):
    # Capacity 2: [1,2] stored; [1,2] hits 2; [3] evicts block 2 (a leaf) in
    # every order; [1,2] hits 1. The bound bypasses [3] and hits 4 of 7.
    trace = tmp_path / "trace.jsonl"
    trace.write_text("\n".join(json.dumps({"hash_ids": ids}) for ids in ([1, 2], [1, 2], [3], [1, 2])) + "\n")
    assert policy_bench.main([str(trace), "--capacities", "2", "--policies", "lru,kvtier_adaptive",
                              "--repeats", "1", "--json"]) == 0
    rows = {row["policy"]: row for row in json.loads(capsys.readouterr().out)["rows"]}
    assert rows["bound"]["hits"] == 4 and rows["bound"]["prompt_blocks"] == 7
    assert rows["lru"]["hits"] == 3 and rows["kvtier_adaptive"]["hits"] == 3
    assert rows["lru"]["cost_vs_lru"] == 1.0 and rows["kvtier_adaptive"]["fraction_of_bound"] == 0.75


def test_the_policy_bench_refuses_a_bad_trace_line(tmp_path):
    trace = tmp_path / "bad.jsonl"
    trace.write_text('{"hash_ids": [1, 2]}\n{"hash_ids": "x"}\n')
    with pytest.raises(SystemExit, match="bad.jsonl:2"):
        policy_bench.main([str(trace)])
