"""kvtier's paged attention as a transformers attention implementation.

Registered under the name "kvtier" in transformers' `AttentionInterface`: a
model set to it (`model.set_attn_implementation("kvtier")`) attends with
kvtier's group attention (its CUDA kernel, or its CPU reference on the host
runtime) over the pages its `KvtierCache` wrote, one query token a row, each
row through its request's block table up to its own position — the causal
mask, a sliding window (the group's) and attention sinks (gpt-oss's `s_aux`)
are the kernel's, not a mask tensor's; MLA (DeepSeek) attends over the
latents, its query absorbed into latent space. The key and value tensors the
model hands over are never read."""
from __future__ import annotations

import torch
from transformers import AttentionInterface

from .paged_cache import stream_of

NAME = "kvtier"


def kvtier_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    cache = kwargs.get("kvtier_cache")
    if cache is None:
        raise RuntimeError("kvtier attention runs inside a kvtier decode step (pass kvtier_cache=)")
    layer = cache.layers[module.layer_idx]
    window = kwargs.get("sliding_window") or getattr(module, "sliding_window", None)
    expected = cache.windows[layer.group]
    if window and window != expected:
        raise RuntimeError(f"layer {module.layer_idx} attends over {window} tokens, its kvtier group over {expected}")
    q = query[0].transpose(0, 1).to(torch.float32)  # [tokens, heads, head_dim]
    if cache.is_mla(layer.group):
        return _mla_attention(module, cache, layer, q, scaling, query.dtype)
    out = torch.empty(q.shape[0], q.shape[1], value.shape[-1], dtype=torch.float32, device=q.device)
    sinks = kwargs.get("s_aux")
    if sinks is not None:
        sinks = sinks.detach().to(torch.float32).contiguous()
    _attend(cache, layer, q.contiguous(), out, scaling, sinks)
    return out.unsqueeze(0).to(query.dtype), None


def _attend(cache, layer, q, out, scaling, sinks=None):
    rows = cache.rows(layer.group)
    cache.manager.group_attention(
        layer.group, layer.index, q, rows.tables, rows.seq_lens, out, scale=scaling, sinks=sinks, stream=stream_of(q)
    )


def _mla_attention(module, cache, layer, q, scaling, dtype):
    """DeepSeek's MLA over the latents in kvtier's pages, absorbed as vLLM's
    MLA backends run decode: the no-RoPE query goes through each head's key
    up-projection into latent space (q_nope . W_UK c = (q_nope W_UK) . c), the
    scores are that with the latent plus the RoPE parts, the output is a
    latent a head, which each head's value up-projection turns into values."""
    nope, rope, v_dim = module.qk_nope_head_dim, module.qk_rope_head_dim, module.v_head_dim
    w = module.kv_b_proj.weight.view(module.num_heads, nope + v_dim, module.kv_lora_rank).to(torch.float32)
    w_uk, w_uv = w[:, :nope, :], w[:, nope:, :]
    q_latent = torch.einsum("thn,hnl->thl", q[..., :nope], w_uk)
    absorbed = torch.cat([q_latent, q[..., nope : nope + rope]], dim=-1).contiguous()
    latent_out = torch.empty(q.shape[0], q.shape[1], module.kv_lora_rank, dtype=torch.float32, device=q.device)
    _attend(cache, layer, absorbed, latent_out, scaling)
    out = torch.einsum("thl,hvl->thv", latent_out, w_uv)
    return out.unsqueeze(0).to(dtype), None


def register() -> str:
    """Registers kvtier's attention with transformers (idempotent); returns its name."""
    AttentionInterface.register(NAME, kvtier_attention)
    return NAME
