"""The CLI as a careless or hostile user runs it (issue 23): every case is its
own process with a time limit, and must end with exit status 2 and a message
that says what is wrong — no hang, no crash, no run of the OOM killer's, no
output file written. KVTIER_BIN names the binary (scripts/test-python-package.sh
sets it; .ci/run also points it at the ASan build); without one the module skips.
"""
import csv
import json
import os
import shutil
import socket
import subprocess

import pytest

KVTIER = os.environ.get("KVTIER_BIN", "build/release/kvtier")
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
pytestmark = pytest.mark.skipif(not os.access(KVTIER, os.X_OK), reason=f"no kvtier binary at {KVTIER}")

# Generous for sanitizer builds; a hang (issue 23: --output-tokens -1 spun forever) ends here.
LIMIT_S = float(os.environ.get("KVTIER_TEST_LIMIT_S", "120"))


def kvtier(*args, stdin=None):
    try:
        return subprocess.run([KVTIER, *args], capture_output=True, text=True, timeout=LIMIT_S, stdin=stdin)
    except subprocess.TimeoutExpired:
        pytest.fail(f"kvtier {' '.join(args)} did not end within {LIMIT_S} s")


def refused(*args, says, stdin=None, stream="stderr"):
    """Runs kvtier, asserting exit status 2 and `says` in its message."""
    done = kvtier(*args, stdin=stdin)
    assert done.returncode == 2, (done.returncode, done.stdout[-2000:], done.stderr[-2000:])
    message = getattr(done, stream)
    assert says in message, message[-2000:]
    return done


def write(path, text):
    path.write_text(text)
    return str(path)


TRACE_LINE = '{{"timestamp": 0, "input_length": 10, "output_length": {out}, "hash_ids": [1]}}\n'


# --- Hang: lengths whose sum wraps ----------------------------------------------------------


def test_negative_output_tokens_is_refused_not_spun_forever():
    refused("replay", "--device", "host", "--output-tokens", "-1", says="must not be negative")


@pytest.mark.parametrize("out", [2**64 - 1, 2**64 - 5, 2**63])
def test_output_length_near_2_64_in_a_trace_line_is_refused(tmp_path, out):
    trace = write(tmp_path / "t.jsonl", TRACE_LINE.format(out=out))
    refused("replay", "--device", "host", "--trace", trace, says="longer than")


def test_output_tokens_near_2_64_from_the_command_line_is_refused():
    refused("replay", "--device", "host", "--output-tokens", str(2**64 - 1), says="longer than")


def test_a_huge_token_budget_is_refused():
    refused("replay", "--device", "host", "--token-budget", str(2**64 - 1), says="token-budget")


# --- Unbounded memory ------------------------------------------------------------------------


def test_a_trace_without_newlines_stops_at_the_line_limit():
    refused("replay", "--device", "host", "--trace", "/dev/zero", says="67108864-byte limit")


def test_a_script_without_newlines_stops_at_the_line_limit():
    done = refused("script", "/dev/zero", says="67108864-byte limit of a script line", stream="stdout")
    assert '"ok":false' in done.stdout


def test_a_g1_slab_larger_than_the_memory_there_is_is_refused_before_it_is_zeroed():
    done = refused("replay", "--device", "host", "--capacity-fraction", "1", says="exceeds 90% of the")
    assert "bytes" in done.stderr and "GiB" in done.stderr, "names the size asked and the size there is"


def test_a_g2_slab_larger_than_the_memory_there_is_is_refused():
    refused("info", "--device", "host", "--host-blocks", "4000000000", says="exceeds 90% of the")


# --- Numbers with a sign, and values that would be ignored ---------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["replay", "--max-requests", "-1"],
        ["replay", "--token-budget", "-1"],
        ["replay", "--seed", "-1"],
        ["replay", "--attention-every", "-1"],
        ["replay", "--capacity", "-1"],
        ["replay", "--host-blocks", "-1"],
        ["replay", "--sweep-capacity", "64,-1"],
        ["replay", "--kv-events-buffer", "-1"],
        ["replay", "--kv-events-queue", "-1"],
        ["info", "--layers", "-1"],
        ["bench", "alloc", "--rounds", "-1"],
        ["bench", "swap", "--page-bytes", "-4096"],
        ["bench", "swap", "--iterations", "-1"],
    ],
    ids=lambda a: " ".join(a),
)
def test_unsigned_options_refuse_negatives(args):
    refused(*args, says="must not be negative")


@pytest.mark.parametrize("value", ["-1", "0", "nan", "inf", "1.5"])
def test_capacity_fraction_outside_0_1_is_refused(value):
    refused("replay", "--device", "host", "--capacity-fraction", value, says="(0, 1]")


@pytest.mark.parametrize("value", ["-1", "nan", "1e300", "86401"])
@pytest.mark.parametrize("option", ["--kv-events-linger", "--metrics-linger"])
def test_a_negative_nan_or_endless_linger_is_refused(option, value):
    # Issue 31, L10: 1e300 overflowed the sleep's clock into no linger at all.
    refused("replay", option, value, says="number of seconds in [0, 86400]")


@pytest.mark.parametrize("option", ["--json", "--csv", "--trace", "--kv-events", "--kv-events-replay"])
def test_empty_paths_and_endpoints_are_refused(option):
    refused("replay", "--device", "host", option, "", says="must not be empty")


def test_eviction_with_the_native_backend_is_refused():
    refused("replay", "--device", "host", "--backend", "native", "--eviction", "lru", says="kvbm backend only")


def test_an_empty_trace_is_refused(tmp_path):
    refused("replay", "--device", "host", "--trace", write(tmp_path / "e.jsonl", ""), says="holds no requests")
    refused("replay", "--device", "host", "--trace", write(tmp_path / "b.jsonl", "\n  \n"), says="holds no requests")


def test_json_errors_say_what_is_wrong(tmp_path):
    broken = write(tmp_path / "b.jsonl", '{"timestamp": 0, "input_length\n')
    done = refused("replay", "--device", "host", "--trace", broken, says="b.jsonl:1: invalid JSON")
    assert "parse error" in done.stderr
    refused("replay", "--device", "host", "--trace", write(tmp_path / "a.jsonl", "[1]\n"), says="not a JSON object")


@pytest.mark.parametrize("port", ["70000", "65536", "-1", "x", ""])
def test_a_zmq_port_outside_0_65535_is_refused(port):
    refused("replay", "--device", "host", "--kv-events", f"tcp://127.0.0.1:{port}", says="needs a port in 0-65535")


def test_a_refused_run_writes_no_report(tmp_path):
    report = tmp_path / "r.json"
    refused("replay", "--device", "host", "--output-tokens", "-1", "--json", str(report), says="negative")
    refused("replay", "--device", "host", "--eviction", "lru", "--json", str(report), says="kvbm")
    assert not report.exists()


# --- Exit codes and the version -------------------------------------------------------------------


def test_info_refusals_are_status_2_as_everywhere():
    refused("info", "--dtype", "int4", says="unknown dtype")


def test_version():
    done = kvtier("--version")
    assert done.returncode == 0 and done.stdout.strip() == "kvtier 0.1.0", done


# --- The plot of an engine-only swap CSV ----------------------------------------------------------


@pytest.mark.skipif(shutil.which("gnuplot") is None, reason="gnuplot is not installed")
def test_plot_swap_draws_an_engine_only_csv(tmp_path):
    data = tmp_path / "swap.csv"
    done = kvtier("bench", "swap", "--device", "host", "--paths", "engine", "--page-bytes", "4096,65536",
                  "--batch", "8", "--iterations", "1", "--csv", str(data))
    assert done.returncode == 0, done.stderr
    rows = list(csv.DictReader(data.open()))
    assert {r["path"] for r in rows} == {"engine"}
    png = tmp_path / "swap.png"
    plot = subprocess.run(["bash", os.path.join(ROOT, "scripts", "plot.sh"), "swap", str(data), str(png)],
                          capture_output=True, text=True, timeout=LIMIT_S)
    assert plot.returncode == 0, plot.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_attention_checks_of_no_sequence_are_refused():
    refused("replay", "--device", "host", "--attention-sequences", "0", says="not in range 1 to 1024")


def test_a_data_parallel_rank_past_the_last_port_is_refused():
    refused("replay", "--device", "host", "--instances", "2", "--kv-events", "tcp://127.0.0.1:65535",
            says="port 65535 + rank 1 is past 65535")


# --- Hostile operators and shared stores (issue 31) -----------------------------------------------

TIER = ["replay", "--device", "host", "--capacity", "256", "--host-blocks", "256"]


def tier_dir(tmp_path, name="g3"):
    path = tmp_path / name
    path.mkdir(mode=0o700)
    return path


def test_a_link_at_the_tiers_file_is_refused_and_its_target_untouched(tmp_path):
    victim = tmp_path / "important"
    victim.write_text("someone's thesis")
    g3 = tier_dir(tmp_path)
    (g3 / "kvtier-g3.slots").symlink_to(victim)
    for extra in ([], ["--disk-reformat"]):
        refused(*TIER, "--disk-path", str(g3), "--disk-blocks", "64", *extra, says="symbolic link")
    assert victim.read_text() == "someone's thesis"


def test_a_file_that_is_not_a_tier_is_refused_and_left_as_it_is(tmp_path):
    g3 = tier_dir(tmp_path)
    foreign = g3 / "kvtier-g3.slots"
    foreign.write_text("not a tier")
    foreign.chmod(0o600)
    refused(*TIER, "--disk-path", str(g3), "--disk-blocks", "64", "--disk-reformat", says="not a kvtier tier file")
    assert foreign.read_text() == "not a tier"


def test_a_directory_others_can_write_is_refused(tmp_path):
    g3 = tier_dir(tmp_path)
    g3.chmod(0o777)
    refused(*TIER, "--disk-path", str(g3), "--disk-blocks", "64", says="writable by group or others")
    assert not (g3 / "kvtier-g3.slots").exists()


def test_a_tier_larger_than_the_file_system_is_refused_with_what_fits(tmp_path):
    refused(*TIER, "--disk-path", str(tmp_path / "g3"), "--disk-blocks", "50000000", says="blocks fit")
    assert not (tmp_path / "g3").exists()


def test_a_disk_queue_that_could_never_write_is_refused(tmp_path):
    refused(*TIER, "--disk-path", str(tmp_path / "g3"), "--disk-blocks", "64", "--disk-queue-depth", "1",
            "--disk-backlog", "0", says="would never write a block")


def test_a_smaller_disk_blocks_says_what_it_dropped(tmp_path):
    g3 = str(tmp_path / "g3")
    first = kvtier(*TIER, "--disk-path", g3, "--disk-blocks", "1024", "--json", str(tmp_path / "a.json"))
    assert first.returncode == 0, first.stderr
    done = kvtier(*TIER, "--disk-path", g3, "--disk-blocks", "8", "--json", str(tmp_path / "b.json"))
    assert done.returncode == 0, done.stderr
    report = json.loads((tmp_path / "b.json").read_text())
    assert report["g3_dropped_on_shrink"] > 0
    assert f"dropped {report['g3_dropped_on_shrink']}" in done.stderr
    assert report["mismatches"] == 0


def test_info_never_makes_or_changes_a_tier(tmp_path):
    done = kvtier("info", "--device", "host", "--disk-path", str(tmp_path / "none"), "--disk-blocks", "8")
    assert done.returncode == 0, done.stderr
    assert "none there" in done.stdout
    assert not (tmp_path / "none").exists()


@pytest.mark.parametrize("mode,content,says", [
    (0o644, "k" * 40, "readable or writable by group or others"),
    (0o600, "short", "fewer than 32"),
])
def test_a_tier_key_file_that_is_not_secret_enough_is_refused(tmp_path, mode, content, says):
    key = tmp_path / "key"
    key.write_text(content)
    key.chmod(mode)
    refused(*TIER, "--disk-path", str(tmp_path / "g3"), "--disk-blocks", "64", "--tier-key-file", str(key), says=says)
    refused(*TIER, "--disk-path", str(tmp_path / "g3"), "--disk-blocks", "64", "--tier-key-file",
            str(tmp_path / "missing"), says="No such file")


def test_a_tier_key_without_a_tier_is_refused(tmp_path):
    key = tmp_path / "key"
    key.write_text("k" * 40)
    key.chmod(0o600)
    refused("replay", "--device", "host", "--tier-key-file", str(key), says="needs a disk or shared tier")


def test_a_disk_tier_under_another_key_is_refused_unless_reformatted(tmp_path):
    keys = []
    for name in ("a", "b"):
        key = tmp_path / name
        key.write_text(name * 40)
        key.chmod(0o600)
        keys.append(str(key))
    g3 = str(tmp_path / "g3")
    done = kvtier(*TIER, "--disk-path", g3, "--disk-blocks", "64", "--tier-key-file", keys[0])
    assert done.returncode == 0, done.stderr
    refused(*TIER, "--disk-path", g3, "--disk-blocks", "64", "--tier-key-file", keys[1], says="another tier key")
    refused(*TIER, "--disk-path", g3, "--disk-blocks", "64", says="under a tier key")
    done = kvtier(*TIER, "--disk-path", g3, "--disk-blocks", "64", "--tier-key-file", keys[1], "--disk-reformat")
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("namespace", ["{hot}", "a{b}c"])
def test_a_shared_namespace_with_a_hash_tag_is_refused(namespace):
    refused(*TIER, "--shared-tier", "redis://127.0.0.1:1", "--shared-namespace", namespace, says="hash tag")


@pytest.mark.parametrize("url,says", [
    ("redis://alice:100%@127.0.0.1:1", "two hex digits"),
    ("redis://::1:7000", "in brackets"),
    ("redis://[::1:7000", "closing ']'"),
])
def test_malformed_shared_tier_urls_are_refused(url, says):
    refused(*TIER, "--shared-tier", url, says=says)


def test_a_shared_tier_that_never_answers_is_exit_status_3_unless_tolerated():
    done = kvtier(*TIER, "--shared-tier", "redis://127.0.0.1:1")
    assert done.returncode == 3, (done.returncode, done.stderr[-2000:])
    assert "never answered" in done.stderr
    assert "without a tier key" in done.stderr  # said once: whoever can write the store can inject K/V
    tolerated = kvtier(*TIER, "--shared-tier", "redis://127.0.0.1:1", "--shared-tolerate-down")
    assert tolerated.returncode == 0, tolerated.stderr[-2000:]


def test_a_metrics_port_in_use_says_so():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        refused("replay", "--device", "host", "--metrics-port", str(port), says="Address already in use")
