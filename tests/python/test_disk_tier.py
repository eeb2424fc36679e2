"""The G3 disk tier through kvtier.Manager (docs/disk.md): blocks G2 evicts
go to disk and come back byte for byte through G2, in this manager and in a
new one on the same directory; the metrics and DISK events say so; bad
settings are refused (host runtime: real pages, no GPU needed)."""
import pytest

import kvtier
from tier_steps import prefill, swap_in

BS = 4


def manager(path, **kw):
    kw.setdefault("backend", "kvbm")
    kw.setdefault("eviction", "lru")
    return kvtier.Manager(capacity=8, block_size=BS, device="host", host_blocks=4, disk_path=str(path),
                          disk_blocks=64, **kw)



def push_first_to_disk(m):
    """A four-block request, then two of eight: the first's blocks leave G2 for G3."""
    first = m.add_request(list(range(16)))
    prefill(m, first)
    m.write_pattern(first)
    m.finish(first)
    for base in (1000, 2000):
        other = m.add_request(list(range(base, base + 32)))
        prefill(m, other)
        m.finish(other)
    m.collect_offloads(wait=True)
    return first



@pytest.mark.parametrize("backend,sync", [("kvbm", "none"), ("native", "none"), ("kvbm", "batch")])
def test_blocks_go_to_disk_and_come_back_with_their_bytes(tmp_path, backend, sync):
    kw = {"backend": backend} if backend == "native" else {}
    if backend == "native":
        kw["eviction"] = None
    kw["disk_sync"] = sync
    with manager(tmp_path, **kw) as m:
        first = push_first_to_disk(m)
        hashes, keys = first.blocks, (first.plhs if backend == "kvbm" else first.blocks)
        assert not any(m.is_host_cached(h) for h in hashes)
        metrics = m.metrics()
        assert metrics["disk_capacity"] == 64 and metrics["disk_used"] >= 4
        start = swap_in(m, keys)
        assert start["status"] == "scheduled" and start["count"] == 4 and start["from_disk"] == 4
        assert m.register_swap_in(start["swap_in_id"]) == {"failed": False, "registered": 4}
        again = m.add_request(list(range(16)))
        prefill(m, again)
        assert m.verify(again) == [], "the pages came back from the file with the bytes written before"
        metrics = m.metrics()
        assert metrics["disk_blocks_read"] == 4 and metrics["disk_checksum_failures"] == 0
        # Under batch sync every stored block was covered by an fdatasync; without it none is made.
        assert (metrics["disk_syncs"] >= 1) == (sync == "batch")
        events = m.take_events()
        disk = {b["hash"] for e in events if e["tier"] == "disk" and e["type"] == "stored" for b in e["blocks"]}
        assert set(hashes) <= disk


def test_a_new_manager_on_the_directory_finds_the_blocks(tmp_path):
    with manager(tmp_path) as m:
        first = push_first_to_disk(m)
        plhs = first.plhs
    with manager(tmp_path) as m:
        told = {b["hash"] for e in m.take_events() if e["tier"] == "disk" for b in e["blocks"]}
        assert set(first.blocks) <= told, "what the directory held is announced as DISK Stored events"
        start = swap_in(m, plhs)
        assert start["from_disk"] == 4
        assert m.register_swap_in(start["swap_in_id"])["registered"] == 4
        again = m.add_request(list(range(16)))
        prefill(m, again)
        assert m.verify(again) == []
        text = m.prometheus_text() if hasattr(m, "prometheus_text") else ""
        if text:
            assert 'kvtier:kv_cache_capacity_blocks{tier="G3"} 64' in text


def test_bad_disk_settings_are_refused(tmp_path):
    with pytest.raises(kvtier.ConfigError):
        kvtier.Manager(capacity=8, block_size=BS, device="host", disk_path=str(tmp_path), disk_blocks=8)  # no G2
    with pytest.raises(kvtier.ConfigError):
        kvtier.Manager(capacity=8, block_size=BS, device="host", host_blocks=4, disk_blocks=8)  # no path
    with pytest.raises(kvtier.ConfigError):
        kvtier.Manager(capacity=8, block_size=BS, device="host", host_blocks=4, disk_path=str(tmp_path))  # 0 blocks
    with pytest.raises(kvtier.ConfigError, match="none or batch"):
        manager(tmp_path, disk_sync="always")
    with pytest.raises(kvtier.ConfigError):
        kvtier.Manager(capacity=8, block_size=BS, device="host", host_blocks=4, disk_sync="batch")  # no path
    with manager(tmp_path):
        with pytest.raises(kvtier.ConfigError, match="in use"):
            manager(tmp_path)


def key_file(tmp_path, name="key", mode=0o600):
    key = tmp_path / name
    key.write_bytes(bytes(range(48)))
    key.chmod(mode)
    return str(key)


def test_a_tier_key_authenticates_the_disk_tier_and_another_key_is_refused(tmp_path):
    """Issue 31, C2: with tier_key_file every G3 record carries its MAC; a
    tier written under one key is refused under another, or none."""
    g3 = tmp_path / "g3"
    key = key_file(tmp_path)
    with manager(g3, tier_key_file=key) as m:
        first = push_first_to_disk(m)
        metrics = m.metrics()
        assert metrics["disk_authentication_failures"] == 0
    with manager(g3, tier_key_file=key) as m:
        start = swap_in(m, first.plhs)
        assert start["from_disk"] == 4
        assert m.register_swap_in(start["swap_in_id"])["registered"] == 4
        again = m.add_request(list(range(16)))
        prefill(m, again)
        assert m.verify(again) == []
    with pytest.raises(kvtier.ConfigError, match="another tier key"):
        other = tmp_path / "other"
        other.write_bytes(bytes(range(100, 148)))
        other.chmod(0o600)
        manager(g3, tier_key_file=str(other))
    with pytest.raises(kvtier.ConfigError, match="under a tier key"):
        manager(g3)
    with pytest.raises(kvtier.ConfigError, match="readable or writable by group or others"):
        manager(tmp_path / "g3-open", tier_key_file=key_file(tmp_path, "open", 0o644))
