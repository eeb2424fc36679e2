#!/usr/bin/env bash
# kvtier's G3 inside a real SGLang engine on a GPU (docs/sglang.md, "End to end on a
# GPU"): sglang.Engine on a tiny local Llama config with random weights
# (load_format="dummy", no download), HiCache (write_through) with kvtier.sglang's
# KvtierHiCacheStorage as its L3, the same prompts twice with the GPU and host
# caches flushed between (SGLang's flush_cache; L3 is kept). Passes when the second
# pass's tokens equal the first's and SGLang reports tokens of the second pass as
# prefetched from storage (meta_info.cached_tokens_details.storage).
# Needs a CUDA GPU and SGLang 0.5.23 with kvtier installed in PYTHON's environment;
# not part of scripts/gpu-check.sh (which needs PyTorch alone). Unrun until someone
# runs it on a GPU (docs/sglang.md says so).
#   scripts/sglang-e2e.sh [PYTHON]
set -euo pipefail
python=${1:-python3}
work=$(mktemp -d "${TMPDIR:-/tmp}/kvtier-sglang-e2e.XXXXXX")
trap 'rm -rf "$work"' EXIT
"$python" - "$work" <<'PY' 2>&1 | tee "$work/log"
import json, os, sys, time
work = sys.argv[1]
model = os.path.join(work, "tiny-llama")
os.makedirs(model)
with open(os.path.join(model, "config.json"), "w") as f:
    json.dump({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 256,
               "intermediate_size": 512, "num_hidden_layers": 2, "num_attention_heads": 4,
               "num_key_value_heads": 2, "head_dim": 64, "vocab_size": 4096, "max_position_embeddings": 4096,
               "rms_norm_eps": 1e-6, "torch_dtype": "bfloat16", "tie_word_embeddings": False}, f)
import sglang

backend = {"backend_name": "kvtier", "module_path": "kvtier.sglang", "class_name": "KvtierHiCacheStorage",
           "interface_v1": 1, "disk_path": os.path.join(work, "g3"), "disk_capacity_blocks": 4096}
engine = sglang.Engine(model_path=model, load_format="dummy", skip_tokenizer_init=True, random_seed=0,
                       mem_fraction_static=0.3, disable_cuda_graph=True, page_size=16,
                       enable_hierarchical_cache=True, hicache_ratio=2, hicache_write_policy="write_through",
                       hicache_mem_layout="page_first", hicache_storage_backend="dynamic",
                       hicache_storage_prefetch_policy="wait_complete",
                       hicache_storage_backend_extra_config=json.dumps(backend))
prompts = [[(7 * i + 13 * j) % 4000 + 1 for j in range(640 + 64 * i)] for i in range(4)]
params = {"temperature": 0.0, "max_new_tokens": 16}
first = engine.generate(input_ids=prompts, sampling_params=params)
time.sleep(5)  # write_through: the backups to L3 run on SGLang's backup thread
flushed = engine.flush_cache()
print("kvtier-e2e: flushed:", getattr(flushed, "success", flushed))
second = engine.generate(input_ids=prompts, sampling_params=params)
same = [o["output_ids"] for o in first] == [o["output_ids"] for o in second]
storage = sum((o["meta_info"].get("cached_tokens_details") or {}).get("storage", 0) for o in second)
print("kvtier-e2e: tokens equal:", same)
print(f"kvtier-e2e: storage tokens={storage}")
engine.shutdown()
sys.exit(0 if same and storage > 0 else 1)
PY
storage=$(grep -o 'kvtier-e2e: storage tokens=[0-9]*' "$work/log" | tail -1 | cut -d= -f2)
grep -q 'kvtier-e2e: tokens equal: True' "$work/log" || { echo "sglang-e2e: the second pass's tokens differ" >&2; exit 1; }
[[ -n $storage && $storage -gt 0 ]] || { echo "sglang-e2e: SGLang prefetched nothing from kvtier's L3" >&2; exit 1; }
echo "sglang-e2e: passed (SGLang prefetched $storage tokens from kvtier's G3; the tokens are the first pass's)"
