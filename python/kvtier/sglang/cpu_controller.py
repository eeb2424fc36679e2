"""SGLang 0.5.23's HiCache L2 <-> L3 path on the CPU, in SGLang's own classes:
the MHA host pool (``MHATokenToKVPoolHost``, built with ``pin_memory=False``),
the host pool group the server builds, and ``HybridCacheController`` (the
class ``UnifiedRadixCache`` builds for every model) with its backup, prefetch
and prefetch-I/O threads, its storage backend factory and its page-hash chain.
Only the device <-> host copies are left out (SGLang's kernels need a GPU): a
test writes the host pages' bytes where SGLang's device -> host copy would.
The single-rank topology is set as the server sets it when it starts. The
SGLang tests and kvtier.sglang.bench use it."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import torch
from sglang.srt.mem_cache.base_prefix_cache import CacheRequestHandle
from sglang.srt.mem_cache.device_pool_info import KVBufferLayout, KVBuffers, MHABufferInfo
from sglang.srt.mem_cache.hicache_storage import PoolName
from sglang.srt.mem_cache.hybrid_cache.hybrid_cache_controller import HybridCacheController
from sglang.srt.mem_cache.hybrid_cache.hybrid_pool_assembler import build_pool_entry
from sglang.srt.mem_cache.pool_host.group import HostPoolGroup
from sglang.srt.mem_cache.pool_host.mha import MHATokenToKVPoolHost
from sglang.srt.mem_cache.utils import get_storage_hash_str
from sglang.srt.runtime_context import get_parallel

KVTIER_BACKEND = {"backend_name": "kvtier", "module_path": "kvtier.sglang", "class_name": "KvtierHiCacheStorage",
                  "interface_v1": 1}


@dataclass(frozen=True)
class Geometry:
    """An MHA model's KV as SGLang's pools hold it."""

    layers: int = 2
    heads: int = 2
    head_dim: int = 8
    page_size: int = 4
    dtype: torch.dtype = torch.bfloat16
    device_tokens: int = 64  # the device pool's tokens; the host pool holds host_ratio times as many

    @property
    def page_bytes(self) -> int:
        return 2 * self.layers * self.page_size * self.heads * self.head_dim * self.dtype.itemsize


def single_rank() -> None:
    """The topology SGLang's server sets at start, for one rank (HiCache reads it)."""
    get_parallel().override_permanently(attn_dcp_size=1, attn_dcp_rank=0, tp_rank=0, tp_size=1, pp_rank=0, pp_size=1)


def host_pool(geometry: Geometry, layout: str, host_ratio: float = 2.0) -> MHATokenToKVPoolHost:
    """SGLang's MHA host pool over a CPU device pool of `geometry`, unpinned (no driver here)."""
    g = geometry
    k = [torch.zeros(g.device_tokens, g.heads, g.head_dim, dtype=g.dtype) for _ in range(g.layers)]
    v = [torch.zeros(g.device_tokens, g.heads, g.head_dim, dtype=g.dtype) for _ in range(g.layers)]

    def pointers(tensors: list[torch.Tensor]) -> torch.Tensor:
        return torch.tensor([t.data_ptr() for t in tensors], dtype=torch.uint64)

    info = MHABufferInfo(buffers=KVBuffers(k=tuple(k), v=tuple(v), k_data_ptrs=pointers(k), v_data_ptrs=pointers(v),
                                           layout=KVBufferLayout.NHD),
                         page_size=g.page_size, head_num=g.heads, head_dim=g.head_dim, v_head_dim=g.head_dim,
                         dtype=g.dtype, device=torch.device("cpu"))
    pool = MHATokenToKVPoolHost(info, host_ratio, 0, g.page_size, layout, pin_memory=False, device="cpu",
                                device_capacity_tokens=g.device_tokens, start_layer=0, end_layer=g.layers)
    pool._kvtier_device_buffers = (k, v)  # the device pool's tensors live as long as the host pool
    return pool


class CpuHiCache:
    """One rank's HiCache storage path: SGLang's controller over a host pool, with a storage backend."""

    def __init__(self, geometry: Geometry, layout: str, backend: str, extra_config: dict[str, Any] | None = None,
                 model_name: str = "kvtier-test/tiny", host_ratio: float = 2.0) -> None:
        single_rank()
        self.geometry = geometry
        self.host = host_pool(geometry, layout, host_ratio)
        device_pool = SimpleNamespace(device="cpu", layer_num=geometry.layers,
                                      register_layer_transfer_counter=lambda counter: None)
        allocator = SimpleNamespace(get_kvcache=lambda: device_pool)
        group = HostPoolGroup([build_pool_entry(name=PoolName.KV, host_pool=self.host, device_pool=device_pool,
                                                layer_mapping={i: i for i in range(geometry.layers)},
                                                transfer_layer_id_max=geometry.layers, is_anchor=True)])
        self.controller = HybridCacheController(allocator, group, geometry.page_size, None, threading.Event(),
                                                write_policy="write_through", storage_backend=backend,
                                                model_name=model_name,
                                                storage_backend_extra_config=dict(extra_config or {}))
        self.backend = self.controller.storage_backend
        self._requests = 0

    # The host pool's pages (what SGLang's device -> host copy fills, and its host -> device copy reads).
    def allocate(self, pages: int) -> torch.Tensor:
        indices = self.host.alloc(pages * self.geometry.page_size)
        if indices is None:
            raise MemoryError(f"the host pool has no room for {pages} pages")
        return indices

    def free(self, indices: torch.Tensor) -> None:
        self.host.free(indices)

    def page_bytes_of(self, indices: torch.Tensor) -> list[bytes]:
        """Each page's bytes, through SGLang's own flat page view."""
        ps = self.geometry.page_size
        return [self.host.get_data_page(int(indices[i]), flat=True).view(torch.uint8).numpy().tobytes()
                for i in range(0, len(indices), ps)]

    def fill(self, indices: torch.Tensor, seed: int) -> None:
        """Writes seeded bytes into each page (where SGLang's device -> host copy would)."""
        ps = self.geometry.page_size
        template = self.host.get_dummy_flat_data_page()
        for n, i in enumerate(range(0, len(indices), ps)):
            g = torch.Generator().manual_seed(seed * 1_000_003 + n)
            raw = torch.randint(0, 256, (template.numel() * template.element_size(),), dtype=torch.uint8, generator=g)
            self.host.set_from_flat_data_page(int(indices[i]), raw.view(template.dtype))

    @staticmethod
    def page_keys(tokens: list[int], page_size: int) -> list[str]:
        """SGLang's storage key chain of `tokens` (one SHA-256 per page, chained)."""
        return list(get_storage_hash_str(tokens, None, page_size=page_size))

    def backup(self, indices: torch.Tensor, tokens: list[int], timeout: float = 60.0) -> int:
        """SGLang's backup of host pages to storage (write_storage, the backup thread): tokens written."""
        keys = self.page_keys(tokens, self.geometry.page_size)
        op_id = self.controller.write_storage(indices, tokens, hash_value=keys)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            op = self.controller.ack_backup_queue.get(timeout=timeout)
            if op.id == op_id:
                return int(op.completed_tokens)
        raise TimeoutError("SGLang's backup thread did not acknowledge the write")

    def prefetch(self, tokens: list[int], timeout: float = 60.0) -> tuple[int, torch.Tensor | None]:
        """SGLang's prefetch (hit query, host allocation, the I/O thread): tokens completed, and their pages."""
        self._requests += 1
        rid = f"kvtier-{self._requests}"
        op = self.controller.prefetch(CacheRequestHandle(rid, 0), tokens)
        hit = self.controller.prefetch_hit_queue.get(timeout=timeout)
        assert hit is op, "SGLang's prefetch thread answered another request"
        if op.storage_hit_count == 0:
            return 0, None
        op.host_indices = self.allocate(op.storage_hit_count // self.geometry.page_size)
        self.controller.prefetch_buffer.put(op)
        done = 0
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ack = self.controller.ack_prefetch_queue.get(timeout=timeout)
            if ack.operation is not op:
                continue
            if ack.completed_tokens is not None:
                done = max(done, int(ack.completed_tokens))
            if ack.completed_req:
                break
        else:
            raise TimeoutError("SGLang's prefetch did not complete")
        return done, op.host_indices[:done]

    def close(self) -> None:
        self.controller.detach_storage_backend()
