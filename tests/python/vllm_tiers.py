"""Building vLLM 0.33.0's tiered offloading on the CPU as vLLM's own tests do
(tests/v1/kv_offload/tiering/): an OffloadingConfig, a spec stub with the fields
tiers read, a page-aligned primary view, tiers made by vLLM's
SecondaryTierFactory, and TieringOffloadingManager over the real
CPUPrimaryTierOffloadingManager. Imported by the vLLM tests only."""
import mmap
import time
from types import SimpleNamespace
from unittest.mock import MagicMock

import numpy as np
from vllm.v1.kv_offload.base import ReqContext, ScheduleEndContext, make_offload_key
from vllm.v1.kv_offload.config import (
    OffloadingCacheConfig,
    OffloadingConfig,
    OffloadingGroupConfig,
    OffloadingModelConfig,
    OffloadingParallelConfig,
)
from vllm.v1.kv_offload.tiering.base import TransferJob
from vllm.v1.kv_offload.tiering.factory import SecondaryTierFactory
from vllm.v1.kv_offload.tiering.manager import CPUPrimaryTierOffloadingManager, TieringOffloadingManager

KVTIER_DISK = {"type": "KvtierDiskTier", "module_path": "kvtier.vllm"}


def offloading_spec(model="kvtier-test/tiny", dtype="bfloat16", events=False, blocks_per_chunk=1):
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


def primary_view(num_chunks, row_bytes):
    """A page-aligned int8 (num_chunks, row_bytes) memoryview, as the CPU primary tier's."""
    region = mmap.mmap(-1, num_chunks * row_bytes)
    array = np.frombuffer(region, dtype=np.int8).reshape(num_chunks, row_bytes)
    return memoryview(array)


def key(n, group=0, hash_bytes=32):
    return make_offload_key(n.to_bytes(hash_bytes, "big"), group)


def row_bytes_of(n, row_bytes, salt=0):
    return np.random.default_rng(n * 7919 + salt).integers(-128, 128, row_bytes, dtype=np.int8)


def make_tier(config, view, spec):
    return SecondaryTierFactory.create_secondary_tier(config, view, spec)


def run_job(tier, job_id, keys, chunk_ids, *, load, timeout=30.0):
    """Submits one job and polls get_finished_jobs until it is reported; the result."""
    job = TransferJob(job_id=job_id, keys=list(keys), chunk_ids=np.asarray(chunk_ids, dtype=np.int32),
                      is_promotion=load, req_context=ReqContext(req_id=f"r{job_id}"))
    (tier.submit_load if load else tier.submit_store)(job)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for result in tier.get_finished_jobs():
            assert result.job_id == job_id, "a result of a job never submitted"
            return result
        time.sleep(0.001)
    raise AssertionError(f"job {job_id} was never reported")


def finished_until(tier, job_ids, timeout=30.0):
    """Polls until every job in `job_ids` was reported; each id exactly once."""
    seen = {}
    deadline = time.monotonic() + timeout
    while set(seen) != set(job_ids) and time.monotonic() < deadline:
        for result in tier.get_finished_jobs():
            assert result.job_id not in seen, f"job {result.job_id} reported twice"
            assert result.job_id in job_ids, f"job {result.job_id} was never submitted"
            seen[result.job_id] = result
        time.sleep(0.001)
    assert set(seen) == set(job_ids), f"never reported: {set(job_ids) - set(seen)}"
    return seen


class TieredManager:
    """TieringOffloadingManager over the real CPU primary tier and `tier_configs`,
    driven step by step as the scheduler does (the lock held per step)."""

    def __init__(self, tier_configs, num_chunks, row_bytes, spec=None):
        self.spec = spec or offloading_spec()
        region = MagicMock()
        self.view = primary_view(num_chunks, row_bytes)
        region.create_kv_memoryview.return_value = self.view
        self.primary = CPUPrimaryTierOffloadingManager(num_chunks=num_chunks, mmap_region=region)
        kv_view = self.primary.get_kv_memoryview()
        self.tiers = [make_tier(dict(c), kv_view, self.spec) for c in tier_configs]
        self.manager = TieringOffloadingManager(primary_tier=self.primary, secondary_tiers=self.tiers,
                                                tier_poll_interval_s=0)
        self.rows = np.asarray(self.view)
        self._requests = 0

    def request(self):
        self._requests += 1
        ctx = ReqContext(req_id=f"req-{self._requests}")
        with self.manager.lock:
            self.manager.on_new_request(ctx)
        return ctx

    def end_step(self, ctx=None):
        with self.manager.lock:
            self.manager.on_schedule_end(ScheduleEndContext(new_req_ids=[], preempted_req_ids=[]))

    def store(self, ctx, keys, payloads):
        """The GPU->CPU store of `keys` (their bytes written into the rows vLLM assigns), then the cascade."""
        with self.manager.lock:
            out = self.manager.prepare_store(keys, ctx)
            assert out is not None
            rows = {k: int(c) for k, c in zip(out.keys_to_store, out.store_spec.chunk_ids)}
            for k in out.keys_to_store:
                self.rows[rows[k]] = payloads[k]
            self.manager.complete_store(out.keys_to_store, ctx)
        self.end_step()

    def settle(self, timeout=30.0):
        """Steps until the tiers have no job in flight."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.manager.lock:
                busy = self.manager.has_pending_work()
            if not busy:
                return
            self.end_step()
            time.sleep(0.002)
        raise AssertionError("the tiers never settled")

    def load(self, ctx, keys, timeout=30.0):
        """Looks `keys` up step by step until all are HIT in primary (promoted from a tier); their rows."""
        from vllm.v1.kv_offload.base import LookupResult
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.manager.lock:
                results = [self.manager.lookup(k, ctx) for k in keys]
            if all(r == LookupResult.HIT for r in results):
                with self.manager.lock:
                    spec = self.manager.prepare_load(keys, ctx)
                    rows = [self.rows[int(c)].copy() for c in spec.chunk_ids]
                    self.manager.complete_load(keys, ctx)
                return rows
            if any(r == LookupResult.MISS for r in results):
                return None
            self.end_step()
            time.sleep(0.002)
        raise AssertionError(f"lookups never resolved: {results}")

    def shutdown(self):
        self.manager.shutdown()
