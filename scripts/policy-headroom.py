#!/usr/bin/env python3
"""How far can an online G1 policy get past LRU on a trace? (issue 35)

`kvtier bench policy` measures kvtier's online policies against the offline
bound. This script asks a narrower question the bound cannot answer: what do
policies that know *more than any online policy can* reach? If even they stay
below a target, no online policy will reach it on that trace.

Two families, each searched over a small grid, both with the one definition of
hit rate of docs/policies.md (a request's hits are the longest resident prefix
of its blocks; after a request all its blocks are resident until the policy
evicts down to the capacity, its own new blocks included; a child never
outranks its parent, the deeper block goes first on ties):

- `frequency`: recency plus a bonus for every earlier sighting of the block
  (exact counts over the whole trace — unbounded history, more than a sketch
  holds — or, with --history H, counts kept only for blocks resident or among
  the last H x capacity evicted), the bonus in units of the cache's lifetime
  in requests.
- `oracle_admission`: as `frequency`, and a block seen for the first time is
  kept only if it is used again within W requests. The oracle knows the
  future of every first sighting, which no cache does.

`lru` is the baseline and equals `kvtier bench policy`'s `lru` row (the
Python tests check it). Prints, per capacity, each family's best hit rate and
its ratio to LRU; `--json` writes the rows.
"""
import argparse
import heapq
import itertools
import json
import sys
from collections import OrderedDict, defaultdict


def read_trace(path):
    requests = []
    with open(path) as trace:
        for number, line in enumerate(trace, 1):
            line = line.strip()
            if not line:
                continue
            try:
                hash_ids = json.loads(line)["hash_ids"]
            except (ValueError, KeyError, TypeError) as error:
                sys.exit(f"{path}:{number}: not a Mooncake request line ({error})")
            if not isinstance(hash_ids, list) or not hash_ids:
                sys.exit(f"{path}:{number}: hash_ids must be a non-empty list")
            requests.append(hash_ids)
    if not requests:
        sys.exit(f"{path}: no requests")
    return requests


def next_uses(requests):
    """For request t and its block b: the next request that holds b (or infinity)."""
    following = {}
    later = {}
    for t in range(len(requests) - 1, -1, -1):
        for block in requests[t]:
            following[(t, block)] = later.get(block, float("inf"))
            later[block] = t
    return following


def hit_rate(requests, capacity, priority, history=0, room_first=False):
    """Replays the requests through a cache of `capacity` blocks that evicts the
    lowest priority(t, block, sightings) first. history > 0: a block's
    sightings are remembered only while it is resident or among the last
    history x capacity blocks evicted (a bounded ghost list); 0: always.
    room_first: room for a request is made before it, never by evicting its
    own blocks (a G1 pool holds a request's pages while it computes: kvtier's
    managers, and any engine), where the hit-rate definition evicts after it."""
    resident = {}
    heap = []
    sightings = defaultdict(int)
    ghosts = OrderedDict()
    hits = total = 0

    def evict(block):
        del resident[block]
        if history:
            ghosts[block] = sightings.pop(block)
            if len(ghosts) > history * capacity:
                ghosts.popitem(last=False)

    for t, blocks in enumerate(requests):
        prefix = 0
        while prefix < len(blocks) and blocks[prefix] in resident:
            prefix += 1
        hits += prefix
        total += len(blocks)
        if room_first:
            blocks = blocks[:capacity]  # what a pool of `capacity` pages can hold of it
            own = set(blocks)
            needed = sum(1 for block in blocks if block not in resident)
            spared = []
            while len(resident) + needed > capacity:
                entry = heapq.heappop(heap)
                key, _, block = entry
                if resident.get(block) != key:
                    continue
                if block in own:
                    spared.append(entry)
                else:
                    evict(block)
            for entry in spared:
                heapq.heappush(heap, entry)
        parent = None
        for depth, block in enumerate(blocks):
            if history and block not in resident:
                sightings[block] = ghosts.pop(block, 0)
            sightings[block] += 1
            key = priority(t, block, sightings[block])
            if parent is not None and parent < key:
                key = parent  # a child never outranks its parent
            parent = key
            resident[block] = key
            heapq.heappush(heap, (key, -depth, block))
        while len(resident) > capacity:
            key, _, block = heapq.heappop(heap)
            if resident.get(block) == key:
                evict(block)
    return hits / total


def frequency(lifetime, weight, cap):
    return lambda t, block, seen: t + weight * lifetime * min(seen - 1, cap)


def oracle_admission(lifetime, weight, cap, window, following):
    def priority(t, block, seen):
        if seen == 1 and following[(t, block)] - t > window:
            return float("-inf")  # never used again soon: not admitted
        return t + weight * lifetime * min(seen - 1, cap)

    return priority


def capacities_of(spec, unique):
    out = []
    for item in spec.split(","):
        item = item.strip()
        if item.endswith("%"):
            out.append(max(1, round(unique * float(item[:-1]) / 100)))
        else:
            out.append(int(item))
        if out[-1] < 1:
            sys.exit(f"capacity {item}: must be at least one block")
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trace", default="data/traces/mooncake_synthetic_trace.jsonl")
    parser.add_argument("--capacities", default="1%,3%,10%", help="of the unique blocks, or block counts")
    parser.add_argument("--requests", type=int, default=0, help="the first N requests only (0: all)")
    parser.add_argument("--weights", default="0.5,1,2,4,8", help="frequency bonus, in cache lifetimes")
    parser.add_argument("--caps", default="1,2,4,100", help="sightings counted at most")
    parser.add_argument("--windows", default="100,300,1000", help="oracle: reused within W requests")
    parser.add_argument("--families", default="lru,frequency,oracle_admission")
    parser.add_argument("--room-first", action="store_true",
                        help="make room before each request, never from its own blocks (as a G1 pool must)")
    parser.add_argument("--history", type=float, default=0,
                        help="frequency: remember the sightings of evicted blocks for this many capacities (0: all)")
    parser.add_argument("--json", help="write the rows to this file")
    args = parser.parse_args()

    requests = read_trace(args.trace)
    if args.requests < 0 or args.history < 0:
        sys.exit("--requests and --history must be at least 0")
    if args.requests:
        requests = requests[: args.requests]
    unique = len({block for blocks in requests for block in blocks})
    mean_blocks = sum(len(blocks) for blocks in requests) / len(requests)
    weights = [float(w) for w in args.weights.split(",")]
    caps = [int(c) for c in args.caps.split(",")]
    windows = [int(w) for w in args.windows.split(",")]
    families = args.families.split(",")
    following = next_uses(requests) if "oracle_admission" in families else None

    rows = []
    for capacity in capacities_of(args.capacities, unique):
        lifetime = capacity / mean_blocks  # requests a block stays without help
        lru = hit_rate(requests, capacity, lambda t, block, seen: t, 0, args.room_first)
        rows.append({"policy": "lru", "capacity_blocks": capacity, "hit_rate": lru, "of_lru": 1.0})
        for family in families:
            if family == "lru":
                continue
            if family == "frequency":
                grid = [(frequency(lifetime, w, c), {"weight": w, "cap": c}) for w, c in itertools.product(weights, caps)]
            elif family == "oracle_admission":
                grid = [
                    (oracle_admission(lifetime, w, c, n, following), {"weight": w, "cap": c, "window": n})
                    for w, c, n in itertools.product([0.0] + weights, caps, windows)
                ]
            else:
                sys.exit(f"unknown family {family}: lru, frequency or oracle_admission")
            history = args.history if family == "frequency" else 0
            best, setting = max(((hit_rate(requests, capacity, p, history, args.room_first), s) for p, s in grid),
                                key=lambda r: r[0])
            rows.append(
                {"policy": family, "capacity_blocks": capacity, "hit_rate": best, "of_lru": best / lru if lru else 0.0,
                 "best_setting": setting}
            )
    print(f"{args.trace}: {len(requests)} requests, {unique} unique blocks")
    print(f"{'policy':<18}{'capacity':>10}{'hit rate %':>12}{'x LRU':>8}  best setting")
    for row in rows:
        print(f"{row['policy']:<18}{row['capacity_blocks']:>10}{100 * row['hit_rate']:>12.2f}{row['of_lru']:>8.3f}  "
              f"{row.get('best_setting', '')}")
    if args.json:
        with open(args.json, "w") as out:
            json.dump(rows, out, indent=1)


if __name__ == "__main__":
    main()
