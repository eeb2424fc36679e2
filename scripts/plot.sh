#!/usr/bin/env bash
# Turns kvtier's CSV output into PNG plots with gnuplot (Debian: gnuplot-nox).
#   scripts/plot.sh swap SWAP.csv OUT.png       # from `kvtier bench swap --csv SWAP.csv`:
#                                               # GB/s against page size per path and direction,
#                                               # with the link's ceiling measured in the same run
#   scripts/plot.sh capacity SWEEP.csv OUT.png  # from `kvtier replay --sweep-capacity ... --csv SWEEP.csv`:
#                                               # G1, G2 and total prefix-hit rate against G1 capacity
set -euo pipefail

usage() { echo "usage: $0 swap|capacity INPUT.csv OUTPUT.png" >&2; exit 2; }
[[ $# -eq 3 ]] || usage
kind=$1 input=$2 output=$3
[[ -r $input ]] || { echo "plot: cannot read $input" >&2; exit 2; }
command -v gnuplot >/dev/null || { echo "plot: gnuplot is not installed (apt-get install gnuplot-nox)" >&2; exit 2; }

common='set terminal pngcairo size 1000,620 noenhanced font ",11"
set datafile separator ","
set datafile columnheaders
set grid
set key outside right top'

case $kind in
  swap)
    runtime=$(awk -F, 'NR == 2 { print $1 }' "$input")
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
plot \
  "$input" using (column("page_bytes")):(pick("out", "batched", "ceiling_GBps")) with lines dt 2 lw 2 lc rgb "black" title "ceiling (one contiguous copy, out)", \
  "$input" using (column("page_bytes")):(pick("in", "batched", "ceiling_GBps")) with lines dt 3 lw 2 lc rgb "gray40" title "ceiling (in)", \
  for [p in "batched staged per_page"] "$input" using (column("page_bytes")):(pick("out", p, "GBps")) with linespoints lw 2 title "out ".p, \
  for [p in "batched staged per_page"] "$input" using (column("page_bytes")):(pick("in", p, "GBps")) with linespoints lw 2 dt 4 title "in ".p
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
  *) usage ;;
esac
echo "plot: wrote $output"
