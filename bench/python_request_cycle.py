"""The request cycle from Python: prefill_cost, allocate, finalize and finish
of N requests of 256 tokens (16 blocks of 16; the first 128 tokens repeat the
request's own id, so nothing is shared) on a 16,384-page pool, the host
runtime, each backend in three alternated rounds. What it costs a Python
scheduler to drive kvtier, per request and in blocks per second.

    python bench/python_request_cycle.py [--requests N]
"""
import argparse
import statistics
import time

import kvtier


def cycle(backend, requests, prompt=256):
    m = kvtier.Manager(backend=backend, capacity=16384, block_size=16, device="host",
                       layers=1, kv_heads=1, head_dim=8, dtype="fp32")
    work = [m.add_request([i] * 128 + list(range(i * 1000, i * 1000 + prompt - 128))) for i in range(requests)]
    start = time.perf_counter()
    for r in work:
        m.prefill_cost(r)
        m.allocate(r)
        m.finalize(r, len(r))
        m.finish(r)
    return time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=2000)
    args = parser.parse_args()
    times = {"native": [], "kvbm": []}
    for _ in range(3):
        for backend in times:
            times[backend].append(cycle(backend, args.requests))
    for backend, seconds in times.items():
        median = statistics.median(seconds)
        print(f"{backend:6} {median * 1e6 / args.requests:6.1f} us/request  "
              f"{args.requests * 16 / median / 1e6:5.2f} M blocks/s  (median of 3)")


if __name__ == "__main__":
    main()
