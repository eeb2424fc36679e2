"""kvtier's paged attention as a transformers attention implementation.

Registered under the name "kvtier" in transformers' `AttentionInterface`: a
model set to it (`model.set_attn_implementation("kvtier")`) attends with
kvtier's group attention (its CUDA kernel, or its CPU reference on the host
runtime) over the pages its `KvtierCache` wrote, one query token a row, each
row through its request's block table up to its own position — the causal
mask, a sliding window (the group's) and attention sinks (gpt-oss's `s_aux`)
are the kernel's, not a mask tensor's. The key and value tensors the model
hands over are never read."""
from __future__ import annotations

import torch
from transformers import AttentionInterface

NAME = "kvtier"


def kvtier_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    cache = kwargs.get("kvtier_cache")
    if cache is None:
        raise RuntimeError("kvtier attention runs inside a kvtier decode step (pass kvtier_cache=)")
    layer = cache.layers[module.layer_idx]
    rows = cache.rows(layer.group)
    q = query[0].transpose(0, 1).to(torch.float32).contiguous()  # [tokens, heads, head_dim]
    out = torch.empty(q.shape[0], q.shape[1], value.shape[-1], dtype=torch.float32, device=q.device)
    sinks = kwargs.get("s_aux")
    if sinks is not None:
        sinks = sinks.detach().to(torch.float32).contiguous()
    stream = torch.cuda.current_stream(q.device).cuda_stream if q.is_cuda else 0
    cache.manager.group_attention(
        layer.group, layer.index, q, rows.tables, rows.seq_lens, out, scale=scaling, sinks=sinks, stream=stream
    )
    return out.unsqueeze(0).to(query.dtype), None


def register() -> str:
    """Registers kvtier's attention with transformers (idempotent); returns its name."""
    AttentionInterface.register(NAME, kvtier_attention)
    return NAME
