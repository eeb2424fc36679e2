"""python -m kvtier.check_model: decodes a transformers model through kvtier's
pages, block tables, attention and tiers, and compares every token and logit
with the model's own generate() and DynamicCache.

    python -m kvtier.check_model --model tiny-llama
    python -m kvtier.check_model --config config.json --seed 0 --prompts prompts.json \\
        --new-tokens 32 --host-blocks 64 --disk-path /tmp/g3 --shared-tier redis://127.0.0.1:6379

Requests arrive one a step (--arrive-every; 0: all at once), as the turns of
conversations do, so each finds what the ones before it computed: the default
prompts share a system prompt and, every second one, a first turn. Prints each
request's tokens and how many of its prompt tokens came from the cache and
from which tier (G1, or brought back by G2/G3/G4), the prefix hits each tier
served (pages: one per KV cache group holding the block) and the largest
logit difference; exit
status 1 when the tokens differ or the logits differ by more than
--tolerance. --json OUT writes {"requests": [{"prompt", "tokens",
"hit_tokens", "g1_hit_tokens", "hit_pages"}],
"max_logit_diff", "hits": {"g1", "g2", "g3", "g4"}} (plus "tokens_equal",
"preemptions", "forwarded_tokens", "steps"). docs/models.md."""
from __future__ import annotations

import argparse
import json
import sys


def default_prompts(vocab_size: int, requests: int = 6) -> list[list[int]]:
    """Requests sharing a 40-token system prompt, then a question each (some
    sharing a second turn), ids from a fixed generator within the vocabulary."""
    import random

    rng = random.Random(1234)
    system = [rng.randrange(1, vocab_size) for _ in range(40)]
    turn = [rng.randrange(1, vocab_size) for _ in range(20)]
    prompts = []
    for i in range(requests):
        question = [rng.randrange(1, vocab_size) for _ in range(7 + 3 * i)]
        prompts.append(system + (turn if i % 2 else []) + question)
    return prompts


def cache_line(d) -> str:
    """How many of a request's prompt tokens came from the cache, and from which tier."""
    if d.hit_tokens == 0:
        return "none from the cache"
    tiers = [f"{d.g1_hit_tokens} in G1"]
    brought = {t.upper(): n for t, n in d.hit_pages.items() if t != "g1" and n}
    if d.hit_tokens > d.g1_hit_tokens:
        pages = ", ".join(f"{t} {n}" for t, n in brought.items())
        tiers.append(f"{d.hit_tokens - d.g1_hit_tokens} brought back ({pages} pages)")
    return f"{d.hit_tokens} from the cache ({'; '.join(tiers)})"


def parse_args(argv):
    p = argparse.ArgumentParser(prog="python -m kvtier.check_model", description=__doc__.split("\n\n")[0])
    which = p.add_mutually_exclusive_group()
    which.add_argument("--model", default="tiny-llama", help="a built-in tiny model (default tiny-llama)")
    which.add_argument("--config", help="a transformers config.json, built with random weights")
    p.add_argument("--seed", type=int, default=0, help="torch.manual_seed before from_config (default 0)")
    p.add_argument("--prompts", help="a JSON list of token-id lists (default: 6 requests sharing prefixes)")
    p.add_argument("--new-tokens", type=int, default=32)
    p.add_argument("--arrive-every", type=int, default=1,
                   help="request i arrives at step i * N (default 1: one a step; 0: all at once)")
    p.add_argument("--capacity", type=int, default=0, help="G1 pages (default: what the prompts need, x2)")
    p.add_argument("--max-running", type=int, default=None, help="requests decoding at once (default: all)")
    p.add_argument("--kv-cache-dtype", default=None, help="vLLM's --kv-cache-dtype for the pages (default: the model's)")
    p.add_argument("--device", default="auto", help="auto (the GPU when there is one), cpu or cuda")
    p.add_argument("--host-blocks", type=int, default=0, help="a G2 tier of this many pages")
    p.add_argument("--disk-path", help="a G3 tier in this directory (needs --host-blocks)")
    p.add_argument("--disk-blocks", type=int, default=4096)
    p.add_argument("--shared-tier", help="a G4 tier: redis://HOST:PORT (needs --host-blocks)")
    p.add_argument("--tolerance", type=float, default=None,
                   help="largest logit difference allowed (default 1e-3; 1e-2 with 8-bit or 4-bit pages)")
    p.add_argument("--json", help="write the result here")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.arrive_every < 0:
        raise SystemExit("--arrive-every must be 0 or more")
    import torch
    from transformers import AutoConfig

    from .hf import PagedDecoder, build_model, compare, manager_for_model, reference_generate, tiny_config

    device = args.device if args.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
    config = AutoConfig.from_pretrained(args.config) if args.config else tiny_config(args.model)
    model = build_model(config, seed=args.seed, device=device)
    if args.prompts:
        with open(args.prompts) as f:
            prompts = json.load(f)
        if not isinstance(prompts, list) or not all(
            isinstance(p, list) and p and all(isinstance(t, int) and 0 <= t < config.vocab_size for t in p)
            for p in prompts
        ):
            raise SystemExit(f"{args.prompts}: a JSON list of non-empty token-id lists within the vocabulary")
    else:
        prompts = default_prompts(config.vocab_size)
    options = {}
    if args.host_blocks:
        options["host_blocks"] = args.host_blocks
    if args.disk_path:
        options.update(disk_path=args.disk_path, disk_blocks=args.disk_blocks)
    if args.shared_tier:
        options["shared_tier"] = [args.shared_tier]
    capacity = args.capacity or 2 * sum((len(p) + args.new_tokens) // 16 + 2 for p in prompts)
    manager, places = manager_for_model(model, capacity=capacity, kv_cache_dtype=args.kv_cache_dtype, **options)
    with manager:
        decoder = PagedDecoder(model, manager, places, max_running=args.max_running)
        decoded = decoder.decode(prompts, args.new_tokens, [i * args.arrive_every for i in range(len(prompts))])
        stats = decoder.stats
    references = [reference_generate(model, p, args.new_tokens, args.kv_cache_dtype) for p in prompts]
    result = compare(decoded, references)
    if args.tolerance is None:
        quantized = args.kv_cache_dtype not in (None, "auto", "bfloat16", "float16", "float32")
        args.tolerance = 1e-2 if quantized else 1e-3
    for i, d in enumerate(decoded):
        print(f"request {i}: {len(d.prompt)} prompt tokens, {cache_line(d)}; tokens {d.tokens}")
    print(f"hits (pages): {stats.hits}; preemptions {stats.preemptions}; forwarded tokens {stats.forwarded_tokens}")
    verdict = result.tokens_equal and result.max_logit_diff <= args.tolerance
    print(
        f"tokens {'equal' if result.tokens_equal else f'differ first at {result.first_divergence}'} to generate(); "
        f"largest logit difference {result.max_logit_diff:.3g} (tolerance {args.tolerance:g}): "
        f"{'OK' if verdict else 'MISMATCH'}"
    )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {
                    "requests": [
                        {
                            "prompt": d.prompt,
                            "tokens": d.tokens,
                            "hit_tokens": d.hit_tokens,
                            "g1_hit_tokens": d.g1_hit_tokens,
                            "hit_pages": d.hit_pages,
                        }
                        for d in decoded
                    ],
                    "max_logit_diff": result.max_logit_diff,
                    "hits": stats.hits,
                    "tokens_equal": result.tokens_equal,
                    "preemptions": stats.preemptions,
                    "forwarded_tokens": stats.forwarded_tokens,
                    "steps": stats.steps,
                },
                f,
                indent=2,
            )
    return 0 if verdict else 1


if __name__ == "__main__":
    sys.exit(main())
