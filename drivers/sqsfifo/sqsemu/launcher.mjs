// Starts fauxqs (the SQS emulator) for wary's tests, bound to 127.0.0.1
// only: fauxqs's own CLI and startFauxqs() listen on 0.0.0.0.
//
//   node launcher.mjs [--port 0] [--dedup-window-ms 300000]
//
// Prints "LISTENING <port>" on stdout once it accepts connections, and
// exits when its stdin closes (so that a test binary that dies does not
// leave it running). --dedup-window-ms shortens the 5-minute
// deduplication window, a constant in fauxqs, for every queue created
// afterwards: tests of "a duplicate is accepted after the window" cannot
// wait five minutes.
import { buildApp } from "fauxqs";
import { SqsStore } from "./node_modules/fauxqs/dist/sqs/sqsStore.js";
import { FifoMap } from "toad-cache";

const args = process.argv.slice(2);
function arg(name, def) {
  const i = args.indexOf(name);
  if (i < 0 || i + 1 >= args.length) return def;
  const n = Number(args[i + 1]);
  if (!Number.isInteger(n) || n < 0) {
    console.error(`launcher: ${name} must be a non-negative integer`);
    process.exit(2);
  }
  return n;
}
const port = arg("--port", 0);
const dedupWindowMs = arg("--dedup-window-ms", 0);
// fauxqs's own cap on remembered deduplication IDs.
const dedupCacheMax = 10_000;

const sqsStore = new SqsStore();
if (dedupWindowMs > 0) {
  const create = sqsStore.createQueue.bind(sqsStore);
  sqsStore.createQueue = (...a) => {
    const q = create(...a);
    q.deduplicationCache = new FifoMap(dedupCacheMax, dedupWindowMs);
    return q;
  };
}

const app = buildApp({ logger: false, stores: { sqsStore } });
const addr = await app.listen({ port, host: "127.0.0.1" });
const actual = new URL(addr).port;
sqsStore.host = `127.0.0.1:${actual}`;
process.stdout.write(`LISTENING ${actual}\n`);

let closing = false;
async function shutdown() {
  if (closing) return;
  closing = true;
  try {
    await app.close();
  } finally {
    process.exit(0);
  }
}
process.stdin.on("end", shutdown);
process.stdin.on("close", shutdown);
process.stdin.resume();
process.on("SIGTERM", shutdown);
process.on("SIGINT", shutdown);
