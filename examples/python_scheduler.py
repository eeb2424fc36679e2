"""A continuous-batching scheduler loop over kvtier (docs/python.md)."""
import kvtier

with kvtier.Manager(backend="native", capacity=48, block_size=16, layers=2, kv_heads=2, head_dim=64, dtype="fp16") as m:
    system = list(range(1000, 1064))  # a 64-token system prompt every request shares
    waiting = [m.add_request(system + [i] * 20, max_output_tokens=24) for i in range(24)]
    running, finished, cached_tokens, preemptions, events = [], 0, 0, 0, 0
    while waiting or running:
        budget = 512  # prompt tokens this step may compute
        while waiting and m.prefill_cost(waiting[0]).new_tokens <= budget:
            cost = m.prefill_cost(waiting[0])
            if not m.allocate(waiting[0]):  # capacity_exhausted: wait for pages
                break
            r = waiting.pop(0)
            m.finalize(r, len(r))  # the model wrote its prompt's K/V: its blocks become reusable
            running.append(r)
            budget -= cost.new_tokens
            cached_tokens += cost.cached_tokens
        tables = m.block_tables(running)  # int32 [len(running), max_blocks] on the manager's device
        k, v = m.kv_cache(0)  # layer 0's pages: torch.from_dlpack(k) on CUDA, numpy.from_dlpack on host
        for r in list(running):
            step = m.generate(r)  # one output token
            if step.result == "capacity_exhausted":  # the pool is full: preempt, recompute later
                running.remove(r)
                m.preempt(r)
                waiting.insert(0, r)
                preemptions += 1
            elif step.finished:  # its last token released every block
                running.remove(r)
                finished += 1
        events += len(m.take_events())  # drain the step's KV events (a router would index them)
    print(f"finished {finished}, prompt tokens from cache {cached_tokens}, preemptions {preemptions}, events {events}")
    print(m.metrics())
