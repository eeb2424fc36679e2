"""What kvtier's tiers share in vLLM's SecondaryTierManager contract: a
kvtier._kvtier.RowTier (G3 or G4 over vLLM's CPU rows, on a C++ thread of its
own) takes the jobs; this maps vLLM's calls onto it. Jobs are reported exactly
once; a load that fails in part reports the keys that loaded; events say what
the tier stored and removed, with its ownership; stats are the tier's counters
as deltas under the names tier_metrics declares."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from typing_extensions import override
from vllm.logger import init_logger
from vllm.v1.kv_offload.base import (
    ConfigInfo,
    ConfigInfoMapping,
    OffloadingEvent,
    OffloadKey,
    ReqContext,
    RequestOffloadingContext,
)
from vllm.v1.kv_offload.tiering.base import JobId, JobResult, SecondaryTierManager, TransferJob

from kvtier.vllm import tier_metrics

logger = init_logger(__name__)


class RowTierAdapter(SecondaryTierManager):
    """The part of a kvtier tier in vLLM that is the same for G3 and G4.
    A subclass opens `self._tier` and says what its events own."""

    _ownership: str = "kvtier"
    _remote: bool = False
    # A tier that evicts and says so (G3): a router keeps its stored blocks
    # until their removal. G4's store evicts on its own, unseen.
    _removal_expected: bool = True
    # Its config facts (one label each on vllm:kv_offload_config_info), set as self._info.
    _info_cls: type[ConfigInfo]
    _info: ConfigInfo

    def _start(self, tier: Any, tier_type: str, events: bool) -> None:
        self._tier = tier
        self._events_on = events
        self._job_keys: dict[JobId, list[OffloadKey]] = {}
        self._deltas = tier_metrics.CounterDeltas(tier_type, remote=self._remote)

    @override
    def on_new_request(self, req_context: ReqContext) -> RequestOffloadingContext:
        return RequestOffloadingContext()

    @override
    def submit_store(self, job_metadata: TransferJob) -> None:
        self._submit(job_metadata, load=False)

    @override
    def submit_load(self, job_metadata: TransferJob) -> None:
        self._submit(job_metadata, load=True)

    def _submit(self, job: TransferJob, *, load: bool) -> None:
        keys = list(job.keys)
        self._job_keys[job.job_id] = keys
        self._tier.submit(job.job_id, load, keys, [int(c) for c in job.chunk_ids])

    def _failed_load(self, keys: list[OffloadKey]) -> None:
        """Keys of a load that did not verify or were gone: they miss from now on."""

    @override
    def get_finished_jobs(self) -> Iterable[JobResult]:
        results = []
        for job_id, is_load, success, loaded, seconds, moved, _error in self._tier.take_finished():
            keys = self._job_keys.pop(job_id)
            successful = None
            if is_load and not success:
                kept = set(loaded)
                self._failed_load([k for i, k in enumerate(keys) if i not in kept])
                if loaded:
                    successful = tuple(keys[i] for i in loaded)
            results.append(JobResult(job_id=job_id, success=success, successful_keys=successful,
                                     transfer_time=seconds, transfer_bytes=moved or None))
        return results

    @override
    def drain_jobs(self) -> None:
        self._tier.drain()

    @override
    def take_events(self) -> Iterable[OffloadingEvent]:
        if not self._events_on:
            return ()
        events: list[OffloadingEvent] = []
        for key, removed in self._tier.take_events():
            if events and events[-1].removed == removed:
                events[-1].keys.append(key)
                continue
            events.append(OffloadingEvent(keys=[key], medium=self.medium, removed=removed, locality=self.locality,
                                          ownership=self._ownership,
                                          removal_expected=self._removal_expected))
        return events

    @override
    def shutdown(self) -> None:
        self._tier.shutdown()
        # One line of what the tier did, for operators (and scripts/vllm-e2e.sh).
        c = self._tier.counters()
        logger.info("kvtier: %s shut down: lookups=%d hits=%d stored=%d loaded=%d load_failed=%d refused=%d "
                    "evictions=%d", self.tier_type, c["lookups"], c["lookup_hits"], c["keys_stored"],
                    c["keys_loaded"], c["keys_load_failed"], c["checksum_failures"], c["evictions"])

    @override
    def get_stats(self) -> Any:
        return self._deltas.stats(self._tier.counters())

    @classmethod
    @override
    def build_metric_definitions(cls, extra_config: dict[str, Any]) -> dict[str, Any]:
        return tier_metrics.metric_definitions(remote=cls._remote)

    @classmethod
    @override
    def config_info_keys(cls, tier_config: dict[str, Any]) -> tuple[str, ...]:
        return cls._info_cls.config_info_keys()

    @override
    def config_info(self) -> ConfigInfoMapping:
        return self._info.as_config_info()
