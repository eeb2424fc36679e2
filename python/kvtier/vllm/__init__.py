"""kvtier's tiers inside vLLM 0.33.0 (docs/vllm.md).

vLLM's tiered KV offloading (``OffloadingConnector`` + ``TieringOffloadingSpec``)
loads secondary tiers by module path::

    {"type": "KvtierDiskTier", "module_path": "kvtier.vllm", "path": "/nvme/kvtier", "capacity_blocks": 200000}
    {"type": "KvtierSharedTier", "module_path": "kvtier.vllm", "redis_url": "redis://10.0.0.5:7000"}

and its CPU tier loads cache policies by module path::

    "eviction_policy": "KvtierAdaptivePolicy", "cache_policy_module_path": "kvtier.vllm"

(also ``KvtierLfuDaPolicy``, ``KvtierLru2Policy``, ``KvtierArcPolicy``,
``KvtierS3FifoPolicy``). The classes are imported on first use: ``import kvtier.vllm`` imports neither
vLLM nor anything that starts a thread or touches a disk (vLLM's API server
imports the module to read the tiers' metric names).
"""

from __future__ import annotations

from typing import Any

_CACHE_POLICIES = (
    "KvtierAdaptivePolicy",
    "KvtierLfuDaPolicy",
    "KvtierLru2Policy",
    "KvtierArcPolicy",
    "KvtierS3FifoPolicy",
)

__all__ = ["KvtierDiskTier", "KvtierSharedTier", *_CACHE_POLICIES]


def __getattr__(name: str) -> Any:
    if name == "KvtierDiskTier":
        from kvtier.vllm.disk_tier import KvtierDiskTier

        return KvtierDiskTier
    if name == "KvtierSharedTier":
        from kvtier.vllm.shared_tier import KvtierSharedTier

        return KvtierSharedTier
    if name in _CACHE_POLICIES:
        from kvtier.vllm import cache_policy

        return getattr(cache_policy, name)
    raise AttributeError(f"module 'kvtier.vllm' has no attribute {name!r}")
