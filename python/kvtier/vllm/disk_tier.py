"""KvtierDiskTier: kvtier's G3 as a vLLM 0.33.0 secondary KV tier (docs/vllm.md).

What it promises, beyond vLLM's own file tier:
- a row is served only after its record verified: the XXH3 of the row, the
  engine's whole offload key (kept in the record, compared on every load and
  at a restart) and, with a tier key, an HMAC-SHA256; a record that fails is
  never a loaded key, is dropped from the tier and misses from then on;
- a capacity in blocks, least recently used out (hits, loads and repeated
  stores are uses: vLLM 0.33.0 never calls touch), never a block a load reads;
- a restart (a new process on the same path) finds every row it held;
- rows move in place between vLLM's CPU rows and one file through io_uring
  (O_DIRECT where the file system takes it), on a C++ thread: no Python thread
  does I/O, and the calls that wait release the interpreter lock;
- lookups answer at once from memory (HIT or MISS, never RETRY).
The C++ service is kvtier._kvtier.open_disk_rows (tiers/rows/disk_rows, row_service).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from typing_extensions import override
from vllm.v1.kv_offload.base import ConfigInfo, Locality, LookupResult, Medium, OffloadKey, ReqContext

from kvtier import _kvtier
from kvtier.vllm.row_tier import RowTierAdapter
from kvtier.vllm.tier_namespace import row_namespace
from kvtier.tier_options import TierOptionError, flag, positive_int, refuse_unknown, text

if TYPE_CHECKING:
    from vllm.v1.kv_offload.base import OffloadingSpec
    from vllm.v1.kv_offload.tiering.backpressure import BackpressureDetector

# What a G3 tier's events say it is: a router that follows them keeps a block
# stored here until the matching removal (the tier evicts).
OWNERSHIP = "kvtier-g3"
_OPTIONS = ["path", "capacity_blocks", "tier_key_file", "queue_depth", "backlog", "sync", "reformat",
            "enable_kv_events", "locality"]


@dataclass(frozen=True)
class KvtierDiskTierInfo(ConfigInfo):
    """Config facts of one KvtierDiskTier, one label each."""

    kvtier_capacity_blocks: int
    kvtier_row_bytes: int
    kvtier_keyed: bool
    kvtier_sync: bool


class KvtierDiskTier(RowTierAdapter):
    """kvtier's G3 (a capacity-bounded, checksummed, restartable file of rows)."""

    medium: ClassVar[Medium] = Medium.STORAGE
    _ownership = OWNERSHIP
    _info_cls = KvtierDiskTierInfo

    def __init__(
        self,
        offloading_spec: OffloadingSpec,
        primary_kv_view: memoryview,
        tier_type: str,
        backpressure_detector: BackpressureDetector | None = None,
        locality: str | None = None,
        path: str | None = None,
        capacity_blocks: int | None = None,
        tier_key_file: str | None = None,
        queue_depth: int = 32,
        backlog: int = 32,
        sync: bool = False,
        reformat: bool = False,
        enable_kv_events: bool = False,
        **unknown: Any,
    ) -> None:
        """Args (beyond what vLLM's factory passes every tier):
        path: the tier's directory (created 0700); its file is
            kvtier-g3-dp<data parallel index>.tier, one engine's at a time.
        capacity_blocks: rows the tier holds at most (the file's size is
            this many slots of a 4 KiB header and a row).
        tier_key_file: a file of at least 32 secret bytes (0600): every
            record gets an HMAC-SHA256 under it, and only those are served.
        queue_depth, backlog: I/O in flight, and waiting for room.
        sync: a stored row counts only once fdatasync'ed (one per batch).
        reformat: a file of another model, layout, row size or key is
            started anew instead of refused.
        enable_kv_events: stored and removed events (with
            ownership "kvtier-g3"), when vLLM's KV events are on.
        """
        name = type(self).__name__
        refuse_unknown(name, unknown, _OPTIONS)
        super().__init__(offloading_spec, primary_kv_view, tier_type, backpressure_detector)
        self.locality = Locality(locality) if locality is not None else None
        directory = text(name, "path", path)
        capacity = positive_int(name, "capacity_blocks", capacity_blocks, most=2**32 - 1)
        key_file = text(name, "tier_key_file", tier_key_file, optional=True)
        events = flag(name, "enable_kv_events", enable_kv_events) and bool(
            offloading_spec.kv_events_config.enable_kv_cache_events
        )
        if not hasattr(_kvtier, "open_disk_rows"):
            raise TierOptionError(f"{name}: this kvtier was built without liburing (no disk tier)")
        dp_index = getattr(offloading_spec.config.parallel, "data_parallel_index", 0)
        tier = _kvtier.open_disk_rows(
            primary_kv_view,
            os.path.join(directory, f"kvtier-g3-dp{dp_index}.tier"),
            capacity,
            row_namespace(offloading_spec),
            queue_depth=positive_int(name, "queue_depth", queue_depth, most=4096),
            backlog=positive_int(name, "backlog", backlog, most=65536),
            sync=flag(name, "sync", sync),
            key_file=key_file,
            reformat=flag(name, "reformat", reformat),
            events=events,
        )
        self._start(tier, tier_type, events)
        self._info = KvtierDiskTierInfo(
            kvtier_capacity_blocks=capacity,
            kvtier_row_bytes=tier.row_bytes,
            kvtier_keyed=key_file is not None,
            kvtier_sync=sync,
        )

    @property
    def recovered(self) -> dict[str, Any]:
        """What the tier file held when this tier opened it (its restart scan)."""
        return self._tier.opened()

    @override
    def lookup(self, key: OffloadKey, req_context: ReqContext) -> LookupResult:
        return LookupResult.HIT if self._tier.lookup(key) else LookupResult.MISS
