"""KvtierHiCacheStorage: kvtier's G3 and G4 as an SGLang 0.5.23 HiCache
storage backend (L3), loaded by module path (docs/sglang.md)::

    --hicache-storage-backend dynamic --hicache-storage-backend-extra-config
    '{"backend_name": "kvtier", "module_path": "kvtier.sglang", "class_name": "KvtierHiCacheStorage",
      "interface_v1": 1, "disk_path": "/nvme/kvtier", "disk_capacity_blocks": 200000,
      "redis_url": "redis://10.0.0.5:7000"}'

What it promises, beyond SGLang's file backend:
- a page is served only after its record verified: the XXH3 of its bytes,
  SGLang's whole page key (kept in the record) and, with a tier key, an
  HMAC-SHA256; a page that fails is a False (the leading run is what SGLang
  uses), is dropped from the tier and misses from then on;
- pages are namespaced by what makes them interchangeable (model and storage
  format tag, dtype, page size, layout, spans, ranks): another layout in the
  same directory is refused, never served;
- G3 has a capacity in pages and evicts respecting prefixes; a restart (a
  new process on the same directory) finds every page;
- G3 and G4 stacked (G3 first, a G4 hit also kept in G3, every set to both);
- calls are thread safe and never raise for a bad page or a tier that failed:
  SGLang would throw the whole batch away. No Python thread does I/O: it runs
  on the tiers' C++ threads, with the interpreter lock released.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from sglang.srt.mem_cache.hicache_storage import (
    HiCacheStorage,
    HiCacheStorageConfig,
    HiCacheStorageExtraInfo,
    PoolName,
    PoolTransfer,
    PoolTransferResult,
)

from kvtier.sglang.page_tiers import PageTiers, leading
from kvtier.sglang.storage_options import storage_options

logger = logging.getLogger(__name__)


def _keys(keys: list[str]) -> list[bytes]:
    return [k.encode() for k in keys]


class KvtierHiCacheStorage(HiCacheStorage):
    """kvtier's verified G3 / G4 (or both stacked) under SGLang's HiCache."""

    def __init__(self, storage_config: HiCacheStorageConfig, kwargs: dict[str, Any] | None = None) -> None:
        self.storage_config = storage_config
        self.options = storage_options(storage_config.extra_config)
        self._pools: dict[str, PageTiers] = {}
        self._lock = threading.Lock()
        self._metrics = {"prefetch_pgs": [], "backup_pgs": [], "prefetch_bandwidth": [], "backup_bandwidth": []}
        self._closed = False

    # Registration: the tiers open once the pages' geometry is known.
    def register_mem_pool_host(self, mem_pool_host: Any) -> None:
        super().register_mem_pool_host(mem_pool_host)
        self._open(PoolName.KV, mem_pool_host)

    def register_mem_host_pool_v2(self, host_pool: Any, host_pool_name: Any) -> None:
        super().register_mem_host_pool_v2(host_pool, host_pool_name)
        name = str(host_pool_name)
        if name == str(PoolName.KV) and host_pool is getattr(self, "mem_pool_host", None):
            return  # the anchor, opened above
        self._open(name, host_pool)

    def _open(self, name: str, pool: Any) -> None:
        with self._lock:
            if str(name) not in self._pools:
                self._pools[str(name)] = PageTiers(self.storage_config, self.options, pool, str(name))

    def _tiers(self, name: Any = PoolName.KV) -> PageTiers:
        tiers = self._pools.get(str(name))
        if tiers is None:
            raise RuntimeError(f"kvtier: no host pool {name} registered")
        return tiers

    # The v1 (zero-copy) calls SGLang makes with "interface_v1": 1.
    def batch_exists(self, keys: list[str], extra_info: HiCacheStorageExtraInfo | None = None) -> int:
        try:
            return self._tiers().exists(_keys(keys))
        except Exception:
            logger.exception("kvtier: batch_exists failed; reporting no hit")
            return 0

    def batch_get_v1(self, keys: list[str], host_indices: Any,
                     extra_info: HiCacheStorageExtraInfo | None = None) -> list[bool]:
        start = time.perf_counter()
        try:
            loaded = self._tiers().get(_keys(keys), host_indices)
        except Exception:
            logger.exception("kvtier: batch_get_v1 failed; reporting every page missing")
            return [False] * len(keys)
        self._record("prefetch", leading(loaded), start)
        return loaded

    def batch_set_v1(self, keys: list[str], host_indices: Any,
                     extra_info: HiCacheStorageExtraInfo | None = None) -> list[bool]:
        start = time.perf_counter()
        prefix = _keys(extra_info.prefix_keys) if extra_info is not None and extra_info.prefix_keys else []
        try:
            stored = self._tiers().set(_keys(keys), host_indices, prefix)
        except Exception:
            logger.exception("kvtier: batch_set_v1 failed; reporting every page unwritten")
            return [False] * len(keys)
        self._record("backup", sum(stored), start)
        return stored

    # The v2 calls (hybrid models' sidecar pools), with SGLang's hit policies.
    def batch_exists_v2(self, keys: list[str], pool_transfers: list[PoolTransfer] | None = None,
                        extra_info: HiCacheStorageExtraInfo | None = None) -> PoolTransferResult:
        try:
            kv_pages = self._tiers().exists(_keys(keys))
            hit_count: dict[str, int] = {PoolName.KV: kv_pages} if kv_pages else {}
            restorable = set(range(1, kv_pages + 1))
            for transfer in pool_transfers or []:
                if not restorable:
                    break
                held = self._tiers(transfer.name).present(_keys(keys[:kv_pages]))
                pool_restorable = _restorable(transfer, held, kv_pages)
                boundary = max(pool_restorable, default=0)
                if boundary:
                    hit_count[transfer.name] = boundary
                restorable &= pool_restorable
            ordered = sorted(restorable)
            return PoolTransferResult(ordered[-1] if ordered else 0, hit_count, ordered)
        except Exception:
            logger.exception("kvtier: batch_exists_v2 failed; reporting no hit")
            return PoolTransferResult.empty()

    def batch_get_v2(self, transfers: list[PoolTransfer],
                     extra_info: HiCacheStorageExtraInfo | None = None) -> dict[str, list[bool]]:
        return self._v2(transfers, load=True)

    def batch_set_v2(self, transfers: list[PoolTransfer],
                     extra_info: HiCacheStorageExtraInfo | None = None) -> dict[str, list[bool]]:
        return self._v2(transfers, load=False)

    def _v2(self, transfers: list[PoolTransfer], *, load: bool) -> dict[str, list[bool]]:
        results: dict[str, list[bool]] = {}
        for transfer in transfers:
            keys = list(transfer.keys or [])
            try:
                tiers = self._tiers(transfer.name)
                if transfer.host_indices is None or transfer.host_indices.numel() != len(keys) * tiers.page_size:
                    raise ValueError(f"{len(keys)} keys and host indices of another length")
                if load:
                    results[transfer.name] = tiers.get(_keys(keys), transfer.host_indices)
                else:
                    results[transfer.name] = tiers.set(_keys(keys), transfer.host_indices, [])
            except Exception:
                logger.exception("kvtier: pool %s: batch %s failed", transfer.name, "get" if load else "set")
                results[transfer.name] = [False] * len(keys)
        return results

    # The legacy generic calls: kvtier serves only the zero-copy path ("interface_v1": 1 is required).
    def get(self, key: str, target_location: Any = None, target_sizes: Any = None) -> None:
        raise NotImplementedError("kvtier serves SGLang's zero-copy path only: set \"interface_v1\": 1")

    def batch_get(self, keys: list[str], target_locations: Any = None, target_sizes: Any = None) -> list[None]:
        raise NotImplementedError("kvtier serves SGLang's zero-copy path only: set \"interface_v1\": 1")

    def set(self, key: str, value: Any = None, target_location: Any = None, target_sizes: Any = None) -> bool:
        raise NotImplementedError("kvtier serves SGLang's zero-copy path only: set \"interface_v1\": 1")

    def batch_set(self, keys: list[str], values: Any = None, target_locations: Any = None,
                  target_sizes: Any = None) -> bool:
        raise NotImplementedError("kvtier serves SGLang's zero-copy path only: set \"interface_v1\": 1")

    def exists(self, key: str) -> bool:
        return self.batch_exists([key]) == 1

    # Operations.
    def clear(self) -> None:
        """SGLang's POST /hicache/storage-backend/clear: every tier of this rank starts empty."""
        with self._lock:
            for tiers in self._pools.values():
                tiers.clear()

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            for name, tiers in self._pools.items():
                logger.info("kvtier: pool %s closed: %s", name, tiers.counters())
                tiers.close()

    def counters(self) -> dict[str, Any]:
        """Each pool's tiers' counters (lookups, hits, stored, loaded, checksum failures, evictions, ...)."""
        return {name: tiers.counters() for name, tiers in self._pools.items()}

    def get_stats(self) -> Any:
        """SGLang's StorageMetrics since the last call (pages per batch, GB/s)."""
        from sglang.srt.observability.metrics_collector import StorageMetrics

        metrics = StorageMetrics()
        with self._lock:
            metrics.prefetch_pgs.extend(self._metrics["prefetch_pgs"])
            metrics.backup_pgs.extend(self._metrics["backup_pgs"])
            metrics.prefetch_bandwidth.extend(self._metrics["prefetch_bandwidth"])
            metrics.backup_bandwidth.extend(self._metrics["backup_bandwidth"])
            for values in self._metrics.values():
                values.clear()
        return metrics

    def _record(self, kind: str, pages: int, start: float) -> None:
        if not self.storage_config.enable_storage_metrics:
            return
        seconds = max(time.perf_counter() - start, 1e-9)
        gigabytes = pages * self._tiers().page_bytes / 1e9
        with self._lock:
            self._metrics[f"{kind}_pgs"].append(pages)
            self._metrics[f"{kind}_bandwidth"].append(gigabytes / seconds)


def _restorable(transfer: PoolTransfer, held: list[bool], kv_pages: int) -> set[int]:
    """The prefix lengths (in pages) a sidecar pool can restore, under its hit policy (SGLang's semantics)."""
    from sglang.srt.mem_cache.hicache_storage import PoolHitPolicy

    if transfer.hit_policy == PoolHitPolicy.ALL_PAGES:
        return set(range(1, leading(held) + 1))
    if transfer.hit_policy == PoolHitPolicy.TRAILING_PAGES:
        trailing = max(1, len(transfer.keys) if transfer.keys else 1)
        return {n for n in range(1, kv_pages + 1) if all(held[max(0, n - trailing):n])}
    raise ValueError(f"kvtier: unsupported pool hit policy {transfer.hit_policy}")
