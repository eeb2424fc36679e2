"""A cold read for the engine benches (kvtier.vllm.bench, kvtier.sglang.bench):
what a restart after the page cache was dropped would read from the disk."""

from __future__ import annotations

import os


def drop_page_cache(directory: str) -> str:
    """Drops the page cache (root), or evicts the files under `directory` from it; which one it did."""
    os.sync()
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("1\n")
        return "drop_caches"
    except OSError:
        for root, _, files in os.walk(directory):
            for name in files:
                fd = os.open(os.path.join(root, name), os.O_RDONLY)
                try:
                    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                finally:
                    os.close(fd)
        return "fadvise"
