"""kvtier's cache orders as vLLM 0.33.0 CPU-tier cache policies (docs/vllm.md).

vLLM's CPU offloading tier takes an out-of-tree ``CachePolicy`` by module path,
in the ``kv_connector_extra_config`` users already write::

    "eviction_policy": "KvtierAdaptivePolicy", "cache_policy_module_path": "kvtier.vllm"

The order is kvtier's own C++ code (``_kvtier.ChunkEviction``, the frame
``kvtier bench policy`` measures, docs/policies.md): only a leaf of the prefix
tree leaves, so a parent never goes before its child; a chunk's history
outlives it in a bounded table (second sight); ``adaptive`` chooses online
between recency and second sight. This module keeps what vLLM's contract needs
in Python — the key -> ``ChunkStatus`` map ``get`` answers, each slot's key —
and tells the order what happened, a request's accesses in one call:

- a store (``insert``) is a chunk's first use; its parent is the key the same
  request observed just before it in the same KV cache group (hybrid models:
  one chain per group), in the order vLLM observed them;
- at ``on_request_finished`` the request's reused chunks count one more use and
  the chunks it stored only renew their recency, tail first (as kvtier's G1
  releases a request leaf first);
- ``mark_evictable`` / ``mark_non_evictable`` move a chunk into and out of the
  candidates; ``evict(n, protected)`` takes all n or none, never a protected or
  pinned chunk.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from typing_extensions import override
from vllm.v1.kv_offload.base import OffloadKey, ReqContext
from vllm.v1.kv_offload.cpu.policies.base import (
    CachePolicy,
    ChunkStatus,
    order_request_keys,
)

from kvtier import _kvtier

# OffloadKey is the block hash followed by the group index as 4 big-endian
# bytes (vllm.v1.kv_offload.base.make_offload_key).
_GROUP_BYTES = 4


@dataclass(slots=True)
class _RequestChains:
    """The keys one request observed, as chains per KV cache group."""

    owner: object
    generation: int
    tail: dict[bytes, OffloadKey] = field(default_factory=dict)
    parent: dict[OffloadKey, OffloadKey | None] = field(default_factory=dict)


class _KvtierCachePolicy(CachePolicy):
    """One of kvtier's leaf-first orders behind vLLM's CachePolicy contract."""

    order: ClassVar[str]

    def __init__(self, cache_capacity: int) -> None:
        super().__init__(cache_capacity)
        self._order = _kvtier.ChunkEviction(self.order, cache_capacity)
        self._chunks: dict[OffloadKey, ChunkStatus] = {}
        self._slot_keys: list[OffloadKey | None] = [None] * cache_capacity
        self._generation = 0
        self._last_context: ReqContext | None = None
        self._last_chains: _RequestChains | None = None

    def _chains(self, req_context: ReqContext) -> _RequestChains:
        # The manager calls for one request in a row (a store's inserts): the
        # last request's chains are kept at hand.
        if req_context is self._last_context:
            return self._last_chains
        state = req_context.get_state(_RequestChains)
        if state is None or state.owner is not self or state.generation != self._generation:
            state = _RequestChains(self, self._generation)
            req_context.set_state(state)
        self._last_context, self._last_chains = req_context, state
        return state

    @override
    def get(self, key: OffloadKey) -> ChunkStatus | None:
        return self._chunks.get(key)

    @override
    def insert(self, key: OffloadKey, chunk: ChunkStatus, req_context: ReqContext) -> None:
        slot = chunk.chunk_id
        if key in self._chunks:
            raise ValueError(f"{type(self).__name__}: key {key.hex()} is already cached")
        if not 0 <= slot < self.cache_capacity or self._slot_keys[slot] is not None:
            raise ValueError(f"{type(self).__name__}: chunk {slot} is outside the cache of "
                             f"{self.cache_capacity} or holds another key")
        self._order.stored(slot, key, self._chains(req_context).parent.get(key))
        self._chunks[key] = chunk
        self._slot_keys[slot] = key
        if chunk.ref_cnt == 0:
            self._order.evictable(slot)

    @override
    def remove(self, key: OffloadKey) -> None:
        chunk = self._chunks[key]
        self._order.removed(chunk.chunk_id)
        del self._chunks[key]
        self._slot_keys[chunk.chunk_id] = None

    @override
    def touch(self, keys: Iterable[OffloadKey], req_context: ReqContext) -> None:
        # A ready chunk is used again; one still being stored only moves up.
        slots: list[int] = []
        reused = bytearray()
        for key in reversed(list(keys)):
            chunk = self._chunks.get(key)
            if chunk is not None:
                slots.append(chunk.chunk_id)
                reused.append(chunk.ref_cnt >= 0)
        if slots:
            self._order.accessed(slots, bytes(reused))

    @override
    def on_store_miss(self, keys: Iterable[OffloadKey], req_context: ReqContext) -> None:
        # A miss is no use of anything cached; a key seen before is recalled
        # from the order's history when it is stored.
        return

    @override
    def on_request_access(self, keys: Iterable[OffloadKey], req_context: ReqContext) -> None:
        chains = self._chains(req_context)
        tail, parent = chains.tail, chains.parent
        for key in keys:
            group = key[-_GROUP_BYTES:]
            parent[key] = tail.get(group)
            tail[group] = key

    @override
    def on_request_finished(
        self,
        key_groups: Sequence[Sequence[OffloadKey]],
        insertion_only_keys: set[OffloadKey],
        reused_keys: set[OffloadKey],
        req_context: ReqContext,
    ) -> None:
        slots: list[int] = []
        reused = bytearray()
        chunks = self._chunks
        for key in reversed(order_request_keys(key_groups, req_context)):
            chunk = chunks.get(key)
            if chunk is not None:
                slots.append(chunk.chunk_id)
                reused.append(key in reused_keys)
        if slots:
            self._order.accessed(slots, bytes(reused))
        req_context.set_state(_RequestChains(None, -1))  # the request's chains are done with
        self._last_context = self._last_chains = None

    @override
    def evict(self, n: int, protected: set[OffloadKey]) -> list[tuple[OffloadKey, ChunkStatus]] | None:
        if n == 0:
            return []
        chunks = self._chunks
        spared = [chunk.chunk_id for key in protected if (chunk := chunks.get(key)) is not None]
        slots = self._order.evict(n, spared)
        if slots is None:
            return None
        evicted: list[tuple[OffloadKey, ChunkStatus]] = []
        for slot in slots:
            key = self._slot_keys[slot]
            self._slot_keys[slot] = None
            evicted.append((key, chunks.pop(key)))
        return evicted

    @override
    def clear(self) -> None:
        self._order.clear()
        self._chunks.clear()
        self._slot_keys = [None] * self.cache_capacity
        self._generation += 1
        self._last_context = self._last_chains = None

    @override
    def mark_evictable(self, key: OffloadKey) -> None:
        self._order.evictable(self._chunks[key].chunk_id)

    @override
    def mark_non_evictable(self, key: OffloadKey) -> None:
        self._order.pinned(self._chunks[key].chunk_id)


class KvtierAdaptivePolicy(_KvtierCachePolicy):
    """kvtier's ``adaptive``: frequency classes (seen once / seen again) on
    leaves, recency inside a class, the cap chosen online by two shadow caches."""

    order = "adaptive"


class KvtierLfuDaPolicy(_KvtierCachePolicy):
    """LFU with dynamic aging on leaves (a TinyLFU estimate of recent uses)."""

    order = "lfu_da"


class KvtierLru2Policy(_KvtierCachePolicy):
    """LRU-2 on leaves: the oldest second-latest use goes first."""

    order = "lru2"


class KvtierArcPolicy(_KvtierCachePolicy):
    """ARC on leaves, its ghost lists the frame's bounded history."""

    order = "arc"


class KvtierS3FifoPolicy(_KvtierCachePolicy):
    """S3-FIFO on leaves: a small FIFO for new chunks, a main FIFO with second chances."""

    order = "s3fifo"
