// Node baseline for bench/mapper: readline + JSON.parse of every line (what a Node host of pi would do).
// Usage: AGENTHOST_BENCH_DUMP_DIR=/tmp/b agenthost_bench_mapper --benchmark_filter=none
//        node bench/mapper/node_baseline.mjs /tmp/b/pi-snapshot.jsonl /tmp/b/pi-delta.jsonl
import { createReadStream, statSync } from "node:fs";
import { createInterface } from "node:readline";

for (const file of process.argv.slice(2)) {
  const bytes = statSync(file).size;
  let best = Infinity;
  let lines = 0;
  for (let round = 0; round < 3; round++) {
    const start = process.hrtime.bigint();
    lines = 0;
    const rl = createInterface({ input: createReadStream(file), crlfDelay: Infinity });
    for await (const line of rl) {
      if (JSON.parse(line).type) lines++;
    }
    best = Math.min(best, Number(process.hrtime.bigint() - start) / 1e9);
  }
  console.log(`${file}: ${(bytes / 1e6).toFixed(1)} MB, ${lines} lines, ` +
              `${(bytes / 1e6 / best).toFixed(1)} MB/s, ${(lines / best).toFixed(0)} lines/s`);
}
