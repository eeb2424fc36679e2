"""One forward of the paged decoder: every running request's new tokens
flattened into one sequence, and for each KV cache group where each token's
K/V goes (its slot) and what each token attends through (its request's block
table, up to its own position) — a varlen batch as vLLM's attention metadata
has it. Built once a step and read by every layer of the group."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch


@dataclass
class GroupRows:
    """A group's view of the step: slots int64 [tokens], tables int32
    [tokens, max_blocks] (a token's request's table), seq_lens int32 [tokens]
    (the token's position + 1: causal attention, the window's span inside it)."""

    slots: torch.Tensor
    tables: torch.Tensor
    seq_lens: torch.Tensor


@dataclass
class StepBatch:
    input_ids: torch.Tensor  # [1, tokens]
    position_ids: torch.Tensor  # [1, tokens]
    groups: list[GroupRows | None]  # None for a group that keeps a state, not tokens
    last_rows: list[int] = field(default_factory=list)  # each request's last token, whose logits sample
    # A state (Mamba) group: the page holding the state the step starts from (None at token 0) and
    # the page the state after it goes to — the blocks of the last token before and after the step
    # (vLLM's align mode: a state at a block's end is that block's, and cacheable with it).
    state_pages: list[tuple[int | None, int] | None] = field(default_factory=list)


def build_step(manager, block_sizes: list[int], token_groups: list[bool], work, device) -> StepBatch:
    """`work` is a list of (request, tokens, first_position): the tokens each
    request forwards this step, from first_position on. `token_groups[g]` is
    whether group g holds tokens (attention) rather than a state (Mamba)."""
    ids, positions, last_rows = [], [], []
    for _, tokens, first in work:
        ids.extend(tokens)
        positions.extend(range(first, first + len(tokens)))
        last_rows.append(len(ids) - 1)
    groups: list[GroupRows | None] = []
    state_pages: list[tuple[int | None, int] | None] = []
    for g, block_size in enumerate(block_sizes):
        if not token_groups[g]:
            if len(work) != 1:
                raise ValueError("a model with recurrent state forwards one request at a time")
            r, tokens, first = work[0]
            table = list(manager.block_table(r, group=g))
            start = table[(first - 1) // block_size] if first > 0 else None
            state_pages.append((start, table[(first + len(tokens) - 1) // block_size]))
            groups.append(None)
            continue
        state_pages.append(None)
        tables = [np.asarray(manager.block_table(r, group=g), dtype=np.int32) for r, _, _ in work]
        width = max(len(t) for t in tables)
        rows = np.full((len(ids), width), -1, dtype=np.int32)
        slots = np.empty(len(ids), dtype=np.int64)
        row = 0
        for table, (_, tokens, first) in zip(tables, work):
            for p in range(first, first + len(tokens)):
                page = int(table[p // block_size])
                if page < 0 or page == manager.null_page:
                    raise RuntimeError(f"group {g}: token {p}, computed now, has no page of its own in its table")
                rows[row, : len(table)] = table
                slots[row] = page * block_size + p % block_size
                row += 1
        lens = np.asarray(positions, dtype=np.int32) + 1
        groups.append(
            GroupRows(
                slots=torch.from_numpy(slots).to(device),
                tables=torch.from_numpy(rows).to(device),
                seq_lens=torch.from_numpy(lens).to(device),
            )
        )
    return StepBatch(
        input_ids=torch.tensor([ids], dtype=torch.long, device=device),
        position_ids=torch.tensor([positions], dtype=torch.long, device=device),
        groups=groups,
        last_rows=last_rows,
        state_pages=state_pages,
    )
