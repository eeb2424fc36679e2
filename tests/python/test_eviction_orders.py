"""Every eviction order docs/policies.md names runs from Python — KVBM's pool
(eviction=) and the native pool (native_eviction=) — and second sight shows
through the public API: a block seen twice outlives a newer block seen once
under lru2 and adaptive, not under lru; tier admission names are checked."""
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


@pytest.mark.parametrize("order", ["lru2", "lfu_da", "arc", "s3fifo", "adaptive"])
def test_every_native_order_serves_prefix_hits(order):
    m = kvtier.Manager(native_eviction=order, capacity=8, block_size=4, device="host")
    shared = list(range(16))
    for i in range(20):
        run_once(m, shared + [1000 + 8 * i + t for t in range(8)])
    assert m.resident_prefix(m.add_request(shared + [1, 2, 3, 4])) == 4


@pytest.mark.parametrize("settings", [{"backend": "kvbm", "eviction": "lru2"}, {"native_eviction": "lru2"},
                                      {"backend": "kvbm", "eviction": "lru"}, {},
                                      {"backend": "kvbm", "eviction": "adaptive"}, {"native_eviction": "adaptive"}])
def test_a_block_seen_twice_outlives_a_newer_one_seen_once(settings):
    kept = settings.get("eviction", settings.get("native_eviction", "lru")) != "lru"
    m = kvtier.Manager(capacity=2, block_size=4, device="host", **settings)
    twice, once, new = [1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12]
    run_once(m, twice)
    run_once(m, twice)
    run_once(m, once)
    run_once(m, new)  # one of the two must go
    assert (m.resident_prefix(m.add_request(twice)) == 1) == kept
    assert (m.resident_prefix(m.add_request(once)) == 1) != kept


@pytest.mark.parametrize("settings, message", [
    ({"native_eviction": "lineage"}, "lineage"),
    ({"backend": "kvbm", "native_eviction": "arc"}, "native_eviction"),
    ({"g3_admission": "second_offer"}, "g3_admission needs a disk tier"),
    ({"host_blocks": 8, "g2_admission": "sometimes"}, "sometimes"),
    ({"g2_eviction": "arc"}, "need the offload tier"),
])
def test_policies_without_their_tier_or_unknown_are_config_errors(settings, message):
    with pytest.raises(kvtier.ConfigError, match=message):
        kvtier.Manager(device="host", **settings)


def test_second_offer_g2_admission_declines_a_first_eviction():
    m = kvtier.Manager(capacity=2, block_size=4, device="host", host_blocks=8, g2_admission="second_offer")
    run_once(m, [1, 2, 3, 4])
    run_once(m, [5, 6, 7, 8])
    run_once(m, [9, 10, 11, 12])  # the first block leaves G1: declined, not copied to G2
    m.collect_offloads(wait=True)
    assert m.metrics()["g2_admission_declined"] >= 1
    assert m.metrics()["g3_admission_declined"] == 0  # no G3: nothing offered
