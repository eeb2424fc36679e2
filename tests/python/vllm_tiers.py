"""Helpers of the vLLM tests: one tier job at a time, polled as vLLM polls it
(the manager side is kvtier.vllm.cpu_driver, which the bench uses too)."""
import time

import numpy as np
from vllm.v1.kv_offload.base import ReqContext
from vllm.v1.kv_offload.tiering.base import TransferJob
from vllm.v1.kv_offload.tiering.factory import SecondaryTierFactory

from kvtier.vllm.cpu_driver import TieredManager, offload_key, offloading_spec, primary_view  # noqa: F401

KVTIER_DISK = {"type": "KvtierDiskTier", "module_path": "kvtier.vllm"}
KVTIER_SHARED = {"type": "KvtierSharedTier", "module_path": "kvtier.vllm"}


def key(n, group=0, hash_bytes=32):
    return offload_key(n, group, hash_bytes)


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

