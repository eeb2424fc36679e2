"""Linear-attention (Gated DeltaNet) states in kvtier's state pages.

A Mamba group's page holds one layer's whole state at one position: the
causal conv's last kernel − 1 inputs ([channels, kernel − 1]), then the
delta rule's state ([value heads, key dim, value dim]), in the model's dtype —
the bytes the group's `state_bytes` counts (vLLM's
`gated_delta_net_state_shape`). A step starts from the state in the page of
the block holding its first token's predecessor and leaves its final state
in the page of its last token's block (vLLM's align mode), so a state at a
block's end is cached with that block and a later request that hits the
block starts from it. transformers' layers read and update the states
through the Cache calls that KvtierCache forwards here; between steps they
exist only in kvtier's pages."""
from __future__ import annotations

import torch


class PagedStates:
    def __init__(self, manager, places: dict[int, tuple[int, int]], config, dtype):
        self.manager, self.places, self.dtype = manager, places, dtype
        key_dim = config.linear_num_key_heads * config.linear_key_head_dim
        value_dim = config.linear_num_value_heads * config.linear_value_head_dim
        self.channels = 2 * key_dim + value_dim
        self.kernel = config.linear_conv_kernel_dim
        self.recurrent_shape = (1, config.linear_num_value_heads, config.linear_key_head_dim,
                                config.linear_value_head_dim)
        self.conv: dict[int, torch.Tensor | None] = {}
        self.recurrent: dict[int, torch.Tensor | None] = {}
        self.pages = None

    def _views(self, layer: int):
        group, index = self.places[layer]
        views = self.manager.group_cache(group, index)
        return group, torch.from_dlpack(views["conv"]), torch.from_dlpack(views["recurrent"])

    def begin(self, state_pages, device) -> None:
        """Every state layer's state at the step's start, from its page (none at token 0)."""
        self.pages = state_pages
        for layer in self.places:
            group, conv_bytes, rec_bytes = self._views(layer)
            page = state_pages[group][0]
            if page is None:
                self.conv[layer] = self.recurrent[layer] = None
                continue
            conv = conv_bytes[page].view(self.dtype).view(1, self.channels, self.kernel - 1).to(device)
            # transformers keeps `kernel` inputs; the oldest is never read by the next output.
            self.conv[layer] = torch.nn.functional.pad(conv, (1, 0))
            self.recurrent[layer] = rec_bytes[page].view(self.dtype).view(self.recurrent_shape).to(device)

    def update_conv(self, layer: int, new: torch.Tensor, kernel: int) -> torch.Tensor:
        """transformers' LinearAttentionLayer.update_conv_state: the left context
        and the new inputs for the causal conv; the last `kernel` inputs kept."""
        if kernel != self.kernel:
            raise RuntimeError(f"layer {layer}: a conv kernel of {kernel}, the config says {self.kernel}")
        prev = self.conv.get(layer)
        if prev is None:
            full = new if new.shape[-1] >= kernel else torch.nn.functional.pad(new, (kernel - new.shape[-1], 0))
        else:
            full = torch.cat([prev, new], dim=-1)
        self.conv[layer] = full[..., -kernel:].clone()
        return full

    def update_recurrent(self, layer: int, state: torch.Tensor) -> torch.Tensor:
        self.recurrent[layer] = state.detach().clone()
        return self.recurrent[layer]

    def store(self) -> None:
        """Every layer's state after the step into the page of its last token's block."""
        for layer in self.places:
            conv, rec = self.conv.get(layer), self.recurrent.get(layer)
            if conv is None or rec is None:
                raise RuntimeError(f"layer {layer} left no state after the step")
            group, conv_bytes, rec_bytes = self._views(layer)
            page = self.pages[group][1]
            kept = conv[0, :, 1:].to(self.dtype).contiguous()  # [channels, kernel - 1]
            conv_bytes[page].copy_(kept.view(torch.uint8).reshape(-1))
            rec_bytes[page].copy_(rec[0].to(self.dtype).contiguous().view(torch.uint8).reshape(-1))
