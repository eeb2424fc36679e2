"""The G4 shared tier through kvtier.Manager (docs/shared-tier.md), on a
redis-server the module starts and stops (conftest.py's redis_url, 127.0.0.1
only): blocks one manager computed come back byte for byte in another manager
(another instance: cold G1 and G2) through G2; metrics and EXTERNAL events
say so; a store that is down is a miss, not an error (host runtime)."""
import pytest

import kvtier
from tier_steps import prefill

BS = 4


def manager(url, space, **kw):
    return kvtier.Manager(backend="native", capacity=8, block_size=BS, device="host", host_blocks=4,
                          shared_tier=[url], shared_namespace=space, **kw)



def publish_first(m):
    """A four-block request, then another of eight: the first's blocks land in G2 and are published."""
    first = m.add_request(list(range(16)))
    prefill(m, first)
    m.write_pattern(first)
    m.finish(first)
    other = m.add_request(list(range(1000, 1032)))
    prefill(m, other)
    m.finish(other)
    m.collect_offloads(wait=True)
    m.collect_offloads(wait=True)
    return first


def test_another_manager_swaps_in_what_one_published(redis_url):
    with manager(redis_url, "python-two") as m:
        first = publish_first(m)
        hashes = first.blocks
        events = m.take_events()
        external = {b["hash"] for e in events if e["tier"] == "external" and e["type"] == "stored" for b in e["blocks"]}
        assert set(hashes) <= external
        assert m.metrics()["shared_blocks_published"] >= 4
    with manager(redis_url, "python-two") as other:
        start = other.swap_in(hashes)
        assert start["status"] == "scheduled" and start["count"] == 4 and start["from_shared"] == 4
        assert other.register_swap_in(start["swap_in_id"]) == {"failed": False, "registered": 4}
        again = other.add_request(list(range(16)))
        prefill(other, again)
        assert other.verify(again) == [], "the pages came back from Redis with the bytes the first manager wrote"
        metrics = other.metrics()
        assert metrics["shared_blocks_fetched"] == 4 and metrics["shared_checksum_failures"] == 0
        assert metrics["shared_lookups"] == 1


def test_a_store_that_is_down_is_a_miss(redis_url):
    with manager("redis://127.0.0.1:1", "down", shared_timeout_ms=100) as m:
        first = publish_first(m)
        start = m.swap_in(first.blocks)  # still in G2: no lookup needed
        assert start["status"] == "scheduled"
        assert m.metrics()["shared_errors"] > 0


def test_bad_shared_settings_are_refused():
    with pytest.raises(kvtier.ConfigError):
        kvtier.Manager(device="host", shared_tier=["redis://127.0.0.1:1"])  # no G2
    with pytest.raises(kvtier.ConfigError):
        kvtier.Manager(device="host", host_blocks=4, shared_tier=["http://127.0.0.1:1"])


def test_managers_under_one_tier_key_share_and_others_do_not_meet_their_values(redis_url, tmp_path):
    """Issue 31, C2: values published under a tier key carry its MAC and its
    id in their keys: a manager with the key fetches them, one without (or
    with another key) never sees them."""
    key = tmp_path / "key"
    key.write_bytes(bytes(range(64)))
    key.chmod(0o600)
    with manager(redis_url, "python-keyed", tier_key_file=str(key)) as m:
        hashes = publish_first(m).blocks
    with manager(redis_url, "python-keyed", tier_key_file=str(key)) as keyed:
        start = keyed.swap_in(hashes)
        assert start["from_shared"] == 4
        assert keyed.register_swap_in(start["swap_in_id"])["registered"] == 4
        metrics = keyed.metrics()
        assert metrics["shared_blocks_fetched"] == 4 and metrics["shared_authentication_failures"] == 0
    with manager(redis_url, "python-keyed") as unkeyed:
        start = unkeyed.swap_in(hashes)
        assert start.get("from_shared", 0) == 0
    with pytest.raises(kvtier.ConfigError, match="fewer than 32"):
        short = tmp_path / "short"
        short.write_text("short")
        short.chmod(0o600)
        manager(redis_url, "python-keyed", tier_key_file=str(short))
