"""A KV cache group's pages from Python in their page format
(docs/spec/model-geometry.md §1, §5, §7): Manager.group_cache views K/V
with inline scales, an MLA latent with its tile scales, and a Mamba state's
conv and recurrent bytes over the real pool, each at the byte offsets vLLM's
formulas give — on the host runtime."""
import numpy as np
import pytest

import kvtier

NVFP4 = {"kind": "full_attention", "layout": {"kv_heads": 2, "head_dim": 32, "quant": "nvfp4"}}
PER_TOKEN_HEAD = {"kind": "full_attention", "layout": {"kv_heads": 2, "head_dim": 32, "quant": "fp8_per_token_head"}}
DS_MLA = {"kind": "mla_attention", "layout": {"latent_dim": 128, "rope_dim": 16, "format": "fp8_ds_mla"}}
MAMBA = {"kind": "mamba", "layout": {"state_bytes": 2048, "conv_state_bytes": 512}}


def address(view):
    return view.__array_interface__["data"][0]


def manager(groups):
    return kvtier.Manager(groups=groups, capacity=8, block_size=16, device="host")


def test_nvfp4_views_put_each_sides_scales_after_its_data():
    m = manager([NVFP4, DS_MLA, MAMBA])
    page = m.groups["groups"][0]["padded_page_bytes"]
    views = m.group_cache(0, 0)
    key, key_scale = np.from_dlpack(views["key"]), np.from_dlpack(views["key_scale"])
    value = np.from_dlpack(views["value"])
    # 16 tokens x 2 heads x 16 bytes of packed e2m1, then 16 x 2 x 2 e4m3 scales (one per 16 values).
    assert key.shape == (8, 16, 2, 16) and key.dtype == np.uint8
    assert key.strides == (page, 32, 16, 1)
    assert key_scale.shape == (8, 16, 2, 2) and key_scale.strides == (page, 4, 2, 1)
    assert address(key_scale) - address(key) == 16 * 2 * 16
    assert address(value) - address(key) == 16 * 2 * (16 + 2)
    # The views are the pool: a write through one page's view is that page's bytes, no other page's.
    key_scale[3, 5, 1, 0] = 0x38
    assert np.from_dlpack(m.group_cache(0, 0)["key_scale"])[3, 5, 1, 0] == 0x38
    assert np.count_nonzero(key_scale) == 1


def test_per_token_head_scales_are_fp32_right_after_each_row():
    m = manager([PER_TOKEN_HEAD])
    views = m.group_cache(0, 0)
    key, scale = np.from_dlpack(views["key"]), np.from_dlpack(views["key_scale"])
    assert key.shape == (8, 16, 2, 32) and key.strides[1:] == (2 * 36, 36, 1)
    assert scale.dtype == np.float32 and scale.shape == (8, 16, 2)
    assert address(scale) - address(key) == 32
    scale[0, 1, 1] = 0.25
    row = key[0, 1, 1]
    assert address(scale[0:, 1:, 1:]) == address(row) + 32


def test_an_fp8_ds_mla_latent_carries_its_tile_scales_and_rope():
    m = manager([NVFP4, DS_MLA, MAMBA])
    views = m.group_cache(1, 0)
    latent, scale = np.from_dlpack(views["latent"]), np.from_dlpack(views["latent_scale"])
    # 128 e4m3 values, 1 fp32 scale, 16 bf16 RoPE values: 164 bytes a token.
    assert latent.shape == (8, 16, 128) and latent.strides[1] == 164
    assert scale.shape == (8, 16, 1) and scale.dtype == np.float32 and scale.strides[1] == 164
    assert address(scale) - address(latent) == 128
    assert "rope" in views


def test_a_mamba_state_is_its_conv_then_its_recurrent_bytes():
    m = manager([NVFP4, DS_MLA, MAMBA])
    views = m.group_cache(2, 0)
    conv, recurrent = np.from_dlpack(views["conv"]), np.from_dlpack(views["recurrent"])
    assert conv.shape == (8, 512) and recurrent.shape == (8, 2048 - 512)
    assert address(recurrent) - address(conv) == 512
    # kv_cache counts layers in group order: layer 2 is the Mamba group's.
    assert set(m.kv_cache(2)) == {"conv", "recurrent"}


def test_views_of_what_is_not_there_are_refused():
    m = manager([NVFP4, DS_MLA, MAMBA])
    with pytest.raises(kvtier.ContractError):
        m.group_cache(3, 0)
    with pytest.raises(kvtier.ContractError):
        m.group_cache(0, 1)
    with pytest.raises(kvtier.ContractError):
        m.kv_cache(3)
