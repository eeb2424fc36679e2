"""A real router's indexer reads kvtier's KV events: Dynamo's standalone indexer
(`python -m dynamo.indexer`, PyPI ai-dynamo-runtime, pinned in requirements.txt)
subscribes to a kvtier.Manager's ZmqEventPublisher, catches up through kvtier's
replay socket after a gap, indexes what kvtier stored on the device and drops it
from the device tier when kvtier evicts it to G2 (medium CPU_PINNED: its host tier).

The indexer's HTTP listener binds 0.0.0.0 and has no option for 127.0.0.1, so
the indexer and the publisher run inside a private network namespace
(`unshare --net`: only a loopback interface exists there, nothing is reachable
from outside); the checks run in a helper script in that namespace.
"""
import importlib.util
import shutil
import subprocess
import sys
import textwrap

import pytest

import kvtier

COMMON = '''
import json, socket, subprocess, sys, time, urllib.request
import kvtier

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]

def post(path, body):
    request = urllib.request.Request(f"http://127.0.0.1:{http}{path}", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as answer:
        return json.loads(answer.read().decode())

def until(condition, what):
    deadline = time.time() + 20
    while not condition():
        assert time.time() < deadline, what
        time.sleep(0.1)

def start_indexer():
    """Dynamo's indexer on a free port, once it answers /health."""
    indexer = subprocess.Popen([sys.executable, "-m", "dynamo.indexer", "--port", str(http), "--threads", "1"],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    def healthy():
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{http}/health", timeout=1)
            return True
        except OSError:
            return False
    until(healthy, "the indexer never answered /health")
    return indexer

def stop_indexer(indexer):
    indexer.terminate()
    print(indexer.communicate(timeout=10)[0][-4000:])
'''

HELPER = COMMON + '''

def matched(tokens, tier):
    """Tokens of `tokens`' prefix the indexer holds for worker 7 in `tier` (gpu, cpu)."""
    return post("/query", {"token_ids": tokens, "model_name": "m"})["instances"].get("7", {}).get(tier, 0)


http, pub, rep = free_port(), free_port(), free_port()
indexer = start_indexer()
try:
    publisher = kvtier.ZmqEventPublisher(f"tcp://127.0.0.1:{pub}", replay_endpoint=f"tcp://127.0.0.1:{rep}")
    m = kvtier.Manager(backend="kvbm", eviction="lru", capacity=8, block_size=4, device="host", host_blocks=16,
                       publishers=[publisher])

    def prefill(tokens):
        r = m.add_request(tokens, emit_token_ids=True)  # Dynamo hashes the token ids of each stored block
        while m.allocate(r).result == "blocked_on_offload":
            m.collect_offloads(wait=True)
        m.finalize(r, len(tokens))
        m.collect_offloads(wait=True)
        publisher.flush()
        return r

    # Published before the indexer subscribes: it sees a gap and catches up through the replay socket.
    first = prefill(list(range(100, 108)))
    publisher.drain()
    assert post("/register", {"instance_id": 7, "endpoint": f"tcp://127.0.0.1:{pub}", "model_name": "m",
                              "block_size": 4, "replay_endpoint": f"tcp://127.0.0.1:{rep}"})["status"] == "ok"
    time.sleep(0.5)  # the SUB socket's subscription reaches the publisher
    second = prefill(list(range(200, 212)))
    until(lambda: matched(list(range(200, 212)), "gpu") == 12, "the live batch was not indexed")
    until(lambda: matched(list(range(100, 108)), "gpu") == 8, "the missed batch was not replayed")
    assert publisher.stats()["replays_served"] >= 1, "the indexer asked kvtier's replay socket"
    assert matched(list(range(100, 104)) + [1, 2, 3, 4], "gpu") == 4, "a prefix match ends where the blocks differ"

    # Eight new blocks evict everything to G2: removed from the device tier, stored in the host tier.
    m.finish(first)
    m.finish(second)
    prefill(list(range(300, 332)))
    until(lambda: matched(list(range(100, 108)), "gpu") == 0, "the evicted blocks stayed on the device tier")
    assert matched(list(range(100, 108)), "cpu") == 8, "CPU_PINNED is Dynamo's host tier"
    assert matched(list(range(300, 332)), "gpu") == 32
    assert publisher.stats()["replays_abandoned"] == 0
    print("indexer checks passed")
finally:
    stop_indexer(indexer)
'''


HYBRID_HELPER = COMMON + '''

def matched(tokens):
    return post("/query", {"token_ids": tokens, "model_name": "m"})["instances"].get("9", {}).get("gpu", 0)


http, pub = free_port(), free_port()
indexer = start_indexer()
try:
    publisher = kvtier.ZmqEventPublisher(f"tcp://127.0.0.1:{pub}")
    # gpt-oss's shape: full attention beside an 8-token sliding window, 4 tokens a block.
    m = kvtier.Manager(groups=[{"kind": "full_attention"}, {"kind": "sliding_window", "sliding_window": 8}],
                       capacity=64, block_size=4, device="host", publishers=[publisher])
    assert post("/register", {"instance_id": 9, "endpoint": f"tcp://127.0.0.1:{pub}", "model_name": "m",
                              "block_size": 4})["status"] == "ok"
    time.sleep(0.5)  # the SUB socket's subscription reaches the publisher
    prompt = list(range(400, 424))
    r = m.add_request(prompt, emit_token_ids=True)
    assert m.allocate(r).ready
    m.finalize(r, len(prompt))
    publisher.flush()
    stored = [e for e in m.take_events() if e["type"] == "stored"]
    assert {e["group"] for e in stored} == {0, 1} and all("token_ids" in e for e in stored)
    # Group 0 (full attention) caches every block: the router matches the whole prompt.
    until(lambda: matched(prompt) == 24, "the hybrid stream's group-0 blocks were not indexed")
    assert matched(prompt[:8] + [1, 2, 3, 4]) == 8, "a prefix match ends where the blocks differ"
    print("hybrid indexer checks passed")
finally:
    stop_indexer(indexer)
'''


def namespace_works():
    """unshare --net and ip (iproute2, scripts/install-deps.sh) to bring its loopback up."""
    return shutil.which("unshare") is not None and subprocess.run(
        ["unshare", "--net", "sh", "-c", "ip link set lo up"], capture_output=True).returncode == 0


def run_in_a_private_network(tmp_path, script, passed):
    """Runs a helper script inside `unshare --net` (loopback only); it must print `passed`."""
    helper = tmp_path / "indexer_helper.py"
    helper.write_text(textwrap.dedent(script))
    done = subprocess.run(["unshare", "--net", "sh", "-c", f'ip link set lo up && exec "{sys.executable}" "{helper}"'],
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 0 and passed in done.stdout, (
        f"exit status {done.returncode}\n{done.stdout[-5000:]}\n{done.stderr[-3000:]}")


# Every test here needs the indexer, libzmq and a private network namespace.
pytestmark = [
    pytest.mark.skipif(importlib.util.find_spec("dynamo") is None, reason="ai-dynamo-runtime is not installed"),
    pytest.mark.skipif(not kvtier.has_zmq, reason="built without libzmq"),
    pytest.mark.skipif(not namespace_works(), reason="no private network namespace (unshare --net) here"),
]


def test_dynamos_indexer_indexes_what_kvtier_stored_catches_up_by_replay_and_drops_what_it_evicted(tmp_path):
    run_in_a_private_network(tmp_path, HELPER, "indexer checks passed")


def test_dynamos_indexer_indexes_a_hybrid_streams_group_0_blocks(tmp_path):
    run_in_a_private_network(tmp_path, HYBRID_HELPER, "hybrid indexer checks passed")
