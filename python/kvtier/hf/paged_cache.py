"""A transformers `Cache` whose layers live in kvtier pages.

Each model layer is one layer of a KV cache group of a `kvtier.Manager` built
from the model's config (`kvtier.model_layers` says which). `update()` writes
the step's new K/V into their slots with kvtier's own kernel (its CPU
reference on the host runtime), in the group's page format, and keeps no
tensor of its own: the attention function (`kvtier.hf.attention`) reads every
K/V it uses back out of the pages through the group's block tables. Nothing
else holds the model's cache, so what the model computes is what kvtier's
pages, tables and tiers give back."""
from __future__ import annotations

import torch
from transformers.cache_utils import Cache, CacheLayerMixin

from .recurrent_state import PagedStates
from .step_batch import StepBatch


class KvtierLayer(CacheLayerMixin):
    """Model layer `layer_idx`: group `group`, layer `index` of that group's pages."""

    def __init__(self, cache: "KvtierCache", layer_idx: int, group: int, index: int):
        super().__init__()
        self.cache, self.layer_idx, self.group, self.index = cache, layer_idx, group, index
        self.is_initialized = True

    # transformers 5.20 (vLLM 0.33.0's pin) reads a linear-attention layer's states
    # on the layer itself; later releases ask the cache (get_conv_state, ...).
    @property
    def record_past(self) -> bool:
        return self.cache.is_recording_past(self.layer_idx)

    @property
    def conv_states(self) -> list:
        return [self.cache.get_conv_state(self.layer_idx)]

    @property
    def recurrent_states(self) -> list:
        return [self.cache.get_recurrent_state(self.layer_idx)]

    def lazy_initialization(self, key_states, value_states) -> None:  # the pages exist already
        pass

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        self.cache.write(self.group, self.index, key_states, value_states)
        return key_states, value_states

    def get_mask_sizes(self, query_length: int) -> tuple[int, int]:
        return query_length, 0

    def get_seq_length(self) -> int:
        return self.cache.longest_sequence()

    def get_max_length(self) -> int:
        return -1


class KvtierCache(Cache):
    """The cache of a model whose layers sit at `layer_places` (group, index)
    in `manager`'s groups; `begin_step` hands it the step's slots and tables."""

    def __init__(self, manager, layer_places: list[tuple[int, int] | None], config=None, dtype=torch.float32):
        if any(place is None for place in layer_places):
            raise ValueError("a layer without a KV cache has no place in kvtier's groups")
        self.manager = manager
        self.kinds = [g["kind"] for g in manager.groups["groups"]]
        self.windows = [g.get("sliding_window") for g in manager.groups["groups"]]
        self.step: StepBatch | None = None
        state_places = {i: p for i, p in enumerate(layer_places) if self.kinds[p[0]] == "mamba"}
        self.states = PagedStates(manager, state_places, config, dtype) if state_places else None
        super().__init__(layers=[KvtierLayer(self, n, g, i) for n, (g, i) in enumerate(layer_places)])

    def begin_step(self, step: StepBatch) -> None:
        self.step = step
        if self.states is not None:
            self.states.begin(step.state_pages, step.input_ids.device)

    def end_step(self) -> None:
        """The step's states go to their pages (before its blocks can be cached)."""
        if self.states is not None:
            self.states.store()

    # transformers' linear-attention calls (Qwen3-Next's Gated DeltaNet layers).
    def get_conv_state(self, layer_idx: int, state_idx: int = 0):
        return self.states.conv.get(layer_idx)

    def get_recurrent_state(self, layer_idx: int, state_idx: int = 0):
        return self.states.recurrent.get(layer_idx)

    def update_conv_state(self, conv_states, layer_idx: int, state_idx: int = 0, conv_kernel_size=None, **kwargs):
        return self.states.update_conv(layer_idx, conv_states, conv_kernel_size or self.states.kernel)

    def update_recurrent_state(self, recurrent_states, layer_idx: int, state_idx: int = 0, **kwargs):
        return self.states.update_recurrent(layer_idx, recurrent_states)

    def has_previous_state(self, layer_idx: int | None = None, state_idx: int | None = None) -> bool:
        layers = [layer_idx] if layer_idx is not None else list(self.states.places)
        return all(self.states.conv.get(i) is not None for i in layers)

    def is_recording_past(self, layer_idx: int) -> bool:
        return False

    def rows(self, group: int):
        if self.step is None or self.step.groups[group] is None:
            raise RuntimeError(f"kvtier cache: no step batch for group {group} (begin_step first)")
        return self.step.groups[group]

    def longest_sequence(self) -> int:
        return 0 if self.step is None else int(self.step.position_ids.max()) + 1

    def is_mla(self, group: int) -> bool:
        return self.kinds[group] in ("mla_attention", "sliding_window_mla")

    def write(self, group: int, index: int, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        """key/value [1, kv_heads, tokens, head_dim] as transformers' attention
        hands them; for MLA (DeepSeek) the latent [1, 1, tokens, kv_lora_rank]
        and the RoPE key [1, 1, tokens, qk_rope_head_dim], which transformers
        caches before expanding them."""
        rows = self.rows(group)
        if self.is_mla(group):
            first = key_states[0, 0].to(torch.float32).contiguous()
            second = value_states[0, 0].to(torch.float32).contiguous()
        else:
            first = key_states[0].transpose(0, 1).to(torch.float32).contiguous()
            second = value_states[0].transpose(0, 1).to(torch.float32).contiguous()
        self.manager.write_kv(group, index, first, second, rows.slots, stream=stream_of(first))


def stream_of(tensor: torch.Tensor) -> int:
    """The stream kvtier's kernels run on for `tensor`: torch's current CUDA stream, or 0 on the CPU."""
    return torch.cuda.current_stream(tensor.device).cuda_stream if tensor.is_cuda else 0
