#!/bin/bash
# 97%-hits vs --load-all, interleaved; full Q4_0 30B shape, -t 2 (round 5: speculative prefetch).
B=${SLUICE:-build/sluice}; M=${MODEL:?the synthesized Qwen3-30B-A3B-shape Q4_0 file}; O=${OUT:-.}
for round in 1 2; do
  for cfg in "load-all:--load-all" "cache1500:--cache-mb 1500" "cache1500-pf2:--cache-mb 1500 --prefetch 2" "cache1500-pf4:--cache-mb 1500 --prefetch 4"; do
    name=${cfg%%:*}; args=${cfg#*:}
    echo "== round $round $name ($(date +%T), load $(cut -d' ' -f1-3 /proc/loadavg))"
    $B bench -m $M $args -p 16 -n 64 -r 4 -t 2 -o csv > $O/${name}_$round.csv 2> $O/${name}_$round.err; grep -E "rep |rror" $O/${name}_$round.err
  done
done
echo "== done $(date +%T)"
