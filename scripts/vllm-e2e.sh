#!/usr/bin/env bash
# kvtier's G3 inside a real vLLM engine on a GPU (docs/vllm.md, "End to end on a
# GPU"): vllm.LLM on a tiny local Llama config with random weights
# (load_format="dummy", no download), OffloadingConnector + TieringOffloadingSpec
# with kvtier.vllm's KvtierDiskTier, the same prompts twice with the GPU prefix
# cache (and vLLM's CPU tier) reset between. Passes when the second pass's
# tokens equal the first's and kvtier's tier loaded rows for it.
# Needs a CUDA GPU and vLLM 0.33.0 with kvtier installed in PYTHON's
# environment; not part of scripts/gpu-check.sh (which needs PyTorch alone).
#   scripts/vllm-e2e.sh [PYTHON]
set -euo pipefail
python=${1:-python3}
work=$(mktemp -d "${TMPDIR:-/tmp}/kvtier-vllm-e2e.XXXXXX")
trap 'rm -rf "$work"' EXIT
# In process: the engine's logs (and kvtier's shutdown line) come to this output.
export VLLM_ENABLE_V1_MULTIPROCESSING=0
"$python" - "$work" <<'PY' 2>&1 | tee "$work/log"
import json, os, sys
work = sys.argv[1]
model = os.path.join(work, "tiny-llama")
os.makedirs(model)
with open(os.path.join(model, "config.json"), "w") as f:
    json.dump({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 256,
               "intermediate_size": 512, "num_hidden_layers": 2, "num_attention_heads": 4,
               "num_key_value_heads": 2, "head_dim": 64, "vocab_size": 4096, "max_position_embeddings": 4096,
               "rms_norm_eps": 1e-6, "torch_dtype": "bfloat16", "tie_word_embeddings": False}, f)
from vllm import LLM, SamplingParams
from vllm.config import KVTransferConfig
from vllm.inputs import TokensPrompt

tiers = [{"type": "KvtierDiskTier", "module_path": "kvtier.vllm", "path": os.path.join(work, "g3"),
          "capacity_blocks": 4096}]
llm = LLM(model=model, load_format="dummy", skip_tokenizer_init=True, enforce_eager=True, max_model_len=2048,
          gpu_memory_utilization=0.3, enable_prefix_caching=True, seed=0,
          kv_transfer_config=KVTransferConfig(kv_connector="OffloadingConnector", kv_role="kv_both",
                                              kv_connector_extra_config={"spec_name": "TieringOffloadingSpec",
                                                                         "cpu_bytes_to_use": 1 << 30,
                                                                         "secondary_tiers": tiers}))
prompts = [TokensPrompt(prompt_token_ids=[(7 * i + 13 * j) % 4000 + 1 for j in range(512 + 64 * i)]) for i in range(4)]
params = SamplingParams(temperature=0.0, max_tokens=16, detokenize=False)
first = [o.outputs[0].token_ids for o in llm.generate(prompts, params)]
assert llm.reset_prefix_cache(), "vLLM refused to reset its prefix cache"
second = [o.outputs[0].token_ids for o in llm.generate(prompts, params)]
print("kvtier-e2e: tokens equal:", first == second)
del llm
import gc
gc.collect()
sys.exit(0 if first == second else 1)
PY
loaded=$(grep -o 'KvtierDiskTier shut down: .*loaded=[0-9]*' "$work/log" | grep -o 'loaded=[0-9]*' | tail -1 | cut -d= -f2)
grep -q 'kvtier-e2e: tokens equal: True' "$work/log" || { echo "vllm-e2e: the second pass's tokens differ" >&2; exit 1; }
[[ -n $loaded && $loaded -gt 0 ]] || { echo "vllm-e2e: kvtier's tier loaded nothing for the second pass" >&2; exit 1; }
echo "vllm-e2e: passed (kvtier G3 loaded $loaded rows; the tokens are the first pass's)"
