// Node baseline for bench/e2e: spawn the fake agent (flood-file FILE --repeat R), readline + JSON.parse of every line
// of its stdout. Run by agenthost_bench_e2e when `node` is on PATH:
//   node bench/e2e/node_e2e.mjs FAKE_AGENT FILE REPEAT
// Prints one JSON object: lines, seconds (from the spawn to the end of stdout).
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";

const [fake, file, repeat] = process.argv.slice(2);
const start = process.hrtime.bigint();
const child = spawn(fake, ["flood-file", file, "--repeat", repeat], { stdio: ["ignore", "pipe", "inherit"] });
const exited = new Promise((resolve) => child.on("close", resolve));
let lines = 0;
const rl = createInterface({ input: child.stdout, crlfDelay: Infinity });
for await (const line of rl) {
  if (JSON.parse(line).type) lines++;
}
const seconds = Number(process.hrtime.bigint() - start) / 1e9;
await exited;
console.log(JSON.stringify({ lines, seconds }));
