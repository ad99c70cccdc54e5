// Node baseline for bench/mapper: readline + JSON.parse of every line (what a Node host of pi would do).
// agenthost_bench_mapper runs it by itself when `node` is on PATH; by hand:
//   AGENTHOST_BENCH_DUMP_DIR=/tmp/b agenthost_bench_mapper --benchmark_filter=none --no-node
//   node bench/mapper/node_baseline.mjs /tmp/b/pi-snapshot.jsonl /tmp/b/pi-delta.jsonl /tmp/b/pi-tools.jsonl
// Prints one JSON object per file: bytes, lines, and the best of 3 rounds as MB/s of wall time and of process CPU time
// (user + system, all of Node's threads).
import { createReadStream, statSync } from "node:fs";
import { createInterface } from "node:readline";

const rounds = Number(process.env.AGENTHOST_BENCH_NODE_ROUNDS ?? 3);
for (const file of process.argv.slice(2)) {
  const bytes = statSync(file).size;
  let bestWall = Infinity;
  let bestCpu = Infinity;
  let lines = 0;
  for (let round = 0; round < rounds; round++) {
    const start = process.hrtime.bigint();
    const cpu = process.cpuUsage();
    lines = 0;
    const rl = createInterface({ input: createReadStream(file), crlfDelay: Infinity });
    for await (const line of rl) {
      if (JSON.parse(line).type) lines++;
    }
    const used = process.cpuUsage(cpu);
    bestWall = Math.min(bestWall, Number(process.hrtime.bigint() - start) / 1e9);
    bestCpu = Math.min(bestCpu, (used.user + used.system) / 1e6);
  }
  console.log(JSON.stringify({ file, bytes, lines, wall_mbps: bytes / 1e6 / bestWall, cpu_mbps: bytes / 1e6 / bestCpu }));
}
