"""kvtier's keys in SGLang's ``--hicache-storage-backend-extra-config`` JSON
(beside SGLang's own), checked, and the namespace of one rank's pages
(docs/sglang.md, "Identity").

SGLang's page key (a SHA-256 chain over token ids) says nothing of the model,
dtype, page size, layout or rank that produced the bytes. kvtier keeps every
page under a namespace of all of them (MLA pages, the same on every TP rank,
without the TP rank, as SGLang's own backends share them) plus the page's
span sizes; a G3 file or a G4 value of another namespace is never served.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from kvtier.tier_options import TierOptionError, flag, positive_int, refuse_unknown, text

NAME = "KvtierHiCacheStorage"
# SGLang's keys that reach a dynamic backend's extra config (it pops the prefetch ones).
_SGLANG_KEYS = {"backend_name", "module_path", "class_name", "interface_v1", "enable_metadata_cache", "metadata_ttl"}
_KVTIER_KEYS = ["disk_path", "disk_capacity_blocks", "redis_url", "tier_key_file", "staging_pages", "queue_depth",
                "sync", "reformat", "deadline_ms", "retry_after_ms", "redis_namespace", "ttl_seconds"]


@dataclass(frozen=True)
class StorageOptions:
    """What the extra config asks of kvtier: G3 (disk_path), G4 (redis_url), or both stacked."""

    disk_path: str | None
    disk_capacity_blocks: int | None
    redis_urls: list[str]
    tier_key_file: str | None
    staging_pages: int
    queue_depth: int
    sync: bool
    reformat: bool
    deadline_ms: int
    retry_after_ms: int
    redis_namespace: str
    ttl_seconds: int


def storage_options(extra_config: dict[str, Any] | None) -> StorageOptions:
    """kvtier's options from SGLang's extra config; TierOptionError naming a bad or unknown one."""
    config = dict(extra_config or {})
    if config.get("interface_v1") != 1:
        raise TierOptionError(f'{NAME}: the extra config needs "interface_v1": 1 (kvtier moves the host pool\'s '
                              "pages in place; SGLang's generic tensor path is not served)")
    mine = {k: v for k, v in config.items() if k not in _SGLANG_KEYS}
    refuse_unknown(NAME, {k: v for k, v in mine.items() if k not in _KVTIER_KEYS}, _KVTIER_KEYS)
    disk_path = text(NAME, "disk_path", mine.get("disk_path"), optional=True)
    capacity = mine.get("disk_capacity_blocks")
    if disk_path is not None:
        capacity = positive_int(NAME, "disk_capacity_blocks", capacity, most=2**32 - 1)
    elif capacity is not None:
        raise TierOptionError(f"{NAME}: disk_capacity_blocks without disk_path")
    urls = mine.get("redis_url")
    if urls is None:
        urls = []
    elif isinstance(urls, str):
        urls = [urls]
    if not isinstance(urls, list):
        raise TierOptionError(f"{NAME}: redis_url must be a redis:// URL or a list of them, not {urls!r}")
    urls = [text(NAME, "redis_url", u) for u in urls]
    if disk_path is None and not urls:
        raise TierOptionError(f"{NAME}: the extra config names no tier: give disk_path (G3), redis_url (G4) or both")
    ttl = mine.get("ttl_seconds", 0)
    if ttl != 0:
        positive_int(NAME, "ttl_seconds", ttl)
    return StorageOptions(
        disk_path=disk_path,
        disk_capacity_blocks=capacity,
        redis_urls=urls,
        tier_key_file=text(NAME, "tier_key_file", mine.get("tier_key_file"), optional=True),
        staging_pages=positive_int(NAME, "staging_pages", mine.get("staging_pages", 32), most=4096),
        queue_depth=positive_int(NAME, "queue_depth", mine.get("queue_depth", 32), most=4096),
        sync=flag(NAME, "sync", mine.get("sync", False)),
        reformat=flag(NAME, "reformat", mine.get("reformat", False)),
        deadline_ms=positive_int(NAME, "deadline_ms", mine.get("deadline_ms", 50), most=60_000),
        retry_after_ms=positive_int(NAME, "retry_after_ms", mine.get("retry_after_ms", 1000), most=3_600_000),
        redis_namespace=text(NAME, "redis_namespace", mine.get("redis_namespace", "kvtier-sglang")),
        ttl_seconds=ttl,
    )


def rank_fields(storage_config: Any) -> dict[str, int]:
    """The ranks that make one process's pages its own (MLA: not the TP rank, shared as SGLang shares them)."""
    c = storage_config
    fields = {"pp_rank": c.pp_rank, "pp_size": c.pp_size, "attn_cp_rank": c.attn_cp_rank,
              "attn_cp_size": c.attn_cp_size, "dcp_rank": c.dcp_rank, "dcp_size": c.dcp_size}
    if not c.is_mla_model:
        fields.update(tp_rank=c.tp_rank, tp_size=c.tp_size)
    return fields


def page_namespace(storage_config: Any, host_pool: Any, pool_name: str, span_bytes: list[int]) -> str:
    """The namespace text of one pool's pages on this rank: what makes two pages interchangeable."""
    fields: dict[str, Any] = {
        "engine": "sglang",
        "model": storage_config.model_name,  # the served name plus the host pool's storage format tag
        "pool": pool_name,
        "pool_class": type(host_pool).__name__,
        "dtype": str(getattr(host_pool, "dtype", None)),
        "page_size": host_pool.page_size,
        "layout": getattr(host_pool, "layout", None),
        "layers": getattr(host_pool, "layer_num", None),
        "heads": getattr(host_pool, "head_num", None),
        "head_dim": getattr(host_pool, "head_dim", None),
        "mla": bool(storage_config.is_mla_model),
        "split_heads": bool(storage_config.should_split_heads),
        "span_bytes": span_bytes,
    }
    fields.update(rank_fields(storage_config))
    return json.dumps(fields, sort_keys=True, separators=(",", ":"))


def disk_file_name(storage_config: Any, pool_name: str) -> str:
    """One G3 file per process and pool (a file has one writer): every rank names its own."""
    c = storage_config
    return (f"kvtier-sglang-{pool_name}-tp{c.tp_rank}of{c.tp_size}-pp{c.pp_rank}of{c.pp_size}"
            f"-cp{c.attn_cp_rank}of{c.attn_cp_size}-dcp{c.dcp_rank}of{c.dcp_size}-dp{c.dp_rank}.tier")
