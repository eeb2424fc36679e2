"""Hugging Face transformers models on kvtier: a `Cache` whose layers live in
kvtier pages (`KvtierCache`), kvtier's paged attention as a transformers
attention implementation ("kvtier"), a batched greedy decoder with prefix
hits, tiers and preemption (`PagedDecoder`), and the model's own generate()
to compare with (`reference_generate`, `compare`). Needs torch and
transformers (not dependencies of the kvtier package). docs/models.md,
"A transformers model on kvtier"."""
from .attention import kvtier_attention, register
from .model_manager import manager_for_model
from .paged_cache import KvtierCache
from .paged_decoder import DecodedRequest, DecodeStats, PagedDecoder
from .reference import Comparison, Reference, compare, reference_generate
from .tiny_models import TINY_CONFIGS, build_model, tiny_config

__all__ = [
    "Comparison", "DecodeStats", "DecodedRequest", "KvtierCache", "PagedDecoder", "Reference", "TINY_CONFIGS",
    "build_model", "compare", "kvtier_attention", "manager_for_model", "reference_generate", "register",
    "tiny_config",
]
