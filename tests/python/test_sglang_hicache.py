"""kvtier's G3 and G4 as an SGLang 0.5.23 HiCache storage backend (issue 51),
with the real SGLang on the CPU: its HybridCacheController (the class the
server builds) over its MHA host pool, its backend factory loading
{"backend_name": "kvtier", "module_path": "kvtier.sglang", "class_name":
"KvtierHiCacheStorage", "interface_v1": 1, ...}, its backup and prefetch
threads and its page-hash chain. Pages come back byte for byte (page_first
and layer_first), from a new process too; damaged and truncated records are
never served where SGLang's file backend serves or loses them; another layout
in the same directory is refused; the capacity keeps the heads of chains; two
processes share G4; G3 + G4 stacked; a stopped Redis answers within its
deadline. Runs in SGLang's own environment (scripts/install-model-deps.sh
sglang), never skipped by the README's test command."""
import json
import os
import pathlib
import subprocess
import sys
import threading
import time

import pytest

if os.environ.get("KVTIER_REQUIRE_SGLANG_TESTS") != "1":
    pytest.importorskip("sglang")

import torch  # noqa: E402
from sglang.srt.mem_cache.hicache_storage import PoolHitPolicy, PoolName, PoolTransfer  # noqa: E402

import sglang_pages as sp  # noqa: E402
from kvtier.sglang.cpu_controller import CpuHiCache, Geometry, host_pool  # noqa: E402

HERE = pathlib.Path(__file__).resolve().parent
LAYOUTS = ["page_first", "layer_first"]


def g3(tmp_path, capacity=64, **options):
    return sp.kvtier_config(disk_path=str(tmp_path / "g3"), disk_capacity_blocks=capacity, **options)


def g4(node, namespace, **options):
    return sp.kvtier_config(redis_url=node.url, redis_namespace=namespace, deadline_ms=200, retry_after_ms=300,
                            **options)


def other_process(layout, config, tokens, tmp_path):
    """SGLang's prefetch of `tokens` in a new process: (tokens completed, page bytes)."""
    out = tmp_path / f"other-{time.monotonic_ns()}.json"
    subprocess.run([sys.executable, str(HERE / "sglang_pages.py"), layout, json.dumps(config), json.dumps(tokens),
                    str(out)], check=True, cwd=HERE, timeout=300)
    got = json.loads(out.read_text())
    return got["done"], [bytes.fromhex(p) for p in got["pages"]]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_pages_come_back_equal_through_sglangs_controller_and_from_a_new_process(tmp_path, layout):
    cache = CpuHiCache(sp.GEOMETRY, layout, "dynamic", g3(tmp_path))
    assert type(cache.backend).__name__ == "KvtierHiCacheStorage"
    assert cache.controller.page_get_func.__name__ == "_page_get_zero_copy"  # SGLang's zero-copy v1 path
    tokens = sp.prompt(6, seed=1)
    written, pages = sp.write_prompt(cache, tokens, seed=1)
    assert written == len(tokens)
    done, got = sp.read_prompt(cache, tokens)
    assert done == len(tokens) and got == pages
    # A longer prompt sharing the prefix: exactly the stored pages hit.
    done, got = sp.read_prompt(cache, tokens + sp.prompt(2, seed=99))
    assert done == len(tokens) and got == pages
    counters = cache.backend.counters()["kv"]["g3"]
    assert counters["keys_stored"] == 6 and counters["keys_loaded"] == 12 and counters["checksum_failures"] == 0
    cache.close()
    # A restart: a new controller and backend on the same directory (page_first: in a new process).
    if layout == "page_first":
        done, got = other_process(layout, g3(tmp_path), tokens, tmp_path)
    else:
        again = CpuHiCache(sp.GEOMETRY, layout, "dynamic", g3(tmp_path))
        done, got = sp.read_prompt(again, tokens)
        again.close()
    assert done == len(tokens) and got == pages


def test_a_page_damaged_in_place_is_never_served_where_sglangs_file_backend_serves_it(tmp_path):
    tokens = sp.prompt(6, seed=2)
    keys = sp.page_keys(tokens)
    # SGLang's own file backend, the same damage: a same-size byte flip in page 2 is served as a hit.
    file_dir = tmp_path / "file"
    theirs = CpuHiCache(sp.GEOMETRY, "page_first", "file", {"file_storage_path": str(file_dir)})
    _, pages = sp.write_prompt(theirs, tokens, seed=2)
    sp.flip_byte(sp.file_backend_page(file_dir, keys[2]))
    done, got = sp.read_prompt(theirs, tokens)
    assert done == len(tokens) and got[2] != pages[2]  # wrong KV, reported as complete
    theirs.close()
    # kvtier's G3: the damaged page and what follows are recomputed; the pages before it are served.
    mine = CpuHiCache(sp.GEOMETRY, "page_first", "dynamic", g3(tmp_path))
    sp.write_prompt(mine, tokens, seed=2)
    mine.close()
    sp.damage_g3_page(tmp_path / "g3", keys[2])
    mine = CpuHiCache(sp.GEOMETRY, "page_first", "dynamic", g3(tmp_path))
    done, got = sp.read_prompt(mine, tokens)
    assert done == 2 * sp.GEOMETRY.page_size and got == pages[:2]
    assert mine.backend.counters()["kv"]["g3"]["checksum_failures"] == 1
    # Dropped: it misses from now on, and the next backup writes it again (repaired).
    assert mine.backend.batch_exists(keys) == 2
    sp.write_prompt(mine, tokens, seed=2)
    done, got = sp.read_prompt(mine, tokens)
    assert done == len(tokens) and got == pages
    mine.close()


def test_a_truncated_record_loses_only_its_tail_and_is_written_again(tmp_path):
    tokens = sp.prompt(6, seed=3)
    keys = sp.page_keys(tokens)
    # SGLang's file backend: a short file throws the whole batch away, and stays (exists, so never rewritten).
    file_dir = tmp_path / "file"
    theirs = CpuHiCache(sp.GEOMETRY, "page_first", "file", {"file_storage_path": str(file_dir)})
    _, pages = sp.write_prompt(theirs, tokens, seed=3)
    os.truncate(sp.file_backend_page(file_dir, keys[4]), 10)
    assert sp.read_prompt(theirs, tokens)[0] == 0
    sp.write_prompt(theirs, tokens, seed=3)
    assert sp.read_prompt(theirs, tokens)[0] == 0
    theirs.close()
    # kvtier: the file cut inside page 4's record (a torn tail): pages 0-3 are served, page 4 is written again.
    mine = CpuHiCache(sp.GEOMETRY, "page_first", "dynamic", g3(tmp_path))
    sp.write_prompt(mine, tokens, seed=3)
    mine.close()
    sp.truncate_g3_at(tmp_path / "g3", keys[4])
    mine = CpuHiCache(sp.GEOMETRY, "page_first", "dynamic", g3(tmp_path))
    done, got = sp.read_prompt(mine, tokens)
    assert done == 4 * sp.GEOMETRY.page_size and got == pages[:4]
    sp.write_prompt(mine, tokens, seed=3)
    done, got = sp.read_prompt(mine, tokens)
    assert done == len(tokens) and got == pages
    mine.close()


def test_another_layout_in_the_same_directory_is_refused(tmp_path):
    tokens = sp.prompt(4, seed=4)
    cache = CpuHiCache(sp.GEOMETRY, "page_first", "dynamic", g3(tmp_path))
    sp.write_prompt(cache, tokens, seed=4)
    cache.close()
    with pytest.raises(Exception, match="namespace|another"):
        CpuHiCache(sp.GEOMETRY, "layer_first", "dynamic", g3(tmp_path))
    other_model = Geometry(heads=4, head_dim=4)  # the same page bytes, another model
    with pytest.raises(Exception, match="namespace|another"):
        CpuHiCache(other_model, "page_first", "dynamic", g3(tmp_path))
    # With reformat the file starts anew: nothing of the old layout is served.
    cache = CpuHiCache(sp.GEOMETRY, "layer_first", "dynamic", g3(tmp_path, reformat=True))
    assert sp.read_prompt(cache, tokens)[0] == 0
    cache.close()


def test_the_capacity_keeps_the_heads_of_chains(tmp_path):
    ps = sp.GEOMETRY.page_size
    # SGLang's file backend with a cap of 3 pages keeps the tail of a 6-page prompt: nothing can hit.
    file_dir = tmp_path / "file"
    theirs = CpuHiCache(sp.GEOMETRY, "page_first", "file",
                        {"file_storage_path": str(file_dir), "max_size": 3 * sp.GEOMETRY.page_bytes})
    a = sp.prompt(6, seed=5)
    sp.write_prompt(theirs, a, seed=5)
    assert sp.read_prompt(theirs, a)[0] == 0
    theirs.close()
    # kvtier with room for 4 pages keeps the head of the prompt: 4 pages hit.
    cache = CpuHiCache(sp.GEOMETRY, "page_first", "dynamic", g3(tmp_path, capacity=4))
    _, a_pages = sp.write_prompt(cache, a, seed=5)
    done, got = sp.read_prompt(cache, a)
    assert done == 4 * ps and got == a_pages[:4]
    # A second prompt of 2 pages takes the room of the first's tail, never its head.
    b = sp.prompt(2, seed=6)
    _, b_pages = sp.write_prompt(cache, b, seed=6)
    assert sp.read_prompt(cache, b) == (2 * ps, b_pages)
    done, got = sp.read_prompt(cache, a)
    assert done == 2 * ps and got == a_pages[:2]
    assert cache.backend.counters()["kv"]["g3"]["used"] == 4
    cache.close()


def test_pages_past_a_lost_prefix_are_the_first_to_go(tmp_path):
    ps = sp.GEOMETRY.page_size
    cache = CpuHiCache(sp.GEOMETRY, "page_first", "dynamic", g3(tmp_path, capacity=6))
    a = sp.prompt(4, seed=7)
    _, a_pages = sp.write_prompt(cache, a, seed=7)
    b = sp.prompt(2, seed=8)
    sp.write_prompt(cache, b, seed=8)
    cache.close()
    sp.damage_g3_page(tmp_path / "g3", sp.page_keys(a)[1])
    cache = CpuHiCache(sp.GEOMETRY, "page_first", "dynamic", g3(tmp_path, capacity=6))
    assert sp.read_prompt(cache, a)[0] == ps  # page 1 dropped: pages 2 and 3 can never be used
    # Two new pages: they take the room of a's orphans (2, 3), not of b, which was written earlier.
    c = sp.prompt(2, seed=9)
    _, c_pages = sp.write_prompt(cache, c, seed=9)
    assert sp.read_prompt(cache, b)[0] == 2 * ps
    assert sp.read_prompt(cache, c) == (2 * ps, c_pages)
    keys = sp.page_keys(a)
    assert cache.backend.batch_exists(keys[2:]) == 0
    cache.close()


def test_two_processes_share_g4(tmp_path, redis_node):
    tokens = sp.prompt(5, seed=10)
    config = g4(redis_node, "two-processes")
    cache = CpuHiCache(sp.GEOMETRY, "page_first", "dynamic", config)
    written, pages = sp.write_prompt(cache, tokens, seed=10)
    assert written == len(tokens)
    cache.close()
    done, got = other_process("page_first", config, tokens, tmp_path)
    assert done == len(tokens) and got == pages
    # Another layout on the same Redis: the values are never served (its namespace differs).
    other = CpuHiCache(sp.GEOMETRY, "layer_first", "dynamic", config)
    assert sp.read_prompt(other, tokens)[0] == 0
    other.close()


def test_a_damaged_g4_value_is_never_served(tmp_path, redis_node):
    tokens = sp.prompt(3, seed=11)
    config = g4(redis_node, "damaged")
    cache = CpuHiCache(sp.GEOMETRY, "page_first", "dynamic", config)
    _, pages = sp.write_prompt(cache, tokens, seed=11)
    key = sp.page_keys(tokens)[1]
    names = [n for n in redis_node.cli("--scan", "--pattern", "damaged:*").split() if n]
    assert len(names) == 3
    damaged = 0
    for name in names:
        value = subprocess.run(["redis-cli", "-p", redis_node.port, "--no-raw", "GET", name], check=True,
                               capture_output=True).stdout
        if key.encode() in value:
            length = int(redis_node.cli("STRLEN", name))
            offset = length - 10
            byte = redis_node.cli("GETRANGE", name, str(offset), str(offset))
            redis_node.cli("SETRANGE", name, str(offset), "Z" if byte != "Z" else "Y")
            damaged += 1
    assert damaged == 1
    done, got = sp.read_prompt(cache, tokens)
    assert done == sp.GEOMETRY.page_size and got == pages[:1]
    assert cache.backend.counters()["kv"]["g4"]["checksum_failures"] == 1
    cache.close()


def test_g3_and_g4_stacked(tmp_path, redis_node):
    tokens = sp.prompt(4, seed=12)
    redis = {"redis_url": redis_node.url, "redis_namespace": "stacked", "deadline_ms": 200}
    first = CpuHiCache(sp.GEOMETRY, "page_first", "dynamic", g3(tmp_path / "a", **redis))
    _, pages = sp.write_prompt(first, tokens, seed=12)
    counters = first.backend.counters()["kv"]
    assert counters["g3"]["keys_stored"] == 4 and counters["g4"]["keys_stored"] == 4  # every set goes to both
    first.close()
    # Another instance with an empty G3: the pages come from G4 and are kept in its G3 too.
    second = CpuHiCache(sp.GEOMETRY, "page_first", "dynamic", g3(tmp_path / "b", **redis))
    done, got = sp.read_prompt(second, tokens)
    assert done == len(tokens) and got == pages
    counters = second.backend.counters()["kv"]
    assert counters["g4"]["keys_loaded"] == 4 and counters["g3"]["keys_stored"] == 4
    second.close()
    alone = CpuHiCache(sp.GEOMETRY, "page_first", "dynamic", g3(tmp_path / "b"))
    assert sp.read_prompt(alone, tokens) == (len(tokens), pages)
    alone.close()


def test_a_stopped_redis_answers_within_its_deadline(tmp_path, redis_node):
    tokens = sp.prompt(3, seed=13)
    cache = CpuHiCache(sp.GEOMETRY, "page_first", "dynamic", g4(redis_node, "stalled"))
    sp.write_prompt(cache, tokens, seed=13)
    redis_node.signal("STOP")
    try:
        start = time.monotonic()
        assert cache.backend.batch_exists(sp.page_keys(tokens)) == 0
        assert sp.read_prompt(cache, tokens)[0] == 0
        assert sp.write_prompt(cache, sp.prompt(2, seed=14), seed=14)[0] == 0
        assert time.monotonic() - start < 10
    finally:
        redis_node.signal("CONT")
    cache.close()


def test_calls_from_several_threads(tmp_path):
    cache = CpuHiCache(sp.GEOMETRY, "page_first", "dynamic", g3(tmp_path, capacity=256, staging_pages=2))
    backend = cache.backend
    prompts = [sp.prompt(4, seed=20 + t) for t in range(3)]
    indices = [cache.allocate(4) for _ in range(3)]
    for t in range(3):
        cache.fill(indices[t], 20 + t)
    expected = [cache.page_bytes_of(i) for i in indices]
    errors = []

    def work(t):
        keys = sp.page_keys(prompts[t])
        try:
            for _ in range(10):
                assert backend.batch_set_v1(keys, indices[t]) == [True] * 4
                assert backend.batch_exists(keys) == 4
                assert backend.batch_get_v1(keys, indices[t]) == [True] * 4
        except AssertionError as error:
            errors.append(error)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert [cache.page_bytes_of(i) for i in indices] == expected
    cache.close()


def test_sidecar_pools_through_the_v2_calls(tmp_path):
    cache = CpuHiCache(sp.GEOMETRY, "page_first", "dynamic", g3(tmp_path))
    backend = cache.backend
    draft = host_pool(Geometry(layers=1), "page_first")
    backend.register_mem_host_pool_v2(draft, PoolName.DRAFT)
    tokens = sp.prompt(3, seed=30)
    keys = sp.page_keys(tokens)
    kv = cache.allocate(3)
    cache.fill(kv, 30)
    assert cache.backup(kv, tokens) == len(tokens)
    side = draft.alloc(3 * sp.GEOMETRY.page_size)
    flat = draft.get_dummy_flat_data_page()
    for n in range(3):
        draft.set_from_flat_data_page(int(side[n * sp.GEOMETRY.page_size]), torch.full_like(flat, n + 1))
    want = [draft.get_data_page(int(side[n * sp.GEOMETRY.page_size]), flat=True).clone() for n in range(3)]
    result = backend.batch_set_v2([PoolTransfer(name=PoolName.DRAFT, host_indices=side, keys=keys)])
    assert result == {PoolName.DRAFT: [True] * 3}
    # All pages of the sidecar present: the whole KV prefix is restorable; only the last two held for TRAILING.
    hit = backend.batch_exists_v2(keys, [PoolTransfer(name=PoolName.DRAFT, keys=keys[-2:],
                                                       hit_policy=PoolHitPolicy.TRAILING_PAGES)])
    assert hit.kv_hit_pages == 3 and hit.extra_pool_hit_pages[PoolName.DRAFT] == 3
    other = draft.alloc(3 * sp.GEOMETRY.page_size)
    loaded = backend.batch_get_v2([PoolTransfer(name=PoolName.DRAFT, host_indices=other, keys=keys)])
    assert loaded == {PoolName.DRAFT: [True] * 3}
    for n in range(3):
        assert torch.equal(draft.get_data_page(int(other[n * sp.GEOMETRY.page_size]), flat=True), want[n])
    # Host indices of another length: every page False, nothing raised.
    assert backend.batch_get_v2([PoolTransfer(name=PoolName.DRAFT, host_indices=other[:4], keys=keys)]) == {
        PoolName.DRAFT: [False] * 3}
    cache.close()


@pytest.mark.parametrize("extra, message", [
    ({"disk_path": "/tmp/x", "disk_capacity_blocks": 8, "disk_capcity": 3}, "unknown option"),
    ({"disk_path": "/tmp/x"}, "disk_capacity_blocks"),
    ({}, "names no tier"),
    ({"redis_url": 7}, "redis_url"),
    ({"disk_path": "/tmp/x", "disk_capacity_blocks": -1}, "disk_capacity_blocks"),
])
def test_a_bad_extra_config_fails_the_attach_with_a_clear_error(extra, message):
    with pytest.raises(Exception, match=message):
        CpuHiCache(sp.GEOMETRY, "page_first", "dynamic", sp.kvtier_config(**extra))


def test_without_interface_v1_it_refuses_sglangs_generic_path(tmp_path):
    config = g3(tmp_path)
    del config["interface_v1"]
    with pytest.raises(Exception, match="interface_v1"):
        CpuHiCache(sp.GEOMETRY, "page_first", "dynamic", config)


def test_bad_calls_are_false_never_an_exception(tmp_path):
    cache = CpuHiCache(sp.GEOMETRY, "page_first", "dynamic", g3(tmp_path))
    backend = cache.backend
    keys = sp.page_keys(sp.prompt(2, seed=40))
    wrong = torch.tensor([0, 1, 2], dtype=torch.int64)  # not whole pages
    assert backend.batch_set_v1(keys, wrong) == [False, False]
    assert backend.batch_get_v1(keys, wrong) == [False, False]
    outside = torch.tensor([10**9 + i for i in range(8)], dtype=torch.int64)  # past the host pool
    assert backend.batch_set_v1(keys, outside) == [False, False]
    assert backend.batch_exists(keys) == 0
    cache.close()


def test_the_bench_compares_both_backends_through_sglangs_controller_and_plots(tmp_path, capsys):
    from kvtier.sglang import bench

    csv_file = tmp_path / "hicache.csv"
    assert bench.main(["--page-tokens", "2", "--total-mib", "1", "--runs", "1", "--dir", str(tmp_path), "--json",
                       "--csv", str(csv_file)]) == 0
    results = json.loads(capsys.readouterr().out)["results"]
    assert [(r["backend"], r["page_bytes"], r["pages"]) for r in results] == [("sglang-file", 65536, 16),
                                                                             ("kvtier-g3", 65536, 16)]
    for r in results:
        assert r["backup_GiBps"] > 0 and r["prefetch_warm_GiBps"] > 0 and r["prefetch_cold_GiBps"] > 0
        assert r["exists_us"] > 0 and r["page_cache"] in ("drop_caches", "fadvise")
    assert all("prefetch_cold_vs_file" in r for r in results if r["backend"] == "kvtier-g3")
    png = tmp_path / "hicache.png"
    subprocess.run(["bash", str(HERE.parents[1] / "scripts" / "plot.sh"), "sglang", str(csv_file), str(png)],
                   check=True, capture_output=True)
    assert png.stat().st_size > 0


def test_storage_metrics_for_sglangs_collector(tmp_path):
    from sglang.srt.observability.metrics_collector import StorageMetrics

    cache = CpuHiCache(sp.GEOMETRY, "page_first", "dynamic", g3(tmp_path))
    backend = cache.backend
    backend.storage_config.enable_storage_metrics = True  # SGLang's --enable-storage-metrics
    keys = sp.page_keys(sp.prompt(3, seed=50))
    indices = cache.allocate(3)
    cache.fill(indices, 50)
    assert backend.batch_set_v1(keys, indices) == [True] * 3
    assert backend.batch_get_v1(keys, indices) == [True] * 3
    metrics = backend.get_stats()
    assert isinstance(metrics, StorageMetrics)
    assert metrics.backup_pgs == [3] and metrics.prefetch_pgs == [3]
    assert metrics.backup_bandwidth[0] > 0 and metrics.prefetch_bandwidth[0] > 0
    again = backend.get_stats()  # since the last call: nothing new
    assert again.backup_pgs == [] and again.prefetch_pgs == []
    cache.close()
