'use strict';
// The AMQP side: connections, links, transfers and dispositions.

require('./guard.js'); // before rhea decodes anything
const rhea = require('rhea');
const terminus = require('rhea/lib/terminus.js');
const RheaConnection = require('rhea/lib/connection.js');
const codec = require('./codec.js');
const cbs = require('./cbs.js');
const management = require('./management.js');
const {render} = require('./render.js');

const types = rhea.types;
const SESSION_FILTER = 'com.microsoft:session-filter';
const SESSION_FILTER_CODE = 0x137000000C;
const DEFAULT_ACCEPT_TIMEOUT_MS = 60000;
const BATCH_FORMAT = 0x80013700;
const OUTGOING_WINDOW = 1 << 16;
const ACCEPT_TIMEOUT_MARGIN_MS = 250;

// rhea decodes incoming messages itself; keep the bytes so the bare message
// can be stored exactly as sent.
const originalDecode = rhea.message.decode;
rhea.message.decode = function (buf) {
  const m = originalDecode(buf);
  Object.defineProperty(m, '__raw', {value: buf, enumerable: false});
  return m;
};

function debug(...args) {
  if (process.env.WARY_SB_EMULATOR_DEBUG) console.error('[sb-emulator]', ...args);
}

// stats counts what GET /$emulator/stats reports: connections the emulator
// dropped on a protocol or read error, and stale end frames it ignored.
const stats = {droppedConnections: 0, ignoredEnds: 0};

// The Go SDK's AMQP client (go-amqp) may send end on a channel whose session
// has already ended (its end exchange done, or an end already received),
// when sessions are begun and ended quickly on one connection (many
// concurrent session accepts). rhea treats that as a protocol error and drops
// the whole connection ("end received on invalid channel", "End already
// received"); the service keeps the connection (the SDK works against it),
// and so does the emulator: such an end is dropped without a reply (go-amqp
// would end its own connection on an end for a channel it has no session
// on); every other frame keeps rhea's checks.
const rheaOnEnd = RheaConnection.prototype.on_end;
RheaConnection.prototype.on_end = function (frame) {
  const session = this.remote_channel_map[frame.channel];
  if (!session || !session.state.remote_open) {
    stats.ignoredEnds++;
    debug('ignoring end on channel', frame.channel, session ? '(session already ended)' : '(no session)');
    return;
  }
  return rheaOnEnd.call(this, frame);
};

function amqpError(condition, description) {
  return {condition, description};
}

// echoAttach copies what the peer asked for into our attach reply.
function echoAttach(link, source, target) {
  const remote = link.remote.attach;
  link.local.attach.snd_settle_mode = remote.snd_settle_mode;
  link.local.attach.rcv_settle_mode = remote.rcv_settle_mode;
  link.local.attach.source = source !== undefined ? source : (remote.source ? remote.source.described() : null);
  link.local.attach.target = target !== undefined ? target : (remote.target ? remote.target.described() : null);
}

// refuse answers an attach with null termini followed by a detach carrying
// the error, as the service does.
function refuse(link, condition, description) {
  debug('refusing link', link.name, condition, description);
  link.local.attach.source = null;
  link.local.attach.target = null;
  link.close(amqpError(condition, description));
}

// pendingTransfers counts deliveries queued on a link that rhea has not yet
// written (and so not yet taken from the link's credit).
function pendingTransfers(link) {
  const out = link.session.outgoing;
  let n = 0;
  for (let id = out.next_pending_delivery; id < out.next_delivery_id; id++) {
    const d = out.deliveries.by_id(id);
    if (d && d.link === link) n++;
  }
  return n;
}

// batchItems splits a batch (message-format 0x80013700): an envelope whose
// data sections each hold one encoded message.
function batchItems(raw) {
  const envelope = originalDecode(raw);
  const body = envelope.body;
  if (!body || body.typecode !== 0x75) throw new Error('batch without data sections');
  return body.multiple ? body.content : [body.content];
}

// settleReply settles an outgoing delivery with our outcome. The client
// (rcv-settle-mode second) waits for this and never settles again, so the
// delivery is finished on both sides: mark it so rhea frees its slot in the
// session's outgoing window.
function settleReply(delivery, state) {
  delivery.update(true, state);
  delivery.remote_settled = true;
}

// forgetDeliveries frees the window slots of a closed link's unsettled
// deliveries (the client can no longer settle them on this link).
function forgetDeliveries(link) {
  const out = link.session && link.session.outgoing;
  if (!out) return;
  // (deliveries not yet written stay: rhea writes them in order)
  for (let id = out.next_delivery_id - out.deliveries.size; id < out.next_pending_delivery; id++) {
    const d = out.deliveries.by_id(id);
    if (d && d.link === link && !(d.settled && d.remote_settled)) {
      d.settled = true;
      d.remote_settled = true;
    }
  }
}

function sessionFilterOf(source) {
  if (!source || !source.value) return {present: false};
  const filter = source.value[7];
  if (!filter || !Array.isArray(filter.value)) return {present: false};
  const entries = filter.value;
  for (let i = 0; i + 1 < entries.length; i += 2) {
    if (String(entries[i].value) === SESSION_FILTER) {
      const v = entries[i + 1];
      const inner = v && v.value !== undefined ? v.value : null;
      return {present: true, sessionId: inner === null || inner === undefined ? null : String(inner)};
    }
  }
  return {present: false};
}

function sourceWithSession(remoteSource, sessionId) {
  const src = terminus.source({});
  src.value = remoteSource.value.slice();
  while (src.value.length < 8) src.value.push(types.Null());
  const filtered = types.described(types.wrap_ulong(SESSION_FILTER_CODE), types.wrap_string(sessionId));
  src.value[7] = types.Map32([types.wrap_symbol(SESSION_FILTER), filtered]);
  return src.described();
}

class Server {
  constructor(broker, opts) {
    this.broker = broker;
    this.maxFrameSize = opts.maxFrameSize || 65536;
    this.maxMessageSize = opts.maxMessageSize || 262144;
    this.outgoingWindow = opts.outgoingWindow || OUTGOING_WINDOW;
    this.container = rhea.create_container({
      id: 'wary-servicebus-emulator',
      sender_options: {autosettle: false, treat_modified_as_released: false},
      receiver_options: {autoaccept: false, credit_window: 1000},
    });
    this.container.sasl_server_mechanisms.enable_anonymous();
    this.wire();
  }

  listen(port, host) {
    return new Promise((resolve, reject) => {
      // A delivery whose lock is never settled (the client let it expire)
      // holds its slot in the session's outgoing window until its link
      // closes: allow many of them.
      //
      // tcp_no_delay: rhea writes each frame with a socket write of its own
      // and leaves Nagle's algorithm on for the connections it accepts, so
      // a small frame written while an earlier one was still unacknowledged
      // (an attach's reply and then a flow, a disposition and then a reply)
      // waited for the client's delayed ACK, about 40 ms on Linux. Each
      // $cbs put-token (a session, two links, a request and its reply) hit
      // that twice (the receiver's attach and the request), about 90 ms,
      // and the SDK negotiates two claims, one at a time per client, for
      // every link it opens, session accepts included. Go's sockets (the
      // SDK's) have Nagle off too.
      const server = this.container.listen({port, host, max_frame_size: this.maxFrameSize, tcp_no_delay: true,
        session_buffer_size: {outgoing: this.outgoingWindow, incoming: 2048}});
      server.once('listening', () => resolve(server.address().port));
      server.once('error', reject);
      this.server = server;
    });
  }

  wire() {
    const c = this.container;
    c.on('connection_open', (ctx) => {
      const conn = ctx.connection;
      // rhea splits outgoing transfers by the peer's max-frame-size
      // (connection.max_frame_size reads the peer's open frame).
      conn.sb = {replyLinks: new Map(), consumers: new Set()};
    });
    c.on('sender_open', (ctx) => this.onClientReceiver(ctx.sender));
    c.on('receiver_open', (ctx) => this.onClientSender(ctx.receiver));
    c.on('message', (ctx) => this.onMessage(ctx));
    for (const outcome of ['accepted', 'released', 'rejected', 'modified']) {
      c.on(outcome, (ctx) => this.onOutcome(outcome, ctx));
    }
    c.on('sender_close', (ctx) => this.dropLink(ctx.sender));
    c.on('sender_error', () => {});
    c.on('receiver_error', () => {});
    c.on('receiver_close', () => {});
    c.on('session_error', () => {});
    c.on('session_close', (ctx) => this.dropConnectionLinks(ctx.connection, ctx.session));
    c.on('connection_close', (ctx) => this.dropConnectionLinks(ctx.connection));
    c.on('connection_error', () => {});
    // rhea ends the socket after a protocol_error or error while reading
    c.on('protocol_error', (err) => {
      stats.droppedConnections++;
      console.error('[sb-emulator] dropping connection on a protocol error:', err && err.message);
    });
    c.on('disconnected', (ctx) => this.dropConnectionLinks(ctx.connection));
    c.on('error', (err) => {
      stats.droppedConnections++;
      debug('container error', err && err.message);
    });
    c.on('sendable', (ctx) => {
      if (ctx.sender.sb && ctx.sender.sb.consumer) this.broker.kick(ctx.sender.sb.consumer.entity);
    });
    c.on('sender_draining', (ctx) => {
      const consumer = ctx.sender.sb && ctx.sender.sb.consumer;
      if (consumer) {
        consumer.entity.pump(this.broker.now());
      }
      ctx.sender.set_drained(true);
    });
  }

  // A client receiver: we send. Entity receivers, $cbs and $management replies.
  onClientReceiver(sender) {
    const remote = sender.remote.attach;
    const address = remote.source && remote.source.address;
    const conn = sender.connection;
    debug('client receiver attach', address, 'target', remote.target && remote.target.address);
    if (address === '$cbs' || (typeof address === 'string' && address.toLowerCase().endsWith('/$management'))) {
      echoAttach(sender);
      const replyTo = remote.target && remote.target.address;
      sender.sb = {reply: true, replyTo};
      if (replyTo) conn.sb.replyLinks.set(replyTo, sender);
      return;
    }
    const resolved = this.broker.resolve(address);
    if (!resolved || !resolved.entity) {
      refuse(sender, 'amqp:not-found', `The messaging entity '${address}' could not be found.`);
      return;
    }
    const entity = resolved.entity;
    const filter = sessionFilterOf(remote.source);
    if (filter.present && !entity.requiresSession) {
      refuse(sender, 'amqp:not-allowed', `It is not possible for an entity that does not require sessions to create a session receiver. Entity: ${entity.path}`);
      return;
    }
    if (!filter.present && entity.requiresSession) {
      refuse(sender, 'amqp:not-allowed', `It is not possible for an entity that requires sessions to create a non-sessionful message receiver. Entity: ${entity.path}`);
      return;
    }
    const consumer = {
      entity,
      link: sender,
      name: sender.name,
      sessionId: undefined,
      receiveAndDelete: remote.snd_settle_mode === 1,
      credit: () => (sender.is_open()
        ? Math.min(sender.credit - pendingTransfers(sender), sender.session.outgoing.available())
        : 0),
      deliver: (rec, lock) => this.deliver(consumer, rec, lock),
      sessionLost: (err) => {
        this.dropConsumer(consumer);
        sender.close(err);
      },
    };
    sender.sb = {consumer};
    if (!filter.present) {
      echoAttach(sender);
      this.addConsumer(conn, consumer);
      return;
    }
    const now = this.broker.now();
    const finish = (err, accepted) => {
      if (err) {
        refuse(sender, err.condition, err.description);
        return;
      }
      consumer.sessionId = accepted.sessionId;
      echoAttach(sender, sourceWithSession(remote.source, accepted.sessionId));
      sender.local.attach.properties = {
        'com.microsoft:locked-until-utc': codec.wrapLong(codec.msToTicks(accepted.until)),
      };
      this.addConsumer(conn, consumer);
    };
    const r = entity.acceptSession(consumer, filter.sessionId, now);
    if (r && r.error) {
      finish(r.error);
      return;
    }
    if (r) {
      finish(null, r);
      return;
    }
    // next-available with nothing available: hold the attach until a session
    // turns up or the client's timeout passes.
    sender.state.local_open = false;
    sender.state.open_requests = 0;
    // The client derives com.microsoft:timeout from its own deadline; answer a
    // little early so the timeout reaches it before its context expires.
    const props = remote.properties || {};
    const t = Number(props['com.microsoft:timeout']);
    const timeout = t > 0 ? Math.max(0, t - ACCEPT_TIMEOUT_MARGIN_MS) : DEFAULT_ACCEPT_TIMEOUT_MS;
    const pending = {
      consumer,
      deadline: now + timeout,
      // A client that gave up (its context cancelled) abandons the link
      // without a detach, or ends its AMQP session: such an accept must
      // never take a session lock.
      alive: () => !consumer.dropped && sender.is_remote_open() && !sender.connection.is_closed(),
      done: (err, accepted) => {
        clearTimeout(pending.timer);
        if (sender.state.remote_open === false) return; // client went away
        sender.state.open();
        finish(err, accepted);
        sender.connection._register();
      },
    };
    pending.timer = setTimeout(() => this.broker.tick(), timeout + 1);
    entity.pendingAccepts.push(pending);
  }

  addConsumer(conn, consumer) {
    if (conn.sb) conn.sb.consumers.add(consumer);
    consumer.entity.addConsumer(consumer);
    this.broker.kick(consumer.entity);
  }

  // A client sender: we receive. Entity senders and $cbs/$management requests.
  onClientSender(receiver) {
    const remote = receiver.remote.attach;
    const address = remote.target && remote.target.address;
    debug('client sender attach', address);
    if (address === '$cbs') {
      echoAttach(receiver);
      receiver.sb = {cbs: true};
      return;
    }
    if (typeof address === 'string' && address.toLowerCase().endsWith('/$management')) {
      const base = address.slice(0, -'/$management'.length);
      const resolved = this.broker.resolve(base);
      if (!resolved) {
        refuse(receiver, 'amqp:not-found', `The messaging entity '${base}' could not be found.`);
        return;
      }
      echoAttach(receiver);
      receiver.sb = {management: resolved};
      return;
    }
    const resolved = this.broker.resolve(address);
    if (!resolved || !resolved.sendTarget) {
      refuse(receiver, 'amqp:not-found', `The messaging entity '${address}' could not be found.`);
      return;
    }
    echoAttach(receiver);
    receiver.local.attach.max_message_size = this.maxMessageSize;
    receiver.sb = {sendTarget: resolved.sendTarget};
  }

  onMessage(ctx) {
    const receiver = ctx.receiver;
    const delivery = ctx.delivery;
    const role = receiver.sb || {};
    const accept = () => delivery.update(true, rhea.message.accepted().described());
    const reject = (condition, description) => delivery.update(true,
      rhea.message.rejected({error: amqpError(condition, description)}).described());
    try {
      if (role.cbs) {
        accept();
        this.reply(receiver.connection, ctx.message, cbs.handle(ctx.message));
        return;
      }
      if (role.management) {
        accept();
        const res = management.handle(this, role.management, ctx.message, receiver.connection);
        this.reply(receiver.connection, ctx.message, res);
        return;
      }
      if (role.sendTarget) {
        const batch = ctx.format === BATCH_FORMAT;
        if (ctx.format !== undefined && !batch) {
          reject('amqp:not-implemented', `message format ${ctx.format} is not supported`);
          return;
        }
        const raw = batch ? ctx.message : ctx.message.__raw;
        if (raw.length > this.maxMessageSize) {
          reject('amqp:link:message-size-exceeded', `The received message (size ${raw.length}) exceeds the limit (${this.maxMessageSize}).`);
          return;
        }
        const items = (batch ? batchItems(raw) : [raw]).map((b) => codec.parse(b));
        const target = role.sendTarget;
        if (target.requiresSession && items.some((m) => m.properties.group_id === undefined)) {
          reject('amqp:not-allowed', `The SessionId was not set on a message, and it cannot be sent to the entity. Entities that have session support enabled can only receive messages that have the SessionId set to a valid value. Entity: ${target.path}`);
          return;
        }
        for (const stored of items) this.broker.send(target, stored);
        accept();
        return;
      }
      reject('amqp:not-allowed', 'unexpected transfer');
    } catch (err) {
      debug('message handling failed', err && err.stack);
      reject('amqp:internal-error', String(err && err.message));
    }
  }

  reply(conn, request, res) {
    const replyTo = request.reply_to;
    const link = conn.sb && conn.sb.replyLinks.get(replyTo);
    if (!link) {
      debug('no reply link for', replyTo);
      return;
    }
    link.send({
      correlation_id: request.message_id,
      to: replyTo,
      application_properties: res.properties,
      body: res.body === undefined ? null : res.body,
    });
  }

  deliver(consumer, rec, lock) {
    const now = this.broker.now();
    const bytes = render(consumer.entity, rec, lock, now, false);
    const tag = lock ? codec.toDotNetGuid(lock.token) : codec.newLockToken();
    const delivery = consumer.link.send(bytes, tag, 0);
    delivery.sb = {rec, lock, entity: consumer.entity};
    debug('delivered', consumer.entity.path, 'seq', rec.seq, 'to', consumer.name);
  }

  onOutcome(outcome, ctx) {
    const delivery = ctx.delivery;
    const info = delivery.sb;
    if (!info || !info.lock || delivery.settled) return;
    const {entity, rec, lock} = info;
    const now = this.broker.now();
    const state = delivery.remote_state;
    settleReply(delivery, this.outcomeReply(outcome, entity, rec, lock, state, now));
    this.broker.kick(entity);
  }

  // outcomeReply applies a client's outcome and returns the state we settle
  // the delivery with.
  outcomeReply(outcome, entity, rec, lock, state, now) {
    if (rec.lock !== lock || !entity.lockValid(rec, now)) {
      const sessionful = entity.requiresSession && rec.sessionId !== undefined;
      return rhea.message.rejected({error: sessionful
        ? amqpError('com.microsoft:session-lock-lost', 'The session lock has expired on the MessageSession. Accept a new MessageSession.')
        : amqpError('com.microsoft:message-lock-lost', 'The lock supplied is invalid. Either the lock expired, or the message has already been removed from the queue.')}).described();
    }
    switch (outcome) {
      case 'accepted':
        entity.complete(rec);
        return rhea.message.accepted().described();
      case 'released':
        entity.unlock(rec, false, now);
        return rhea.message.released().described();
      case 'modified': {
        const props = state && state.message_annotations;
        if (state && state.undeliverable_here) entity.defer(rec, props, now);
        else entity.abandon(rec, props, now);
        return rhea.message.modified({delivery_failed: !!(state && state.delivery_failed),
          undeliverable_here: !!(state && state.undeliverable_here)}).described();
      }
      default: { // rejected
        const err = (state && state.error) || {};
        const infoMap = Object.assign({}, err.info || {});
        const reason = infoMap.DeadLetterReason;
        const description = infoMap.DeadLetterErrorDescription;
        delete infoMap.DeadLetterReason;
        delete infoMap.DeadLetterErrorDescription;
        entity.deadLetter(rec, reason, description, infoMap, now);
        return rhea.message.rejected({}).described();
      }
    }
  }

  dropConsumer(consumer) {
    if (consumer.dropped) return;
    consumer.dropped = true;
    const conn = consumer.link.connection;
    if (conn.sb) conn.sb.consumers.delete(consumer);
    consumer.entity.removeConsumer(consumer, this.broker.now());
    this.broker.kick(consumer.entity);
  }

  dropLink(sender) {
    forgetDeliveries(sender);
    if (sender.sb && sender.sb.consumer) this.dropConsumer(sender.sb.consumer);
    if (sender.sb && sender.sb.reply && sender.connection.sb) {
      sender.connection.sb.replyLinks.delete(sender.sb.replyTo);
    }
  }

  dropConnectionLinks(conn, session) {
    if (!conn || !conn.sb) return;
    for (const consumer of Array.from(conn.sb.consumers)) {
      if (!session || consumer.link.session === session) this.dropConsumer(consumer);
    }
    // next-available accepts still waiting on this connection or session
    for (const e of this.broker.allEntities()) {
      const gone = e.pendingAccepts.filter((p) => p.consumer.link.connection === conn &&
        (!session || p.consumer.link.session === session));
      for (const p of gone) this.dropConsumer(p.consumer);
    }
  }

  // closeEntity detaches every receiver of a deleted entity (and of its
  // dead-letter queue) with amqp:not-found.
  closeEntity(entity) {
    const err = amqpError('amqp:not-found', `The messaging entity '${entity.path}' could not be found.`);
    for (const e of [entity, entity.dlq]) {
      if (!e) continue;
      for (const p of e.pendingAccepts.slice()) p.done(err);
      e.pendingAccepts = [];
      for (const c of e.consumers.slice()) c.sessionLost(err);
    }
  }

  // consumerByLinkName finds the receiver a $management request names.
  consumerByLinkName(conn, name) {
    if (!conn || !conn.sb || !name) return undefined;
    for (const c of conn.sb.consumers) if (c.name === name) return c;
    return undefined;
  }
}

module.exports = {Server, stats};
