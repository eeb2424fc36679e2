"""kvtier's G3 as a vLLM 0.33.0 secondary tier (issue 49), with the real vLLM:
built by vLLM's SecondaryTierFactory from {"type": "KvtierDiskTier",
"module_path": "kvtier.vllm", ...}, driven through its SecondaryTierManager
contract and through TieringOffloadingManager over vLLM's CPU primary tier.
Rows come back byte for byte (into other rows, in a new process), damaged
bytes are never loaded — where vLLM's own fs tier, on the same damage, serves
them —, the capacity holds, and every job is reported exactly once."""
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

if os.environ.get("KVTIER_REQUIRE_VLLM_TESTS") != "1":
    pytest.importorskip("vllm")

from vllm.v1.kv_offload.base import LookupResult, Medium, ReqContext  # noqa: E402
from vllm.v1.kv_offload.tiering.spec import TieringOffloadingSpec  # noqa: E402

import vllm_tiers as vt  # noqa: E402

ROW = 2 * 4096  # two pages: O_DIRECT-sized, small enough for many rows
HERE = pathlib.Path(__file__).resolve().parent


def disk(path, capacity=64, **options):
    return dict(vt.KVTIER_DISK, path=str(path), capacity_blocks=capacity, **options)


def tier_file(path):
    return pathlib.Path(path) / "kvtier-g3-dp0.tier"


@pytest.fixture
def view():
    return vt.primary_view(32, ROW)


def store_rows(tier, view, ns, job_id=1, first_row=0, salt=0):
    rows = np.asarray(view)
    for i, n in enumerate(ns):
        rows[first_row + i] = vt.row_bytes_of(n, ROW, salt)
    return vt.run_job(tier, job_id, [vt.key(n) for n in ns], range(first_row, first_row + len(ns)), load=False)


def test_the_factory_builds_it_by_module_path_with_locality_and_backpressure(tmp_path, view):
    config = disk(tmp_path, locality="LOCAL",
                  backpressure={"backpressure_cls": "EMABackpressureDetector", "failure_threshold": 3})
    tier = vt.make_tier(config, view, vt.offloading_spec())
    assert type(tier).__name__ == "KvtierDiskTier" and tier.medium == Medium.STORAGE
    assert tier.tier_type == "KvtierDiskTier" and tier.locality.value == "LOCAL"
    assert tier.bp_detector is not None
    assert tier.config_info() == {"kvtier_capacity_blocks": 64, "kvtier_row_bytes": ROW, "kvtier_keyed": False,
                                  "kvtier_sync": False}
    tier.shutdown()


@pytest.mark.parametrize("bad, named", [
    ({"capacity_blocks": 0}, "capacity_blocks"),
    ({"capacity_blocks": "8"}, "capacity_blocks"),
    ({"path": ""}, "path"),
    ({"queue_depth": 0}, "queue_depth"),
    ({"sync": "yes"}, "sync"),
    ({"capacity": 8}, "capacity"),
])
def test_a_bad_option_is_an_error_that_names_it(tmp_path, view, bad, named):
    with pytest.raises(ValueError, match=named):
        vt.make_tier({**disk(tmp_path), **bad}, view, vt.offloading_spec())


@pytest.mark.parametrize("batch", [0, 1, 2, 5])
def test_rows_come_back_into_other_rows(tmp_path, view, batch):
    tier = vt.make_tier(disk(tmp_path), view, vt.offloading_spec())
    ns = list(range(1, batch + 1))
    assert store_rows(tier, view, ns).success
    assert all(tier.lookup(vt.key(n), ReqContext(req_id="r")) == LookupResult.HIT for n in ns)
    assert tier.lookup(vt.key(99), ReqContext(req_id="r")) == LookupResult.MISS
    result = vt.run_job(tier, 2, [vt.key(n) for n in ns], range(20, 20 + batch), load=True)
    assert result.success and result.successful_keys is None
    rows = np.asarray(view)
    for i, n in enumerate(ns):
        assert np.array_equal(rows[20 + i], vt.row_bytes_of(n, ROW))
    tier.shutdown()


def test_a_missing_key_fails_the_job_and_a_partial_failure_keeps_the_good_keys(tmp_path, view):
    tier = vt.make_tier(disk(tmp_path), view, vt.offloading_spec())
    assert store_rows(tier, view, [1, 2]).success
    missing = vt.run_job(tier, 2, [vt.key(7)], [10], load=True)
    assert not missing.success and missing.successful_keys is None
    partial = vt.run_job(tier, 3, [vt.key(1), vt.key(7), vt.key(2)], [10, 11, 12], load=True)
    assert not partial.success
    assert set(partial.successful_keys) == {vt.key(1), vt.key(2)}
    assert np.array_equal(np.asarray(view)[12], vt.row_bytes_of(2, ROW))
    outside = vt.run_job(tier, 4, [vt.key(1)], [32], load=True)  # a row past the primary's
    assert not outside.success
    tier.shutdown()


def test_several_jobs_are_each_reported_once_and_drain_waits_for_all(tmp_path, view):
    tier = vt.make_tier(disk(tmp_path), view, vt.offloading_spec())
    rows = np.asarray(view)
    for n in range(16):
        rows[n] = vt.row_bytes_of(n, ROW)
    from vllm.v1.kv_offload.tiering.base import TransferJob
    for j in range(8):
        tier.submit_store(TransferJob(job_id=j, keys=[vt.key(2 * j), vt.key(2 * j + 1)],
                                      chunk_ids=np.array([2 * j, 2 * j + 1], dtype=np.int32), is_promotion=False,
                                      req_context=ReqContext(req_id="r")))
    tier.drain_jobs()
    results = vt.finished_until(tier, set(range(8)), timeout=1.0)
    assert all(r.success and r.transfer_bytes == 2 * ROW for r in results.values())
    assert list(tier.get_finished_jobs()) == []
    tier.shutdown()


def manager_storing(tmp_path, count=24):
    """A TieringOffloadingManager over kvtier's G3 right after storing `count` rows (their cascade in flight)."""
    m = vt.TieredManager([disk(tmp_path)], num_chunks=32, row_bytes=ROW)
    ctx = m.request()
    keys = [vt.key(n) for n in range(count)]
    m.store(ctx, keys, {k: vt.row_bytes_of(n, ROW) for n, k in enumerate(keys)})
    return m, ctx, keys


def test_shutdown_while_busy_reports_every_job_and_frees_the_primary(tmp_path):
    m, _, _ = manager_storing(tmp_path)
    m.shutdown()  # vLLM's: the tiers first, then the primary (its memoryview release must not fail)


def test_a_restart_in_a_new_process_finds_and_loads_every_row(tmp_path, view):
    tier = vt.make_tier(disk(tmp_path), view, vt.offloading_spec())
    ns = list(range(1, 21))
    assert store_rows(tier, view, ns).success
    tier.shutdown()
    script = f"""
import sys, numpy as np
sys.path.insert(0, {str(HERE)!r})
import vllm_tiers as vt
view = vt.primary_view(32, {ROW})
tier = vt.make_tier({disk(tmp_path)!r}, view, vt.offloading_spec())
from vllm.v1.kv_offload.base import LookupResult, ReqContext
assert tier.recovered["resident"] == 20, tier.recovered
assert all(tier.lookup(vt.key(n), ReqContext(req_id="x")) == LookupResult.HIT for n in {ns!r})
result = vt.run_job(tier, 1, [vt.key(n) for n in {ns!r}], range(31, 11, -1), load=True)
assert result.success
rows = np.asarray(view)
bad = [n for i, n in enumerate({ns!r}) if not np.array_equal(rows[31 - i], vt.row_bytes_of(n, {ROW}))]
tier.shutdown()
print("rows that differ:", bad)
sys.exit(1 if bad else 0)
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "rows that differ: []" in done.stdout


def flip_bytes_in_place(path, offsets):
    with open(path, "r+b") as f:
        for at in offsets:
            f.seek(at)
            b = f.read(1)
            f.seek(at)
            f.write(bytes([b[0] ^ 0x5A]))


def test_damaged_bytes_are_never_loaded_where_vllms_fs_tier_serves_them(tmp_path):
    ns = list(range(1, 17))
    # kvtier's G3: every stored row damaged in place (same sizes).
    view = vt.primary_view(32, ROW)
    tier = vt.make_tier(disk(tmp_path / "g3"), view, vt.offloading_spec())
    assert store_rows(tier, view, ns).success
    tier.shutdown()
    slot = 4096 + ROW
    flip_bytes_in_place(tier_file(tmp_path / "g3"), [4096 + s * slot + 4096 + 1000 for s in range(len(ns))])
    tier = vt.make_tier(disk(tmp_path / "g3"), view, vt.offloading_spec())
    result = vt.run_job(tier, 1, [vt.key(n) for n in ns], range(16, 32), load=True)
    assert not result.success and not result.successful_keys  # not one damaged row is a loaded key
    assert all(tier.lookup(vt.key(n), ReqContext(req_id="r")) == LookupResult.MISS for n in ns)
    counted = tier.get_stats().data
    tier.shutdown()
    assert any("refused_records" in name for name in str(counted).split("'"))

    # vLLM's own fs tier, the same rows and the same damage: 16 of 16 served as successful loads.
    view = vt.primary_view(32, ROW)
    fs = vt.make_tier({"type": "fs", "root_dir": str(tmp_path / "fs"), "n_read_threads": 2,
                       "n_write_threads": 2}, view, vt.offloading_spec())
    assert store_rows(fs, view, ns).success
    files = sorted(pathlib.Path(tmp_path / "fs").rglob("*.bin"))
    assert len(files) == len(ns)
    for f in files:
        flip_bytes_in_place(f, [1000])
    loaded = vt.run_job(fs, 2, [vt.key(n) for n in ns], range(16, 32), load=True)
    rows = np.asarray(view)
    wrong = [n for i, n in enumerate(ns) if not np.array_equal(rows[16 + i], vt.row_bytes_of(n, ROW))]
    fs.shutdown()
    assert loaded.success and len(wrong) == len(ns)


def test_records_of_another_tier_key_are_refused(tmp_path, view):
    key_a, key_b = tmp_path / "a.key", tmp_path / "b.key"
    for path, byte in ((key_a, b"a"), (key_b, b"b")):
        path.write_bytes(byte * 32)
        path.chmod(0o600)
    ns = [1, 2, 3]
    with_a = vt.make_tier(disk(tmp_path / "a", tier_key_file=str(key_a)), view, vt.offloading_spec())
    assert store_rows(with_a, view, ns).success
    with_a.shutdown()
    with_b = vt.make_tier(disk(tmp_path / "b", tier_key_file=str(key_b)), view, vt.offloading_spec())
    assert store_rows(with_b, view, [7], salt=1).success
    with_b.shutdown()
    # Someone without key A writes B's records (valid checksums, B's MAC) over A's slots.
    slot = 4096 + ROW
    forged = tier_file(tmp_path / "b").read_bytes()[4096:4096 + slot]
    with open(tier_file(tmp_path / "a"), "r+b") as f:
        for s in range(len(ns)):
            f.seek(4096 + s * slot)
            f.write(forged)
    again = vt.make_tier(disk(tmp_path / "a", tier_key_file=str(key_a)), view, vt.offloading_spec())
    assert again.recovered["resident"] == 0 and again.recovered["unauthenticated"] == len(ns)
    assert again.lookup(vt.key(7), ReqContext(req_id="r")) == LookupResult.MISS
    again.shutdown()


def test_three_times_its_capacity_stays_within_it_and_keeps_the_newest(tmp_path, view):
    capacity = 8
    tier = vt.make_tier(disk(tmp_path, capacity=capacity), view, vt.offloading_spec())
    for j in range(3 * capacity // 4):
        ns = list(range(4 * j, 4 * j + 4))
        assert store_rows(tier, view, ns, job_id=j, first_row=0).success
    held = [n for n in range(3 * capacity) if tier.lookup(vt.key(n), ReqContext(req_id="r")) == LookupResult.HIT]
    assert held == list(range(2 * capacity, 3 * capacity))
    tier.shutdown()
    assert tier_file(tmp_path).stat().st_size <= 4096 + capacity * (4096 + ROW)
    assert tier_file(tmp_path).stat().st_blocks * 512 <= 4096 + capacity * (4096 + ROW)


def test_another_model_or_row_size_never_hits_and_its_file_is_refused_unless_reformatted(tmp_path, view):
    tier = vt.make_tier(disk(tmp_path), view, vt.offloading_spec(model="model-a"))
    assert store_rows(tier, view, [1]).success
    tier.shutdown()
    with pytest.raises(ValueError, match="reformat"):
        vt.make_tier(disk(tmp_path), view, vt.offloading_spec(model="model-b"))
    with pytest.raises(ValueError, match="reformat"):
        vt.make_tier(disk(tmp_path), vt.primary_view(8, 4096), vt.offloading_spec(model="model-a"))
    fresh = vt.make_tier(disk(tmp_path, reformat=True), view, vt.offloading_spec(model="model-b"))
    assert fresh.recovered["reformatted"]
    assert fresh.lookup(vt.key(1), ReqContext(req_id="r")) == LookupResult.MISS
    fresh.shutdown()


def test_events_say_what_was_stored_and_evicted_with_ownership(tmp_path, view):
    tier = vt.make_tier(disk(tmp_path, capacity=2, enable_kv_events=True), view, vt.offloading_spec(events=True))
    assert store_rows(tier, view, [1, 2]).success
    assert store_rows(tier, view, [3], job_id=2).success
    events = list(tier.take_events())
    stored = [k for e in events if not e.removed for k in e.keys]
    removed = [k for e in events if e.removed for k in e.keys]
    assert stored == [vt.key(1), vt.key(2), vt.key(3)]
    assert removed == [vt.key(1)]
    assert all(e.medium == Medium.STORAGE and e.ownership == "kvtier-g3" and e.removal_expected for e in events)
    assert list(tier.take_events()) == []
    tier.shutdown()
    quiet = vt.make_tier(disk(tmp_path / "q", enable_kv_events=True), view, vt.offloading_spec(events=False))
    assert store_rows(quiet, view, [1]).success
    assert list(quiet.take_events()) == []  # vLLM's KV events are off: nothing is kept
    quiet.shutdown()


def test_every_metric_emitted_is_declared_with_its_labels_and_every_declared_one_is_emitted(tmp_path, view):
    extra = {"spec_name": "TieringOffloadingSpec", "secondary_tiers": [disk(tmp_path)]}
    declared = TieringOffloadingSpec.build_metric_definitions(extra)
    ours = {name for name in declared if name.startswith("kvtier:")}
    tier = vt.make_tier(disk(tmp_path, capacity=2), view, vt.offloading_spec())
    emitted = {}

    def collect():
        from vllm.distributed.kv_transfer.kv_connector.v1.offloading.metrics import _StatsKey
        for name, values in tier.get_stats().data[_StatsKey.DATA].items():
            for labels in values:
                assert name in declared, name
                assert len(labels) == len(declared[name].labelnames), (name, labels)
                emitted.setdefault(name, set()).add(labels)

    assert store_rows(tier, view, [1, 2, 3]).success  # one eviction
    assert store_rows(tier, view, [3], job_id=2).success  # already held
    tier.lookup(vt.key(3), ReqContext(req_id="r"))
    tier.lookup(vt.key(1), ReqContext(req_id="r"))
    assert vt.run_job(tier, 3, [vt.key(3), vt.key(9)], [10, 11], load=True).successful_keys == (vt.key(3),)
    collect()
    tier.shutdown()
    flip_bytes_in_place(tier_file(tmp_path), [4096 + 4096 + 10, 4096 + (4096 + ROW) + 4096 + 10])
    key_less = vt.make_tier(disk(tmp_path, capacity=2), view, vt.offloading_spec())
    tier = key_less
    vt.run_job(tier, 4, [vt.key(2), vt.key(3)], [10, 11], load=True)
    collect()
    tier.shutdown()
    assert set(emitted) == ours
    assert emitted["kvtier:vllm_tier_refused_records"] == {("KvtierDiskTier", "checksum")}
    assert emitted["kvtier:vllm_tier_lookups"] == {("KvtierDiskTier", "hit"), ("KvtierDiskTier", "miss")}


def test_tiering_manager_cascades_stores_to_kvtier_and_promotes_after_a_restart(tmp_path):
    keys = [vt.key(n) for n in range(12)]
    payloads = {k: vt.row_bytes_of(n, ROW) for n, k in enumerate(keys)}
    m = vt.TieredManager([disk(tmp_path)], num_chunks=16, row_bytes=ROW)
    ctx = m.request()
    m.store(ctx, keys, payloads)
    m.settle()
    assert all(m.tiers[0].lookup(k, ctx) == LookupResult.HIT for k in keys)
    m.shutdown()
    # A new manager on the same path: primary is empty, every key is promoted from kvtier's G3.
    again = vt.TieredManager([disk(tmp_path)], num_chunks=16, row_bytes=ROW)
    ctx = again.request()
    took = again.promote([(ctx, keys)])
    assert took["missed"] == [] and took["steps"] >= 1  # a promotion crosses a step boundary
    rows = again.read_rows(ctx, keys)
    assert all(np.array_equal(r, payloads[k]) for r, k in zip(rows, keys))
    again.shutdown()


def test_reset_cache_with_jobs_in_flight_drains_them(tmp_path):
    m, ctx, keys = manager_storing(tmp_path)
    with m.manager.lock:
        m.manager.reset_cache()  # drains the tier, then asserts no job is left
    m.settle()
    assert all(m.tiers[0].lookup(k, ctx) == LookupResult.HIT for k in keys)
    m.shutdown()


def test_a_writer_killed_mid_store_leaves_only_whole_rows(tmp_path):
    """kill -9 while G3 writes: the next process finds only rows whose bytes verify, and each loads whole."""
    script = f"""
import sys, numpy as np
sys.path.insert(0, {str(HERE)!r})
import vllm_tiers as vt
from vllm.v1.kv_offload.tiering.base import TransferJob
from vllm.v1.kv_offload.base import ReqContext
view = vt.primary_view(32, {ROW})
rows = np.asarray(view)
for i in range(32):
    rows[i] = vt.row_bytes_of(i, {ROW})
tier = vt.make_tier({disk(tmp_path, capacity=1024)!r}, view, vt.offloading_spec())
print("storing", flush=True)
finished = 0
for j in range(1000000):  # until killed
    tier.submit_store(TransferJob(job_id=j, keys=[vt.key(32 * j + i) for i in range(32)],
                                  chunk_ids=np.arange(32, dtype=np.int32), is_promotion=False,
                                  req_context=ReqContext(req_id="w")))
    finished += len(list(tier.get_finished_jobs()))
    print(j, finished, flush=True)
"""
    writer = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              text=True)
    assert writer.stdout.readline().strip() == "storing"
    submitted = finished = 0
    while finished < 20:  # 20 jobs stored, and more in flight at the kill
        submitted, finished = map(int, writer.stdout.readline().split())
    writer.kill()
    writer.wait()
    view = vt.primary_view(32, ROW)
    tier = vt.make_tier(disk(tmp_path, capacity=1024), view, vt.offloading_spec())
    held = tier.recovered["resident"]
    assert held > 0
    found = [n for n in range(32 * (submitted + 1000)) if tier.lookup(vt.key(n), ReqContext(req_id="r")) ==
             LookupResult.HIT]
    assert len(found) == held
    rows = np.asarray(view)
    for start in range(0, len(found), 32):
        batch = found[start:start + 32]
        result = vt.run_job(tier, start, [vt.key(n) for n in batch], range(len(batch)), load=True)
        loaded = set(result.successful_keys or ()) if not result.success else {vt.key(n) for n in batch}
        for i, n in enumerate(batch):  # a row that loads is its key's whole row; a torn one never loads
            if vt.key(n) in loaded:
                assert np.array_equal(rows[i], vt.row_bytes_of(n % 32, ROW)), n
    tier.shutdown()
