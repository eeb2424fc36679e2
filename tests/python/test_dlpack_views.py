"""Zero-copy views: numpy sees the G1 pool's real pages through DLPack (K and
V of each layer, both page layouts, every dtype numpy has), block tables
are int32 tensors, the views keep the manager alive, and kvtier's own
paged-attention reads the same bytes numpy wrote."""
import gc

import numpy as np
import pytest

import kvtier

BS = 4


def manager(**kw):
    kw.setdefault("capacity", 16)
    kw.setdefault("block_size", BS)
    kw.setdefault("device", "host")
    return kvtier.Manager(**kw)


def filled_request(m, tokens=10):
    r = m.add_request(list(range(tokens)))
    assert m.allocate(r).ready
    m.finalize(r, tokens)
    return r


@pytest.mark.parametrize("layout", ["layer-major", "page-major"])
@pytest.mark.parametrize("dtype, numpy_dtype", [("fp32", np.float32), ("fp16", np.float16), ("fp8", np.uint8)])
def test_views_have_the_layouts_shape_strides_and_dtype(layout, dtype, numpy_dtype):
    m = manager(layout=layout, dtype=dtype, layers=3, kv_heads=2, head_dim=8)
    k, v = (np.from_dlpack(t) for t in m.kv_cache(1))
    assert k.shape == v.shape == (16, BS, 2, 8)
    assert k.dtype == numpy_dtype
    element = k.itemsize
    page_stride = m.page_bytes if layout == "page-major" else m.page_bytes // 3
    assert k.strides == (page_stride, 2 * 8 * element, 8 * element, element)
    assert v.__array_interface__["data"][0] - k.__array_interface__["data"][0] == BS * 2 * 8 * element


def test_bf16_views_need_a_consumer_with_bf16_or_bytes():
    m = manager(dtype="bf16", head_dim=8)
    k, _ = m.kv_cache(0)
    assert k.__dlpack_device__() == (1, 0)  # kDLCPU on the host runtime
    kb, _ = m.kv_cache(0, as_bytes=True)
    assert np.from_dlpack(kb).shape == (16, BS, 2, 16)
    torch = pytest.importorskip("torch")
    assert torch.from_dlpack(k).dtype == torch.bfloat16


@pytest.mark.parametrize("layout", ["layer-major", "page-major"])
def test_writes_through_numpy_are_what_the_library_reads(layout):
    m = manager(layout=layout, dtype="fp16", layers=2, kv_heads=2, head_dim=8)
    r = filled_request(m)
    views = [[np.from_dlpack(t) for t in m.kv_cache(layer, as_bytes=True)] for layer in range(2)]
    # Each page's logical bytes are [layer][K|V][token][head][dim]: write the
    # library's pattern for its block through the views, part by part.
    for page, block in zip(m.block_table(r), r.blocks):
        pattern = np.frombuffer(kvtier.page_pattern(kvtier.Manager.pattern_identity(block), m.page_bytes), np.uint8)
        parts = pattern.reshape(2, 2, BS, 2, 16)
        for layer in range(2):
            for part in range(2):
                views[layer][part][page] = parts[layer, part]
    assert m.verify(r) == []
    # One byte changed through a view is one page the library finds.
    victim = int(m.block_table(r)[1])
    views[1][1][victim, 3, 1, 5] ^= 0xFF
    assert m.verify(r) == [victim]
    assert m.read_page(victim) != kvtier.page_pattern(kvtier.Manager.pattern_identity(r.blocks[1]), m.page_bytes)


def test_library_writes_are_seen_through_numpy():
    m = manager(dtype="fp32", head_dim=8)
    r = filled_request(m)
    pages = m.write_pattern(r)
    k = np.from_dlpack(m.kv_cache(0, as_bytes=True)[0])
    page = pages[0]
    expected = np.frombuffer(kvtier.page_pattern(kvtier.Manager.pattern_identity(r.blocks[0]), m.page_bytes), np.uint8)
    assert np.array_equal(k[page].reshape(-1), expected[: k[page].size])
    assert m.read_page(page) == expected.tobytes()


def test_a_view_keeps_the_pool_alive():
    m = manager(dtype="fp32", head_dim=8)
    k = np.from_dlpack(m.kv_cache(0)[0])
    k[3] = 7.0
    del m
    gc.collect()
    k[3] += 1.0  # the slab is still there: no use after free (ASan builds would say so)
    assert np.all(k[3] == 8.0)


def test_block_tables_are_padded_int32_tensors():
    m = manager()
    a = filled_request(m, 10)
    b = m.add_request(list(range(50, 55)))
    assert m.allocate(b).ready
    table = np.from_dlpack(m.block_tables([a, b]))
    assert table.dtype == np.int32 and table.shape == (2, 3)
    assert list(table[0]) == list(m.block_table(a))
    assert list(table[1]) == list(m.block_table(b)) + [-1]
    assert np.from_dlpack(m.block_tables([a], max_blocks=6)).shape == (1, 6)
    with pytest.raises(kvtier.ContractError, match="does not fit"):
        m.block_tables([a], max_blocks=2)
    single = m.block_table(a)
    assert isinstance(single, np.ndarray) and single.dtype == np.int32


def test_paged_attention_reads_the_pages_numpy_wrote():
    rng = np.random.default_rng(7)
    m = manager(capacity=32, dtype="fp32", layers=2, kv_heads=2, head_dim=8)
    requests = [filled_request(m, n) for n in (5, 12, 9)]
    for layer in range(2):
        for view in m.kv_cache(layer):
            array = np.from_dlpack(view)
            array[...] = rng.standard_normal(array.shape).astype(np.float32)
    q_heads, layer = 4, 1
    tables = np.from_dlpack(m.block_tables(requests))
    lens = np.array([len(r) for r in requests], np.int32)
    query = rng.standard_normal((3, q_heads, 8)).astype(np.float32)
    out = np.zeros_like(query)
    m.paged_attention(query, tables, lens, out, layer)
    k, v = (np.from_dlpack(t) for t in m.kv_cache(layer))
    for s, r in enumerate(requests):
        pages = m.block_table(r)
        keys = k[pages].reshape(-1, 2, 8)[: len(r)]
        values = v[pages].reshape(-1, 2, 8)[: len(r)]
        for h in range(q_heads):
            kv = h // (q_heads // 2)
            scores = keys[:, kv] @ query[s, h] / np.sqrt(8)
            weights = np.exp(scores - scores.max())
            expected = (weights / weights.sum()) @ values[:, kv]
            np.testing.assert_allclose(out[s, h], expected, rtol=1e-5, atol=1e-5)
    with pytest.raises(kvtier.ContractError, match="query heads"):
        m.paged_attention(np.zeros((3, 3, 8), np.float32), tables, lens, np.zeros((3, 3, 8), np.float32), layer)


def test_attend_builds_the_tables_itself_and_matches_paged_attention():
    rng = np.random.default_rng(11)
    m = manager(capacity=32, dtype="fp32", layers=2, kv_heads=2, head_dim=8)
    requests = [filled_request(m, n) for n in (5, 12, 9)]
    partial = m.add_request(list(range(100, 114)))
    assert m.allocate(partial).ready
    m.finalize(partial, 6)  # attends to its 6 computed tokens, not its 14
    requests.append(partial)
    for layer in range(2):
        for view in m.kv_cache(layer):
            array = np.from_dlpack(view)
            array[...] = rng.standard_normal(array.shape).astype(np.float32)
    query = rng.standard_normal((4, 4, 8)).astype(np.float32)
    for layer in range(2):
        out = np.zeros_like(query)
        m.attend(query, requests, out, layer)
        tables = np.from_dlpack(m.block_tables(requests))
        lens = np.array([r.computed_tokens for r in requests], np.int32)
        assert list(lens) == [5, 12, 9, 6]
        expected = np.zeros_like(query)
        m.paged_attention(query, tables, lens, expected, layer)
        np.testing.assert_array_equal(out, expected)
        assert np.abs(out).sum() > 0
    # Again with fewer requests: the tables are rebuilt for this step.
    out = np.zeros((1, 4, 8), np.float32)
    m.attend(query[1:2], [requests[1]], out, 1)
    np.testing.assert_array_equal(out, expected[1:2])


def test_attend_refuses_what_it_cannot_run_before_touching_out():
    m = manager(capacity=32, dtype="fp32", layers=2, kv_heads=2, head_dim=8)
    r = filled_request(m, 5)
    fresh = m.add_request([1, 2, 3])
    q = np.zeros((1, 4, 8), np.float32)
    out = np.full((1, 4, 8), 3.0, np.float32)
    with pytest.raises(kvtier.ContractError, match="no computed tokens"):
        m.attend(q, [fresh], out, 0)
    with pytest.raises(kvtier.ContractError, match="query heads"):
        m.attend(np.zeros((1, 3, 8), np.float32), [r], np.zeros((1, 3, 8), np.float32), 0)
    with pytest.raises(kvtier.ContractError, match="layer"):
        m.attend(q, [r], out, 2)
    with pytest.raises(kvtier.ContractError, match="query must be"):
        m.attend(np.zeros((2, 4, 8), np.float32), [r], out, 0)
    with pytest.raises(TypeError, match="out must be"):
        m.attend(q, [r], np.zeros((1, 4, 8), np.float64), 0)
    other = manager()
    with pytest.raises(kvtier.ContractError):
        m.attend(q, [filled_request(other, 4)], out, 0)
    assert np.all(out == 3.0)
