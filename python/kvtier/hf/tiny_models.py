"""Tiny configurations of real architectures, random weights from a fixed
seed: the same code paths as a real checkpoint (transformers' own modeling
code), small enough for a CPU test. Nothing is downloaded."""
from __future__ import annotations

import torch
from transformers import AutoConfig, AutoModelForCausalLM

# Shared by every tiny model: a small vocabulary keeps the LM head cheap.
_COMMON = {"vocab_size": 512, "max_position_embeddings": 2048, "bos_token_id": None, "eos_token_id": None,
           "pad_token_id": 0, "tie_word_embeddings": False}

# Each keeps its architecture's KV shape: GQA, its layer kinds in their pattern, windows short enough
# that the test prompts (60-90 tokens) reach past them.
TINY_CONFIGS = {
    "tiny-llama": dict(model_type="llama", hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                       num_attention_heads=4, num_key_value_heads=2, head_dim=16),
    # 5 sliding : 1 full, query_pre_attn_scalar scaling, local and global RoPE.
    "tiny-gemma3": dict(model_type="gemma3_text", hidden_size=64, intermediate_size=128, num_hidden_layers=6,
                        num_attention_heads=4, num_key_value_heads=2, head_dim=16, query_pre_attn_scalar=16,
                        sliding_window=32),
    # Sliding and full attention alternating, attention sinks, a mixture of experts.
    "tiny-gpt-oss": dict(model_type="gpt_oss", hidden_size=64, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, head_dim=16, num_local_experts=4,
                         num_experts_per_tok=2, sliding_window=32,
                         layer_types=["sliding_attention", "full_attention"]),
    # MLA: a low-rank query, a kv_lora_rank latent and a RoPE key a token; a dense layer, then MoE.
    "tiny-deepseek-v3": dict(model_type="deepseek_v3", hidden_size=64, intermediate_size=128,
                             moe_intermediate_size=32, num_hidden_layers=2, num_attention_heads=4,
                             num_key_value_heads=4, kv_lora_rank=32, q_lora_rank=48, qk_rope_head_dim=8,
                             qk_nope_head_dim=16, v_head_dim=16, n_routed_experts=4, num_experts_per_tok=2,
                             n_shared_experts=1, n_group=1, topk_group=1, first_k_dense_replace=1),
    # Gated DeltaNet linear attention, every 4th layer full attention (gated), a mixture of experts.
    "tiny-qwen3-next": dict(model_type="qwen3_next", hidden_size=64, intermediate_size=128, num_hidden_layers=4,
                            num_attention_heads=4, num_key_value_heads=2, head_dim=16, linear_conv_kernel_dim=4,
                            linear_key_head_dim=8, linear_value_head_dim=8, linear_num_key_heads=2,
                            linear_num_value_heads=4, moe_intermediate_size=32, shared_expert_intermediate_size=32,
                            num_experts=4, num_experts_per_tok=2),
}


def tiny_config(name: str):
    if name not in TINY_CONFIGS:
        raise ValueError(f"unknown tiny model {name!r}: one of {', '.join(sorted(TINY_CONFIGS))}")
    fields = dict(TINY_CONFIGS[name])
    return AutoConfig.for_model(fields.pop("model_type"), **_COMMON, **fields)


def build_model(config, seed: int = 0, device: str = "cpu"):
    """torch.manual_seed(seed), then AutoModelForCausalLM.from_config: float32, eval."""
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    return model.to(device).eval()
