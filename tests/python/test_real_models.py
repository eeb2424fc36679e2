"""Real transformers models decode through kvtier (issue 34): every layer's
K/V goes into kvtier pages through write_kv, comes back through kvtier's
attention over the manager's block tables, and the greedy tokens and logits
equal those of the model's own generate() with its DynamicCache — with prefix
hits (a request forwards only what is not cached), after preemption and
recompute, and after the shared prefix went through G2, G3 and G4 and came
back. One corrupted byte of a reused page shows in the logits, so the
comparison can fail. Tiny configs with random weights (kvtier.hf.tiny_models)
run transformers' own modeling code; on CPU with the host runtime, and with
kvtier's CUDA kernels on a GPU (marked gpu)."""
import json
import os
import random

import pytest

if os.environ.get("KVTIER_REQUIRE_MODEL_TESTS") != "1":
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
import torch  # noqa: E402  (CI requires them: scripts/install-model-deps.sh)

import kvtier  # noqa: E402
from kvtier.check_model import main as check_model  # noqa: E402
from kvtier.hf import PagedDecoder, build_model, compare, manager_for_model, reference_generate, tiny_config  # noqa: E402

NEW_TOKENS = 32
TOLERANCE = 1e-3  # fp32: the same arithmetic but for the order of a few sums
# FP8 pages: a key that differs in its last bit between a batched forward and generate()'s may round
# to the next fp8 code (a step of 1/16 of the value), so the logits may move by about 1e-3.
FP8_TOLERANCE = 1e-2

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() and kvtier.cuda_device_count() > 0 else [])


def prompts_sharing_a_prefix(vocab, seed=7):
    """A: prefix + question; F1, F2: unrelated fillers that push the prefix out of
    G1 (and G2); B, C: the prefix again with other questions."""
    rng = random.Random(seed)
    draw = lambda n: [rng.randrange(1, vocab) for _ in range(n)]  # noqa: E731
    prefix = draw(64)
    return [prefix + draw(10), draw(74), draw(74), prefix + draw(12), prefix + draw(5)]


# Full attention (Llama), 5 sliding : 1 full (Gemma 3), sliding + full with attention sinks (gpt-oss),
# Gated DeltaNet + full attention (Qwen3-Next), MLA (DeepSeek-V3).
MODELS = ["tiny-llama", "tiny-gemma3", "tiny-gpt-oss", "tiny-qwen3-next", "tiny-deepseek-v3"]


@pytest.fixture(scope="module", params=[(m, d) for d in DEVICES for m in MODELS], ids=lambda p: f"{p[0]}-{p[1]}")
def model(request):
    name, device = request.param
    return build_model(tiny_config(name), seed=0, device=device)


@pytest.fixture(scope="module")
def llama(request):
    return build_model(tiny_config("tiny-llama"), seed=0, device="cpu")


def references_of(model):
    cache = {}

    def of(prompts):
        for p in prompts:
            if tuple(p) not in cache:
                cache[tuple(p)] = reference_generate(model, p, NEW_TOKENS)
        return [cache[tuple(p)] for p in prompts]

    return of


@pytest.fixture(scope="module")
def references(model):
    return references_of(model)


def groups_of(model):
    """The KV cache groups kvtier makes of the model: a block of tokens takes a page in each."""
    manager, _ = manager_for_model(model, capacity=4)
    with manager:
        return len(manager.groups["groups"])


def run(model, prompts, capacity, max_running=None, **tiers):
    """capacity and host_blocks: pages for this many blocks of every group."""
    groups = groups_of(model)
    if "host_blocks" in tiers:
        tiers["host_blocks"] *= groups
    manager, places = manager_for_model(model, capacity=capacity * groups, **tiers)
    with manager:
        decoder = PagedDecoder(model, manager, places, max_running=max_running)
        decoded = decoder.decode(prompts, NEW_TOKENS)
        manager.audit()
    return decoded, decoder.stats


def assert_same_as_generate(decoded, references, tolerance=TOLERANCE):
    result = compare(decoded, references)
    assert result.tokens_equal, f"tokens differ first at (request, token) {result.first_divergence}"
    assert result.max_logit_diff <= tolerance, result.max_logit_diff
    assert all(len(d.tokens) == NEW_TOKENS for d in decoded)


def test_requests_sharing_a_prefix_forward_only_their_suffix(model, references):
    prompts = prompts_sharing_a_prefix(model.config.vocab_size)
    decoded, stats = run(model, prompts, capacity=64, max_running=1)
    assert_same_as_generate(decoded, references(prompts))
    b, c = decoded[3], decoded[4]
    assert b.hit_tokens == 64 and c.hit_tokens == 64, "the shared 64-token prefix is cached"
    assert b.forwarded == len(b.prompt) - 64 + NEW_TOKENS - 1, "B forwards its suffix, then one token a step"
    assert stats.hits["g1"] > 0 and stats.preemptions == 0


def test_preempted_requests_recompute_and_decode_the_same_tokens(model, references):
    prompts = prompts_sharing_a_prefix(model.config.vocab_size)
    # 12 pages for five requests of 5-7 pages each, all admitted at once: decode runs out.
    decoded, stats = run(model, prompts, capacity=12)
    assert stats.preemptions > 0
    assert_same_as_generate(decoded, references(prompts))


def test_the_shared_prefix_comes_back_from_g2(model, references):
    prompts = prompts_sharing_a_prefix(model.config.vocab_size)
    decoded, stats = run(model, prompts, capacity=8, max_running=1, host_blocks=64)
    assert stats.hits["g2"] >= 4, stats.hits  # the prefix's 4 blocks, swapped back in
    assert decoded[3].hit_tokens == 64
    assert_same_as_generate(decoded, references(prompts))


def test_the_shared_prefix_comes_back_from_g3(model, references, tmp_path):
    prompts = prompts_sharing_a_prefix(model.config.vocab_size)
    decoded, stats = run(model, prompts, capacity=8, max_running=1, host_blocks=4,
                         disk_path=str(tmp_path / "g3"), disk_blocks=256)
    assert stats.hits["g3"] > 0, stats.hits
    assert_same_as_generate(decoded, references(prompts))


def test_the_shared_prefix_comes_back_from_g4_in_another_instance(model, references, redis_url):
    prompts = prompts_sharing_a_prefix(model.config.vocab_size)
    space = f"models-{model.config.model_type}-{model.device.type}"
    # One instance runs A, then F1 and F2, whose pages push all of A's to G2: published to the store.
    decoded, stats = run(model, prompts[:3], capacity=8, max_running=1, host_blocks=8, shared_tier=[redis_url],
                         shared_namespace=space)
    assert_same_as_generate(decoded, references(prompts[:3]))
    # Another instance (its own G1 and G2) on the same store: B's prefix comes from G4.
    decoded, stats = run(model, prompts[3:], capacity=8, max_running=1, host_blocks=8, shared_tier=[redis_url],
                         shared_namespace=space)
    assert stats.hits["g4"] >= 4, stats.hits
    assert decoded[0].hit_tokens == 64
    assert_same_as_generate(decoded, references(prompts[3:]))


@pytest.mark.parametrize("page_format", ["bf16", "fp8"])
def test_pages_in_vllms_formats_decode_as_a_cache_that_rounds_the_same_way(model, page_format):
    """bf16 pages (vLLM's default for these models) and FP8 (a scale per
    (token, head); MLA's latent per tensor): the tokens and logits of
    generate() with a DynamicCache that stores K/V rounded as the pages hold
    them — with preemption and a prefix through G2. The unrounded model
    differs, so the pages really are in that format."""
    mla = model.config.model_type == "deepseek_v3"
    kv_cache_dtype = {"bf16": "bfloat16", "fp8": "fp8" if mla else "fp8_per_token_head"}[page_format]
    prompts = prompts_sharing_a_prefix(model.config.vocab_size)
    decoded, stats = run(model, prompts, capacity=10, host_blocks=64, kv_cache_dtype=kv_cache_dtype)
    assert stats.preemptions > 0
    references = [reference_generate(model, p, NEW_TOKENS, kv_cache_dtype) for p in prompts]
    assert_same_as_generate(decoded, references, FP8_TOLERANCE if page_format == "fp8" else TOLERANCE)
    unrounded = [reference_generate(model, p, NEW_TOKENS) for p in prompts[:1]]
    assert compare(decoded[:1], unrounded).max_logit_diff > 1e-5


def test_a_corrupted_byte_of_a_reused_page_shows_in_the_logits(llama):
    """The comparison can fail: one byte of layer 1's K in the prefix's first
    page, flipped after A cached it, reaches B's logits through its prefix hit."""
    prompts = prompts_sharing_a_prefix(llama.config.vocab_size)
    prompts = [prompts[0], prompts[3]]
    manager, places = manager_for_model(llama, capacity=64)
    with manager:
        decoder = PagedDecoder(llama, manager, places, max_running=1)
        first = decoder.decode(prompts[:1], NEW_TOKENS)
        a = manager.add_request(prompts[0])
        assert manager.allocate(a).ready
        page = int(manager.block_table(a)[0])
        manager.finish(a)
        keys = torch.from_dlpack(manager.group_cache(0, 1)["key"])  # layer 1 of the one group
        raw = keys[page].view(torch.uint8)
        raw[3, 0, 3] ^= 0x40  # the exponent of token 3, head 0, dim 0 of its K
        second = decoder.decode(prompts[1:], NEW_TOKENS)
    assert second[0].hit_tokens == 64
    references = references_of(llama)
    assert compare(first, references(prompts[:1])).max_logit_diff <= TOLERANCE
    result = compare(second, references(prompts[1:]))
    assert not result.tokens_equal or result.max_logit_diff > TOLERANCE, result


def test_check_model_writes_what_other_programs_read(tmp_path, capsys):
    config = tiny_config("tiny-llama")
    config.to_json_file(tmp_path / "config.json")
    prompts = prompts_sharing_a_prefix(config.vocab_size)[:4]
    (tmp_path / "prompts.json").write_text(json.dumps(prompts))
    out = tmp_path / "result.json"
    status = check_model(["--config", str(tmp_path / "config.json"), "--seed", "3", "--prompts",
                          str(tmp_path / "prompts.json"), "--new-tokens", "8", "--max-running", "1",
                          "--capacity", "8", "--host-blocks", "64", "--device", "cpu", "--json", str(out)])
    assert status == 0, capsys.readouterr().out
    result = json.loads(out.read_text())
    assert set(result) >= {"requests", "max_logit_diff", "hits"}
    assert set(result["hits"]) == {"g1", "g2", "g3", "g4"} and result["hits"]["g2"] > 0
    assert [r["prompt"] for r in result["requests"]] == prompts
    assert all(len(r["tokens"]) == 8 for r in result["requests"]) and result["max_logit_diff"] <= TOLERANCE
    assert "OK" in capsys.readouterr().out


def test_check_model_shows_prefix_reuse_by_default(tmp_path, capsys):
    """The README's example (issue 48): its default prompts arrive one a step,
    so every request after the first takes the system prompt from G1 and the
    second turns take the first turn too, all of it from G1; the output says
    so. All at once, nothing is computed when the others look up."""
    out = tmp_path / "result.json"
    assert check_model(["--model", "tiny-gpt-oss", "--new-tokens", "4", "--device", "cpu", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    requests = json.loads(out.read_text())["requests"]
    assert requests[0]["hit_tokens"] == 0 and "none from the cache" in printed
    assert all(r["hit_tokens"] > 0 and r["hit_tokens"] == r["g1_hit_tokens"] for r in requests[1:]), requests
    assert requests[3]["hit_tokens"] > requests[2]["hit_tokens"], "a second turn reuses the first turn too"
    assert "from the cache (" in printed and "in G1" in printed
    # All at once: nothing is computed when the others look up.
    assert check_model(["--model", "tiny-gpt-oss", "--new-tokens", "4", "--device", "cpu", "--arrive-every", "0",
                        "--json", str(out)]) == 0
    assert all(r["hit_tokens"] == 0 for r in json.loads(out.read_text())["requests"])
