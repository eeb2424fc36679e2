"""On a GPU: PyTorch's scaled-dot-product attention over K/V gathered through
kvtier's block tables equals kvtier's paged-attention kernel on the same
pages — the pages, the tables and the zero-copy views agree on device memory.
Skipped without PyTorch, a CUDA device or a CUDA build of kvtier."""
import pytest

import kvtier

torch = pytest.importorskip("torch")

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(
        not (kvtier.cuda_compiled() and kvtier.cuda_device_count() > 0 and torch.cuda.is_available()),
        reason="needs a CUDA device, a CUDA build of kvtier and PyTorch with CUDA",
    ),
]

BS, KV_HEADS, Q_HEADS, HEAD_DIM, LAYERS = 16, 2, 8, 64, 2


@pytest.mark.parametrize("layout", ["layer-major", "page-major"])
@pytest.mark.parametrize("dtype, torch_dtype", [("bf16", torch.bfloat16), ("fp16", torch.float16), ("fp32", torch.float32)])
def test_sdpa_over_block_tables_matches_the_paged_attention_kernel(layout, dtype, torch_dtype):
    m = kvtier.Manager(device="cuda", capacity=256, block_size=BS, layers=LAYERS, kv_heads=KV_HEADS,
                       head_dim=HEAD_DIM, dtype=dtype, layout=layout)
    assert m.device == "cuda"
    generator = torch.Generator(device="cuda").manual_seed(0)
    # Shared prefixes, so some pages appear in several tables.
    prompts = [list(range(40)) + [1000 + i] * n for i, n in enumerate((1, 30, 77, 5))]
    requests = []
    for prompt in prompts:
        r = m.add_request(prompt)
        assert m.allocate(r).ready
        m.finalize(r, len(r))
        requests.append(r)
    views = {}
    for layer in range(LAYERS):
        k, v = (torch.from_dlpack(t) for t in m.kv_cache(layer))
        assert k.device.type == "cuda" and k.dtype == torch_dtype
        views[layer] = (k, v)
    for k, v in views.values():  # written in place: zero copy means the kernel sees these values
        k.copy_(torch.randn(k.shape, generator=generator, device="cuda").to(torch_dtype))
        v.copy_(torch.randn(v.shape, generator=generator, device="cuda").to(torch_dtype))
    # The library copies a page out of the very memory torch wrote: no copy sat in between.
    page = int(m.block_table(requests[2])[3])
    logical = torch.cat([views[layer][part][page].reshape(-1).view(torch.uint8)
                         for layer in range(LAYERS) for part in range(2)])
    assert m.read_page(page) == bytes(logical.cpu().numpy())
    tables = torch.from_dlpack(m.block_tables(requests))
    assert tables.device.type == "cuda" and tables.dtype == torch.int32
    lens = torch.tensor([len(r) for r in requests], dtype=torch.int32, device="cuda")
    query = torch.randn((len(requests), Q_HEADS, HEAD_DIM), generator=generator, device="cuda")
    for layer in range(LAYERS):
        out = torch.zeros_like(query)
        m.paged_attention(query, tables, lens, out, layer, stream=torch.cuda.current_stream().cuda_stream)
        torch.cuda.synchronize()
        k, v = views[layer]
        for s, r in enumerate(requests):
            pages = tables[s][tables[s] >= 0].long()
            keys = k[pages].reshape(-1, KV_HEADS, HEAD_DIM)[: len(r)].float()
            values = v[pages].reshape(-1, KV_HEADS, HEAD_DIM)[: len(r)].float()
            group = Q_HEADS // KV_HEADS
            keys = keys.repeat_interleave(group, dim=1).transpose(0, 1)  # [q_heads, tokens, dim]
            values = values.repeat_interleave(group, dim=1).transpose(0, 1)
            expected = torch.nn.functional.scaled_dot_product_attention(
                query[s].unsqueeze(1), keys, values).squeeze(1)
            torch.testing.assert_close(out[s], expected, rtol=2e-3, atol=2e-3)
        # attend: the same step with tables built through the manager's persistent buffer on torch's stream.
        attended = torch.zeros_like(query)
        m.attend(query, requests, attended, layer, stream=torch.cuda.current_stream().cuda_stream)
        torch.cuda.synchronize()
        torch.testing.assert_close(attended, out, rtol=0, atol=0)
