"""KvtierSharedTier: kvtier's G4 as a vLLM 0.33.0 secondary KV tier (docs/vllm.md).

One pool of rows in Redis (one redis-server, or a Redis Cluster from any of its
nodes) shared by every vLLM instance of the same model and layout. What it
promises:
- a row is served only after its value verified: the XXH3 of the row, the
  engine's whole offload key and, with a tier key, an HMAC-SHA256 (a value
  written by anyone without the key is never a hit); a value that fails is
  deleted and its key misses;
- every call is bounded by its deadline (deadline_ms), and a node that failed
  is not asked again for a back-off (the breaker): a store that is down, slow
  or stopped makes misses, never an endless RETRY and never a hang;
- lookups are asynchronous (vLLM's AsyncLookupManager: RETRY, then HIT or MISS
  once the step's batch was asked, in one round trip), values fetched by a
  lookup are kept for the load that follows (no second round trip);
- no Python thread does I/O: the Redis pipelines run on a C++ thread, and the
  lookup batch waits with the interpreter lock released.
Capacity is Redis' own (maxmemory + allkeys-lru); kvtier does not see its
evictions, so stored events say removal_expected=False.
The C++ service is kvtier._kvtier.open_shared_rows (tiers/rows/shared_rows, row_service).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from typing_extensions import override
from vllm.v1.kv_offload.base import (
    ConfigInfo,
    Locality,
    LookupResult,
    Medium,
    OffloadKey,
    ReqContext,
    ScheduleEndContext,
)
from vllm.v1.kv_offload.tiering.async_lookup import AsyncLookupManager
from vllm.v1.metrics.cache_hit_source import CacheHitSource

from kvtier import _kvtier
from kvtier.vllm.row_tier import RowTierAdapter
from kvtier.vllm.tier_namespace import row_namespace
from kvtier.tier_options import TierOptionError, flag, positive_int, refuse_unknown, text

if TYPE_CHECKING:
    from vllm.v1.kv_offload.base import OffloadingSpec
    from vllm.v1.kv_offload.tiering.backpressure import BackpressureDetector

OWNERSHIP = "kvtier-g4"
_OPTIONS = ["redis_url", "tier_key_file", "deadline_ms", "retry_after_ms", "namespace", "ttl_seconds",
            "enable_kv_events", "locality"]


@dataclass(frozen=True)
class KvtierSharedTierInfo(ConfigInfo):
    """Config facts of one KvtierSharedTier, one label each."""

    kvtier_row_bytes: int
    kvtier_keyed: bool
    kvtier_deadline_ms: int
    kvtier_namespace: str


class _SharedLookups(AsyncLookupManager):
    """vLLM's async lookup front end over kvtier's batched, deadline-bounded lookup."""

    def __init__(self, tier: Any, tier_type: str) -> None:
        super().__init__(tier_type=tier_type)
        self._tier = tier

    def batch_lookup(self, keys: list[OffloadKey], req_context: ReqContext) -> Iterable[bool]:
        return self._tier.lookup_many(keys)  # the interpreter lock released while Redis answers


class KvtierSharedTier(RowTierAdapter):
    """kvtier's G4 (rows shared by instances in Redis, verified, deadline-bounded)."""

    medium: ClassVar[Medium] = Medium.CPU  # remote DRAM
    cache_hit_source: ClassVar[CacheHitSource] = CacheHitSource.EXTERNAL_UNSPECIFIED
    _ownership = OWNERSHIP
    _info_cls = KvtierSharedTierInfo
    _remote = True
    _removal_expected = False

    def __init__(
        self,
        offloading_spec: OffloadingSpec,
        primary_kv_view: memoryview,
        tier_type: str,
        backpressure_detector: BackpressureDetector | None = None,
        locality: str | None = None,
        redis_url: str | list[str] | None = None,
        tier_key_file: str | None = None,
        deadline_ms: int = 50,
        retry_after_ms: int = 1000,
        namespace: str = "kvtier",
        ttl_seconds: int = 0,
        enable_kv_events: bool = False,
        **unknown: Any,
    ) -> None:
        """Args (beyond what vLLM's factory passes every tier):
        redis_url: "redis://[[user]:password@]host:port", or a list of them:
            one redis-server, or any nodes of a Redis Cluster.
        tier_key_file: a file of at least 32 secret bytes (0600): values get
            an HMAC-SHA256 under it, and only those are served.
        deadline_ms: the most any lookup, store or load call waits.
        retry_after_ms: how long a node that failed is left alone.
        namespace: the key prefix; instances share rows only under the same one.
        ttl_seconds: values expire after this (0: Redis' maxmemory policy only).
        enable_kv_events: stored events (ownership "kvtier-g4"), when vLLM's
            KV events are on.
        """
        name = type(self).__name__
        refuse_unknown(name, unknown, _OPTIONS)
        super().__init__(offloading_spec, primary_kv_view, tier_type, backpressure_detector)
        self.locality = Locality(locality) if locality is not None else Locality.REMOTE
        urls = [redis_url] if isinstance(redis_url, str) else redis_url
        if not isinstance(urls, list) or not urls:
            raise TierOptionError(f"{name}: option redis_url must be a redis:// URL or a list of them, not {redis_url!r}")
        urls = [text(name, "redis_url", u) for u in urls]
        key_file = text(name, "tier_key_file", tier_key_file, optional=True)
        deadline = positive_int(name, "deadline_ms", deadline_ms, most=60_000)
        events = flag(name, "enable_kv_events", enable_kv_events) and bool(
            offloading_spec.kv_events_config.enable_kv_cache_events
        )
        if ttl_seconds != 0:
            positive_int(name, "ttl_seconds", ttl_seconds)
        if not hasattr(_kvtier, "open_shared_rows"):
            raise TierOptionError(f"{name}: this kvtier was built without hiredis (no shared tier)")
        tier = _kvtier.open_shared_rows(
            primary_kv_view,
            urls,
            text(name, "namespace", namespace),
            row_namespace(offloading_spec),
            deadline_ms=deadline,
            retry_after_ms=positive_int(name, "retry_after_ms", retry_after_ms, most=3_600_000),
            ttl_seconds=ttl_seconds,
            key_file=key_file,
            events=events,
        )
        self._start(tier, tier_type, events)
        self._lookups = _SharedLookups(tier, tier_type)
        self._info = KvtierSharedTierInfo(kvtier_row_bytes=tier.row_bytes, kvtier_keyed=key_file is not None,
                                          kvtier_deadline_ms=deadline, kvtier_namespace=namespace)

    @override
    def lookup(self, key: OffloadKey, req_context: ReqContext) -> LookupResult:
        found = self._lookups.lookup(key, req_context)
        if found is None:
            return LookupResult.RETRY
        return LookupResult.HIT if found else LookupResult.MISS

    @override
    def _failed_load(self, keys: list[OffloadKey]) -> None:
        self._lookups.mark_miss(keys)  # no promotion re-issued forever (vllm#49176)

    @override
    def on_request_finished(self, req_context: ReqContext) -> None:
        self._lookups.cleanup(req_context.req_id)

    @override
    def on_schedule_end(self, context: ScheduleEndContext) -> None:
        self._lookups.flush()

    @override
    def shutdown(self) -> None:
        self._lookups.shutdown()
        super().shutdown()
