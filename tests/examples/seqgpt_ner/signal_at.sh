#!/bin/sh
# signal_at.sh LOCK STEP [COUNT]: copies its input (seqgpt_ner's output) to its output and,
# when a progress line of step STEP passes ("step STEP/"), sends SIGTERM to the process the
# output lock LOCK names ("<pid> <host>"), COUNT times (default 1) a fifth of a second apart.
lock=$1
at=$2
count=${3:-1}
while IFS= read -r line; do
  printf '%s\n' "$line"
  case $line in
    "step $at/"*)
      pid=$(cut -d' ' -f1 "$lock")
      i=0
      while [ "$i" -lt "$count" ]; do
        [ "$i" -gt 0 ] && sleep 0.2
        kill -TERM "$pid"
        i=$((i + 1))
      done
      ;;
  esac
done
