"""kvtier.Manager as a careless or hostile user calls it (issue 23). Every case
runs in its own interpreter, so a segfault or an abort is a failed test (exit
status), not a dead test run; each asserts the exception type, its message and
that the manager's state did not change.
"""
import subprocess
import sys
import textwrap

import pytest

PRELUDE = '''
import gc, sys, uuid, weakref
import numpy as np
import kvtier

def raises(kind, match, call, *args, **kwargs):
    try:
        call(*args, **kwargs)
    except kind as error:
        assert match in str(error), f"{kind.__name__} without {match!r}: {error}"
        assert "bad_cast" not in str(error), error
        return error
    except BaseException as error:
        raise AssertionError(f"expected {kind.__name__}({match!r}), got {type(error).__name__}: {error}")
    raise AssertionError(f"expected {kind.__name__}({match!r}), nothing raised")

def manager(**kw):
    kw.setdefault("capacity", 64)
    kw.setdefault("block_size", 4)
    kw.setdefault("device", "host")
    return kvtier.Manager(**kw)

def prefill(m, r):
    assert m.allocate(r).ready
    m.finalize(r, len(r))

def allocate_all(m, r):
    """Allocates all of r, waiting for swap-outs that make room; asserts it fits."""
    while (result := m.allocate(r).result) == "blocked_on_offload":
        m.collect_offloads(wait=True)
    assert result == "ready", result

def state(m):
    """What a refused call must leave as it was."""
    return (m.metrics(), sorted(m.owners()), [list(m.block_table(o)) for o in sorted(m.owners())])
'''


def run_case(body, timeout=120):
    code = PRELUDE + textwrap.dedent(body) + '\nprint("case passed")\n'
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0 and "case passed" in done.stdout, (
        f"exit status {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    )


# --- Crash: None as a publisher ------------------------------------------------------------------


@pytest.mark.parametrize("publisher", ["None", "1", "'tcp://127.0.0.1:5557'", "object()"])
def test_a_publisher_that_is_not_one_is_a_type_error_not_a_segfault(publisher):
    run_case(f"""
        raises(TypeError, "publishers must be kvtier.ZmqEventPublisher", kvtier.Manager, device="host",
               publishers=[{publisher}])
        raises(TypeError, "publishers", kvtier.Manager, device="host", publishers=[{publisher}, {publisher}])
    """)


# --- Silent wrong result: an `out` that would be converted --------------------------------------


def test_paged_attention_refuses_an_out_it_would_copy_and_writes_a_good_one():
    run_case("""
        m = manager(capacity=8, layers=1, kv_heads=1, head_dim=8, dtype="fp32")
        r = m.add_request(list(range(8)))
        prefill(m, r)
        k, v = (np.from_dlpack(t) for t in m.kv_cache(0))
        k[...] = 1.0
        v[...] = 2.0
        q = np.ones((1, 1, 8), np.float32)
        tables = np.from_dlpack(m.block_tables([r]))
        lens = np.array([8], np.int32)
        for bad in (np.zeros((1, 1, 8), np.float64),             # another dtype
                    np.zeros((1, 1, 16), np.float32)[:, :, ::2],   # strided
                    np.zeros((1, 1, 8), np.float16)):              # a narrower float
            before = bad.copy()
            raises(TypeError, "out must be a writable, C-contiguous float32 array", m.paged_attention, q, tables,
                   lens, bad, 0)
            assert np.array_equal(bad, before), "nothing written anywhere"
        readonly = np.zeros((1, 1, 8), np.float32)
        readonly.flags.writeable = False
        raises(TypeError, "out must be", m.paged_attention, q, tables, lens, readonly, 0)
        out = np.zeros((1, 1, 8), np.float32)
        m.paged_attention(q, tables, lens, out, 0)
        assert np.allclose(out, 2.0), out  # every V is 2: so is their weighted mean
    """)


# --- Leak: callbacks that refer to their manager, and close() ------------------------------------


def test_a_manager_whose_callback_refers_to_it_is_collected():
    run_case("""
        class Sentinel: pass
        sentinel = Sentinel()
        alive = weakref.ref(sentinel)
        m = manager()
        m.add_event_callback(lambda event, m=m, s=sentinel: m.metrics())
        prefill(m, m.add_request(list(range(8))))
        del m, sentinel
        gc.collect()
        assert alive() is None, "the cycle manager -> callback -> manager was collected"
    """)


def test_dropped_managers_with_callback_cycles_give_their_memory_back():
    run_case("""
        def rss_mib():
            with open("/proc/self/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1]) / 1024

        base = rss_mib()
        for _ in range(4):
            # 16384 pages of 16 KiB: 256 MiB each, zero-filled (resident).
            m = manager(capacity=16384, block_size=16)
            m.add_event_callback(lambda event, m=m: None)
            del m
            gc.collect()
        grown = rss_mib() - base
        assert grown < 300, f"RSS grew {grown:.0f} MiB over 4 dropped 256 MiB managers"
    """, timeout=300)


def test_close_frees_the_manager_refuses_later_calls_and_keeps_views_valid():
    run_case("""
        m = manager(backend="kvbm", host_blocks=16)
        r = m.add_request(list(range(8)))
        prefill(m, r)
        m.write_pattern(r)
        k, v = (np.from_dlpack(t) for t in m.kv_cache(0, as_bytes=True))
        page = m.block_table(r)[0]
        expected = bytes(k[page].tobytes())
        m.add_event_callback(lambda e: None)
        assert not m.closed
        m.close()
        assert m.closed
        m.close()  # idempotent
        for call in (m.metrics, lambda: m.allocate(r), lambda: m.add_request([1]), lambda: m.kv_cache(0),
                     lambda: m.take_events(), lambda: m.capacity, lambda: m.add_event_callback(print),
                     lambda: m.collect_offloads()):
            raises(kvtier.ContractError, "the manager is closed", call)
        assert bytes(k[page].tobytes()) == expected, "a view outlives close(): the pages live on"
        with manager() as c:
            assert c.metrics()["capacity"] == 64
        assert c.closed
        raises(kvtier.ContractError, "closed", c.metrics)
    """)


# --- Handles of another manager ------------------------------------------------------------------


def test_prefix_pins_of_one_manager_are_refused_by_another():
    run_case("""
        a, b = manager(backend="kvbm", host_blocks=16), manager(backend="kvbm", host_blocks=16)
        ra, rb = a.add_request(list(range(8))), b.add_request(list(range(8)))
        prefill(a, ra); prefill(b, rb)
        a.finish(ra); b.finish(rb)
        pins_a = a.pin_prefix(ra.plhs)
        pins_b = b.pin_prefix(rb.plhs)
        assert pins_a is not None and pins_b is not None
        before = state(b)
        raises(kvtier.ContractError, "the prefix pins belong to another manager", b.release_prefix_pins, pins_a)
        raises(kvtier.ContractError, "belong to another manager", b.swap_in, rb.plhs, pins_a)
        assert state(b) == before, "b changed nothing"
        a.release_prefix_pins(pins_a)  # still a's, still live
        b.release_prefix_pins(pins_b)
        # Nothing stays pinned: a's whole capacity is allocatable again.
        allocate_all(a, a.add_request(list(range(1000, 1000 + 4 * 64))))
    """)


def test_reservations_of_one_manager_are_refused_by_another():
    run_case("""
        a, b = manager(backend="kvbm", capacity=8), manager(backend="kvbm", capacity=8)
        decode = a.reserve_decode(2)
        before = state(b)
        raises(kvtier.ContractError, "the decode reservation belong", b.release_decode, decode)
        raises(kvtier.ContractError, "belong to another manager", b.decode_use, 5, decode, [uuid.uuid4()])
        assert state(b) == before
        a.release_decode(decode)
        na, nb = manager(backend="native"), manager(backend="native")
        r = na.add_request(list(range(9)), max_output_tokens=2)
        reservation = na.reserve_destination(r)
        raises(kvtier.ContractError, "the destination reservation belong", nb.activate_destination, reservation)
        raises(kvtier.ContractError, "belong to another manager", nb.cancel_destination, reservation)
        assert reservation.live
        na.activate_destination(reservation)
        assert r.allocated_tokens == 9
    """)


# --- Unbounded memory ------------------------------------------------------------------------------


def test_block_tables_wider_than_the_pool_are_refused_before_allocating():
    run_case("""
        m = manager(capacity=8)
        r = m.add_request(list(range(8)))
        prefill(m, r)
        raises(ValueError, "max_blocks 4294967295 is more than the pool's 8 pages", m.block_tables, [r],
               max_blocks=2**32 - 1)
        assert np.from_dlpack(m.block_tables([r], max_blocks=8)).shape == (1, 8)
    """)


def test_a_pool_larger_than_the_machine_is_an_allocation_error():
    run_case("""
        total = 0
        with open("/proc/meminfo") as f:
            total = int(f.readline().split()[1]) * 1024
        pages = 2 * total // (2 << 20) + 1  # 2 MiB pages: twice the machine
        raises(kvtier.AllocationError, "exceeds 90% of the", kvtier.Manager, device="host", capacity=pages,
               layers=32, kv_heads=8, head_dim=128, block_size=16)
        raises(kvtier.AllocationError, "exceeds 90% of the", kvtier.Manager, device="host", capacity=8,
               layers=32, kv_heads=8, head_dim=128, block_size=16, host_blocks=pages)
    """)


def test_an_output_length_past_the_token_limit_is_refused():
    run_case("""
        m = manager()
        for n in (2**63, 2**64 - 1):
            raises(kvtier.ContractError, "longer than the", m.add_request, [1, 2, 3], max_output_tokens=n)
    """)


# --- Lower: bookkeeping, types, native keys, owner ids -----------------------------------------------


def test_a_raising_callback_skips_no_python_side_bookkeeping():
    run_case("""
        m = manager(backend="native")
        def broken(event):
            raise RuntimeError("callback failed")
        m.add_event_callback(broken)
        r = m.add_request(list(range(8)), max_output_tokens=1)
        assert m.allocate(r).ready
        raises(RuntimeError, "callback failed", m.finalize, r, 8)  # native: the blocks become visible (Stored)
        assert r.computed_tokens == 8, "finalize happened, and the request knows it"
        m.remove_event_callback(broken)
        m.finalize(r, 8)  # no step back: the bookkeeping and the manager agree
        m.finish(r)
        assert r.finished and r.computed_tokens == 0
    """)


def test_a_raising_callback_gives_back_what_the_call_handed_out():
    run_case("""
        m = manager(backend="kvbm", eviction="lru", capacity=8)
        first = m.add_request(list(range(32)))  # all 8 pages, cached once finished
        prefill(m, first)
        m.finish(first)
        def broken(event):
            raise RuntimeError("callback failed")
        m.add_event_callback(broken)
        other = m.add_request(list(range(1000, 1008)))
        # Its two fresh blocks evict two of first's (Removed events): the callback raises.
        raises(RuntimeError, "callback failed", m.reserve_destination, other)
        m.remove_event_callback(broken)
        allocate_all(m, m.add_request(list(range(2000, 2032))))  # all 8 pages: nothing stayed reserved
    """)


def test_wrong_python_values_are_type_and_value_errors():
    run_case("""
        m = manager(backend="kvbm")
        r = m.add_request(list(range(8)))
        prefill(m, r)
        before = state(m)
        raises(TypeError, "an owner is a kvtier.Request or an int owner id", m.block_table, "x")
        raises(TypeError, "an owner", m.block_table, 1.5)
        raises(ValueError, "an owner id must be in [0, 2**64)", m.block_table, -1)
        raises(TypeError, "a PLH", m.pin_prefix, ["x"])
        raises(TypeError, "a PLH's low word must be an int", m.pin_prefix, [(1, "a")])
        raises(ValueError, "a PLH's hash must be in [0, 2**64)", m.pin_prefix, [(-1, None, 0)])
        raises(ValueError, "a block hash must be in [0, 2**64)", m.use, 1, [-5])
        raises(ValueError, "a block hash", m.use, 1, [2**64])
        raises(TypeError, "a block is an int", m.use, 1, ["x"])
        raises(TypeError, "reserve_destination takes a kvtier.Request", m.reserve_destination, 5)
        assert state(m) == before
    """)


@pytest.mark.parametrize("keys", ["request", "hashes"])
def test_native_swap_in_matches_a_request_or_its_block_hashes(keys):
    run_case(f"""
        m = manager(backend="native", capacity=8, host_blocks=32, verify_swaps=True)
        first = m.add_request(list(range(16)))
        prefill(m, first)
        m.write_pattern(first)
        hashes = first.blocks
        m.finish(first)
        other = m.add_request(list(range(1000, 1032)))
        while m.allocate(other).result == "blocked_on_offload":
            m.collect_offloads(wait=True)
        m.collect_offloads(wait=True)
        assert all(m.is_host_cached(h) for h in hashes) and not any(m.is_cached(h) for h in hashes)
        m.finish(other)
        keys = first if "{keys}" == "request" else hashes
        start = m.swap_in(keys)
        while start["status"] == "blocked_on_offload":
            m.collect_offloads(wait=True)
            start = m.swap_in(keys)
        assert start["status"] == "scheduled" and start["count"] == 4, start
        assert m.register_swap_in(start["swap_in_id"]) == {{"failed": False, "registered": 4}}
        assert all(m.is_cached(h) for h in hashes)
        pins = m.pin_prefix(keys)
        assert pins is not None, "the registered blocks are pinned by the same keys"
        m.release_prefix_pins(pins)
        again = m.add_request(list(range(16)))
        prefill(m, again)
        assert m.verify(again) == []
    """)


def test_move_block_owners_may_not_take_a_request_owner_id():
    run_case("""
        m = manager()
        r1, r2 = m.add_request([1, 2, 3]), m.add_request([4, 5, 6])
        assert r1.owner >= 2**63 and r2.owner >= 2**63 and r1.owner != r2.owner
        prefill(m, r1)
        before = state(m)
        for owner in (r1.owner, r2.owner, 2**63, 2**64 - 1):
            raises(kvtier.ContractError, "is a request's: MoveBlock-level owners are below 2^63", m.use, owner, [77])
        raises(kvtier.ContractError, "is a request's", m.deref, r1.owner, [uuid.uuid4()])
        raises(kvtier.ContractError, "is a request's", m.finalize_blocks, r1.owner, 0, 4)
        assert state(m) == before
        assert m.use(2**63 - 1, [77]).ready
    """)
