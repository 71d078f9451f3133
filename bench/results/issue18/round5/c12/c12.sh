#!/bin/bash
# 12-layer cut at ~96.5% hits (--cache-mb 800): --load-all, the cache with O_DIRECT misses, and the
# cache with buffered misses served from a warm page cache (a "disk" at memory speed). Interleaved.
B=${SLUICE:-build/sluice}; M=${MODEL:?its 12-layer cut, Q4_0}; O=${OUT:-.}
for round in 1 2 3; do
  for cfg in "load-all:--load-all" "cache800:--cache-mb 800" "cache800-pagecache:--cache-mb 800 --no-odirect"; do
    name=${cfg%%:*}; args=${cfg#*:}
    [[ $name == *pagecache ]] && cat $M > /dev/null
    echo "== round $round $name ($(date +%T), load $(cut -d' ' -f1-3 /proc/loadavg))"
    $B bench -m $M $args -p 16 -n 64 -r 4 -t 2 -o csv > $O/c12-${name}_$round.csv 2> $O/c12-${name}_$round.err; grep -E "rep [34]|rror" $O/c12-${name}_$round.err
  done
done
echo "== done $(date +%T)"
