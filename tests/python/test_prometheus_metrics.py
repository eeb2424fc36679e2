"""Prometheus metrics read as Prometheus reads them (prometheus_client's parser).

`kvtier replay --metrics-port 0` serves /metrics on 127.0.0.1 while it runs:
every scrape parses and no counter falls between scrapes, and the last one
(and --metrics-file) agrees with the replay's JSON report. The Python
Manager's prometheus_text() counts what its own calls did.
"""
import json
import os
import subprocess
import time
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

import kvtier

KVTIER = os.environ.get("KVTIER_BIN", "build/release/kvtier")
needs_cli = pytest.mark.skipif(not os.access(KVTIER, os.X_OK), reason=f"no kvtier CLI at {KVTIER} (set KVTIER_BIN)")


def samples(text):
    """{(sample name, sorted label items): value} of an exposition, parsed by prometheus_client."""
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def value(parsed, name, **labels):
    return parsed[(name, tuple(sorted(labels.items())))]


def counters(parsed):
    return {k: v for k, v in parsed.items() if k[0].endswith("_total") or k[0].endswith("_count")}


def start_replay(tmp_path, *extra):
    args = [KVTIER, "replay", "--capacity", "1024", "--host-blocks", "2048", "--verify", "full",
            "--metrics-port", "0", "--metrics-linger", "30",
            "--json", str(tmp_path / "report.json"), "--metrics-file", str(tmp_path / "metrics.prom"), *extra]
    process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    line = process.stderr.readline()
    assert line.startswith("kvtier: metrics on http://127.0.0.1:"), line
    return process, line.split(" on ", 1)[1].strip()


@needs_cli
def test_scrapes_during_a_replay_parse_and_end_at_the_reports_figures(tmp_path):
    process, url = start_replay(tmp_path)
    try:
        scrapes = []
        done = tmp_path / "metrics.prom"
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            finished = done.exists() and done.stat().st_size > 0 and (tmp_path / "report.json").exists()
            with urllib.request.urlopen(url, timeout=10) as response:
                assert response.status == 200
                scrapes.append(samples(response.read().decode()))
            if finished:
                break  # this scrape came after the last update
            time.sleep(0.02)
        assert len(scrapes) >= 2, "no scrape while the replay ran"
        for before, after in zip(scrapes, scrapes[1:]):
            for key, total in counters(before).items():
                assert after.get(key, total) >= total, key
        final = scrapes[-1]
        report = json.loads((tmp_path / "report.json").read_text())
        from_file = samples((tmp_path / "metrics.prom").read_text())
        for parsed in (final, from_file):
            assert value(parsed, "kvtier:prefix_cache_query_blocks_total") == report["prompt_blocks"]
            assert value(parsed, "kvtier:prefix_cache_hit_blocks_total", tier="G1") == report["g1_hit_blocks"]
            assert value(parsed, "kvtier:prefix_cache_hit_blocks_total", tier="G2") == report["g2_hit_blocks"]
            assert value(parsed, "kvtier:prefix_cache_miss_blocks_total", tier="G1") == \
                report["prompt_blocks"] - report["g1_hit_blocks"]
            assert value(parsed, "kvtier:kv_cache_evicted_blocks_total", tier="G1") == report["evictions"]
            assert value(parsed, "kvtier:kv_cache_stored_blocks_total", tier="G2") == report["swap_outs"]
            assert value(parsed, "kvtier:kv_transfer_blocks_total", **{"from": "G1", "to": "G2"}) == report["swap_outs"]
            assert value(parsed, "kvtier:kv_transfer_bytes_total", **{"from": "G1", "to": "G2"}) == report["swap_out_bytes"]
            assert value(parsed, "kvtier:kv_transfer_blocks_total", **{"from": "G2", "to": "G1"}) == report["swap_ins"]
            assert value(parsed, "kvtier:kv_transfer_bytes_total", **{"from": "G2", "to": "G1"}) == report["swap_in_bytes"]
            assert value(parsed, "kvtier:kv_transfer_failures_total") == report["failed_copies"]
            assert value(parsed, "kvtier:allocator_operations_total") == report["allocator_ops"]
            assert value(parsed, "kvtier:kv_verified_pages_total") == report["pages_verified"]
            assert value(parsed, "kvtier:kv_verify_mismatches_total") == report["mismatches"] == 0
            assert value(parsed, "kvtier:kv_cache_capacity_blocks", tier="G1") == report["capacity"]
            assert value(parsed, "kvtier:kv_cache_capacity_blocks", tier="G2") == report["host_blocks"]
            assert value(parsed, "kvtier:kv_cache_used_blocks", tier="G1") == 0  # every request finished
            assert value(parsed, "kvtier:scheduler_step_duration_seconds_count") == report["steps"]
        assert report["g2_hit_blocks"] > 0 and report["evictions"] > 0  # the figures compared are not all zero
    finally:
        process.kill()
        process.wait()


@needs_cli
def test_several_instances_report_under_their_engine_labels(tmp_path):
    """`--instances 2`: one exposition, each instance's series labelled
    engine="i" (vLLM's label for its data-parallel engines), equal to that
    instance's row of the JSON report."""
    done = subprocess.run(
        [KVTIER, "replay", "--device", "host", "--capacity", "1024", "--host-blocks", "2048", "--instances", "2",
         "--json", str(tmp_path / "report.json"), "--metrics-file", str(tmp_path / "metrics.prom")],
        capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    report = json.loads((tmp_path / "report.json").read_text())
    parsed = samples((tmp_path / "metrics.prom").read_text())
    assert all(dict(labels).get("engine") in ("0", "1") for _, labels in parsed), "every series names its engine"
    for engine, row in enumerate(report["per_instance"]):
        e = str(engine)
        assert value(parsed, "kvtier:prefix_cache_query_blocks_total", engine=e) == row["prompt_blocks"] > 0
        assert value(parsed, "kvtier:prefix_cache_hit_blocks_total", engine=e, tier="G1") == row["g1_hit_blocks"]
        assert value(parsed, "kvtier:prefix_cache_hit_blocks_total", engine=e, tier="G2") == row["g2_hit_blocks"]
        assert value(parsed, "kvtier:kv_cache_evicted_blocks_total", engine=e, tier="G1") == row["evictions"]
        assert value(parsed, "kvtier:kv_transfer_blocks_total", engine=e, **{"from": "G1", "to": "G2"}) == \
            row["swap_outs"]
        assert value(parsed, "kvtier:allocator_operations_total", engine=e) == row["allocator_ops"]
        assert value(parsed, "kvtier:scheduler_step_duration_seconds_count", engine=e) == row["steps"]
    assert sum(value(parsed, "kvtier:prefix_cache_query_blocks_total", engine=str(i)) for i in (0, 1)) == \
        report["prompt_blocks"]


@needs_cli
def test_a_metrics_port_in_use_is_refused_before_the_replay(tmp_path):
    process, url = start_replay(tmp_path)
    try:
        port = url.rsplit(":", 1)[1].split("/")[0]
        second = subprocess.run([KVTIER, "replay", "--metrics-port", port], capture_output=True, text=True, timeout=60)
        assert second.returncode == 2
        assert f"cannot serve metrics on 127.0.0.1:{port}" in second.stderr
        assert "requests:" not in second.stdout  # nothing was replayed
    finally:
        process.kill()
        process.wait()


@needs_cli
def test_metrics_options_that_cannot_work_are_refused(tmp_path):
    for args in (["--metrics-port", "70000"], ["--metrics-port", "-1"], ["--metrics-file", ""],
                 ["--metrics-linger", "-2", "--metrics-port", "0"],
                 ["--sweep-capacity", "512,1024", "--metrics-file", str(tmp_path / "m.prom")]):
        result = subprocess.run([KVTIER, "replay", *args], capture_output=True, text=True, timeout=60)
        assert result.returncode != 0, args
        assert result.stderr.strip(), args
        assert not (tmp_path / "m.prom").exists()


def prefix_requests(m, count, shared_blocks=4, own_blocks=2):
    """`count` requests sharing a prompt prefix: each is allocated, finalized and finished."""
    shared = list(range(1000, 1000 + shared_blocks * m.block_size))
    hits = []
    for i in range(count):
        own = list(range(5000 + 100 * i, 5000 + 100 * i + own_blocks * m.block_size))
        r = m.add_request(shared + own)
        hits.append(m.prefill_cost(r).cached_tokens // m.block_size)
        assert m.allocate(r).result == "ready"
        m.finalize(r, len(r))
        m.finish(r)
    return hits


@pytest.mark.parametrize("backend", ["native", "kvbm"])
def test_manager_prometheus_text_counts_its_own_calls(backend):
    with kvtier.Manager(backend=backend, capacity=64, block_size=4, host_blocks=32) as m:
        hits = prefix_requests(m, 5)
        parsed = samples(m.prometheus_text())
        assert value(parsed, "kvtier:prefix_cache_query_blocks_total") == 5 * 6
        assert value(parsed, "kvtier:prefix_cache_hit_blocks_total", tier="G1") == sum(hits) == 4 * 4
        assert value(parsed, "kvtier:prefix_cache_miss_blocks_total", tier="G1") == 30 - 16
        assert value(parsed, "kvtier:kv_cache_capacity_blocks", tier="G1") == 64
        assert value(parsed, "kvtier:kv_cache_capacity_blocks", tier="G2") == 32
        metrics = m.metrics()
        assert value(parsed, "kvtier:kv_cache_cached_blocks", tier="G1") == metrics["inactive"]
        assert value(parsed, "kvtier:kv_cache_usage_perc", tier="G1") == metrics["active_perc"] == 0
        events = m.take_events()
        stored = sum(len(e["blocks"]) for e in events if e["type"] == "stored" and e["tier"] == "device")
        assert value(parsed, "kvtier:kv_cache_stored_blocks_total", tier="G1") == stored > 0
        assert value(parsed, "kvtier:kv_events_published_total") == len(events)
        assert ("kvtier:allocator_operations_total", ()) not in parsed  # only the replay counts those
        again = samples(m.prometheus_text())  # a second render counts nothing twice
        assert counters(again) == counters(parsed)


def test_manager_without_g2_has_no_g2_series():
    with kvtier.Manager(capacity=16, block_size=4) as m:
        prefix_requests(m, 2)
        text = m.prometheus_text()
        assert 'tier="G2"' not in text
        assert value(samples(text), "kvtier:kv_cache_capacity_blocks", tier="G1") == 16


def test_prometheus_text_after_close_is_a_contract_error():
    m = kvtier.Manager(capacity=16, block_size=4)
    m.close()
    with pytest.raises(kvtier.ContractError):
        m.prometheus_text()
