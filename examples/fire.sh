#!/usr/bin/env bash
# fire.sh N PORT...: N concurrent chat requests spread over the ports (model: $MODEL, default lab/chat);
# prints each answer's status and Retry-After. Used in the README's "Several processes, several replicas".
set -u
n=$1; shift; ports=("$@"); i=0
body="{\"model\": \"${MODEL:-lab/chat}\", \"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}"
for _ in $(seq 1 "$n"); do
  port=${ports[$((i % ${#ports[@]}))]}; i=$((i + 1))
  curl -s -o /dev/null -D - "localhost:$port/v1/chat/completions" -H 'content-type: application/json' -d "$body" \
    | tr -d '\r' \
    | awk -v p="$port" '/^HTTP/{s=$2} /^retry-after/{r=$2} END{print "port " p ": " s (r ? " retry-after " r : "")}' &
done
wait
