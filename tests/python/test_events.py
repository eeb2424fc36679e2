"""KV events from Python: the script's format, callbacks right after the call
that made them, the iterator, a bounded queue, and the ZMQ publisher."""
import json
import os
import subprocess

import pytest

import kvtier

KVTIER = os.environ.get("KVTIER_BIN", "build/release/kvtier")


def test_events_chain_parents_and_report_evictions():
    m = kvtier.Manager(capacity=4, block_size=4, device="host", backend="kvbm", eviction="lru")
    a = m.add_request(list(range(12)), emit_token_ids=True)
    assert m.allocate(a).ready
    stored = m.take_events()
    assert [e["type"] for e in stored] == ["stored"]
    assert stored[0]["parent"] is None
    assert [b["hash"] for b in stored[0]["blocks"]] == a.blocks
    assert stored[0]["token_ids"] == [list(range(0, 4)), list(range(4, 8)), list(range(8, 12))]
    m.finish(a)
    b = m.add_request(list(range(100, 116)))
    assert m.allocate(b).ready  # needs every page: a's blocks are evicted
    kinds = [e["type"] for e in m.take_events()]
    assert sorted(set(kinds)) == ["removed", "stored"]
    assert m.take_events() == []


def test_the_same_events_as_the_script():
    if not os.path.exists(KVTIER):
        pytest.skip(f"no kvtier CLI at {KVTIER} (set KVTIER_BIN)")
    lines = [
        {"op": "init", "capacity": 8, "block_size": 4, "backend": "native", "device": "host"},
        {"op": "use", "owner": "a", "blocks": [11, 22, "p"], "token_ids": [[1, 2, 3, 4], [5, 6, 7, 8]]},
        {"op": "finalize", "owner": "a", "before": 0, "after": 8},
        {"op": "deref", "owner": "a", "blocks": ["p", 22, 11]},
    ]
    out = subprocess.run([KVTIER, "script", "-"], input="\n".join(json.dumps(line) for line in lines),
                         capture_output=True, text=True, check=True).stdout
    script_events = [e for line in out.splitlines() for e in json.loads(line).get("events", [])]
    m = kvtier.Manager(capacity=8, block_size=4, device="host", backend="native")
    import uuid
    p = uuid.uuid4()
    m.use(1, [11, 22, p], token_ids=[[1, 2, 3, 4], [5, 6, 7, 8]])
    m.finalize_blocks(1, 0, 8)
    m.deref(1, [p, 22, 11])
    assert m.take_events() == script_events
    assert script_events, "the script published something to compare"


def test_callbacks_and_the_iterator_see_every_event():
    m = kvtier.Manager(capacity=16, block_size=4, device="host", backend="kvbm")
    seen = []
    m.add_event_callback(seen.append)
    r = m.add_request(list(range(9)))
    m.allocate(r)
    assert len(seen) == 1, "delivered right after the call that made it"
    m.finish(r)
    queued = list(m.events())
    assert queued == seen
    assert list(m.events()) == []
    assert m.remove_event_callback(seen.append) is False  # a new bound method each time: not the same object
    callback = seen.append
    m.add_event_callback(callback)
    assert m.remove_event_callback(callback)


def test_a_failing_callback_raises_after_the_call_is_done():
    m = kvtier.Manager(capacity=16, block_size=4, device="host", backend="kvbm")
    others = []

    def broken(event):
        raise RuntimeError("callback failed")

    m.add_event_callback(broken)
    m.add_event_callback(others.append)
    r = m.add_request(list(range(8)))
    with pytest.raises(RuntimeError, match="callback failed"):
        m.allocate(r)
    assert r.allocated_tokens == 8, "the allocation itself happened"
    assert len(others) == 1, "every callback was still called"


def test_the_queue_is_bounded_and_counts_drops():
    m = kvtier.Manager(capacity=64, block_size=4, device="host", backend="kvbm", max_pending_events=2)
    for i in range(5):
        m.allocate(m.add_request([i * 100 + t for t in range(4)]))
    assert len(m.take_events()) == 2
    assert m.metrics()["events_dropped"] == 3


@pytest.mark.skipif(not kvtier.has_zmq, reason="built without libzmq")
def test_the_publisher_sends_vllm_batches_from_python():
    zmq = pytest.importorskip("zmq")
    msgpack = pytest.importorskip("msgpack")
    publisher = kvtier.ZmqEventPublisher("tcp://127.0.0.1:*", replay_endpoint="tcp://127.0.0.1:*", topic="kv")
    ctx = zmq.Context()
    sub = ctx.socket(zmq.SUB)
    sub.setsockopt(zmq.SUBSCRIBE, b"")
    sub.connect(publisher.endpoint)
    m = kvtier.Manager(capacity=16, block_size=4, device="host", backend="kvbm", publishers=[publisher])
    # PUB drops messages until the subscription has arrived: send probes until one gets through.
    received = None
    for i in range(100):
        r = m.add_request(list(range(4 * i, 4 * i + 4)))  # new blocks each time: every probe publishes a batch
        m.allocate(r)
        m.finish(r)
        publisher.flush()
        if sub.poll(100):
            received = sub.recv_multipart()
            break
    assert received is not None, "no batch arrived"
    topic, seq, payload = received
    assert topic == b"kv" and len(seq) == 8
    ts, events, rank = msgpack.unpackb(payload, raw=False)
    stored = [e for e in events if e["type"] == "BlockStored"]
    assert rank == 0 and stored and stored[0]["medium"] == "GPU"
    assert stored[0]["block_size"] == 4
    publisher.drain()
    assert publisher.stats()["batches_sent"] >= 1 and publisher.stats()["batches_dropped"] == 0
    sub.close()
    ctx.term()


@pytest.mark.skipif(not kvtier.has_zmq, reason="built without libzmq")
def test_a_publisher_with_a_bad_endpoint_is_a_config_error():
    with pytest.raises(kvtier.ConfigError):
        kvtier.ZmqEventPublisher("tcp://no-such-host.invalid:5557")


@pytest.mark.skipif(not kvtier.has_zmq, reason="built without libzmq")
@pytest.mark.parametrize("replay_format, frames", [("current", 4), ("pre-45177", 3)])
def test_the_publishers_replay_format_and_endpoint_mode_from_python(replay_format, frames):
    zmq = pytest.importorskip("zmq")
    publisher = kvtier.ZmqEventPublisher("tcp://127.0.0.1:*", replay_endpoint="tcp://127.0.0.1:*", topic="kv",
                                         replay_format=replay_format)
    assert publisher.endpoint_mode == "bind"
    m = kvtier.Manager(capacity=16, block_size=4, device="host", backend="kvbm", publishers=[publisher])
    m.allocate(m.add_request(list(range(4))))
    publisher.flush()
    publisher.drain()
    ctx = zmq.Context()
    dealer = ctx.socket(zmq.DEALER)
    dealer.setsockopt(zmq.LINGER, 0)
    dealer.connect(publisher.replay_endpoint)
    dealer.send_multipart([b"", (0).to_bytes(8, "big")])
    assert dealer.poll(5000)
    batch = dealer.recv_multipart()
    assert len(batch) == frames and (frames == 3 or batch[1] == b"kv")
    assert dealer.poll(5000)
    end = dealer.recv_multipart()
    assert len(end) == frames and end[-2] == (-1).to_bytes(8, "big", signed=True) and end[-1] == b""
    stats = publisher.stats()
    assert stats["replays_abandoned"] == 0
    dealer.close()
    ctx.term()
    with pytest.raises(kvtier.ConfigError, match="replay format"):
        kvtier.ZmqEventPublisher("tcp://127.0.0.1:*", replay_format="v2")
    with pytest.raises(kvtier.ConfigError, match="endpoint mode"):
        kvtier.ZmqEventPublisher("tcp://127.0.0.1:*", endpoint_mode="both")
