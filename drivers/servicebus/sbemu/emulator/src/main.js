#!/usr/bin/env node
'use strict';
// Azure Service Bus emulator for wary's tests.
//
//   node src/main.js --config topology.json [--port 0] [--host 127.0.0.1]
//                    [--admin-port 0] [--exit-on-stdin-close]
//
// Prints "ADMIN <port>" (the administration API over HTTP) and then
// "LISTENING <port>" (AMQP) on stdout once it accepts connections.

const fs = require('fs');
const {Broker} = require('./store.js');
const {Server} = require('./server.js');
const {Admin} = require('./admin.js');

const TICK_MS = 20;

function parseArgs(argv) {
  const out = {port: 0, adminPort: 0, host: '127.0.0.1', config: null, exitOnStdinClose: false};
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--port') out.port = Number(argv[++i]);
    else if (a === '--host') out.host = argv[++i];
    else if (a === '--admin-port') out.adminPort = Number(argv[++i]);
    else if (a === '--config') out.config = argv[++i];
    else if (a === '--exit-on-stdin-close') out.exitOnStdinClose = true;
    else if (a === '--help' || a === '-h') {
      process.stdout.write('usage: main.js --config topology.json [--port N] [--admin-port N] [--host H] [--exit-on-stdin-close]\n');
      process.exit(0);
    } else {
      throw new Error(`unknown argument ${a}`);
    }
  }
  return out;
}

function validate(topology) {
  const names = new Set();
  const check = (e, kind) => {
    if (!e || typeof e.name !== 'string' || !e.name) throw new Error(`${kind} without a name`);
  };
  for (const q of topology.queues || []) {
    check(q, 'queue');
    if (names.has(q.name.toLowerCase())) throw new Error(`duplicate entity ${q.name}`);
    names.add(q.name.toLowerCase());
  }
  for (const t of topology.topics || []) {
    check(t, 'topic');
    if (names.has(t.name.toLowerCase())) throw new Error(`duplicate entity ${t.name}`);
    names.add(t.name.toLowerCase());
    for (const s of t.subscriptions || []) check(s, 'subscription');
  }
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const topology = args.config ? JSON.parse(fs.readFileSync(args.config, 'utf8')) : {};
  validate(topology);
  const broker = new Broker(topology);
  const server = new Server(broker, {
    maxMessageSize: topology.maxMessageSizeBytes,
    maxFrameSize: topology.maxFrameSizeBytes,
    outgoingWindow: topology.outgoingWindow,
  });
  const port = await server.listen(args.port, args.host);
  const admin = new Admin(broker, server, {maxMessageSize: topology.maxMessageSizeBytes});
  const adminPort = await admin.listen(args.adminPort, args.host);
  const ticker = setInterval(() => broker.tick(), TICK_MS);
  const stop = () => {
    clearInterval(ticker);
    process.exit(0);
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  if (args.exitOnStdinClose) {
    process.stdin.on('end', stop);
    process.stdin.on('error', stop);
    process.stdin.resume();
  }
  process.stdout.write(`ADMIN ${adminPort}\nLISTENING ${port}\n`);
}

main().catch((err) => {
  process.stderr.write(`servicebus emulator: ${err && err.message}\n`);
  process.exit(1);
});
