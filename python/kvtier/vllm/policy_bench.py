"""Cache policies through vLLM 0.33.0's own CPU tier manager (docs/vllm.md,
"kvtier's cache policy"): vLLM's ``lru``, ``arc`` and ``lru`` with
``store_threshold`` 2 beside kvtier's orders, on the same trace and capacities,
with the offline optimum kvtier computes (docs/policies.md, "bound").

    python -m kvtier.vllm.policy_bench [TRACE] [--capacities 1%,3%,10%] [--policies ...]
                                       [--json] [--csv F]

TRACE is a Mooncake-style JSONL trace (``hash_ids`` per block; default: the
shipped data/traces/mooncake_synthetic_trace.jsonl). Each policy replays it
through a fresh ``CPUOffloadingManager`` (metadata only), one request at a time:
look up the longest resident prefix (the hits), load it (prepare_load,
complete_load), offer every block to the store (prepare_store, complete_store),
finish the request. A block's key is vLLM's ``OffloadKey`` of its hash id and
KV cache group 0. The hit rate is hits over all blocks of the trace — the one
definition of docs/policies.md, so ``lru`` here equals ``kvtier bench policy``'s.

Also measured, per policy: the manager's time per request (us; the median of
--repeats replays, the policies alternated within each round, the trace's keys
built before the clock), and its ratio to vLLM's ``lru`` in the same run.
"""

from __future__ import annotations

import argparse
import csv
import gc
import json
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from kvtier import _kvtier

# name -> (vLLM's eviction_policy, cache_policy_module_path, store_threshold)
POLICIES: dict[str, tuple[str, str | None, int]] = {
    "lru": ("lru", None, 1),
    "arc": ("arc", None, 1),
    "lru_threshold2": ("lru", None, 2),
    "kvtier_adaptive": ("KvtierAdaptivePolicy", "kvtier.vllm", 1),
    "kvtier_lfu_da": ("KvtierLfuDaPolicy", "kvtier.vllm", 1),
    "kvtier_lru2": ("KvtierLru2Policy", "kvtier.vllm", 1),
    "kvtier_arc": ("KvtierArcPolicy", "kvtier.vllm", 1),
    "kvtier_s3fifo": ("KvtierS3FifoPolicy", "kvtier.vllm", 1),
}
DEFAULT_POLICIES = "lru,arc,lru_threshold2,kvtier_adaptive,kvtier_lfu_da"


@dataclass
class PolicyRow:
    policy: str
    capacity: str
    capacity_blocks: int
    hits: int
    prompt_blocks: int
    hit_rate: float
    fraction_of_bound: float
    us_per_request: float | None = None  # None for the bound
    cost_vs_lru: float | None = None


def default_trace() -> Path:
    """The shipped trace, found from a source checkout or the working directory."""
    for base in (Path(__file__).resolve().parents[3], Path.cwd()):
        candidate = base / "data" / "traces" / "mooncake_synthetic_trace.jsonl"
        if candidate.is_file():
            return candidate
    raise SystemExit("policy_bench: give the trace (data/traces/mooncake_synthetic_trace.jsonl of a kvtier checkout)")


def read_trace(path: Path) -> list[list[int]]:
    """Each request's hash ids; a clear error naming the line for anything else."""
    requests = []
    with path.open() as lines:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                ids = json.loads(line)["hash_ids"]
                if not isinstance(ids, list) or not all(isinstance(i, int) and 0 <= i < 2**63 for i in ids):
                    raise ValueError("hash_ids must be a list of non-negative integers")
            except (ValueError, KeyError, TypeError) as error:
                raise SystemExit(f"policy_bench: {path}:{number}: {error}") from None
            requests.append(ids)
    if not requests:
        raise SystemExit(f"policy_bench: {path} holds no request")
    return requests


def parse_capacity(text: str, unique_blocks: int) -> int:
    """"1%" of the unique blocks (rounded, at least 1) or a block count."""
    try:
        if text.endswith("%"):
            share = float(text[:-1])
            if not 0 < share <= 100:
                raise ValueError
            return max(1, round(unique_blocks * share / 100))
        blocks = int(text)
        if blocks <= 0:
            raise ValueError
        return blocks
    except ValueError:
        raise SystemExit(f"policy_bench: capacity {text!r} is not a share like 1% or a block count") from None


def replay(requests: list[list[int]], capacity: int, policy: str) -> tuple[int, float]:
    """(hits, seconds in the manager) of one policy through vLLM's CPUOffloadingManager."""
    from vllm.v1.kv_offload.base import LookupResult, ReqContext, make_offload_key
    from vllm.v1.kv_offload.cpu.manager import CPUOffloadingManager

    name, module_path, threshold = POLICIES[policy]
    manager = CPUOffloadingManager(
        capacity, cache_policy=name, cache_policy_module_path=module_path, store_threshold=threshold
    )
    keyed = []
    for index, ids in enumerate(requests):
        context = ReqContext(req_id=str(index))
        keys = [make_offload_key(i.to_bytes(8, "big"), 0) for i in ids]
        for position, key in enumerate(keys, 1):
            context.set_offload_key_position(key, position)
        keyed.append((context, keys))
    hits = 0
    hit = LookupResult.HIT
    gc.collect()
    start = time.perf_counter()
    for context, keys in keyed:
        manager.on_new_request(context)
        found = 0
        for key in keys:
            if manager.lookup(key, context) != hit:
                break
            found += 1
        hits += found
        if found:
            manager.prepare_load(keys[:found], context)
            manager.complete_load(keys[:found], context)
        stored = manager.prepare_store(keys, context)
        if stored is not None and stored.keys_to_store:
            manager.complete_store(stored.keys_to_store, context)
        manager.on_request_finished(context)
    return hits, time.perf_counter() - start


def measure(requests: list[list[int]], capacities: list[str], policies: list[str], repeats: int = 3) -> list[PolicyRow]:
    unique = len({i for ids in requests for i in ids})
    prompt_blocks = sum(len(ids) for ids in requests)
    rows = []
    for text in capacities:
        blocks = parse_capacity(text, unique)
        bound_hits, bound_blocks = _kvtier.prefix_cache_bound(requests, blocks)
        assert bound_blocks == prompt_blocks
        rows.append(PolicyRow("bound", text, blocks, bound_hits, prompt_blocks, bound_hits / prompt_blocks, 1.0))
        hits: dict[str, set[int]] = {policy: set() for policy in policies}
        seconds: dict[str, list[float]] = {policy: [] for policy in policies}
        for _ in range(repeats):
            for policy in policies:
                found, took = replay(requests, blocks, policy)
                hits[policy].add(found)
                seconds[policy].append(took)
        timed = []
        for policy in policies:
            if len(hits[policy]) != 1:
                raise RuntimeError(f"{policy} hit {sorted(hits[policy])} blocks in replays of one trace")
            found = hits[policy].pop()
            row = PolicyRow(policy, text, blocks, found, prompt_blocks, found / prompt_blocks,
                            found / bound_hits if bound_hits else 1.0,
                            1e6 * statistics.median(seconds[policy]) / len(requests))
            rows.append(row)
            timed.append(row)
        lru = next((row for row in timed if row.policy == "lru"), None)
        for row in timed:
            if lru is not None:
                row.cost_vs_lru = row.us_per_request / lru.us_per_request
    return rows


def print_table(rows: list[PolicyRow]) -> None:
    columns = ("policy", "capacity", "blocks", "hit %", "of bound", "us/req", "vs lru")
    widths = (16, 9, 7, 7, 9, 8, 7)
    print(" ".join(f"{c:<{w}}" if i == 0 else f"{c:>{w}}" for i, (c, w) in enumerate(zip(columns, widths))))
    for row in rows:
        cells = (row.policy, row.capacity, str(row.capacity_blocks), f"{100 * row.hit_rate:.2f}",
                 f"{row.fraction_of_bound:.3f}",
                 "" if row.us_per_request is None else f"{row.us_per_request:.1f}",
                 "" if row.cost_vs_lru is None else f"{row.cost_vs_lru:.2f}x")
        print(" ".join(f"{c:<{w}}" if i == 0 else f"{c:>{w}}" for i, (c, w) in enumerate(zip(cells, widths))))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kvtier.vllm.policy_bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("trace", nargs="?", type=Path, help="Mooncake-style JSONL (default: the shipped trace)")
    parser.add_argument("--capacities", default="1%,3%,10%", help="shares of the unique blocks or block counts")
    parser.add_argument("--policies", default=DEFAULT_POLICIES, help=f"of {', '.join(POLICIES)}")
    parser.add_argument("--repeats", type=int, default=3, help="replays per policy, for the time (median)")
    parser.add_argument("--json", action="store_true", help="one JSON document on stdout")
    parser.add_argument("--csv", type=Path, help="a CSV for scripts/plot.sh policy")
    args = parser.parse_args(argv)
    policies = [p for p in args.policies.split(",") if p]
    unknown = [p for p in policies if p not in POLICIES]
    if unknown or not policies:
        parser.error(f"unknown policies {unknown} (known: {', '.join(POLICIES)})")
    capacities = [c for c in args.capacities.split(",") if c]
    if not capacities:
        parser.error("no capacity")
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    trace = args.trace or default_trace()
    requests = read_trace(trace)
    rows = measure(requests, capacities, policies, args.repeats)
    if args.csv:
        with args.csv.open("w", newline="") as out:
            writer = csv.DictWriter(out, fieldnames=list(asdict(rows[0])))
            writer.writeheader()
            writer.writerows(asdict(row) for row in rows)
    if args.json:
        json.dump({"trace": str(trace), "requests": len(requests), "rows": [asdict(row) for row in rows]},
                  sys.stdout, indent=1)
        print()
        return 0
    print_table(rows)
    print(f"({trace.name}: {len(requests)} requests, one at a time through vLLM's CPUOffloadingManager; "
          f"time: median of {args.repeats})")
    return 0

if __name__ == "__main__":
    sys.exit(main())
