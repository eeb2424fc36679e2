"""vLLM 0.33.0's tiered offloading on the CPU, as vLLM's own tests build it
(tests/v1/kv_offload/tiering/): a normalized OffloadingConfig, a spec with the
fields tiers read, a page-aligned primary view, tiers from vLLM's
SecondaryTierFactory, and TieringOffloadingManager over the real
CPUPrimaryTierOffloadingManager, driven step by step as the scheduler drives
it. Only the GPU<->CPU copies are left out (they need CUDA): a store writes the
rows' bytes where vLLM's GPU->CPU copy would. The vLLM tests and
kvtier.vllm.bench use it."""

from __future__ import annotations

import mmap
import time
from types import SimpleNamespace
from typing import Any
from unittest.mock import MagicMock

import numpy as np
from vllm.v1.kv_offload.base import LookupResult, OffloadKey, ReqContext, ScheduleEndContext, make_offload_key
from vllm.v1.kv_offload.config import (
    OffloadingCacheConfig,
    OffloadingConfig,
    OffloadingGroupConfig,
    OffloadingModelConfig,
    OffloadingParallelConfig,
)
from vllm.v1.kv_offload.tiering.factory import SecondaryTierFactory
from vllm.v1.kv_offload.tiering.manager import CPUPrimaryTierOffloadingManager, TieringOffloadingManager


def offloading_spec(model: str = "kvtier-test/tiny", dtype: str = "bfloat16", events: bool = False,
                    blocks_per_chunk: int = 1) -> Any:
    """The spec fields a secondary tier reads, over a real OffloadingConfig."""
    config = OffloadingConfig(
        groups=(OffloadingGroupConfig(tokens_per_block=16, layer_names=("layer.0", "layer.1"), group_id=0),),
        worker_kv_bytes_per_block=4096,
        enable_kv_cache_events=events,
        extra_config={},
        engine_id="kvtier-test",
        model=OffloadingModelConfig(name=model, dtype=dtype),
        cache=OffloadingCacheConfig(tokens_per_hash=16, blocks_per_chunk=blocks_per_chunk),
        parallel=OffloadingParallelConfig(rank=0, world_size=1, tp_size=1, pp_size=1, pcp_size=1, dcp_size=1,
                                          data_parallel_index=0, data_parallel_size=1,
                                          data_parallel_rank_local=None, is_parallelism_agnostic=False),
    )
    return SimpleNamespace(config=config, blocks_per_chunk=blocks_per_chunk, tokens_per_hash=16,
                           kv_events_config=SimpleNamespace(enable_kv_cache_events=events,
                                                            self_describing_kv_events=False),
                           extra_config={})


def primary_view(num_chunks: int, row_bytes: int) -> memoryview:
    """A page-aligned int8 (num_chunks, row_bytes) memoryview, as the CPU primary tier's.
    Its pages are touched once, as vLLM's workers touch the shared region: a
    tier's first read into a row then costs no page fault (a bench measures I/O)."""
    region = mmap.mmap(-1, num_chunks * row_bytes)
    rows = np.frombuffer(region, dtype=np.int8).reshape(num_chunks, row_bytes)
    rows.fill(0)
    return memoryview(rows)


def offload_key(n: int, group: int = 0, hash_bytes: int = 32) -> OffloadKey:
    """A vLLM offload key: `hash_bytes` of block hash (sha256: 32) and the group."""
    return make_offload_key(n.to_bytes(hash_bytes, "big"), group)


class TieredManager:
    """TieringOffloadingManager over the real CPU primary tier and `tier_configs`
    (each as in kv_connector_extra_config's secondary_tiers), driven step by
    step with the manager's lock held per step, as the scheduler does. The
    primary tier's cache policy is vLLM's `eviction_policy` /
    `cache_policy_module_path` pair."""

    def __init__(self, tier_configs: list[dict], num_chunks: int, row_bytes: int, spec: Any = None,
                 cache_policy: str = "lru", cache_policy_module_path: str | None = None) -> None:
        self.spec = spec or offloading_spec()
        region = MagicMock()
        self.view = primary_view(num_chunks, row_bytes)
        region.create_kv_memoryview.return_value = self.view
        self.primary = CPUPrimaryTierOffloadingManager(num_chunks=num_chunks, mmap_region=region,
                                                       cache_policy=cache_policy,
                                                       cache_policy_module_path=cache_policy_module_path)
        kv_view = self.primary.get_kv_memoryview()
        self.tiers = [SecondaryTierFactory.create_secondary_tier(dict(c), kv_view, self.spec) for c in tier_configs]
        self.manager = TieringOffloadingManager(primary_tier=self.primary, secondary_tiers=self.tiers,
                                                tier_poll_interval_s=0)
        self.rows = np.asarray(self.view)
        self._requests = 0

    def request(self) -> ReqContext:
        self._requests += 1
        ctx = ReqContext(req_id=f"req-{self._requests}")
        with self.manager.lock:
            self.manager.on_new_request(ctx)
        return ctx

    def end_step(self) -> None:
        with self.manager.lock:
            self.manager.on_schedule_end(ScheduleEndContext(new_req_ids=[], preempted_req_ids=[]))

    def store(self, ctx: ReqContext, keys: list[OffloadKey], payloads: dict[OffloadKey, np.ndarray]) -> None:
        """The GPU->CPU store of `keys` (their bytes put in the rows vLLM assigns), then the cascade."""
        with self.manager.lock:
            out = self.manager.prepare_store(keys, ctx)
            if out is None:
                raise RuntimeError("the CPU primary tier has no room for the store")
            for k, c in zip(out.keys_to_store, out.store_spec.chunk_ids):
                self.rows[int(c)] = payloads[k]
            self.manager.complete_store(out.keys_to_store, ctx)
        self.end_step()

    def settle(self, timeout: float = 60.0, step_s: float = 0.002) -> None:
        """Steps until no tier has a job in flight."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.manager.lock:
                busy = self.manager.has_pending_work()
            if not busy:
                return
            self.end_step()
            time.sleep(step_s)
        raise TimeoutError("the tiers never settled")

    def promote(self, requests: list[tuple[ReqContext, list[OffloadKey]]], timeout: float = 60.0,
                step_s: float = 0.002) -> dict[str, Any]:
        """Looks every request's keys up, step by step, until each is HIT in primary
        (promoted from a tier) or some key MISSes; what it took."""
        start = time.monotonic()
        pending = {ctx.req_id: (ctx, list(keys)) for ctx, keys in requests}
        steps, resolved_at, missed = 0, None, []
        while pending and time.monotonic() - start < timeout:
            retry = False
            with self.manager.lock:
                for req_id, (ctx, keys) in list(pending.items()):
                    results = [self.manager.lookup(k, ctx) for k in keys]
                    if any(r == LookupResult.MISS for r in results):
                        missed += [k for k, r in zip(keys, results) if r == LookupResult.MISS]
                        del pending[req_id]
                    elif all(r == LookupResult.HIT for r in results):
                        del pending[req_id]
                    retry |= any(r == LookupResult.RETRY for r in results)
            if not retry and resolved_at is None:
                resolved_at = time.monotonic() - start
            if pending:
                self.end_step()
                steps += 1
                time.sleep(step_s)
        if pending:
            raise TimeoutError(f"lookups never resolved for {len(pending)} requests")
        return {"seconds": time.monotonic() - start, "steps": steps, "resolved_s": resolved_at or 0.0,
                "missed": missed}

    def read_rows(self, ctx: ReqContext, keys: list[OffloadKey]) -> list[np.ndarray]:
        """The primary rows of keys that are HIT (what vLLM's CPU->GPU load reads)."""
        with self.manager.lock:
            spec = self.manager.prepare_load(keys, ctx)
            rows = [self.rows[int(c)].copy() for c in spec.chunk_ids]
            self.manager.complete_load(keys, ctx)
        return rows

    def shutdown(self) -> None:
        self.manager.shutdown()
