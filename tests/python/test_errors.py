"""Errors come out as kvtier's Python exceptions with the library's messages,
and a refused call leaves the manager exactly as it was."""
import uuid

import pytest

import kvtier


def snapshot(m, owners):
    return m.metrics(), {o: list(m.block_table(o)) for o in owners if m.has_owner(o)}, m.take_events()


def test_the_exception_hierarchy():
    assert issubclass(kvtier.ContractError, kvtier.Error)
    assert issubclass(kvtier.ConfigError, kvtier.Error) and issubclass(kvtier.ConfigError, ValueError)
    assert issubclass(kvtier.AllocationError, MemoryError)
    assert issubclass(kvtier.TransferError, kvtier.Error) and issubclass(kvtier.CudaError, kvtier.Error)
    assert issubclass(kvtier.InvariantError, RuntimeError) and not issubclass(kvtier.InvariantError, kvtier.Error)


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"backend": "vllm"}, 'backend must be "native" or "kvbm"'),
        ({"eviction": "lru"}, "eviction applies to the kvbm backend only"),
        ({"backend": "kvbm", "eviction": "fifo"}, "fifo"),
        ({"dtype": "int4"}, "int4"),
        ({"layout": "diagonal"}, "diagonal"),
        ({"verify_swaps": True}, "need the offload tier"),
        ({"block_size": 1}, "tokens per block must be at least 2"),
        ({"capacity": 0}, "capacity"),
        ({"head_dim": 0}, "dimensions must be non-zero"),
    ],
)
def test_impossible_configurations_are_config_errors(settings, message):
    settings.setdefault("device", "host")
    with pytest.raises(kvtier.ConfigError, match=message):
        kvtier.Manager(**settings)


def test_an_unknown_device_is_a_config_error():
    with pytest.raises(kvtier.ConfigError, match="tpu"):
        kvtier.Manager(device="tpu")


def test_cuda_without_a_device_is_a_config_error():
    if kvtier.cuda_device_count() > 0:
        pytest.skip("a CUDA device is present")
    with pytest.raises(kvtier.ConfigError):
        kvtier.Manager(device="cuda")


def test_a_contract_violation_changes_nothing():
    m = kvtier.Manager(capacity=32, block_size=4, device="host")
    r = m.add_request(list(range(10)))
    assert m.allocate(r).ready
    m.finalize(r, 8)
    m.take_events()
    before = snapshot(m, [r.owner])
    # Promote of a partial block the owner does not hold: the library refuses it.
    with pytest.raises(kvtier.ContractError) as error:
        m.promote(r.owner, uuid.uuid4(), 999)
    assert str(error.value), "the library's message comes through"
    with pytest.raises(kvtier.ContractError, match="computed tokens must stay within"):
        m.finalize(r, 4)
    with pytest.raises(kvtier.ContractError, match="past the sequence length"):
        m.allocate(r, 11)
    with pytest.raises(kvtier.ContractError, match="unknown owner"):
        m.block_table(12345)
    with pytest.raises(kvtier.ContractError):
        m.deref(r.owner, [uuid.uuid4()])
    assert snapshot(m, [r.owner]) == before
    m.audit()


def test_a_request_of_another_manager_is_refused():
    a = kvtier.Manager(capacity=8, block_size=4, device="host")
    b = kvtier.Manager(capacity=8, block_size=4, device="host")
    r = a.add_request([1, 2, 3])
    with pytest.raises(kvtier.ContractError, match="another manager"):
        b.allocate(r)
    assert b.metrics()["active"] == 0


def test_bad_values_are_type_errors():
    m = kvtier.Manager(capacity=8, block_size=4, device="host")
    with pytest.raises(TypeError):
        m.use(1, ["not a block"])
    with pytest.raises(TypeError):
        m.add_request([1, -2, 3])
    with pytest.raises(TypeError):
        m.swap_in([(1, 2, 3, 4)])
    with pytest.raises(kvtier.ContractError, match="at least one prompt token"):
        m.add_request([])
    with pytest.raises(kvtier.ContractError, match="layer 5"):
        m.kv_cache(5)
    assert m.metrics()["active"] == 0


def test_finished_requests_cannot_come_back():
    m = kvtier.Manager(capacity=8, block_size=4, device="host")
    r = m.add_request([1, 2, 3, 4, 5])
    assert m.allocate(r).ready
    m.finish(r)
    with pytest.raises(kvtier.ContractError, match="finished"):
        m.allocate(r)
    with pytest.raises(kvtier.ContractError, match="finished"):
        m.preempt(r)
