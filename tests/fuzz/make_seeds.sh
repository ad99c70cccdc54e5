#!/usr/bin/env bash
# Builds the seed corpora of the fuzz targets from fixtures/ (and a few hand-written inputs) into OUTDIR/<target>/.
# Each target's input starts with a few parameter bytes (see the target's header comment); seeds get several.
# Usage: tests/fuzz/make_seeds.sh OUTDIR        (idempotent: OUTDIR/<target> is recreated)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:?usage: make_seeds.sh OUTDIR}
fixtures=("$root"/fixtures/pi/*.jsonl "$root"/fixtures/pi/synthetic/*.jsonl)

for t in fuzz_line_framer fuzz_pi_mapper fuzz_pi_events fuzz_agent_mappers fuzz_cli_options fuzz_message_json \
  fuzz_reaper_protocol; do
  rm -rf "${out:?}/$t"
  mkdir -p "$out/$t"
done

# seed DIR NAME HEADER(printf format) FILE|- : HEADER bytes then FILE's bytes (or stdin).
seed() {
  local dir=$1 name=$2 header=$3 src=$4
  { printf "$header"; if [[ $src == - ]]; then cat; else cat "$src"; fi; } > "$out/$dir/$name"
}

# fake_agent's hostile outputs (fixtures/fake_agent/README.md), as bytes.
hostile() {
  printf '{"type":"invalid_utf8","text":"a\xffb\xc3(c\xed\xa0\x80d\xf0\x9f\x98e"}\n'
  printf '{"type":"crlf","n":1}\r\n{"type":"crlf","n":2}\r\n'
  printf '\xef\xbb\xbf{"type":"bom"}\n'
  printf '{"type":"nul","text":"a\0b\0c"}\n'
  printf '[1,2,3]\n42\n"str"\nnull\n{"type":5}\n{"type":"agent_end","type":"x"}\n'
  printf '{"type":"no_newline"}'
}

i=0
for f in "${fixtures[@]}"; do
  i=$((i + 1))
  size=$(stat -c %s "$f")
  # line framer: small maximum with mixed chunk sizes; large maximum with byte-by-byte-ish reads.
  if ((size <= 20000)); then
    seed fuzz_line_framer "fixture$i-a" '\x10\x08\x02\x05\x11\x00' "$f"
    seed fuzz_line_framer "fixture$i-b" '\x80\xff\x00\x07' "$f"
  fi
  # pi mapper: whole small transcripts (buffered and stream thinking; exit 0, cancelled, exit 1, signal) and
  # windows of 8 lines of every transcript.
  if ((size <= 20000)); then
    seed fuzz_pi_mapper "fixture$i-buffered" '\x00\x00' "$f"
    seed fuzz_pi_mapper "fixture$i-stream" '\x01\x00' "$f"
    seed fuzz_pi_mapper "fixture$i-cancel" '\x05\x04' "$f"
    seed fuzz_pi_mapper "fixture$i-exit1" '\x12\x01' "$f"
    seed fuzz_pi_mapper "fixture$i-signal" '\x0d\x02' "$f"
  fi
  lines=$(wc -l < "$f")
  for ((start = 1; start <= lines; start += 8)); do
    sed -n "${start},$((start + 7))p" "$f" | { head -c 16000; cat >/dev/null; } | seed fuzz_pi_mapper "fixture$i-w$start" '\x01\x00' -
  done
done
hostile | seed fuzz_line_framer hostile-a '\x08\x04\x03\x01\x02\x03\x00' -
hostile | seed fuzz_line_framer hostile-b '\x80\x10\x00\x00' -
hostile | seed fuzz_pi_mapper hostile '\x00\x00' -
printf '\x01{"type":"message_update","assistantMessageEvent":{"type":"text_delta","delta":"x"}}\n' |
  seed fuzz_pi_mapper oversize '\x00\x00' -

# The other agents' mappers (fuzz_agent_mappers.cpp: agent byte 0 claude, 1 codex, 2 gemini, 3 opencode): every recorded
# transcript of each agent whole (buffered / stream thinking, exit 0 / cancelled / exit 1), and windows of 6 lines.
agent_byte=0
for dir in claude-code codex gemini opencode; do
  j=0
  for f in "$root"/fixtures/$dir/recorded/*.jsonl; do
    [[ -e $f ]] || continue
    j=$((j + 1))
    a=$(printf '\\x%02x' "$agent_byte")
    seed fuzz_agent_mappers "$dir-$j-buffered" "$a"'\x00\x00' "$f"
    seed fuzz_agent_mappers "$dir-$j-stream-merged" "$a"'\x03\x04' "$f"
    seed fuzz_agent_mappers "$dir-$j-exit1" "$a"'\x12\x01' "$f"
    lines=$(wc -l < "$f")
    for ((start = 1; start <= lines; start += 6)); do
      sed -n "${start},$((start + 5))p" "$f" | { head -c 16000; cat >/dev/null; } |
        seed fuzz_agent_mappers "$dir-$j-w$start" "$a"'\x01\x00' -
    done
  done
  hostile | seed fuzz_agent_mappers "$dir-hostile" "$(printf '\\x%02x' "$agent_byte")"'\x00\x00' -
  agent_byte=$((agent_byte + 1))
done

# pi events (opcodes of fuzz_pi_events.cpp): a text turn, and a tool turn; plus one byte per opcode.
printf '\x00\x00\x00\x00\x01\x04\x06\x08\x00\x09\x00\x03\x0a\x00\x0b\x12\x01\x00\x03\x00\x00\x05\x05\x0a\x02\x02\x03\x00' \
  > "$out/fuzz_pi_events/text-turn"
printf '\x01\x00\x00\x00\x01\x04\x06\x0e\x00\x00\x00\x10\x00\x00\x00\x03\x14\x00\x00\x00\x03\x14\x00\x00\x02\x03\x00\x05\x00\x00\x00\x00\x00\x00\x00\x00\x04\x06\x09\x00\x04\x12\x01\x00\x04\x00\x00\x01\x01\x02\x02\x02\x03\x00' \
  > "$out/fuzz_pi_events/tool-turn"
for ((op = 0; op < 24; op++)); do printf "\\x00\\x00\\x$(printf %02x $op)" > "$out/fuzz_pi_events/op$op"; done

# CLI: command lines from README.md and the usage text, NUL-separated.
cli() { local name=$1; shift; printf '%s\0' "$@" | head -c -1 > "$out/fuzz_cli_options/$name"; }
cli run-basic run --agent pi -- "fix the test"
cli run-all run --agent pi --executable /usr/bin/pi --model M --provider P --cwd /tmp --session abc --tools a,b \
  --thinking stream --thinking-level low --timeout 10m --idle-timeout 30s --first-event-timeout 500ms --arg=--yolo \
  --json -v hello world
cli run-inline run --agent=pi --timeout=1.5s --no-session -rf /
cli map-code map --agent pi --exit-code 3 recorded.jsonl
cli map-signal map --agent pi --exit-signal SIGTERM recorded.jsonl
cli replay replay --agent pi --delay-ms 10 --fake-agent /bin/fake fixtures/pi/x.jsonl
cli help --help
cli bad-dur run --agent pi --timeout 10x p
cli dash run --agent pi -- -p

# message JSON: the reviewed contract output of every golden test.
for f in "$root"/fixtures/pi/golden/*.jsonl; do cp "$f" "$out/fuzz_message_json/$(basename "$f")"; done
# reaper protocol (fuzz_reaper_protocol.cpp): byte 0 even = one packet, each the helper or the host sends; odd =
# (kind, 4-byte little-endian value) pairs to format and parse back.
rp() { printf '\x00%s' "$2" > "$out/fuzz_reaper_protocol/$1"; }
rp started 'started 12345'
rp spawn-failed 'spawn-failed 2'
rp exit-code 'exit 256'
rp exit-signal 'exit 9'
rp empty 'empty'
rp kill 'kill'
rp signal-leader 'signal leader 15'
rp signal-group 'signal group 2'
rp signal-tree 'signal tree 9'
printf '\x01\x00\x39\x30\x00\x00\x02\x02\x00\x00\x00\x04\x00\x01\x00\x00\x06\x00\x00\x00\x00\x01\x0f\x00\x00\x00\x03\x02\x00\x00\x00\x05\x09\x00\x00\x00\x07\x00\x00\x00\x00' \
  > "$out/fuzz_reaper_protocol/round-trips"

echo "seeds: $(for t in "$out"/*/; do printf '%s=%s ' "$(basename "$t")" "$(ls "$t" | wc -l)"; done)"
