"""What a model does without kvtier: its own greedy `generate()` with its
own `DynamicCache`, one request at a time — the tokens and logits a decode
through kvtier must reproduce — and the comparison of the two."""
from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers import DynamicCache


@dataclass
class Reference:
    tokens: list[int]
    logits: list[torch.Tensor]  # [vocab] float32 per generated token


def round_like_pages(x: torch.Tensor, kv_cache_dtype: str | None) -> torch.Tensor:
    """K or V [batch, heads, tokens, head_dim] as kvtier's pages give it back:
    rounded to bf16/fp16, to fp8 e4m3 (per tensor, scale 1), or to fp8 e4m3
    with one fp32 scale per (token, head) row of amax / 448
    (docs/page-formats.md)."""
    if kv_cache_dtype in (None, "auto", "float32"):
        return x
    if kv_cache_dtype in ("bfloat16", "float16"):
        return x.to(getattr(torch, kv_cache_dtype)).to(x.dtype)
    if kv_cache_dtype == "fp8":  # one scale for the layer, outside the page: 1.0 here
        return x.to(torch.float8_e4m3fn).to(x.dtype)
    if kv_cache_dtype == "fp8_per_token_head":
        amax = x.abs().amax(dim=-1, keepdim=True).to(torch.float32)
        scale = torch.where(amax > 0, amax / 448.0, torch.ones_like(amax))
        codes = (x.to(torch.float32) / scale).to(torch.float8_e4m3fn)
        return (codes.to(torch.float32) * scale).to(x.dtype)
    raise ValueError(f"no reference rounding for kv_cache_dtype {kv_cache_dtype!r}")


class PageRoundingCache(DynamicCache):
    """The model's own DynamicCache, storing K/V as kvtier's pages of
    `kv_cache_dtype` hold them: the reference for a quantized page format."""

    def __init__(self, kv_cache_dtype: str | None, **kwargs):
        super().__init__(**kwargs)
        self.kv_cache_dtype = kv_cache_dtype

    def update(self, key_states, value_states, layer_idx, *args, **kwargs):
        return super().update(round_like_pages(key_states, self.kv_cache_dtype),
                              round_like_pages(value_states, self.kv_cache_dtype), layer_idx, *args, **kwargs)


def reference_generate(model, prompt: list[int], new_tokens: int, kv_cache_dtype: str | None = None) -> Reference:
    """Greedy generate() with the model's DynamicCache (rounding K/V as pages
    of `kv_cache_dtype` would, when it is not the model's own dtype)."""
    device = next(model.parameters()).device
    cache = {}
    if kv_cache_dtype not in (None, "auto"):
        cache["past_key_values"] = PageRoundingCache(kv_cache_dtype, config=model.config)
    with torch.no_grad():
        out = model.generate(
            torch.tensor([prompt], device=device),
            **cache,
            attention_mask=torch.ones(1, len(prompt), dtype=torch.long, device=device),
            max_new_tokens=new_tokens,
            do_sample=False,
            eos_token_id=None,  # exactly new_tokens tokens, with no logit processor touching them
            pad_token_id=0,
            output_logits=True,
            return_dict_in_generate=True,
        )
    return Reference(
        tokens=out.sequences[0, len(prompt) :].tolist(),
        logits=[step[0].detach().to(torch.float32).cpu() for step in out.logits],
    )


@dataclass
class Comparison:
    tokens_equal: bool
    max_logit_diff: float
    first_divergence: tuple[int, int] | None  # (request, token) where the tokens first differ


def compare(decoded, references: list[Reference]) -> Comparison:
    """Tokens equal request by request, and the largest absolute logit
    difference over every generated token both sides produced."""
    worst, first = 0.0, None
    for i, (got, want) in enumerate(zip(decoded, references)):
        for t, (a, b) in enumerate(zip(got.logits, want.logits)):
            worst = max(worst, float((a - b).abs().max()))
        if got.tokens != want.tokens and first is None:
            first = (i, next((t for t, (a, b) in enumerate(zip(got.tokens, want.tokens)) if a != b), len(got.tokens)))
    return Comparison(tokens_equal=first is None, max_logit_diff=worst, first_divergence=first)
