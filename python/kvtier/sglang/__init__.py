"""kvtier's tiers inside SGLang 0.5.23 (docs/sglang.md).

SGLang's hierarchical cache loads a third-party L3 storage backend by module path::

    --enable-hierarchical-cache --hicache-storage-backend dynamic
    --hicache-storage-backend-extra-config '{"backend_name": "kvtier", "module_path": "kvtier.sglang",
        "class_name": "KvtierHiCacheStorage", "interface_v1": 1,
        "disk_path": "/nvme/kvtier", "disk_capacity_blocks": 200000, "redis_url": "redis://10.0.0.5:7000"}'

The class is imported on first use: ``import kvtier.sglang`` imports neither
SGLang nor torch.
"""

from __future__ import annotations

from typing import Any

__all__ = ["KvtierHiCacheStorage"]


def __getattr__(name: str) -> Any:
    if name == "KvtierHiCacheStorage":
        from kvtier.sglang.hicache_storage import KvtierHiCacheStorage

        return KvtierHiCacheStorage
    raise AttributeError(f"module 'kvtier.sglang' has no attribute {name!r}")
