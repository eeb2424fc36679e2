"""kvtier's tiers inside vLLM 0.33.0 (docs/vllm.md).

vLLM's tiered KV offloading (``OffloadingConnector`` + ``TieringOffloadingSpec``)
loads secondary tiers by module path::

    {"type": "KvtierDiskTier", "module_path": "kvtier.vllm", "path": "/nvme/kvtier", "capacity_blocks": 200000}
    {"type": "KvtierSharedTier", "module_path": "kvtier.vllm", "redis_url": "redis://10.0.0.5:7000"}

The classes are imported on first use: ``import kvtier.vllm`` imports neither
vLLM nor anything that starts a thread or touches a disk (vLLM's API server
imports the module to read the tiers' metric names).
"""

from __future__ import annotations

from typing import Any

__all__ = ["KvtierDiskTier", "KvtierSharedTier"]


def __getattr__(name: str) -> Any:
    if name == "KvtierDiskTier":
        from kvtier.vllm.disk_tier import KvtierDiskTier

        return KvtierDiskTier
    if name == "KvtierSharedTier":
        from kvtier.vllm.shared_tier import KvtierSharedTier

        return KvtierSharedTier
    raise AttributeError(f"module 'kvtier.vllm' has no attribute {name!r}")
