"""Every eviction order docs/policies.md names runs on the KVBM backend from
Python, and second sight shows through the public API: a block seen twice
outlives a newer block seen once under lru2 and adaptive, not under lru."""
import pytest

import kvtier

ORDERS = ["lineage", "lru", "multi_lru", "lru2", "lfu_da", "arc", "s3fifo", "adaptive"]


def run_once(m, tokens):
    r = m.add_request(tokens)
    assert m.allocate(r)
    m.finalize(r, len(tokens))
    m.finish(r)
    return r


@pytest.mark.parametrize("order", ORDERS)
def test_every_order_serves_prefix_hits(order):
    m = kvtier.Manager(backend="kvbm", eviction=order, capacity=8, block_size=4, device="host")
    assert m.eviction == order
    shared = list(range(16))
    for i in range(20):  # more blocks than pages pass through: the order evicts
        run_once(m, shared + [1000 + 8 * i + t for t in range(8)])
    assert m.resident_prefix(m.add_request(shared + [1, 2, 3, 4])) == 4


@pytest.mark.parametrize("order, kept", [("lru", False), ("lru2", True), ("adaptive", True)])
def test_a_block_seen_twice_outlives_a_newer_one_seen_once(order, kept):
    m = kvtier.Manager(backend="kvbm", eviction=order, capacity=2, block_size=4, device="host")
    twice, once, new = [1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12]
    run_once(m, twice)
    run_once(m, twice)
    run_once(m, once)
    run_once(m, new)  # one of the two must go
    assert (m.resident_prefix(m.add_request(twice)) == 1) == kept
    assert (m.resident_prefix(m.add_request(once)) == 1) != kept
