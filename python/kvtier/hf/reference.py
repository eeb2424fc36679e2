"""What a model does without kvtier: its own greedy `generate()` with its
own `DynamicCache`, one request at a time — the tokens and logits a decode
through kvtier must reproduce — and the comparison of the two."""
from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class Reference:
    tokens: list[int]
    logits: list[torch.Tensor]  # [vocab] float32 per generated token


def reference_generate(model, prompt: list[int], new_tokens: int) -> Reference:
    device = next(model.parameters()).device
    with torch.no_grad():
        out = model.generate(
            torch.tensor([prompt], device=device),
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
