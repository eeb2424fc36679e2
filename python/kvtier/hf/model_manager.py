"""A kvtier.Manager laid out for a transformers model: its KV cache groups
read from the model's own config (as `kvtier info --model-config` reads a
config.json: vLLM's grouping of the layer kinds), and where each model layer
sits in them."""
from __future__ import annotations

import json
import os
import tempfile

import kvtier


def manager_for_model(model, *, capacity: int, kv_cache_dtype: str | None = None, **options):
    """(manager, layer_places) for `model`; `kv_cache_dtype` is vLLM's
    --kv-cache-dtype for the attention pages (auto: the model's dtype;
    bfloat16, float16; or a quantized format: fp8, fp8_per_token_head,
    int8_per_token_head, nvfp4, fp8_ds_mla) — a linear-attention state stays
    in the model's dtype; `options` go to kvtier.Manager (device, host_blocks,
    disk_path, disk_blocks, shared_tier, ...). The device defaults to the
    model's: the host runtime for a CPU model, CUDA for a model on the GPU."""
    config = model.config.to_dict()
    config["dtype"] = str(model.dtype).removeprefix("torch.")  # what the model computes (and its states) in
    options.setdefault("device", "cuda" if next(model.parameters()).is_cuda else "host")
    with tempfile.TemporaryDirectory(prefix="kvtier-model-") as directory:
        path = os.path.join(directory, "config.json")
        with open(path, "w") as f:
            json.dump(config, f)
        layer_places = kvtier.model_layers(model_config=path)
        manager = kvtier.Manager(model_config=path, capacity=capacity, kv_cache_dtype=kv_cache_dtype, **options)
    return manager, layer_places
