"""vLLM's KV event types as msgspec structs, declared from the field list vLLM
publishes (vllm/distributed/kv_events.py) so msgspec itself — the decoder
vLLM's consumers use — checks kvtier's bytes: tags, field names, order, types
and required fields. Two families: the current one (events are tagged maps)
and the older one (events are tagged arrays, `array_like`), which AIBrix and
older llm-d releases read."""
import msgspec


class EventBatch(msgspec.Struct, array_like=True, omit_defaults=True, gc=False):
    ts: float
    events: list
    data_parallel_rank: int | None = None


# Current vLLM: tag=True, omit_defaults, events as maps.
class KVCacheEvent(msgspec.Struct, omit_defaults=True, gc=False, tag=True):
    pass


class BlockStored(KVCacheEvent):
    block_hashes: list[int]
    parent_block_hash: int | None
    token_ids: list[int]
    block_size: int
    lora_id: int | None
    medium: str | None
    lora_name: str | None = None
    extra_keys: list | None = None
    group_idx: int | None = None


class BlockRemoved(KVCacheEvent):
    block_hashes: list[int]
    medium: str | None


class AllBlocksCleared(KVCacheEvent):
    pass


class KVEventBatch(EventBatch):
    events: list[BlockStored | BlockRemoved | AllBlocksCleared]


# Older vLLM: the same events as tagged arrays (array_like=True).
class ArrayKVCacheEvent(msgspec.Struct, array_like=True, omit_defaults=True, gc=False, tag=True):
    pass


class ArrayBlockStored(ArrayKVCacheEvent, tag="BlockStored"):
    block_hashes: list[int]
    parent_block_hash: int | None
    token_ids: list[int]
    block_size: int
    lora_id: int | None
    medium: str | None


class ArrayBlockRemoved(ArrayKVCacheEvent, tag="BlockRemoved"):
    block_hashes: list[int]
    medium: str | None


class ArrayAllBlocksCleared(ArrayKVCacheEvent, tag="AllBlocksCleared"):
    pass


class ArrayKVEventBatch(EventBatch):
    events: list[ArrayBlockStored | ArrayBlockRemoved | ArrayAllBlocksCleared]


def decoder(encoding):
    """msgspec's msgpack decoder for one encoding ("map" or "array")."""
    return msgspec.msgpack.Decoder(KVEventBatch if encoding == "map" else ArrayKVEventBatch)
