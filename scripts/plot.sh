#!/usr/bin/env bash
# Turns kvtier's CSV output into PNG plots with gnuplot (Debian: gnuplot-nox).
#   scripts/plot.sh swap SWAP.csv OUT.png       # from `kvtier bench swap --csv SWAP.csv`:
#                                               # GB/s against page size per path and direction,
#                                               # with the link's ceiling measured in the same run
#   scripts/plot.sh capacity SWEEP.csv OUT.png  # from `kvtier replay --sweep-capacity ... --csv SWEEP.csv`:
#                                               # G1, G2 and total prefix-hit rate against G1 capacity
#   scripts/plot.sh policy POLICY.csv OUT.png   # from `kvtier bench policy --csv POLICY.csv` (or
#                                               # `python -m kvtier.vllm.policy_bench --csv`): each
#                                               # policy's hit rate against capacity, beside the
#                                               # same-run bound (ceiling and FIFO floor)
#   scripts/plot.sh vllm-tiers TIERS.csv OUT.png  # from `python -m kvtier.vllm.bench --csv TIERS.csv`:
#                                               # store and load-after-restart GiB/s against row size,
#                                               # per tier (vLLM's fs, kvtier's G3 and G4), same run
#   scripts/plot.sh sglang HICACHE.csv OUT.png  # from `python -m kvtier.sglang.bench --csv HICACHE.csv`:
#                                               # backup and prefetch (warm, cold) GiB/s against page
#                                               # size per backend (SGLang's file, kvtier's G3), same run
set -euo pipefail

usage() { echo "usage: $0 swap|capacity|policy|vllm-tiers|sglang INPUT.csv OUTPUT.png" >&2; exit 2; }
[[ $# -eq 3 ]] || usage
kind=$1 input=$2 output=$3
[[ -r $input ]] || { echo "plot: cannot read $input" >&2; exit 2; }
command -v gnuplot >/dev/null || { echo "plot: gnuplot is not installed (apt-get install gnuplot-nox)" >&2; exit 2; }

common='set terminal pngcairo size 1000,620 noenhanced font ",11"
set datafile separator ","
set datafile columnheaders
set grid
set key outside right top'

# The distinct values of column NAME in the input, in order of first appearance.
distinct() {
  awk -F, -v name="$1" 'NR == 1 { for (i = 1; i <= NF; ++i) col[$i] = i; next }
                        { v = $(col[name]); if (!(v in seen)) { seen[v] = 1; print v } }' "$input"
}
# The input with each series' rows together (first column), by its x (second,
# numeric), so that a series' points join into one line: `input` becomes that copy.
group_series() {
  sorted=$(mktemp)
  trap 'rm -f "$sorted"' EXIT
  { head -n 1 "$input"; tail -n +2 "$input" | sort -t, -k1,1 -k2,2n; } >"$sorted"
  input=$sorted
}

case $kind in
  swap)
    runtime=$(awk -F, 'NR == 2 { print $1 }' "$input")
    # The (direction, path) pairs the CSV holds, in order: `--paths engine` has
    # no batched rows, and a direction may be missing (`--direction out`).
    pairs=$(awk -F, 'NR == 1 { for (i = 1; i <= NF; ++i) col[$i] = i; next }
                     { key = $(col["direction"]) " " $(col["path"]); if (!(key in seen)) { seen[key] = 1; print key } }' "$input")
    [[ -n $pairs ]] || { echo "plot: $input holds no rows" >&2; exit 2; }
    plots=() ceilings=""
    while read -r dir path; do
      style=$([[ $dir == in ]] && echo " dt 4" || echo "")
      # Each direction's ceiling once, from its first path's rows (same run).
      if [[ " $ceilings " != *" $dir "* ]]; then
        ceilings+=" $dir"
        shade=$([[ $dir == in ]] && echo 'dt 3 lw 2 lc rgb "gray40"' || echo 'dt 2 lw 2 lc rgb "black"')
        plots+=("\"$input\" using (column(\"page_bytes\")):(pick(\"$dir\", \"$path\", \"ceiling_GBps\")) with lines $shade title \"ceiling (one contiguous copy, $dir)\"")
      fi
      plots+=("\"$input\" using (column(\"page_bytes\")):(pick(\"$dir\", \"$path\", \"GBps\")) with linespoints lw 2$style title \"$dir $path\"")
    done <<<"$pairs"
    plot_line=$(IFS=,; echo "${plots[*]}")
    gnuplot <<GNUPLOT
$common
set output "$output"
set title "kvtier swap bandwidth ($runtime runtime): scattered G1 pages <-> pinned G2 pages"
set logscale x 2
set format x "%.0b %BB"
set xlabel "page size"
set ylabel "GB/s"
set yrange [0:*]
pick(dir, path, col) = (strcol("direction") eq dir && strcol("path") eq path) ? column(col) : NaN
plot $plot_line
GNUPLOT
    ;;
  capacity)
    gnuplot <<GNUPLOT
$common
set output "$output"
set title "kvtier replay: prefix-hit rate against G1 capacity"
set logscale x 2
set xlabel "G1 capacity (pages)"
set ylabel "prompt blocks hit"
set yrange [0:1]
set format y "%.0f%%"
set yrange [0:100]
plot \
  "$input" using (column("capacity")):(100 * column("g1_hit_rate")) with linespoints lw 2 title "G1", \
  "$input" using (column("capacity")):(100 * column("g2_hit_rate")) with linespoints lw 2 title "G2 (swap-in)", \
  "$input" using (column("capacity")):(100 * (column("g1_hit_rate") + column("g2_hit_rate"))) with linespoints lw 2 dt 2 title "G1 + G2"
GNUPLOT
    ;;
  policy)
    names=$(distinct policy)
    [[ -n $names ]] || { echo "plot: $input holds no rows" >&2; exit 2; }
    group_series
    plots=()
    while read -r name; do
      case $name in
        bound) style='dt 2 lw 3 lc rgb "black"' ;;
        ceiling) style='dt 3 lw 2 lc rgb "gray40"' ;;
        fifo) style='dt 4 lw 2 lc rgb "gray60"' ;;
        *) style='lw 2' ;;
      esac
      plots+=("\"$input\" using (column(\"capacity_blocks\")):(pick(\"$name\")) with linespoints $style title \"$name\"")
    done <<<"$names"
    plot_line=$(IFS=,; echo "${plots[*]}")
    gnuplot <<GNUPLOT
$common
set output "$output"
set title "prompt blocks hit against cache size, one request at a time"
set logscale x 10
set xlabel "capacity (blocks)"
set ylabel "prompt blocks hit"
set format y "%.0f%%"
set yrange [0:100]
pick(name) = strcol("policy") eq name ? 100 * column("hit_rate") : NaN
plot $plot_line
GNUPLOT
    ;;
  vllm-tiers)
    tiers=$(distinct tier)
    [[ -n $tiers ]] || { echo "plot: $input holds no rows" >&2; exit 2; }
    group_series
    plots=()
    while read -r tier; do
      plots+=("\"$input\" using (column(\"row_bytes\")):(pick(\"$tier\", \"load_GiBps\")) with linespoints lw 2 title \"$tier load (after a restart)\"")
      plots+=("\"$input\" using (column(\"row_bytes\")):(pick(\"$tier\", \"store_GiBps\")) with linespoints lw 2 dt 2 title \"$tier store\"")
    done <<<"$tiers"
    plot_line=$(IFS=,; echo "${plots[*]}")
    gnuplot <<GNUPLOT
$common
set output "$output"
set title "vLLM 0.33.0 secondary tiers through vLLM's manager: store, and load after a restart"
set logscale x 2
set format x "%.0b %BB"
set xlabel "row (chunk) size"
set ylabel "GiB/s"
set yrange [0:*]
pick(tier, col) = strcol("tier") eq tier ? column(col) : NaN
plot $plot_line
GNUPLOT
    ;;
  sglang)
    backends=$(distinct backend)
    [[ -n $backends ]] || { echo "plot: $input holds no rows" >&2; exit 2; }
    group_series
    plots=()
    while read -r backend; do
      plots+=("\"$input\" using (column(\"page_bytes\")):(pick(\"$backend\", \"prefetch_cold_GiBps\")) with linespoints lw 2 title \"$backend prefetch (cold restart)\"")
      plots+=("\"$input\" using (column(\"page_bytes\")):(pick(\"$backend\", \"prefetch_warm_GiBps\")) with linespoints lw 2 dt 4 title \"$backend prefetch (warm)\"")
      plots+=("\"$input\" using (column(\"page_bytes\")):(pick(\"$backend\", \"backup_GiBps\")) with linespoints lw 2 dt 2 title \"$backend backup\"")
    done <<<"$backends"
    plot_line=$(IFS=,; echo "${plots[*]}")
    gnuplot <<GNUPLOT
$common
set output "$output"
set title "SGLang 0.5.23 HiCache storage through SGLang's controller: backup and prefetch"
set logscale x 2
set format x "%.0b %BB"
set xlabel "page size"
set ylabel "GiB/s"
set yrange [0:*]
pick(backend, col) = strcol("backend") eq backend ? column(col) : NaN
plot $plot_line
GNUPLOT
    ;;
  *) usage ;;
esac
echo "plot: wrote $output"
