"""kvtier's tiers inside vLLM 0.33.0 (docs/vllm.md).

vLLM's tiered KV offloading (``OffloadingConnector`` + ``TieringOffloadingSpec``)
loads secondary tiers by module path::

    {"type": "KvtierDiskTier", "module_path": "kvtier.vllm", "path": "/nvme/kvtier", "capacity_blocks": 200000}

The classes are imported on first use: ``import kvtier.vllm`` imports neither
vLLM nor anything that starts a thread or touches a disk (vLLM's API server
imports the module to read the tiers' metric names).
"""

from __future__ import annotations

from typing import Any

__all__ = ["KvtierDiskTier"]


def __getattr__(name: str) -> Any:
    if name == "KvtierDiskTier":
        from kvtier.vllm.disk_tier import KvtierDiskTier

        return KvtierDiskTier
    raise AttributeError(f"module 'kvtier.vllm' has no attribute {name!r}")
