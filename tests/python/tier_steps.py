"""Steps the tier tests share (G3 disk, G4 shared): a prefill that waits for
the swap-outs making room, and a swap-in retried past blocked offloads."""


def prefill(m, r):
    """Allocates all of r, collecting swap-outs that block, then finalizes it."""
    while True:
        result = m.allocate(r).result
        if result != "blocked_on_offload":
            break
        m.collect_offloads(wait=True)
    assert result == "ready"
    m.finalize(r, len(r))


def swap_in(m, keys):
    """Starts a swap-in of keys, collecting swap-outs while it is blocked on them."""
    start = m.swap_in(keys)
    while start["status"] == "blocked_on_offload":
        m.collect_offloads(wait=True)
        start = m.swap_in(keys)
    return start
