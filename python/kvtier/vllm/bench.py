"""Tiers side by side through vLLM 0.33.0's own manager (docs/vllm.md, "Measured"):
vLLM's `fs` tier, kvtier's G3 and (with --redis-url) kvtier's G4 on the same
rows, at row sizes of real models.

    python -m kvtier.vllm.bench [--row-kib 192,2048,8192] [--total-mib 512] [--runs 3] [--json] [--csv F]
                                [--redis-url redis://127.0.0.1:6379]

Each run builds TieringOffloadingManager over the real CPU primary tier with one
secondary tier (kvtier.vllm.cpu_driver), stores every row (the GPU->CPU store,
then the tier's cascade), shuts down, drops the page cache (or, without the
right to, evicts the tier's files from it with posix_fadvise), builds a NEW
manager on the same directory — an empty primary — and promotes every row back
from the tier, request by request, stepping as the scheduler steps; every row
is compared byte for byte. Reported, the median of the runs:
- store GiB/s: bytes / (complete_store -> the last cascade job reported);
- load GiB/s: bytes / (first lookup -> every key HIT in primary), after the restart;
- lookup: the tier's own lookup() call (us, per key, on a hit) and how long the
  manager's lookups of every key took to stop answering RETRY (ms).
vLLM's fs tier runs with its default threads (16 + 16) unless --fs-threads.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from typing import Any

import numpy as np

from kvtier.page_cache import drop_page_cache


def _tier_config(kind: str, directory: str, rows: int, fs_threads: int | None, queue_depth: int,
                 redis_url: str | None) -> dict[str, Any]:
    if kind == "kvtier-g4":
        # A namespace of its own per run: nothing an earlier run stored is found.
        return {"type": "KvtierSharedTier", "module_path": "kvtier.vllm", "redis_url": redis_url,
                "namespace": "bench-" + os.path.basename(directory),
                "deadline_ms": 5000}
    if kind == "fs":
        config: dict[str, Any] = {"type": "fs", "root_dir": directory}
        if fs_threads:
            config.update(n_read_threads=fs_threads, n_write_threads=fs_threads)
        return config
    return {"type": "KvtierDiskTier", "module_path": "kvtier.vllm", "path": directory, "capacity_blocks": rows,
            "queue_depth": queue_depth}


def run_once(kind: str, row_bytes: int, rows: int, requests: int, step_s: float, fs_threads: int | None,
             queue_depth: int, redis_url: str | None, scratch: str) -> dict[str, Any]:
    from vllm.v1.kv_offload.base import ReqContext

    from kvtier.vllm.cpu_driver import TieredManager, offload_key

    directory = tempfile.mkdtemp(prefix=f"kvtier-bench-{kind}-", dir=scratch)
    try:
        keys = [offload_key(n) for n in range(rows)]
        rng = np.random.default_rng(row_bytes + rows)
        payloads = {k: rng.integers(-128, 128, row_bytes, dtype=np.int8) for k in keys}
        config = _tier_config(kind, directory, rows, fs_threads, queue_depth, redis_url)
        m = TieredManager([config], num_chunks=rows, row_bytes=row_bytes)
        ctx = m.request()
        start = time.monotonic()
        m.store(ctx, keys, payloads)
        m.settle(timeout=600, step_s=step_s)
        store_s = time.monotonic() - start
        m.shutdown()
        dropped = drop_page_cache(directory) if kind != "kvtier-g4" else "n/a (Redis)"

        again = TieredManager([config], num_chunks=rows, row_bytes=row_bytes)
        tier = again.tiers[0]
        probe = ReqContext(req_id="probe")
        lookup_us = None
        if kind == "kvtier-g3":  # fs and G4 answer RETRY first (async): their cost is the time to resolve, below
            t = time.perf_counter()
            for k in keys:
                tier.lookup(k, probe)
            lookup_us = (time.perf_counter() - t) / rows * 1e6
        share = -(-rows // requests)
        batches = [(again.request(), keys[i:i + share]) for i in range(0, rows, share)]
        took = again.promote(batches, timeout=600, step_s=step_s)
        if took["missed"]:
            raise RuntimeError(f"{kind}: {len(took['missed'])} rows missed after the restart")
        differ = 0
        for ctx_i, ks in batches:
            for k, row in zip(ks, again.read_rows(ctx_i, ks)):
                differ += 0 if np.array_equal(row, payloads[k]) else 1
        again.shutdown()
        if differ:
            raise RuntimeError(f"{kind}: {differ} rows came back with other bytes")
        total = rows * row_bytes
        return {"store_GiBps": total / store_s / 2**30, "load_GiBps": total / took["seconds"] / 2**30,
                "lookup_us": lookup_us, "lookup_resolved_ms": took["resolved_s"] * 1e3, "steps": took["steps"],
                "page_cache": dropped}
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kvtier.vllm.bench", description=__doc__.split("\n")[0])
    parser.add_argument("--row-kib", default="192,2048,8192", help="row sizes in KiB (multiples of 4)")
    parser.add_argument("--total-mib", type=int, default=512, help="bytes stored per run, in MiB")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--requests", type=int, default=8, help="requests the rows are promoted for")
    parser.add_argument("--step-ms", type=float, default=2.0, help="the scheduler step's sleep")
    parser.add_argument("--tiers", default=None, help="of fs, kvtier-g3, kvtier-g4 (default: fs and kvtier-g3, "
                        "and kvtier-g4 with --redis-url)")
    parser.add_argument("--redis-url", default=None, help="a Redis for kvtier-g4 (its values are left to expire "
                        "under maxmemory; each run uses a namespace of its own)")
    parser.add_argument("--fs-threads", type=int, default=None, help="fs tier read and write threads (its default: 16)")
    parser.add_argument("--queue-depth", type=int, default=32, help="kvtier G3's I/O in flight (its default: 32)")
    parser.add_argument("--dir", default=None, help="where the tiers' files go (default: $TMPDIR)")
    parser.add_argument("--json", action="store_true", help="one JSON document on stdout")
    parser.add_argument("--csv", default=None, help="a CSV for scripts/plot.sh vllm-tiers")
    args = parser.parse_args(argv)
    sizes = [int(s) * 1024 for s in args.row_kib.split(",")]
    if any(s <= 0 or s % 4096 for s in sizes):
        parser.error("--row-kib: row sizes are positive multiples of 4 KiB")
    tiers = (args.tiers or ("fs,kvtier-g3,kvtier-g4" if args.redis_url else "fs,kvtier-g3")).split(",")
    for t in tiers:
        if t not in ("fs", "kvtier-g3", "kvtier-g4"):
            parser.error(f"--tiers: unknown tier {t!r} (fs, kvtier-g3, kvtier-g4)")
    if "kvtier-g4" in tiers and not args.redis_url:
        parser.error("--tiers kvtier-g4 needs --redis-url")
    scratch = args.dir or tempfile.gettempdir()
    results = []
    for row_bytes in sizes:
        rows = max(4, args.total_mib * 2**20 // row_bytes)
        runs: dict[str, list[dict[str, Any]]] = {t: [] for t in tiers}
        for _ in range(args.runs):
            for t in tiers:  # alternated, so drift hits both
                runs[t].append(run_once(t, row_bytes, rows, args.requests, args.step_ms / 1e3, args.fs_threads,
                                        args.queue_depth, args.redis_url, scratch))
        for t in tiers:
            median = {k: statistics.median(r[k] for r in runs[t]) for k in ("store_GiBps", "load_GiBps",
                                                                          "lookup_resolved_ms", "steps")}
            lookups = [r["lookup_us"] for r in runs[t] if r["lookup_us"] is not None]
            median["lookup_us"] = statistics.median(lookups) if lookups else None
            results.append({"tier": t, "row_bytes": row_bytes, "rows": rows, "runs": args.runs,
                            "page_cache": runs[t][0]["page_cache"], **median})
        base = {r["tier"]: r for r in results if r["row_bytes"] == row_bytes}
        for t in ("kvtier-g3", "kvtier-g4"):
            if "fs" in base and t in base:
                base[t]["store_vs_fs"] = base[t]["store_GiBps"] / base["fs"]["store_GiBps"]
                base[t]["load_vs_fs"] = base[t]["load_GiBps"] / base["fs"]["load_GiBps"]
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=["tier", "row_bytes", "rows", "store_GiBps", "load_GiBps",
                                                   "lookup_us", "lookup_resolved_ms", "steps"], extrasaction="ignore")
            writer.writeheader()
            writer.writerows(results)
    if args.json:
        json.dump({"bench": "vllm-tiers", "date": time.strftime("%Y-%m-%d"), "results": results}, sys.stdout, indent=2)
        print()
        return 0
    print(f"{'tier':10} {'row':>8} {'rows':>5} {'store GiB/s':>12} {'load GiB/s':>11} {'lookup us':>10} "
          f"{'resolved ms':>12}  vs fs (store, load)")
    for r in results:
        ratio = f"  {r['store_vs_fs']:.2f}x, {r['load_vs_fs']:.2f}x" if "load_vs_fs" in r else ""
        lookup = f"{r['lookup_us']:.2f}" if r["lookup_us"] is not None else "async"
        print(f"{r['tier']:10} {r['row_bytes'] // 1024:>6}Ki {r['rows']:>5} {r['store_GiBps']:>12.2f} "
              f"{r['load_GiBps']:>11.2f} {lookup:>10} {r['lookup_resolved_ms']:>12.1f}{ratio}")
    print(f"(median of {args.runs} runs; page cache before loads: {results[0]['page_cache']}; "
          f"{args.requests} requests promoted, {args.step_ms} ms steps)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
