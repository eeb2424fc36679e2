"""KV cache groups from Python (docs/spec/model-geometry.md §7): a
hybrid manager from group dicts or a real model's preset, per-group block
tables with the null page, the uncached common prefix, events and metrics
per group, and the refusals — on the host runtime."""
import numpy as np
import pytest

import kvtier

FULL_AND_WINDOW = [{"kind": "full_attention"}, {"kind": "sliding_window", "sliding_window": 32}]


def test_a_window_group_holds_the_null_page_before_its_window():
    m = kvtier.Manager(groups=FULL_AND_WINDOW, capacity=21, block_size=16, device="host")
    assert m.has_groups and m.null_page == 0
    assert [g["kind"] for g in m.groups["groups"]] == ["full_attention", "sliding_window"]
    shared = list(range(100, 148))
    a = m.add_request(shared + list(range(500, 507)))
    assert m.allocate(a).ready
    m.finalize(a, len(a))
    b = m.add_request(shared + [1, 2, 3, 4, 5])
    cost = m.prefill_cost(b)
    assert cost.cached_tokens == 48 and cost.uncached_common_prefix_tokens == 0
    assert m.allocate(b).ready  # takes the hit
    full, window = list(m.block_table(b)), list(m.block_table(b, group=1))
    assert full[:3] == list(m.block_table(a))[:3], "the shared prefix is the same pages"
    assert window[0] == m.null_page and window[1:3] == list(m.block_table(a, group=1))[1:3]
    tables = np.from_dlpack(m.block_tables([a, b], group=1))
    assert tables.shape == (2, 4) and list(tables[1]) == window
    events = m.take_events()
    assert {e["group"] for e in events if e["type"] == "stored"} == {0, 1}
    assert all(e["kind"] in ("full_attention", "sliding_window") for e in events)
    groups = m.metrics()["groups"]
    assert groups[0]["active"] == 5 and groups[1]["active"] == 5
    try:
        text = m.prometheus_text()
    except kvtier.ConfigError:
        return  # a build without prometheus-cpp
    # b took 3 cached pages in full attention, 2 in the window (null before it).
    assert 'kvtier:prefix_cache_group_hit_blocks_total{group="0",kind="full_attention",tier="G1"} 3' in text
    assert 'kvtier:prefix_cache_group_hit_blocks_total{group="1",kind="sliding_window",tier="G1"} 2' in text
    assert 'kvtier:kv_cache_group_used_blocks{group="1",kind="sliding_window",tier="G1"} 5' in text


def test_a_real_models_preset_resolves_its_groups():
    m = kvtier.Manager(model="gpt-oss-20b", capacity=32, device="host")
    described = m.groups
    assert [g["kind"] for g in described["groups"]] == ["full_attention", "sliding_window"]
    assert described["groups"][0]["page_bytes"] == 12 * 16 * 8 * 64 * 2 * 2
    # Qwen3-Next's Gated DeltaNet state raises the attention block, as vLLM does.
    q = kvtier.Manager(model="qwen3-next-80b-a3b", capacity=8, device="host")
    assert q.block_size == 544 and q.groups["hash_block_size"] == 544


def test_impossible_groups_are_refused():
    with pytest.raises(kvtier.ConfigError, match="give one of them"):
        kvtier.Manager(groups=FULL_AND_WINDOW, model="gpt-oss-20b", device="host")
    with pytest.raises(kvtier.ConfigError, match="KVBM"):
        kvtier.Manager(backend="kvbm", groups=FULL_AND_WINDOW, device="host")
    with pytest.raises(kvtier.ConfigError, match="multiples of 16"):
        kvtier.Manager(groups=[{"kind": "full_attention", "layout": {"head_dim": 72, "quant": "nvfp4"}}], device="host")
    with pytest.raises(kvtier.ConfigError, match="sliding_window"):
        kvtier.Manager(groups=[{"kind": "sliding_window"}], device="host")
    m = kvtier.Manager(groups=FULL_AND_WINDOW, capacity=8, block_size=16, device="host")
    r = m.add_request(list(range(20)))
    assert m.allocate(r).ready
    with pytest.raises(kvtier.ContractError):
        m.block_table(r, group=2)


def test_a_groups_blocks_come_back_from_g2_through_the_swap_in_plan():
    f16 = [dict(g, layout={"dtype": "fp16"}) for g in FULL_AND_WINDOW]
    m = kvtier.Manager(groups=f16, capacity=11, block_size=16, host_blocks=32, device="host")
    keys = [np.from_dlpack(m.group_cache(g, 0)["key"]) for g in range(2)]

    def mark(r):  # each (group, block) page of r holds its own values
        for g in range(2):
            for b, page in enumerate(m.block_table(r, group=g)):
                if page != m.null_page:
                    keys[g][page] = 100 * g + b

    prompt = list(range(100, 164))
    a = m.add_request(prompt)
    assert m.allocate(a).ready
    mark(a)
    m.finalize(a, len(a))
    m.finish(a)
    other = m.add_request(list(range(5000, 5064)))  # takes the pages: a's blocks go to G2
    while m.allocate(other).result == "blocked_on_offload":
        m.collect_offloads(wait=True)
    keys = [np.from_dlpack(m.group_cache(g, 0)["key"]) for g in range(2)]
    for g in range(2):
        for page in m.block_table(other, group=g):
            if page != m.null_page:
                keys[g][page] = -1
    m.finalize(other, len(other))
    m.finish(other)
    m.collect_offloads(wait=True)
    again = m.add_request(prompt)
    before = m.prefill_cost(again).cached_tokens
    plan = m.group_swap_in_plan(again)
    # The groups' fixed point over G1 and G2: 48 tokens (the last token is computed);
    # the window's block 0 is outside it and never fetched.
    assert plan["tokens"] == 48 and before < 48 and plan["fetch"]
    assert {group for group, _ in plan["fetch"]} <= {0, 1}
    assert (1, again.blocks[0]) not in plan["fetch"]
    start = m.swap_in(plan["fetch"], m.pin_prefix(plan["pin"]))
    while start["status"] == "blocked_on_offload":  # making room in G1 offloads `other`'s blocks first
        m.collect_offloads(wait=True)
        plan = m.group_swap_in_plan(again)
        start = m.swap_in(plan["fetch"], m.pin_prefix(plan["pin"]))
    assert start["status"] == "scheduled" and start["count"] == len(plan["fetch"])
    assert m.register_swap_in(start["swap_in_id"])["registered"] == len(plan["fetch"])
    assert m.prefill_cost(again).cached_tokens == 48
    while m.allocate(again).result == "blocked_on_offload":
        m.collect_offloads(wait=True)
    assert len(m.block_table(again)) == 4
    for g in range(2):  # every group's pages of the hit hold what was written before eviction
        for b, page in enumerate(list(m.block_table(again, group=g))[:3]):
            if page != m.null_page:
                assert (keys[g][page] == 100 * g + b).all(), (g, b)
    stored = [e for e in m.take_events() if e["type"] == "stored" and e["tier"] == "host_pinned"]
    assert {e["group"] for e in stored} == {0, 1}
