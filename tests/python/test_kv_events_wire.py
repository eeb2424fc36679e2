"""KV events on the wire, read as a router written for vLLM reads them.

`kvtier script --kv-events` publishes one batch per operation line; a SUB
socket (pyzmq) and a DEALER on the replay socket receive them, msgpack
decodes them, and every event must equal the one the script itself reports
for the same line. A subscriber too slow to keep up loses batches on the live
socket and gets every one of them back through the replay socket.
"""
import json
import os
import socket
import subprocess
import time

import msgpack
import pytest
import zmq

KVTIER = os.environ.get("KVTIER_BIN", "build/release/kvtier")
# Every test here runs the CLI; without it they skip (a failed one left ZMQ sockets that kept the interpreter from exiting).
pytestmark = pytest.mark.skipif(not os.access(KVTIER, os.X_OK), reason=f"no kvtier CLI at {KVTIER} (set KVTIER_BIN)")
SCRIPTS = os.path.join(os.path.dirname(__file__), "..", "scripts")
MEDIUM = {"device": "GPU", "host_pinned": "CPU_PINNED"}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def replay_from(ctx, endpoint, start, topic=b"kv", current=True):
    """Every buffered batch from `start` on, as {seq: payload}, through a DEALER
    reading vLLM's replay answers: since vLLM PR #45177 ["", topic, seq, payload]
    and the end marker ["", "", -1, ""]; before it (current=False) without the topic."""
    dealer = ctx.socket(zmq.DEALER)
    dealer.setsockopt(zmq.LINGER, 0)
    dealer.setsockopt(zmq.SNDTIMEO, 10000)  # a send with no peer yet waits, never forever
    dealer.connect(endpoint)
    dealer.send_multipart([b"", start.to_bytes(8, "big")])
    batches = {}
    while True:
        assert dealer.poll(10000), f"the replay socket stopped answering after {len(batches)} batches"
        frames = dealer.recv_multipart()
        assert len(frames) == (4 if current else 3), [len(f) for f in frames]
        if current:
            empty, frame_topic, seq, payload = frames
        else:
            empty, seq, payload = frames
            frame_topic = None
        assert empty == b""
        number = int.from_bytes(seq, "big", signed=True)
        if number == -1:
            assert payload == b"" and frame_topic in (b"", None)
            break
        assert frame_topic in (topic, None), frame_topic
        batches[number] = payload
    dealer.close()
    return batches


def decode(payload, rank=0):
    ts, events, batch_rank = msgpack.unpackb(payload, raw=False)
    assert isinstance(ts, float) and ts > 1.6e9
    assert batch_rank == rank
    return events


def expected_wire_event(event, block_size):
    """What vLLM's types hold for one of the script's events."""
    if event["type"] == "stored":
        tokens = [t for block in event.get("token_ids", []) for t in block]
        return {"type": "BlockStored", "block_hashes": [b["hash"] for b in event["blocks"]],
                "parent_block_hash": event["parent"], "token_ids": tokens, "block_size": block_size,
                "lora_id": None, "medium": MEDIUM[event["tier"]], "lora_name": None}
    return {"type": "BlockRemoved", "block_hashes": event["hashes"], "medium": MEDIUM[event["tier"]]}


def run_script(script, extra):
    pub, rep = free_port(), free_port()
    ctx = zmq.Context()
    sub = ctx.socket(zmq.SUB)
    sub.setsockopt(zmq.SUBSCRIBE, b"kv")
    sub.setsockopt(zmq.LINGER, 0)
    sub.connect(f"tcp://127.0.0.1:{pub}")
    proc = subprocess.Popen(
        [KVTIER, "script", script, "--kv-events", f"tcp://127.0.0.1:{pub}",
         "--kv-events-replay", f"tcp://127.0.0.1:{rep}", "--kv-events-topic", "kv", "--kv-events-linger", "4", *extra],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return ctx, sub, proc, f"tcp://127.0.0.1:{rep}"


def operation_lines(script):
    """How many answers a script gets: one per line that is not blank or a comment."""
    with open(script) as f:
        return sum(1 for line in f if line.strip() and not line.lstrip().startswith("#"))


def answers_then_replay(ctx, proc, script, replay_endpoint, topic=b"kv", current=True):
    """The script's answers (all written before its sockets linger), then every
    batch they report from the replay socket: asked again until the sending
    thread has buffered them all (a loaded machine may lag)."""
    lines = [json.loads(proc.stdout.readline()) for _ in range(operation_lines(script))]
    expected = sum(1 for line in lines if line.get("events"))
    deadline = time.time() + 20
    while True:
        replayed = replay_from(ctx, replay_endpoint, 0, topic=topic, current=current)
        if len(replayed) >= expected or time.time() > deadline:
            return lines, replayed
        time.sleep(0.2)


def test_every_batch_on_the_wire_equals_the_events_the_script_reports():
    script = os.path.join(SCRIPTS, "offload_swap_cycle.jsonl")
    ctx, sub, proc, replay_endpoint = run_script(script, [])
    lines, replayed = answers_then_replay(ctx, proc, script, replay_endpoint)
    live = {}
    while sub.poll(200):  # what reached the live socket meanwhile (the first batches may precede the subscription)
        topic, seq, payload = sub.recv_multipart()
        assert topic == b"kv" and len(seq) == 8
        live[int.from_bytes(seq, "big")] = payload
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    block_size = lines[0]["block_size"]
    batches = [line["events"] for line in lines if line.get("events")]
    assert sorted(replayed) == list(range(len(batches))), "sequence numbers run 0, 1, 2, ... one per batch"
    for seq, payload in live.items():
        assert replayed[seq] == payload, "the live and the replayed copy of a batch are the same bytes"
    tiers = set()
    for seq, events in enumerate(batches):
        wire = decode(replayed[seq])
        assert wire == [expected_wire_event(e, block_size) for e in events]
        tiers.update(e["tier"] for e in events)
    assert tiers == {"device", "host_pinned"}  # G1 and G2 both appear: "GPU" and "CPU_PINNED"
    assert f"{len(batches)} batches on tcp://127.0.0.1:" in err
    ctx.destroy(linger=0)


@pytest.mark.parametrize("encoding, medium_g2", [("map", "CPU_PINNED"), ("array", "CPU")])
def test_msgspec_decodes_every_batch_with_vllms_own_types(encoding, medium_g2):
    msgspec = pytest.importorskip("msgspec")
    import vllm_kv_event_types as vllm

    script = os.path.join(SCRIPTS, "offload_swap_cycle.jsonl")
    ctx, sub, proc, replay_endpoint = run_script(
        script, ["--kv-events-encoding", encoding, "--kv-events-medium-g2", medium_g2])
    lines, replayed = answers_then_replay(ctx, proc, script, replay_endpoint)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    block_size = lines[0]["block_size"]
    batches = [line["events"] for line in lines if line.get("events")]
    assert sorted(replayed) == list(range(len(batches)))
    decode_batch = vllm.decoder(encoding)
    media = set()
    for seq, events in enumerate(batches):
        batch = decode_batch.decode(replayed[seq])  # raises on any tag, field or type vLLM would refuse
        assert batch.data_parallel_rank == 0
        decoded = [{"type": type(e).__name__.removeprefix("Array"), **msgspec.structs.asdict(e)} for e in batch.events]
        for got, event in zip(decoded, events, strict=True):
            want = expected_wire_event(event, block_size)
            if event["tier"] == "host_pinned":
                want["medium"] = medium_g2
            assert {k: got.get(k) for k in want} == want  # the array family has no lora_name: None either way
            media.add(got["medium"])
    assert media == {"GPU", medium_g2}
    ctx.destroy(linger=0)


def test_a_slow_subscriber_loses_live_batches_and_catches_up_through_the_replay_socket():
    pub, rep = free_port(), free_port()
    ctx = zmq.Context()
    sub = ctx.socket(zmq.SUB)
    sub.setsockopt(zmq.RCVHWM, 1)
    sub.setsockopt(zmq.SUBSCRIBE, b"")
    sub.connect(f"tcp://127.0.0.1:{pub}")
    proc = subprocess.Popen(
        [KVTIER, "replay", "--device", "host", "--capacity", "512", "--kv-events", f"tcp://127.0.0.1:{pub}",
         "--kv-events-replay", f"tcp://127.0.0.1:{rep}", "--kv-events-hwm", "1", "--kv-events-linger", "4"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(2.0)  # not reading: the replay runs and the high-water marks drop batches for us
    live = []
    while sub.poll(200):
        _, seq, payload = sub.recv_multipart()
        live.append(int.from_bytes(seq, "big"))
    replayed = replay_from(ctx, f"tcp://127.0.0.1:{rep}", 0, topic=b"kv-events")
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    sent = int(out.split("events in ")[1].split(" batches")[0])
    assert live == sorted(live) and len(live) < sent, "the slow subscriber missed batches"
    assert sorted(replayed) == list(range(sent)), "the replay socket gave every batch back"
    for payload in replayed.values():
        for event in decode(payload):
            assert event["type"] in ("BlockStored", "BlockRemoved") and event["medium"] == "GPU"
    ctx.destroy(linger=0)


def test_a_bad_endpoint_is_a_clear_error():
    # A remote host is connected to, as vLLM does; one that does not resolve is refused.
    proc = subprocess.run([KVTIER, "replay", "--kv-events", "tcp://no-such-host.invalid:5557"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "cannot connect the KV event socket" in proc.stderr and "does not resolve" in proc.stderr
    proc = subprocess.run([KVTIER, "replay", "--kv-events", "tcp://no-such-host.invalid:5557", "--kv-events-mode", "bind"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "cannot bind the KV event socket" in proc.stderr


def batch_per_use_script(path, batches):
    """A script of `batches` KVBM Uses, each publishing one batch (it stores a
    block, evicting an older cached one), each followed by a Deref (no event:
    the block stays cached). Returns the number of operation lines."""
    lines = [{"op": "init", "backend": "kvbm", "eviction": "lru", "capacity": 2, "block_size": 4, "device": "host"}]
    for i in range(batches):
        lines.append({"op": "use", "owner": "a", "blocks": [i + 1]})
        lines.append({"op": "deref", "owner": "a", "blocks": [i + 1]})
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    return len(lines)


@pytest.mark.parametrize("replay_format", ["current", "pre-45177"])
def test_a_subscriber_catches_up_on_more_than_ten_thousand_batches_then_gets_the_end_marker(tmp_path, replay_format):
    # Regression (issue 22): past ~1,000 buffered batches the replay lost answers and never sent the end marker.
    script = tmp_path / "many.jsonl"
    lines = batch_per_use_script(script, 10500)
    pub, rep = free_port(), free_port()
    proc = subprocess.Popen(
        [KVTIER, "script", str(script), "--kv-events", f"tcp://127.0.0.1:{pub}", "--kv-events-replay",
         f"tcp://127.0.0.1:{rep}", "--kv-events-topic", "kv@pod-0@model", "--kv-events-buffer", "20000",
         "--kv-events-replay-format", replay_format, "--kv-events-linger", "60"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    answers = 0
    for line in proc.stdout:  # every line answered: every batch is queued
        assert json.loads(line)["ok"], line
        answers += 1
        if answers == lines:
            break
    ctx = zmq.Context()
    try:
        # Answers are written before their batch reaches the sending thread: ask until all are buffered.
        deadline = time.time() + 30
        while True:
            replayed = replay_from(ctx, f"tcp://127.0.0.1:{rep}", 0, topic=b"kv@pod-0@model",
                                   current=replay_format == "current")
            if len(replayed) >= 10500 or time.time() > deadline:
                break
            time.sleep(0.2)
        assert list(replayed) == list(range(10500)), "every batch, in order, none missing"
        for payload in (replayed[0], replayed[10499]):
            assert all(e["type"] in ("BlockStored", "BlockRemoved") for e in decode(payload))
    finally:
        proc.kill()
        proc.wait()
        ctx.destroy(linger=0)


def free_port_pair():
    """A port P with P + 1 free too: where data-parallel ranks 0 and 1 bind."""
    for _ in range(50):
        port = free_port()
        if port >= 65535:
            continue
        try:
            with socket.socket() as s:
                s.bind(("127.0.0.1", port + 1))
            return port
        except OSError:
            continue
    pytest.skip("no two consecutive free ports")


def test_several_instances_publish_as_data_parallel_ranks_on_offset_ports():
    """`--instances 2`: each instance is a DP rank with vLLM's endpoints for it
    (port + rank, for the live and the replay socket), and every batch a rank
    sends carries its rank."""
    pub, rep = free_port_pair(), free_port_pair()
    ctx = zmq.Context()
    proc = subprocess.Popen(
        [KVTIER, "replay", "--device", "host", "--capacity", "512", "--instances", "2",
         "--kv-events", f"tcp://127.0.0.1:{pub}", "--kv-events-replay", f"tcp://127.0.0.1:{rep}",
         "--kv-events-topic", "kv", "--kv-events-linger", "8"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out = ""
        while "wall time:" not in out:  # the report is out (flushed) before the sockets linger
            line = proc.stdout.readline()
            assert line, proc.stderr.read()
            out += line
        time.sleep(1.0)  # the last batches reach the publishers' buffers
        replayed = {rank: replay_from(ctx, f"tcp://127.0.0.1:{rep + rank}", 0) for rank in (0, 1)}
        rest, err = proc.communicate(timeout=60)
        out += rest
        assert proc.returncode == 0, err
        for rank in (0, 1):
            line = [l for l in out.splitlines() if f"127.0.0.1:{pub + rank}," in l and "KV events:" in l]
            assert len(line) == 1, out
            sent = int(line[0].split("events in ")[1].split(" batches")[0])
            events = int(line[0].split("KV events:")[1].split(" events")[0])
            assert sorted(replayed[rank]) == list(range(sent)) and sent > 0
            decoded = [e for payload in replayed[rank].values() for e in decode(payload, rank=rank)]
            assert len(decoded) == events
            assert {e["type"] for e in decoded} <= {"BlockStored", "BlockRemoved"}
            assert any(e["type"] == "BlockStored" and e["token_ids"] for e in decoded)
    finally:
        if proc.poll() is None:
            proc.kill()
        ctx.destroy(linger=0)
