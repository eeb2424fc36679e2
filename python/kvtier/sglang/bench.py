"""kvtier's G3 beside SGLang's file backend, through SGLang 0.5.23's own HiCache
controller on the same pages (docs/sglang.md, "Measured"):

    python -m kvtier.sglang.bench [--page-tokens 8,64] [--total-mib 512] [--runs 3] [--json] [--csv F]

Each run builds SGLang's HybridCacheController over its MHA host pool
(kvtier.sglang.cpu_controller) with one backend — SGLang's `file`, or kvtier's
through `dynamic` — on an empty directory, fills the host pages of one prompt
with random bytes, and:
- backup: SGLang's write_storage -> its backup thread's acknowledgement;
- prefetch, warm: the same controller prefetches the prompt back (hit query,
  host allocation, the I/O thread) into other host pages;
- exists: the backend's batch_exists of 128 keys (SGLang's batch), the median
  of 50 calls;
- prefetch, cold: the controller is closed, the page cache dropped (or the
  directory's files evicted from it with posix_fadvise), a NEW controller and
  backend on the same directory (a restart) prefetch the prompt again.
Every prefetched page is compared byte for byte with what was written. The
model: 8 layers, 8 KV heads of 128, bf16 (32 KiB a token); the page size in
tokens varies. Reported, the median of the runs; kvtier's figures also as
ratios to the file backend's of the same run.
"""

from __future__ import annotations

import argparse
import csv
import gc
import json
import shutil
import statistics
import sys
import tempfile
import time
from typing import Any

BACKENDS = ("sglang-file", "kvtier-g3")
_BATCH = 128  # SGLang's STORAGE_BATCH_SIZE


def _backend(kind: str, directory: str, pages: int) -> tuple[str, dict[str, Any]]:
    from kvtier.sglang.cpu_controller import KVTIER_BACKEND

    if kind == "sglang-file":
        return "file", {"file_storage_path": directory}
    return "dynamic", dict(KVTIER_BACKEND, disk_path=directory, disk_capacity_blocks=pages)


def run_once(kind: str, page_tokens: int, pages: int, scratch: str, seed: int) -> dict[str, Any]:
    import torch

    from kvtier.page_cache import drop_page_cache
    from kvtier.sglang.cpu_controller import CpuHiCache, Geometry

    geometry = Geometry(layers=8, heads=8, head_dim=128, page_size=page_tokens, dtype=torch.bfloat16,
                        device_tokens=pages * page_tokens)
    directory = tempfile.mkdtemp(prefix=f"kvtier-sglang-bench-{kind}-", dir=scratch)
    backend, config = _backend(kind, directory, pages)
    total = pages * geometry.page_bytes
    try:
        tokens = [(seed * 7919 + i) % 150_000 for i in range(pages * page_tokens)]
        # The host pool holds the prompt once (what is backed up is freed before the prefetch).
        cache = CpuHiCache(geometry, "page_first", backend, config, model_name="kvtier-bench/8x8x128", host_ratio=1.0)
        indices = cache.allocate(pages)
        cache.fill(indices, seed)
        want = cache.page_bytes_of(indices)
        keys = cache.page_keys(tokens, page_tokens)
        start = time.perf_counter()
        written = cache.backup(indices, tokens, timeout=600)
        backup_s = time.perf_counter() - start
        cache.free(indices)
        if written != len(tokens):
            raise RuntimeError(f"{kind}: backup wrote {written} of {len(tokens)} tokens")
        start = time.perf_counter()
        done, got = cache.prefetch(tokens, timeout=600)
        warm_s = time.perf_counter() - start
        _check(kind, "warm", done, len(tokens), cache.page_bytes_of(got) if got is not None else [], want)
        cache.free(got)
        batch = keys[:_BATCH]
        exists = []
        for _ in range(50):
            t = time.perf_counter()
            cache.backend.batch_exists(batch)
            exists.append(time.perf_counter() - t)
        cache.close()
        dropped = drop_page_cache(directory)
        del cache
        gc.collect()  # the closed controller's pools go before the new one's are allocated
        again = CpuHiCache(geometry, "page_first", backend, config, model_name="kvtier-bench/8x8x128",
                           host_ratio=1.0)
        start = time.perf_counter()
        done, got = again.prefetch(tokens, timeout=600)
        cold_s = time.perf_counter() - start
        _check(kind, "cold", done, len(tokens), again.page_bytes_of(got) if got is not None else [], want)
        again.close()
        del again
        gc.collect()
        return {"backup_GiBps": total / backup_s / 2**30, "prefetch_warm_GiBps": total / warm_s / 2**30,
                "prefetch_cold_GiBps": total / cold_s / 2**30, "exists_us": statistics.median(exists) * 1e6,
                "exists_pages": len(batch), "page_cache": dropped}
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def _check(kind: str, when: str, done: int, wanted: int, got: list[bytes], want: list[bytes]) -> None:
    if done != wanted:
        raise RuntimeError(f"{kind}: the {when} prefetch completed {done} of {wanted} tokens")
    if got != want:
        raise RuntimeError(f"{kind}: the {when} prefetch gave other bytes")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kvtier.sglang.bench", description=__doc__.split("\n")[0])
    parser.add_argument("--page-tokens", default="8,64", help="page sizes in tokens (32 KiB a token)")
    parser.add_argument("--total-mib", type=int, default=512, help="bytes of the prompt, in MiB")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--backends", default=",".join(BACKENDS), help=f"of {', '.join(BACKENDS)}")
    parser.add_argument("--dir", default=None, help="where the backends' files go (default: $TMPDIR)")
    parser.add_argument("--json", action="store_true", help="one JSON document on stdout")
    parser.add_argument("--csv", default=None, help="a CSV for scripts/plot.sh sglang")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.page_tokens.split(",")]
    if any(s <= 0 for s in sizes):
        parser.error("--page-tokens: positive numbers of tokens")
    backends = args.backends.split(",")
    for b in backends:
        if b not in BACKENDS:
            parser.error(f"--backends: unknown backend {b!r} ({', '.join(BACKENDS)})")
    from kvtier.sglang.cpu_controller import single_rank

    single_rank()
    scratch = args.dir or tempfile.gettempdir()
    results = []
    for page_tokens in sizes:
        page_bytes = page_tokens * 32 * 1024
        pages = max(4, args.total_mib * 2**20 // page_bytes)
        runs: dict[str, list[dict[str, Any]]] = {b: [] for b in backends}
        for r in range(args.runs):
            for b in backends:  # alternated, so drift hits both
                runs[b].append(run_once(b, page_tokens, pages, scratch, seed=r + 1))
        for b in backends:
            median = {k: statistics.median(x[k] for x in runs[b])
                      for k in ("backup_GiBps", "prefetch_warm_GiBps", "prefetch_cold_GiBps", "exists_us")}
            results.append({"backend": b, "page_bytes": page_bytes, "page_tokens": page_tokens, "pages": pages,
                            "runs": args.runs, "page_cache": runs[b][0]["page_cache"], **median})
        base = {x["backend"]: x for x in results if x["page_bytes"] == page_bytes}
        if "sglang-file" in base and "kvtier-g3" in base:
            mine, theirs = base["kvtier-g3"], base["sglang-file"]
            for k in ("backup_GiBps", "prefetch_warm_GiBps", "prefetch_cold_GiBps"):
                mine[k.replace("_GiBps", "_vs_file")] = mine[k] / theirs[k]
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=["backend", "page_bytes", "pages", "backup_GiBps",
                                                   "prefetch_warm_GiBps", "prefetch_cold_GiBps", "exists_us"],
                                    extrasaction="ignore")
            writer.writeheader()
            writer.writerows(results)
    if args.json:
        json.dump({"bench": "sglang-hicache", "date": time.strftime("%Y-%m-%d"), "results": results}, sys.stdout,
                  indent=2)
        print()
        return 0
    print(f"{'backend':12} {'page':>8} {'pages':>5} {'backup':>8} {'warm':>8} {'cold':>8} {'exists us':>10}"
          "  vs file (backup, warm, cold)")
    for x in results:
        ratio = (f"  {x['backup_vs_file']:.2f}x, {x['prefetch_warm_vs_file']:.2f}x, {x['prefetch_cold_vs_file']:.2f}x"
                 if "backup_vs_file" in x else "")
        print(f"{x['backend']:12} {x['page_bytes'] // 1024:>6}Ki {x['pages']:>5} {x['backup_GiBps']:>8.2f} "
              f"{x['prefetch_warm_GiBps']:>8.2f} {x['prefetch_cold_GiBps']:>8.2f} {x['exists_us']:>10.1f}{ratio}")
    print(f"(GiB/s, median of {args.runs} runs through SGLang 0.5.23's HybridCacheController; exists: "
          f"{_BATCH} keys; page cache before the cold prefetch: {results[0]['page_cache']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
