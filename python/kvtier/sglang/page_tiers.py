"""One host pool's pages in kvtier's tiers: G3 (a file), G4 (Redis), or both
stacked — looked up in G3 then G4, a G4 hit kept in G3 too, every set going
to both. The pages move in place between SGLang's host pool and the tiers
(kvtier._kvtier.PageTier: the I/O on a C++ thread, the interpreter lock
released while it runs); this maps SGLang's batches onto them.

Eviction respects prefixes (G3, within its capacity): the pages of a batch
are uses from the tail to the head, so the head of a chain is the last of it
to go, and a page found after the first missing page of a chain (its prefix
is gone: SGLang can never use it) is demoted, the first to go.
"""

from __future__ import annotations

import os
from typing import Any

from kvtier import _kvtier
from kvtier.sglang.storage_options import StorageOptions, disk_file_name, page_namespace
from kvtier.tier_options import TierOptionError


def leading(flags: list[bool]) -> int:
    """The length of the run of True from the first."""
    for i, f in enumerate(flags):
        if not f:
            return i
    return len(flags)


def pool_memory(host_pool: Any) -> list[tuple[int, int]]:
    """The host pool's buffers (address, bytes): every span a page names must lie in one."""
    memory = []
    for name in ("kv_buffer", "k_buffer", "v_buffer"):
        buffer = getattr(host_pool, name, None)
        if buffer is None or not hasattr(buffer, "data_ptr"):
            continue
        tensors = buffer if isinstance(buffer, (list, tuple)) else [buffer]
        memory += [(t.data_ptr(), t.numel() * t.element_size()) for t in tensors if t.numel() > 0]
    if not memory:
        raise TierOptionError(f"kvtier: the host pool {type(host_pool).__name__} exposes no buffer to move pages in")
    return memory


class PageTiers:
    """G3 and/or G4 over one host pool's pages (pool `pool_name`)."""

    def __init__(self, storage_config: Any, options: StorageOptions, host_pool: Any, pool_name: str) -> None:
        if not hasattr(host_pool, "get_page_buffer_meta"):
            raise TierOptionError(f"kvtier: the host pool {type(host_pool).__name__} ({pool_name}) has no "
                                  "zero-copy page view (get_page_buffer_meta)")
        self.pool = host_pool
        self.page_size = int(host_pool.page_size)
        import torch

        _, sizes = host_pool.get_page_buffer_meta(torch.arange(self.page_size, dtype=torch.int64))
        self.span_bytes = [int(s) for s in sizes]
        namespace = page_namespace(storage_config, host_pool, pool_name, self.span_bytes)
        memory = pool_memory(host_pool)
        self.g3 = self.g4 = None
        self._disk_file = None
        if options.disk_path is not None:
            if not hasattr(_kvtier, "open_disk_pages"):
                raise TierOptionError("kvtier: this build has no disk tier (built without liburing)")
            self._disk_file = os.path.join(options.disk_path, disk_file_name(storage_config, pool_name))

        def open_g3() -> Any:
            return _kvtier.open_disk_pages(
                self.span_bytes, memory, self._disk_file, options.disk_capacity_blocks, namespace,
                staging_pages=options.staging_pages, queue_depth=options.queue_depth, sync=options.sync,
                key_file=options.tier_key_file, reformat=options.reformat)

        self._open_g3 = open_g3
        try:
            if self._disk_file is not None:
                self.g3 = open_g3()
            if options.redis_urls:
                if not hasattr(_kvtier, "open_shared_pages"):
                    raise TierOptionError("kvtier: this build has no shared tier (built without hiredis)")
                self.g4 = _kvtier.open_shared_pages(
                    self.span_bytes, memory, options.redis_urls, options.redis_namespace, namespace,
                    staging_pages=options.staging_pages, deadline_ms=options.deadline_ms,
                    retry_after_ms=options.retry_after_ms, ttl_seconds=options.ttl_seconds,
                    key_file=options.tier_key_file)
        except BaseException:
            self.close()
            raise
        self.page_bytes = sum(self.span_bytes)
        self.g4_sets_failed = 0
        self.g4_kept_in_g3 = 0

    def spans(self, host_indices: Any) -> tuple[list[int], list[int]]:
        addresses, sizes = self.pool.get_page_buffer_meta(host_indices)
        return [int(a) for a in addresses], [int(s) for s in sizes]

    def _page_spans(self, spans: tuple[list[int], list[int]], positions: list[int]) -> tuple[list[int], list[int]]:
        per = len(self.span_bytes)
        addresses, sizes = spans
        picked_a: list[int] = []
        picked_s: list[int] = []
        for p in positions:
            picked_a += addresses[p * per:(p + 1) * per]
            picked_s += sizes[p * per:(p + 1) * per]
        return picked_a, picked_s

    def exists(self, keys: list[bytes]) -> int:
        """The count of leading pages some tier holds (G4 asked once, for what G3 lacks)."""
        in_g3 = self.g3.present(keys) if self.g3 is not None else [False] * len(keys)
        held = in_g3
        first_missing = leading(held)
        if first_missing < len(keys) and self.g4 is not None:
            rest = self.g4.present(keys[first_missing:])
            held = held[:first_missing] + [h or r for h, r in zip(held[first_missing:], rest)]
        count = leading(held)
        self._note_chain(keys, count, in_g3)
        return count

    def present(self, keys: list[bytes]) -> list[bool]:
        """Per key, whether some tier holds it (G4 asked once, for what G3 lacks)."""
        held = self.g3.present(keys) if self.g3 is not None else [False] * len(keys)
        missing = [i for i, h in enumerate(held) if not h]
        if missing and self.g4 is not None:
            for i, r in zip(missing, self.g4.present([keys[i] for i in missing])):
                held[i] = r
        return held

    def _note_chain(self, keys: list[bytes], count: int, g3_held: list[bool]) -> None:
        """The run SGLang can use: uses tail to head; G3 pages past its end: demoted."""
        if self.g3 is None:
            return
        self.g3.note_uses(list(reversed(keys[:count])))
        orphans = [k for k, h in zip(keys[count + 1:], g3_held[count + 1:]) if h]
        if orphans:
            self.g3.note_uses(orphans, demote=True)

    def get(self, keys: list[bytes], host_indices: Any) -> list[bool]:
        """Reads page i of `keys` into the host pages of `host_indices`; per page, whether it verified."""
        spans = self.spans(host_indices)
        loaded = [False] * len(keys)
        if self.g3 is not None:
            present = self.g3.present(keys)
            positions = [i for i, p in enumerate(present) if p]
            if positions:
                got = self.g3.load([keys[i] for i in positions], *self._page_spans(spans, positions))
                for i, ok in zip(positions, got):
                    loaded[i] = ok
        in_g3 = list(loaded)
        if self.g4 is not None:
            # Up to the first page nothing gave: SGLang uses only the leading run.
            wanted = [i for i in range(len(keys)) if not loaded[i]]
            if wanted:
                got = self.g4.load([keys[i] for i in wanted], *self._page_spans(spans, wanted))
                from_g4 = [i for i, ok in zip(wanted, got) if ok]
                for i in from_g4:
                    loaded[i] = True
                if self.g3 is not None and from_g4:
                    kept = self.g3.store([keys[i] for i in from_g4], *self._page_spans(spans, from_g4))
                    self.g4_kept_in_g3 += sum(kept)
        self._note_chain(keys, leading(loaded), in_g3)
        return loaded

    def set(self, keys: list[bytes], host_indices: Any, prefix: list[bytes]) -> list[bool]:
        """Writes each page under its key in every tier (a page held already is not written again).
        A batch longer than G3's capacity keeps its head there: the pages past it are not written (False)."""
        spans = self.spans(host_indices)
        stored = None
        if self.g3 is not None:
            room = min(len(keys), self.g3.capacity)
            stored = self.g3.store(keys[:room], *self._page_spans(spans, list(range(room)))) + [False] * (
                len(keys) - room)
            # The chain's head is the most recent use: its tail goes first.
            self.g3.note_uses(list(reversed(prefix + keys)))
        if self.g4 is not None:
            shared = self.g4.store(keys, *spans)
            self.g4_sets_failed += len(shared) - sum(shared)
            # G4 alone: its answer; stacked, a page either tier holds (G4's failures are counted).
            stored = shared if stored is None else [a or b for a, b in zip(stored, shared)]
        return stored

    def counters(self) -> dict[str, dict[str, Any]]:
        out = {}
        if self.g3 is not None:
            out["g3"] = self.g3.counters()
        if self.g4 is not None:
            out["g4"] = self.g4.counters()
        return out

    def clear(self) -> None:
        """G3 starts empty (its file removed and made anew); G4 is shared by other instances and left as it is."""
        if self.g3 is None:
            return
        self.g3.shutdown()
        self.g3 = None
        os.unlink(self._disk_file)
        self.g3 = self._open_g3()

    def close(self) -> None:
        for tier in (self.g3, self.g4):
            if tier is not None:
                tier.shutdown()
