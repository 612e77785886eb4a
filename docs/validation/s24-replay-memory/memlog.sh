#!/bin/bash
# per-role RSS sums and free, every 15 s
while true; do
  ts=$(date -u +%H:%M:%S)
  w=$(ps -eo rss,args | awk '/synclab worker/ && !/awk/{s+=$1; if($1>m)m=$1; n++} END{printf "workers n=%d sum=%.0fM max=%.0fM", n, s/1024, m/1024}')
  p=$(ps -eo rss,args | awk '/synclab ps/ && !/awk/{s+=$1; if($1>m)m=$1; n++} END{printf "ps n=%d sum=%.0fM max=%.0fM", n, s/1024, m/1024}')
  f=$(free -m | awk '/Mem/{print "used="$3"M avail="$7"M"}')
  echo "$ts $w | $p | $f"
  sleep 15
done
