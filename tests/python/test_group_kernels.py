"""Manager.write_kv and Manager.group_attention on numpy arrays (the calls
kvtier.hf runs a transformers model on): K/V written to a request's slots read
back through group_cache exactly, attention over a sliding-window group with
sinks equals numpy's softmax over the window, and every malformed call is a
clear error that writes nothing — on the host runtime."""
import numpy as np
import pytest

import kvtier

F32 = {"kv_heads": 2, "head_dim": 8, "dtype": "fp32"}
GROUPS = [{"kind": "full_attention", "layout": F32},
          {"kind": "sliding_window", "sliding_window": 8, "layout": F32},
          {"kind": "mamba", "layout": {"state_bytes": 256, "conv_state_bytes": 64}}]
TOKENS = 20


def setup():
    m = kvtier.Manager(groups=GROUPS, capacity=24, block_size=4, device="host")
    r = m.add_request(list(range(100, 100 + TOKENS)))
    assert m.allocate(r).ready
    rng = np.random.default_rng(5)
    k = rng.standard_normal((TOKENS, 2, 8), dtype=np.float32)
    v = rng.standard_normal((TOKENS, 2, 8), dtype=np.float32)
    return m, r, k, v


def slots_of(m, r, group):
    table = np.asarray(m.block_table(r, group=group))
    return np.array([table[t // 4] * 4 + t % 4 for t in range(TOKENS)], dtype=np.int64), table


def test_written_kv_reads_back_and_attends_like_numpy_over_the_window():
    m, r, k, v = setup()
    slots, table = slots_of(m, r, 1)
    m.write_kv(1, 0, k, v, slots)
    keys = np.from_dlpack(m.group_cache(1, 0)["key"])
    for t in range(TOKENS):
        np.testing.assert_array_equal(keys[table[t // 4], t % 4], k[t])
    # One query a row: token 19 (attends 12..19) and token 9 (2..9), as a prompt's rows do.
    rows = np.array([19, 9])
    query = np.random.default_rng(6).standard_normal((2, 4, 8), dtype=np.float32)
    sinks = np.array([0.5, -1.0, 2.0, 0.0], dtype=np.float32)
    out = np.zeros((2, 4, 8), dtype=np.float32)
    tables = np.tile(table.astype(np.int32), (2, 1))
    m.group_attention(1, 0, query, tables, (rows + 1).astype(np.int32), out, scale=0.5, sinks=sinks)
    for i, t in enumerate(rows):
        window = range(t - 7, t + 1)
        for h in range(4):
            scores = np.array([query[i, h] @ k[s, h // 2] for s in window]) * 0.5
            weights = np.exp(np.append(scores, sinks[h]) - max(scores.max(), sinks[h]))
            want = (weights[:-1] / weights.sum()) @ v[list(window), h // 2]
            np.testing.assert_allclose(out[i, h], want, rtol=1e-5, atol=1e-6)


def test_malformed_calls_are_refused_and_write_nothing():
    m, r, k, v = setup()
    slots, _ = slots_of(m, r, 0)
    before = np.from_dlpack(m.group_cache(0, 0)["key"]).copy()
    with pytest.raises(kvtier.ContractError, match="key must be"):
        m.write_kv(0, 0, k[:, :1], v, slots)
    with pytest.raises(kvtier.ContractError, match="recurrent state"):
        m.write_kv(2, 0, k, v, slots)
    with pytest.raises(kvtier.ContractError, match="outside group"):
        m.write_kv(0, 1, k, v, slots)
    with pytest.raises(kvtier.ContractError, match="not one of"):
        m.write_kv(3, 0, k, v, slots)
    bad = slots.copy()
    bad[3] = 24 * 4  # past the pool
    with pytest.raises(kvtier.ContractError, match="outside the pool"):
        m.write_kv(0, 0, k, v, bad)
    np.testing.assert_array_equal(np.from_dlpack(m.group_cache(0, 0)["key"]), before)
    query, out = np.zeros((1, 4, 8), np.float32), np.zeros((1, 4, 8), np.float32)
    table = np.zeros((1, 5), np.int32)
    with pytest.raises(kvtier.ContractError, match="sinks"):
        m.group_attention(0, 0, query, table, np.array([3], np.int32), out, sinks=np.zeros(3, np.float32))
    with pytest.raises(kvtier.ContractError, match="does not fit"):
        m.group_attention(0, 0, query, table, np.array([21], np.int32), out)
    with pytest.raises(TypeError, match="written in place"):
        m.group_attention(0, 0, query, table, np.array([3], np.int32), out.astype(np.float64))
    with pytest.raises(kvtier.ContractError, match="KV cache groups"):
        kvtier.Manager(capacity=8, device="host").write_kv(0, 0, k, v, slots)
