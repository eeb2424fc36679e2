"""Helpers of the SGLang tests: a rank's HiCache path (kvtier.sglang.cpu_controller,
which the bench uses too), a prompt's pages written and prefetched back, and
the records inside a G3 file or SGLang's file backend's directory. Run as a
script it is the other process of a test: it prefetches a prompt through a
new controller and writes the pages it got to a file."""
import json
import os
import pathlib
import sys

from kvtier.sglang.cpu_controller import KVTIER_BACKEND, CpuHiCache, Geometry

GEOMETRY = Geometry()


def kvtier_config(**options):
    return dict(KVTIER_BACKEND, **options)


def prompt(n_pages, seed, page_size=GEOMETRY.page_size):
    return [(seed * 7919 + i) % 150_000 for i in range(n_pages * page_size)]


def write_prompt(cache, tokens, seed):
    """Fills host pages for `tokens`, backs them up through SGLang's backup thread; (tokens written, page bytes)."""
    indices = cache.allocate(len(tokens) // cache.geometry.page_size)
    cache.fill(indices, seed)
    pages = cache.page_bytes_of(indices)
    written = cache.backup(indices, tokens)
    cache.free(indices)
    return written, pages


def read_prompt(cache, tokens):
    """SGLang's prefetch of `tokens`: (tokens completed, the pages it put in the host pool)."""
    done, indices = cache.prefetch(tokens)
    if indices is None:
        return 0, []
    pages = cache.page_bytes_of(indices)
    cache.free(indices)
    return done, pages


def page_keys(tokens, page_size=GEOMETRY.page_size):
    return CpuHiCache.page_keys(tokens, page_size)


def damage_g3_page(directory, key, offset=100):
    """Flips one byte of the payload of `key`'s record in the G3 file under `directory` (its 4 KiB header names
    the whole key)."""
    (path,) = pathlib.Path(directory).glob("kvtier-sglang-kv-*.tier")
    data = path.read_bytes()
    at = data.find(key.encode())
    assert at >= 0, "no record of the key in the tier file"
    payload = at // 4096 * 4096 + 4096
    with open(path, "r+b") as f:
        f.seek(payload + offset)
        byte = f.read(1)
        f.seek(payload + offset)
        f.write(bytes([byte[0] ^ 0x40]))


def truncate_g3_at(directory, key):
    """Cuts the G3 file in the middle of `key`'s record's payload (a torn tail)."""
    (path,) = pathlib.Path(directory).glob("kvtier-sglang-kv-*.tier")
    data = path.read_bytes()
    at = data.find(key.encode())
    assert at >= 0
    os.truncate(path, at // 4096 * 4096 + 4096 + 64)


def file_backend_page(directory, key):
    """SGLang's file backend's file of `key`."""
    (path,) = pathlib.Path(directory).glob(f"{key}_*.bin")
    return path


def flip_byte(path, offset=100):
    with open(path, "r+b") as f:
        f.seek(offset)
        byte = f.read(1)
        f.seek(offset)
        f.write(bytes([byte[0] ^ 0x40]))


if __name__ == "__main__":
    # python sglang_pages.py LAYOUT CONFIG_JSON TOKENS_JSON OUT: the other process of a test.
    layout, config, tokens, out = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3]), sys.argv[4]
    cache = CpuHiCache(GEOMETRY, layout, "dynamic", config)
    done, pages = read_prompt(cache, tokens)
    cache.close()
    pathlib.Path(out).write_text(json.dumps({"done": done, "pages": [p.hex() for p in pages]}))
