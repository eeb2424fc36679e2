"""scripts/policy-headroom.py replays a trace by the one definition of hit rate
kvtier's managers use (docs/policies.md): its LRU must hit exactly what
`kvtier bench policy`'s `lru` row hits, or its figures say nothing about
kvtier's policies. KVTIER_BIN names the binary; without one the module skips. The trace is the
one the repository ships (data/traces)."""
import json
import os
import subprocess
import sys

import pytest

KVTIER = os.environ.get("KVTIER_BIN", "build/release/kvtier")
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
SCRIPT = os.path.join(ROOT, "scripts", "policy-headroom.py")
TRACE = os.path.join(ROOT, "data", "traces", "mooncake_synthetic_trace.jsonl")
pytestmark = [
    pytest.mark.skipif(not os.access(KVTIER, os.X_OK), reason=f"no kvtier binary at {KVTIER}"),
]
CAPACITIES = "97,439,1318"
REQUESTS = "1200"


def headroom(tmp_path, *args):
    out = tmp_path / "headroom.json"
    subprocess.run([sys.executable, SCRIPT, "--trace", TRACE, "--capacities", CAPACITIES, "--requests", REQUESTS,
                    "--json", str(out), *args], check=True, capture_output=True, text=True, timeout=600)
    return json.loads(out.read_text())


def test_its_lru_hits_what_kvtiers_lru_hits(tmp_path):
    out = tmp_path / "policy.json"
    subprocess.run([KVTIER, "bench", "policy", "--trace", TRACE, "--capacities", CAPACITIES, "--requests", REQUESTS,
                    "--policies", "lru", "--json", str(out)], check=True, capture_output=True, text=True, timeout=600)
    kvtier_lru = {row["capacity_blocks"]: row["hit_rate"] for row in json.loads(out.read_text())
                  if row["policy"] == "lru"}
    # Room made after a request (the definition's) or before it (a G1 pool's): LRU evicts the same blocks.
    for room in ([], ["--room-first"]):
        script_lru = {row["capacity_blocks"]: row["hit_rate"] for row in headroom(tmp_path, "--families", "lru", *room)}
        assert set(script_lru) == {97, 439, 1318}
        assert kvtier_lru.keys() == script_lru.keys()
        for capacity, rate in script_lru.items():
            assert rate > 0
            assert rate == pytest.approx(kvtier_lru[capacity], abs=1e-12), (capacity, room)


def test_no_bonus_is_lru_and_the_oracle_never_hits_less(tmp_path):
    rows = headroom(tmp_path, "--families", "lru,frequency,oracle_admission", "--weights", "0", "--caps", "1",
                    "--windows", "1000000000")
    by_policy = {}
    for row in rows:
        by_policy.setdefault(row["policy"], {})[row["capacity_blocks"]] = row["hit_rate"]
    assert by_policy["frequency"] == by_policy["lru"]  # a bonus of 0: recency alone
    # Turning away only first sightings that are never used again can only leave more room for the rest.
    for capacity, rate in by_policy["lru"].items():
        assert by_policy["oracle_admission"][capacity] >= rate
    assert any(by_policy["oracle_admission"][c] > r for c, r in by_policy["lru"].items())


def test_a_history_longer_than_the_trace_is_exact_counts_and_a_short_one_forgets(tmp_path):
    args = ["--families", "frequency", "--weights", "4", "--caps", "100"]
    exact = {r["capacity_blocks"]: r["hit_rate"] for r in headroom(tmp_path, *args)}
    long = {r["capacity_blocks"]: r["hit_rate"] for r in headroom(tmp_path, *args, "--history", "1000")}
    short = {r["capacity_blocks"]: r["hit_rate"] for r in headroom(tmp_path, *args, "--history", "0.5")}
    assert long == exact
    assert short != exact


def test_room_made_first_costs_the_bounded_frequency_rule_its_lead_at_one_percent(tmp_path):
    # The whole trace at 1%: after a request the rule may evict its own new blocks and keep
    # boosted old ones (5.10%); a pool that makes room first may not (4.60%); LRU is the same.
    args = ["--families", "lru,frequency", "--weights", "8", "--caps", "1", "--history", "4", "--requests", "0",
            "--capacities", "439"]
    after = {r["policy"]: r["hit_rate"] for r in headroom(tmp_path, *args)}
    first = {r["policy"]: r["hit_rate"] for r in headroom(tmp_path, *args, "--room-first")}
    assert first["lru"] == after["lru"]
    assert after["frequency"] > 1.3 * after["lru"]
    assert after["lru"] < first["frequency"] < after["frequency"]
