"""kvtier's G4 as a vLLM 0.33.0 secondary tier (issue 49), with the real vLLM
and a real redis-server: built by vLLM's factory from {"type":
"KvtierSharedTier", "module_path": "kvtier.vllm", "redis_url": ...}, looked up
asynchronously (RETRY, then HIT or MISS), shared by two processes, never
serving a damaged or forged value, and bounded by its deadline when Redis is
stopped (SIGSTOP): misses, never an endless RETRY, nothing hangs."""
import os
import pathlib
import subprocess
import sys
import time

import numpy as np
import pytest

if os.environ.get("KVTIER_REQUIRE_VLLM_TESTS") != "1":
    pytest.importorskip("vllm")

from vllm.v1.kv_offload.base import Locality, LookupResult, Medium, ReqContext, ScheduleEndContext  # noqa: E402
from vllm.v1.kv_offload.tiering.spec import TieringOffloadingSpec  # noqa: E402
from vllm.v1.metrics.cache_hit_source import CacheHitSource  # noqa: E402

import vllm_tiers as vt  # noqa: E402

ROW = 2 * 4096
HERE = pathlib.Path(__file__).resolve().parent
STEP = ScheduleEndContext(new_req_ids=[], preempted_req_ids=[])


def shared(node, namespace, **options):
    return dict(vt.KVTIER_SHARED, redis_url=node.url, namespace=namespace, deadline_ms=200, retry_after_ms=300,
                **options)


def resolve(tier, keys, steps=200):
    """vLLM's async lookup: RETRY until the step's batch was asked; the verdicts."""
    ctx = ReqContext(req_id="lookup")
    for _ in range(steps):
        results = [tier.lookup(k, ctx) for k in keys]
        if LookupResult.RETRY not in results:
            return results
        tier.on_schedule_end(STEP)
        time.sleep(0.005)
    raise AssertionError("lookups stayed RETRY")


def store_rows(tier, view, ns, job_id=1, salt=0):
    rows = np.asarray(view)
    for i, n in enumerate(ns):
        rows[i] = vt.row_bytes_of(n, ROW, salt)
    return vt.run_job(tier, job_id, [vt.key(n) for n in ns], range(len(ns)), load=False)


def test_the_factory_builds_it_as_a_remote_pool(redis_node):
    tier = vt.make_tier(shared(redis_node, "factory"), vt.primary_view(8, ROW), vt.offloading_spec())
    assert type(tier).__name__ == "KvtierSharedTier" and tier.medium == Medium.CPU
    assert tier.cache_hit_source == CacheHitSource.EXTERNAL_UNSPECIFIED and tier.locality == Locality.REMOTE
    assert tier.config_info()["kvtier_deadline_ms"] == 200
    tier.shutdown()


@pytest.mark.parametrize("bad, named", [
    ({"redis_url": None}, "redis_url"),
    ({"redis_url": []}, "redis_url"),
    ({"redis_url": "http://x"}, "redis"),
    ({"deadline_ms": 0}, "deadline_ms"),
    ({"namespace": ""}, "namespace"),
    ({"path": "/tmp"}, "path"),
])
def test_a_bad_option_is_an_error_that_names_it(redis_node, bad, named):
    with pytest.raises(ValueError, match=named):
        vt.make_tier({**shared(redis_node, "bad"), **bad}, vt.primary_view(8, ROW), vt.offloading_spec())


def test_lookups_retry_then_answer_and_rows_come_back_into_other_rows(redis_node):
    view = vt.primary_view(32, ROW)
    tier = vt.make_tier(shared(redis_node, "roundtrip"), view, vt.offloading_spec())
    ns = [1, 2, 3, 4, 5]
    assert store_rows(tier, view, ns).success
    ctx = ReqContext(req_id="r")
    assert tier.lookup(vt.key(1), ctx) == LookupResult.RETRY  # asked at the step's end, not now
    assert resolve(tier, [vt.key(n) for n in ns] + [vt.key(99)]) == [LookupResult.HIT] * 5 + [LookupResult.MISS]
    result = vt.run_job(tier, 2, [vt.key(n) for n in ns], range(20, 25), load=True)
    assert result.success
    rows = np.asarray(view)
    assert all(np.array_equal(rows[20 + i], vt.row_bytes_of(n, ROW)) for i, n in enumerate(ns))
    partial = vt.run_job(tier, 3, [vt.key(1), vt.key(77)], [26, 27], load=True)
    assert not partial.success and partial.successful_keys == (vt.key(1),)
    tier.shutdown()


def test_another_process_loads_what_one_stored(redis_node):
    view = vt.primary_view(32, ROW)
    config = shared(redis_node, "two-processes")
    tier = vt.make_tier(config, view, vt.offloading_spec())
    ns = list(range(1, 13))
    assert store_rows(tier, view, ns).success
    script = f"""
import sys, numpy as np
sys.path.insert(0, {str(HERE)!r})
import vllm_tiers as vt
keys = [vt.key(n) for n in {ns!r}]
m = vt.TieredManager([{config!r}], num_chunks=16, row_bytes={ROW})
ctx = m.request()
took = m.promote([(ctx, keys)])
assert took["missed"] == [], took
rows = m.read_rows(ctx, keys)
bad = [n for n, r in zip({ns!r}, rows) if not np.array_equal(r, vt.row_bytes_of(n, {ROW}))]
m.shutdown()
print("rows that differ:", bad)
sys.exit(1 if bad else 0)
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    tier.shutdown()
    assert done.returncode == 0, done.stdout + done.stderr
    assert "rows that differ: []" in done.stdout


def test_a_damaged_value_is_never_loaded_and_misses_from_then_on(redis_node):
    view = vt.primary_view(32, ROW)
    writer = vt.make_tier(shared(redis_node, "damage"), view, vt.offloading_spec())
    ns = [1, 2, 3]
    assert store_rows(writer, view, ns).success
    writer.shutdown()
    keys = redis_node.cli("--scan", "--pattern", "damage:*").split()
    assert len(keys) == len(ns)
    for k in keys:  # same size, other bytes
        assert redis_node.cli("SETRANGE", k, "6000", "XYZ") == str(4096 + ROW)
    reader = vt.make_tier(shared(redis_node, "damage"), view, vt.offloading_spec())
    assert resolve(reader, [vt.key(n) for n in ns]) == [LookupResult.MISS] * 3
    loaded = vt.run_job(reader, 1, [vt.key(n) for n in ns], [10, 11, 12], load=True)
    assert not loaded.success and not loaded.successful_keys
    assert redis_node.cli("--scan", "--pattern", "damage:*") == ""  # deleted: they can be stored again
    reader.shutdown()


def test_a_value_written_without_the_tier_key_is_refused(redis_node, tmp_path):
    key_file = tmp_path / "tier.key"
    key_file.write_bytes(b"k" * 32)
    key_file.chmod(0o600)
    view = vt.primary_view(32, ROW)
    keyed = vt.make_tier(shared(redis_node, "forge", tier_key_file=str(key_file)), view, vt.offloading_spec())
    assert store_rows(keyed, view, [1]).success
    # Someone without the key writes a value of its own (valid checksums, no MAC) under the keyed name.
    plain = vt.make_tier(shared(redis_node, "forge"), view, vt.offloading_spec())
    assert store_rows(plain, view, [1], salt=5).success
    (real,) = [k for k in redis_node.cli("--scan", "--pattern", "forge:*").split() if ":k" in k]
    (forged,) = [k for k in redis_node.cli("--scan", "--pattern", "forge:*").split() if ":k" not in k]
    assert redis_node.cli("COPY", forged, real, "REPLACE") == "1"
    assert resolve(keyed, [vt.key(1)]) == [LookupResult.MISS]
    assert keyed.get_stats() is not None
    keyed.shutdown()
    plain.shutdown()


def test_a_stopped_redis_gives_misses_within_the_deadline_and_nothing_hangs(redis_node):
    view = vt.primary_view(32, ROW)
    tier = vt.make_tier(shared(redis_node, "stopped"), view, vt.offloading_spec())
    assert store_rows(tier, view, [1, 2]).success
    redis_node.signal("STOP")
    try:
        start = time.monotonic()
        assert resolve(tier, [vt.key(1), vt.key(2)]) == [LookupResult.MISS, LookupResult.MISS]
        assert not store_rows(tier, view, [3], job_id=2).success
        assert not vt.run_job(tier, 3, [vt.key(1)], [9], load=True).success
        tier.drain_jobs()
        took = time.monotonic() - start
        assert took < 5.0, f"{took:.1f} s with Redis stopped"
        from vllm.distributed.kv_transfer.kv_connector.v1.offloading.metrics import _StatsKey
        data = tier.get_stats().data[_StatsKey.DATA]
        assert data["kvtier:vllm_tier_breaker_open"][("KvtierSharedTier",)] == 1
        assert data["kvtier:vllm_tier_deadline_misses"][("KvtierSharedTier",)] > 0
    finally:
        redis_node.signal("CONT")
    tier.shutdown()


def test_every_metric_emitted_is_declared_with_its_labels(redis_node):
    extra = {"spec_name": "TieringOffloadingSpec", "secondary_tiers": [shared(redis_node, "metrics")]}
    declared = TieringOffloadingSpec.build_metric_definitions(extra)
    view = vt.primary_view(32, ROW)
    tier = vt.make_tier(shared(redis_node, "metrics"), view, vt.offloading_spec())
    assert store_rows(tier, view, [1, 2]).success
    resolve(tier, [vt.key(1), vt.key(9)])
    vt.run_job(tier, 2, [vt.key(1), vt.key(9)], [5, 6], load=True)
    from vllm.distributed.kv_transfer.kv_connector.v1.offloading.metrics import _StatsKey
    emitted = tier.get_stats().data[_StatsKey.DATA]
    for name, values in emitted.items():
        assert name in declared, name
        assert all(len(labels) == len(declared[name].labelnames) for labels in values), name
    assert {n for n in declared if n.startswith("kvtier:")} - set(emitted) == {"kvtier:vllm_tier_refused_records",
                                                                                "kvtier:vllm_tier_evictions",
                                                                                "kvtier:vllm_tier_deadline_misses"}
    tier.shutdown()


def test_stored_events_name_the_pool_and_expect_no_removal(redis_node):
    view = vt.primary_view(32, ROW)
    tier = vt.make_tier(shared(redis_node, "events", enable_kv_events=True), view, vt.offloading_spec(events=True))
    assert store_rows(tier, view, [1, 2]).success
    events = list(tier.take_events())
    assert [k for e in events for k in e.keys] == [vt.key(1), vt.key(2)]
    assert all(not e.removed and e.ownership == "kvtier-g4" and not e.removal_expected and e.medium == Medium.CPU
               for e in events)
    tier.shutdown()


def test_tiering_manager_puts_g3_before_g4_and_promotes_from_either(redis_node, tmp_path):
    keys = [vt.key(n) for n in range(8)]
    payloads = {k: vt.row_bytes_of(n, ROW) for n, k in enumerate(keys)}
    tiers = [dict(vt.KVTIER_DISK, path=str(tmp_path), capacity_blocks=64), shared(redis_node, "cascade")]
    m = vt.TieredManager(tiers, num_chunks=16, row_bytes=ROW)
    ctx = m.request()
    m.store(ctx, keys, payloads)  # cascaded to both tiers
    m.settle()
    m.shutdown()
    # Another instance without the G3 directory: every row comes from G4.
    other = vt.TieredManager([shared(redis_node, "cascade")], num_chunks=16, row_bytes=ROW)
    ctx = other.request()
    assert other.promote([(ctx, keys)])["missed"] == []
    assert all(np.array_equal(r, payloads[k]) for r, k in zip(other.read_rows(ctx, keys), keys))
    other.shutdown()
