"""Batched greedy decoding of a transformers model over kvtier.

A continuous-batching loop as an engine runs it, with kvtier as the engine's
KV cache: requests are admitted in order while the pool has pages, each
taking the prefix the manager already holds (its G1 hit, and with tiers what
G2, G3 or G4 bring back first through the groups' swap-in plan), so a request
forwards only the tokens not cached; every step forwards all running
requests' new tokens as one flat batch (`step_batch`); each request's last
row's logits pick its next token; when the pool cannot take a decode token
the newest running request is preempted (vLLM's recompute preemption) and
later admitted again, recomputing what was not cached."""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

import torch

from .attention import register
from .paged_cache import KvtierCache
from .step_batch import build_step


@dataclass
class DecodedRequest:
    prompt: list[int]
    tokens: list[int] = field(default_factory=list)  # generated, greedy
    logits: list[torch.Tensor] = field(default_factory=list)  # [vocab] float32 per generated token
    forwarded: int = 0  # tokens this request put through the model (prompt suffixes, recomputes, decodes)
    hit_tokens: int = 0  # prompt tokens its first admission took from the cache
    g1_hit_tokens: int = 0  # of those, the ones G1 held (the rest the tiers brought back)
    hit_pages: dict = field(default_factory=lambda: {"g1": 0, "g2": 0, "g3": 0, "g4": 0})  # its first admission's


@dataclass
class DecodeStats:
    steps: int = 0
    preemptions: int = 0
    forwarded_tokens: int = 0
    hits: dict = field(default_factory=lambda: {"g1": 0, "g2": 0, "g3": 0, "g4": 0})  # pages, per tier


class PagedDecoder:
    """Greedy decoding of `model` (a transformers causal LM) whose whole KV
    cache is `manager`'s pages; `layer_places` from `kvtier.model_layers`."""

    def __init__(self, model, manager, layer_places, max_running: int | None = None):
        self.model, self.manager, self.max_running = model, manager, max_running
        self.cache = KvtierCache(manager, layer_places, model.config, model.dtype)
        described = manager.groups["groups"]
        self.block_sizes = [g["block_size"] for g in described]
        self.token_groups = [g["kind"] != "mamba" for g in described]
        # transformers' linear-attention layers take one sequence a forward (no varlen batch), and
        # a prefill ends at the last block boundary first so the state there is cached (vLLM's
        # _mamba_block_aligned_split).
        self.one_request_a_forward = not all(self.token_groups)
        self.hash_block = manager.groups["hash_block_size"]
        self.has_tier = manager.metrics()["host_capacity"] > 0
        self.device = next(model.parameters()).device
        self.stats = DecodeStats()

    def decode(self, prompts: list[list[int]], new_tokens: int, arrivals: list[int] | None = None) -> list[DecodedRequest]:
        """`arrivals[i]`: the step request i arrives at (in order; default: all at step 0)."""
        if arrivals is not None and (len(arrivals) != len(prompts) or sorted(arrivals) != list(arrivals)):
            raise ValueError("arrivals: one non-decreasing step per prompt")
        register()
        previous = self.model.config._attn_implementation
        self.model.set_attn_implementation("kvtier")
        try:
            return self._decode(prompts, new_tokens, arrivals or [0] * len(prompts))
        finally:
            self.model.set_attn_implementation(previous)

    def _decode(self, prompts, new_tokens, arrivals):
        m = self.manager
        out = [DecodedRequest(prompt=list(p)) for p in prompts]
        requests = [m.add_request(list(p)) for p in prompts]
        index = {r.owner: i for i, r in enumerate(requests)}
        arriving, waiting, running = deque(zip(arrivals, requests)), deque(), []
        computed = {}  # owner -> tokens whose K/V is in the pages
        step = 0
        while arriving or waiting or running:
            if not waiting and not running:
                step = max(step, arriving[0][0])  # idle: the next arrival
            while arriving and arriving[0][0] <= step:
                waiting.append(arriving.popleft()[1])
            step += 1
            m.begin_step()  # states cached in earlier steps may be hit from now on
            while waiting and (self.max_running is None or len(running) < self.max_running):
                r = waiting[0]
                first = out[index[r.owner]].forwarded == 0
                hit = self._admit(r, out[index[r.owner]] if first else None)
                if hit is None:
                    break
                waiting.popleft()
                running.append(r)
                computed[r.owner] = hit
            if not running:
                raise RuntimeError("the pool cannot hold the next request even alone")
            work = [(r, list(r.tokens)[computed[r.owner] :], computed[r.owner]) for r in running]
            self.stats.steps += 1
            for (r, tokens, _), logits in self._forward(work):
                record = out[index[r.owner]]
                record.forwarded += len(tokens)
                computed[r.owner] = len(r)
                if r.computed_tokens < len(r):
                    m.finalize(r, len(r))  # its prompt's (or recompute's) blocks become reusable
                record.logits.append(logits.detach().to(torch.float32).cpu())
                record.tokens.append(int(torch.argmax(logits)))
            for r in [r for r in running if len(out[index[r.owner]].tokens) == new_tokens]:
                m.finish(r)
                running.remove(r)
            # Newest first: a request preempted for an older one's token has appended its own already.
            for r in list(reversed(running)):
                if r in running:
                    self._append(r, out[index[r.owner]].tokens[-1], running, waiting)
        return out

    def _forward(self, work):
        """Runs the step's forwards: all requests in one flat batch, or one
        request at a time (in block-aligned chunks) for a recurrent model.
        Yields each request's work item and its last token's logits."""
        if not self.one_request_a_forward:
            logits, step = self._run(work)
            for item, row in zip(work, step.last_rows):
                yield item, logits[row]
            return
        for r, tokens, first in work:
            end = first + len(tokens)
            boundary = (end - 1) // self.hash_block * self.hash_block
            chunks = [(first, boundary), (boundary, end)] if first < boundary else [(first, end)]
            for a, b in chunks:
                logits, step = self._run([(r, tokens[a - first : b - first], a)])
                if r.computed_tokens < b:
                    self.manager.finalize(r, b)  # a state the schedule lands on: cached at its block's end
            yield (r, tokens, first), logits[step.last_rows[0]]

    def _run(self, work):
        step = build_step(self.manager, self.block_sizes, self.token_groups, work, self.device)
        self.cache.begin_step(step)
        with torch.no_grad():
            logits = self.model(
                input_ids=step.input_ids,
                position_ids=step.position_ids,
                past_key_values=self.cache,
                use_cache=True,
                kvtier_cache=self.cache,
            ).logits[0]
        self.cache.end_step()
        self.stats.forwarded_tokens += step.input_ids.shape[1]
        return logits, step

    def _append(self, r, token, running, waiting) -> None:
        """The request's next token gets its slot; while the pool is full the
        newest running request is preempted (possibly this one)."""
        m = self.manager
        ready = m.generate(r, token).result == "ready"
        while not ready:
            victim = running.pop()
            m.preempt(victim)
            waiting.appendleft(victim)
            self.stats.preemptions += 1
            if victim is r:
                return
            ready = m.allocate(r).ready

    def _admit(self, r, record: DecodedRequest | None) -> int | None:
        """Allocates the request's tokens after taking back what the tiers hold
        of its prefix; the tokens already cached, or None when the pool is full.
        `record`: a first admission's, which gets its hits by tier."""
        m = self.manager
        in_g1 = m.prefill_cost(r).cached_tokens
        swapped = self._swap_in(r) if self.has_tier else {}
        cost = m.prefill_cost(r)
        acquire = m.allocate(r)
        while acquire.result == "blocked_on_offload":
            m.collect_offloads(wait=True)
            acquire = m.allocate(r)
        if not acquire.ready:
            return None
        pages = self._count_hits(r, cost.cached_tokens, swapped)
        if record is not None:
            record.hit_tokens, record.g1_hit_tokens, record.hit_pages = cost.cached_tokens, in_g1, pages
        return cost.cached_tokens

    def _swap_in(self, r) -> dict:
        """Brings the request's prefix back from G2/G3/G4 (the library's
        swap_in_prefix: the groups' fixed point over G1 and the tiers); pages per tier."""
        done = self.manager.swap_in_prefix(r)
        return {"g2": done["from_g2"], "g3": done["from_disk"], "g4": done["from_shared"]}

    def _count_hits(self, r, cached_tokens: int, swapped: dict) -> dict:
        """Pages of the hit (one per group that holds the block), the tiers'
        swapped-in ones counted apart from what G1 held; added to the stats
        and returned per tier."""
        pages = 0
        for g, block_size in enumerate(self.block_sizes):
            table = self.manager.block_table(r, group=g)
            pages += sum(1 for page in list(table)[: cached_tokens // block_size] if page != self.manager.null_page)
        hits = {"g1": max(0, pages - sum(swapped.values())), "g2": 0, "g3": 0, "g4": 0}
        hits.update(swapped)
        for tier, n in hits.items():
            self.stats.hits[tier] += n
        return hits
