#!/bin/bash
# Resident memory of a command over time: prints "seconds RSS MiB" whenever it moves by more
# than 20 MiB (sampled every 20 ms), and the command's stderr lines with their time.
# Usage: scripts/bench/rss_timeline.sh target/release/closest query --mesh M --points P --out O
start=$(date +%s.%N)
elapsed() { echo "$(date +%s.%N) - $start" | bc | cut -c1-6; }
"$@" 2> >(while IFS= read -r line; do echo "$(elapsed) ERR $line"; done) &
pid=$!
last=0
while kill -0 $pid 2>/dev/null; do
  rss=$(awk '/VmRSS/{print int($2/1024)}' /proc/$pid/status 2>/dev/null)
  if [ -n "$rss" ] && { [ "$rss" -gt $((last + 20)) ] || [ "$rss" -lt $((last - 20)) ]; }; then
    echo "$(elapsed) RSS $rss"
    last=$rss
  fi
  sleep 0.02
done
wait $pid
