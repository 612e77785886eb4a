#!/bin/bash
# usage: memrun.sh NAME STRATEGY WORKERS [extra sets...]
name=$1; strat=$2; w=$3; shift 3
out=/tmp/mem/$name; rm -rf $out; mkdir -p $out
cd /work/main
( while true; do
    for p in $(pgrep -f "synclab (worker|ps|coordinator|run)"); do
      a=$(tr '\0' ' ' < /proc/$p/cmdline 2>/dev/null | grep -o -- "--rank [0-9]*\|worker\|ps \|coordinator" | head -2 | tr '\n' ' ')
      h=$(grep VmHWM /proc/$p/status 2>/dev/null | awk '{print $2}')
      r=$(grep VmRSS /proc/$p/status 2>/dev/null | awk '{print $2}')
      echo "$(date +%s) $p [$a] hwm=$h rss=$r"
    done
    free -m | awk '/Mem/{print "free used="$3" avail="$7}'
    sleep 2; done ) > $out/mem.log 2>&1 &
sp=$!
flock /tmp/synclab-emu.lock .venv/bin/python -m synclab run examples/quickstart.yaml --out $out/run --no-report \
  --set strategy.name=$strat --set cluster.workers=$w --set model.name=vgg16 --set model.batch_size=64 \
  --set compute.mode=replay --set compute.scale=0.01 --set run.iterations=4 --set run.warmup=1 "$@" > $out/run.log 2>&1
echo rc=$? >> $out/run.log
kill $sp
