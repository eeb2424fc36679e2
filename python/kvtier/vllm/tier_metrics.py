"""The Prometheus series kvtier's tiers add to vLLM's (docs/vllm.md, "Metrics").

Declared by build_metric_definitions (vLLM's API server calls it, so nothing
here starts anything) and filled by get_stats from the tier's counters: every
name get_stats emits is declared here with the same labels.
"""

from __future__ import annotations

from typing import Any

TIER = "tier"

LOOKUPS = "kvtier:vllm_tier_lookups"
KEYS = "kvtier:vllm_tier_keys"
BYTES = "kvtier:vllm_tier_bytes"
REFUSED_RECORDS = "kvtier:vllm_tier_refused_records"
EVICTIONS = "kvtier:vllm_tier_evictions"
DEADLINE_MISSES = "kvtier:vllm_tier_deadline_misses"
USED_BLOCKS = "kvtier:vllm_tier_used_blocks"
CAPACITY_BLOCKS = "kvtier:vllm_tier_capacity_blocks"
BREAKER_OPEN = "kvtier:vllm_tier_breaker_open"

# counter name -> (its labels after the tier, {label values: the counter that feeds it})
_COUNTERS: dict[str, tuple[tuple[str, ...], dict[tuple[str, ...], str]]] = {
    LOOKUPS: (("result",), {("hit",): "lookup_hits", ("miss",): "lookup_misses"}),
    KEYS: (
        ("operation",),
        {
            ("stored",): "keys_stored",
            ("already_held",): "keys_already_held",
            ("store_failed",): "keys_store_failed",
            ("loaded",): "keys_loaded",
            ("load_failed",): "keys_load_failed",
        },
    ),
    BYTES: (("direction",), {("stored",): "bytes_stored", ("loaded",): "bytes_loaded"}),
    REFUSED_RECORDS: (("reason",), {("checksum",): "checksum_only_failures", ("mac",): "authentication_failures"}),
    EVICTIONS: ((), {(): "evictions"}),
    DEADLINE_MISSES: ((), {(): "deadline_misses"}),
}
_GAUGES: dict[str, str] = {USED_BLOCKS: "used", CAPACITY_BLOCKS: "capacity", BREAKER_OPEN: "breaker_open"}

_DOCUMENTATION = {
    LOOKUPS: "Lookups of a kvtier tier, by result.",
    KEYS: "Keys a kvtier tier stored, found held already, failed to store, loaded or failed to load.",
    BYTES: "Row bytes a kvtier tier stored and loaded.",
    REFUSED_RECORDS: "Records a kvtier tier refused to serve: a checksum that failed, or a MAC of no tier key.",
    EVICTIONS: "Blocks a kvtier tier evicted to make room.",
    DEADLINE_MISSES: "Operations of a kvtier tier past their deadline (a remote tier).",
    USED_BLOCKS: "Blocks a kvtier tier holds.",
    CAPACITY_BLOCKS: "Blocks a kvtier tier can hold (0: bounded by its store).",
    BREAKER_OPEN: "1 while a kvtier tier considers its store down (a remote tier).",
}


# Only a remote tier has deadlines and a breaker: a local one declares neither.
_REMOTE_ONLY = {DEADLINE_MISSES, BREAKER_OPEN}


def _declared(remote: bool) -> list[str]:
    return [name for name in (*_COUNTERS, *_GAUGES) if remote or name not in _REMOTE_ONLY]


def metric_definitions(*, remote: bool) -> dict[str, Any]:
    from vllm.v1.kv_offload.base import OffloadingCounterMetadata, OffloadingGaugeMetadata

    definitions: dict[str, Any] = {}
    for name in _declared(remote):
        if name in _COUNTERS:
            labels = (TIER, *_COUNTERS[name][0])
            definitions[name] = OffloadingCounterMetadata(documentation=_DOCUMENTATION[name], labelnames=labels)
        else:
            definitions[name] = OffloadingGaugeMetadata(documentation=_DOCUMENTATION[name], labelnames=(TIER,))
    return definitions


class CounterDeltas:
    """Turns a tier's counters since it opened into vLLM's per-call stats."""

    def __init__(self, tier_label: str, *, remote: bool) -> None:
        self._tier = tier_label
        self._names = set(_declared(remote))
        self._last: dict[str, int] = {}

    def stats(self, counters: dict[str, Any]) -> Any:
        from vllm.distributed.kv_transfer.kv_connector.v1.offloading.metrics import OffloadingConnectorStats

        counters = dict(counters)
        counters["lookup_misses"] = counters["lookups"] - counters["lookup_hits"]
        counters["checksum_only_failures"] = counters["checksum_failures"] - counters["authentication_failures"]
        stats = OffloadingConnectorStats()
        for name, (_, feeds) in _COUNTERS.items():
            if name not in self._names:
                continue
            for labels, counter in feeds.items():
                delta = counters[counter] - self._last.get(counter, 0)
                self._last[counter] = counters[counter]
                if delta > 0:
                    stats.increase_counter(name, delta, (self._tier, *labels))
        for name, counter in _GAUGES.items():
            if name in self._names:
                stats.set_gauge(name, int(counters[counter]), (self._tier,))
        return stats
