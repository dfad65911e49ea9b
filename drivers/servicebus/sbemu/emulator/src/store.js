'use strict';
// Entities and their messages: queues, topics, subscriptions, dead-letter
// queues, locks, sessions, scheduling, expiry and duplicate detection.
// Nothing here knows about AMQP links: consumers are objects with
// credit(), deliver(rec) and sessionLost(error) supplied by server.js.

const codec = require('./codec.js');

const DLQ_SUFFIX = '/$deadletterqueue';
const FAR_FUTURE = Number.MAX_SAFE_INTEGER;

function ms(v, def) {
  return typeof v === 'number' && v > 0 ? v : def;
}

class Entity {
  constructor(broker, path, cfg, isDlq) {
    this.broker = broker;
    this.path = path;
    this.isDlq = !!isDlq;
    this.requiresSession = !isDlq && !!cfg.requiresSession;
    this.lockDurationMs = ms(cfg.lockDurationMs, 60000);
    this.maxDeliveryCount = ms(cfg.maxDeliveryCount, 10);
    // messages in a dead-letter queue do not expire
    this.defaultTtlMs = isDlq ? FAR_FUTURE : ms(cfg.defaultMessageTimeToLiveMs, FAR_FUTURE);
    this.deadLetterOnExpiry = !isDlq && !!cfg.deadLetteringOnMessageExpiration;
    this.dupWindowMs = isDlq ? 0 : ms(cfg.duplicateDetectionHistoryTimeWindowMs, 0);
    this.nextSeq = 1;
    this.messages = new Map(); // seq -> record, in sequence order
    this.locks = new Map(); // lock token hex -> record
    this.sessions = new Map(); // session id -> {lock: {owner, until} | null, state}
    this.consumers = [];
    this.pendingAccepts = []; // next-available session receivers waiting
    this.rr = 0;
    // the dead-letter queue is a sub-queue: it shares the entity's lock duration
    this.dlq = isDlq ? null : new Entity(broker, path + '/$DeadLetterQueue', {lockDurationMs: this.lockDurationMs}, true);
    this.cfg = cfg;
  }

  // add stores a message that was sent to (or fanned out to) this entity.
  add(stored, now, extra) {
    const rec = {
      seq: this.nextSeq++,
      stored,
      messageId: stored.properties.message_id,
      sessionId: stored.properties.group_id,
      enqueuedAt: now,
      deliveryCount: 0,
      state: 'active',
      lock: null,
      scheduledAt: null,
    };
    const headerTtl = stored.header.ttl;
    rec.ttlMs = headerTtl && headerTtl > 0 ? Math.min(headerTtl, this.defaultTtlMs) : this.defaultTtlMs;
    if (extra && extra.ttlMs) rec.ttlMs = extra.ttlMs; // kept for the record: nothing expires in a dead-letter queue
    if (extra && extra.deliveryCount) rec.deliveryCount = extra.deliveryCount;
    if (extra && extra.enqueuedAt) rec.enqueuedAt = extra.enqueuedAt;
    const sched = codec.mapGet(stored.messageAnnotations, 'x-opt-scheduled-enqueue-time');
    const at = sched && sched.value instanceof Date ? sched.value.getTime() : null;
    if (!this.isDlq && at !== null && at > now) {
      rec.state = 'scheduled';
      rec.scheduledAt = at;
    }
    this.messages.set(rec.seq, rec);
    if (rec.sessionId !== undefined && !this.sessions.has(rec.sessionId)) {
      this.sessions.set(rec.sessionId, {lock: null, state: null});
    }
    return rec;
  }

  expiresAt(rec) {
    if (this.isDlq) return FAR_FUTURE;
    return rec.ttlMs >= FAR_FUTURE ? FAR_FUTURE : rec.enqueuedAt + rec.ttlMs;
  }

  remove(rec) {
    if (rec.lock) this.locks.delete(rec.lock.hex);
    rec.lock = null;
    this.messages.delete(rec.seq);
  }

  sessionHeldBy(sessionId, consumer, now) {
    const s = this.sessions.get(sessionId);
    return !!(s && s.lock && s.lock.owner === consumer && s.lock.until > now);
  }

  // lockValid tells whether a settlement with this lock token may proceed.
  lockValid(rec, now) {
    if (!rec.lock || !this.messages.has(rec.seq)) return false;
    if (this.requiresSession && rec.sessionId !== undefined && rec.lock.consumer) {
      return this.sessionHeldBy(rec.sessionId, rec.lock.consumer, now);
    }
    return rec.lock.until > now;
  }

  lock(rec, consumer, now) {
    const token = codec.newLockToken();
    let until = now + this.lockDurationMs;
    if (this.requiresSession && consumer && consumer.sessionId !== undefined) {
      until = this.sessions.get(consumer.sessionId).lock.until;
    }
    rec.lock = {token, hex: token.toString('hex'), until, consumer};
    this.locks.set(rec.lock.hex, rec);
    return rec.lock;
  }

  unlock(rec, countDelivery, now) {
    if (rec.lock) this.locks.delete(rec.lock.hex);
    rec.lock = null;
    if (countDelivery) {
      rec.deliveryCount++;
      if (!this.isDlq && rec.deliveryCount >= this.maxDeliveryCount) {
        this.deadLetter(rec, 'MaxDeliveryCountExceeded',
          `Message could not be consumed after ${this.maxDeliveryCount} delivery attempts.`, null, now);
      }
    }
  }

  applyProperties(rec, props) {
    if (!props) return;
    const keys = Object.keys(props);
    if (!keys.length) return;
    if (!rec.stored.appProps) rec.stored.appProps = [];
    for (const k of keys) codec.mapSet(rec.stored.appProps, k, codec.toTyped(props[k]), false);
  }

  complete(rec) {
    this.remove(rec);
  }

  abandon(rec, props, now) {
    this.applyProperties(rec, props);
    this.unlock(rec, true, now);
  }

  defer(rec, props, now) {
    this.applyProperties(rec, props);
    rec.state = 'deferred';
    // deferral counts a delivery, and past MaxDeliveryCount dead-letters, as
    // in the service
    this.unlock(rec, true, now);
  }

  deadLetter(rec, reason, description, props, now) {
    if (!this.dlq) {
      // a dead-letter queue has no dead-letter queue: the message stays
      this.unlock(rec, false, now);
      return;
    }
    this.remove(rec);
    const stored = rec.stored;
    if (!stored.appProps) stored.appProps = [];
    this.applyProperties(rec, props);
    if (reason !== undefined && reason !== null) {
      codec.mapSet(stored.appProps, 'DeadLetterReason', codec.types.wrap_string(String(reason)), false);
    }
    if (description !== undefined && description !== null) {
      codec.mapSet(stored.appProps, 'DeadLetterErrorDescription', codec.types.wrap_string(String(description)), false);
    }
    codec.mapDelete(stored.messageAnnotations || [], 'x-opt-scheduled-enqueue-time');
    this.dlq.add(stored, now, {deliveryCount: rec.deliveryCount, enqueuedAt: rec.enqueuedAt, ttlMs: rec.ttlMs});
    this.broker.kick(this.dlq);
  }

  // next finds the next message a consumer may receive, or undefined.
  next(consumer, now) {
    for (const rec of this.messages.values()) {
      if (rec.state !== 'active' || rec.lock) continue;
      if (this.expireIfDue(rec, now)) continue;
      if (this.requiresSession) {
        if (rec.sessionId !== consumer.sessionId) continue;
      }
      return rec;
    }
    return undefined;
  }

  expireIfDue(rec, now) {
    if (rec.lock || this.expiresAt(rec) > now) return false;
    if (this.deadLetterOnExpiry) {
      this.deadLetter(rec, 'TTLExpiredException', 'The message expired and was dead lettered.', null, now);
    } else {
      this.remove(rec);
    }
    return true;
  }

  // firstAvailableSession returns the session id with the oldest available
  // message among the unlocked sessions.
  firstAvailableSession(now) {
    for (const rec of this.messages.values()) {
      if (rec.state !== 'active' || rec.lock || rec.sessionId === undefined) continue;
      if (this.expiresAt(rec) <= now) continue;
      const s = this.sessions.get(rec.sessionId);
      if (s && s.lock && s.lock.until > now) continue;
      return rec.sessionId;
    }
    return undefined;
  }

  // acceptSession locks a session for a consumer. Returns {sessionId,
  // until} or {error}.
  acceptSession(consumer, sessionId, now) {
    if (sessionId === null || sessionId === undefined) {
      sessionId = this.firstAvailableSession(now);
      if (sessionId === undefined) return null;
    }
    let s = this.sessions.get(sessionId);
    if (!s) {
      s = {lock: null, state: null};
      this.sessions.set(sessionId, s);
    }
    if (s.lock && s.lock.until > now && s.lock.owner !== consumer) {
      return {error: {condition: 'com.microsoft:session-cannot-be-locked',
        description: `The requested session '${sessionId}' cannot be accepted. It may be locked by another receiver.`}};
    }
    if (s.lock && s.lock.owner !== consumer) this.releaseSession(sessionId, now, true); // expired
    s.lock = {owner: consumer, until: now + this.lockDurationMs};
    return {sessionId, until: s.lock.until};
  }

  renewSession(sessionId, consumer, now) {
    const s = this.sessions.get(sessionId);
    if (!s || !s.lock || s.lock.until <= now || (consumer && s.lock.owner !== consumer)) return null;
    s.lock.until = now + this.lockDurationMs;
    for (const rec of this.messages.values()) {
      if (rec.sessionId === sessionId && rec.lock && rec.lock.consumer === s.lock.owner) rec.lock.until = s.lock.until;
    }
    return s.lock.until;
  }

  // releaseSession drops a session lock: its locked messages become
  // available again. As in the service, the delivery counts as an attempt
  // only when the lock expired, not when the receiver closed the session.
  releaseSession(sessionId, now, countDelivery) {
    const s = this.sessions.get(sessionId);
    if (!s || !s.lock) return;
    const owner = s.lock.owner;
    s.lock = null;
    for (const rec of Array.from(this.messages.values())) {
      if (rec.sessionId === sessionId && rec.lock && rec.lock.consumer === owner) {
        this.unlock(rec, !!countDelivery, now);
      }
    }
    this.broker.kick(this);
  }

  addConsumer(c) {
    this.consumers.push(c);
  }

  removeConsumer(c, now) {
    this.consumers = this.consumers.filter((x) => x !== c);
    this.pendingAccepts = this.pendingAccepts.filter((p) => p.consumer !== c);
    if (this.requiresSession && c.sessionId !== undefined && this.sessionHeldBy(c.sessionId, c, now)) {
      this.releaseSession(c.sessionId, now, false);
    }
  }

  // tick handles everything time-driven.
  tick(now) {
    for (const rec of Array.from(this.messages.values())) {
      if (rec.state === 'scheduled' && rec.scheduledAt <= now) {
        rec.state = 'active';
        rec.enqueuedAt = rec.scheduledAt;
        this.broker.kick(this);
      }
      if (rec.lock && !(this.requiresSession && rec.sessionId !== undefined && rec.lock.consumer)) {
        if (rec.lock.until <= now) {
          this.unlock(rec, true, now);
          this.broker.kick(this);
        }
      }
      if (rec.state === 'active' && !rec.lock && this.messages.has(rec.seq)) {
        if (this.expireIfDue(rec, now)) this.broker.kick(this);
      }
    }
    for (const [sid, s] of this.sessions) {
      if (s.lock && s.lock.until <= now) {
        const owner = s.lock.owner;
        this.releaseSession(sid, now, true);
        if (owner && owner.sessionLost) {
          owner.sessionLost({condition: 'com.microsoft:session-lock-lost',
            description: `The session lock has expired on the MessageSession. Session ${sid}.`});
        }
      }
    }
    this.pendingAccepts = this.pendingAccepts.filter((p) => !p.alive || p.alive());
    for (const p of this.pendingAccepts.slice()) {
      if (p.deadline <= now) {
        this.pendingAccepts = this.pendingAccepts.filter((x) => x !== p);
        p.done({condition: 'com.microsoft:timeout',
          description: 'The operation did not complete within the allotted timeout while accepting a session.'});
      }
    }
    if (this.dlq) this.dlq.tick(now);
  }

  // pump hands available messages to consumers with credit, round robin.
  pump(now) {
    this.pendingAccepts = this.pendingAccepts.filter((p) => !p.alive || p.alive());
    for (const p of this.pendingAccepts.slice()) {
      const r = this.acceptSession(p.consumer, null, now);
      if (!r) break;
      this.pendingAccepts = this.pendingAccepts.filter((x) => x !== p);
      p.done(null, r);
    }
    let progressed = true;
    while (progressed) {
      progressed = false;
      const n = this.consumers.length;
      for (let i = 0; i < n; i++) {
        const c = this.consumers[(this.rr + i) % n];
        if (!c || c.credit() <= 0) continue;
        if (this.requiresSession && !this.sessionHeldBy(c.sessionId, c, now)) continue;
        const rec = this.next(c, now);
        if (!rec) continue;
        this.rr = (this.rr + i + 1) % Math.max(n, 1);
        if (c.receiveAndDelete) {
          this.remove(rec);
          c.deliver(rec, null);
        } else {
          c.deliver(rec, this.lock(rec, c, now));
        }
        progressed = true;
        break;
      }
    }
  }
}

class Topic {
  constructor(name, cfg) {
    this.path = name;
    this.cfg = cfg;
    this.subscriptions = new Map(); // lower name -> Entity
    this.nextSeq = 1;
    this.scheduled = new Map(); // seq -> {stored, at}: held here, fanned out when due
  }
}

class Broker {
  constructor(topology, clock) {
    this.now = clock || (() => Date.now());
    this.queues = new Map();
    this.topics = new Map();
    this.dedup = new Map(); // send target path -> Map(messageId -> time)
    this.kicked = new Set();
    this.kickScheduled = false;
    for (const q of topology.queues || []) this.createQueue(q);
    for (const t of topology.topics || []) {
      this.createTopic(t);
      for (const s of t.subscriptions || []) this.createSubscription(t.name, s);
    }
  }

  // createQueue, createTopic and createSubscription add an entity at run
  // time (the topology file and the administration API both use them).
  // They return the entity, or null when the name is taken.
  createQueue(cfg) {
    const key = cfg.name.toLowerCase();
    if (this.queues.has(key) || this.topics.has(key)) return null;
    const q = new Entity(this, cfg.name, cfg, false);
    this.queues.set(key, q);
    return q;
  }

  createTopic(cfg) {
    const key = cfg.name.toLowerCase();
    if (this.queues.has(key) || this.topics.has(key)) return null;
    const t = new Topic(cfg.name, cfg);
    this.topics.set(key, t);
    return t;
  }

  createSubscription(topicName, cfg) {
    const t = this.topics.get(topicName.toLowerCase());
    if (!t) return undefined;
    const key = cfg.name.toLowerCase();
    if (t.subscriptions.has(key)) return null;
    const s = new Entity(this, `${t.path}/Subscriptions/${cfg.name}`, cfg, false);
    t.subscriptions.set(key, s);
    return s;
  }

  // deleteEntity removes a queue, a topic (with its subscriptions) or a
  // subscription; its receivers lose their links. Returns false when absent.
  deleteEntity(path, closeConsumers) {
    const parts = path.toLowerCase().split('/');
    let gone = [];
    if (parts.length === 1) {
      const q = this.queues.get(parts[0]);
      const t = this.topics.get(parts[0]);
      if (q) {
        this.queues.delete(parts[0]);
        gone = [q];
      } else if (t) {
        this.topics.delete(parts[0]);
        gone = Array.from(t.subscriptions.values());
      } else {
        return false;
      }
    } else if (parts.length === 3 && parts[1] === 'subscriptions') {
      const t = this.topics.get(parts[0]);
      const s = t && t.subscriptions.get(parts[2]);
      if (!s) return false;
      t.subscriptions.delete(parts[2]);
      gone = [s];
    } else {
      return false;
    }
    if (parts.length === 1) this.dedup.delete(this.dedupKeyOf(parts[0]));
    if (closeConsumers) for (const e of gone) closeConsumers(e);
    return true;
  }

  // resolve maps a link address to {send, receive} targets.
  resolve(address) {
    if (typeof address !== 'string') return null;
    let a = address.replace(/^amqps?:\/\/[^/]+\//i, '').replace(/^\/+/, '');
    const lower = a.toLowerCase();
    let dlq = false;
    let base = lower;
    if (lower.endsWith(DLQ_SUFFIX)) {
      dlq = true;
      base = lower.slice(0, -DLQ_SUFFIX.length);
    }
    const q = this.queues.get(base);
    if (q) return {entity: dlq ? q.dlq : q, sendTarget: dlq ? null : q};
    const parts = base.split('/');
    if (parts.length === 1) {
      const t = this.topics.get(base);
      if (t && !dlq) return {entity: null, sendTarget: t};
      return null;
    }
    if (parts.length === 3 && parts[1] === 'subscriptions') {
      const t = this.topics.get(parts[0]);
      const s = t && t.subscriptions.get(parts[2]);
      if (s) return {entity: dlq ? s.dlq : s, sendTarget: null};
    }
    return null;
  }

  dedupKeyOf(path) {
    return path.toLowerCase();
  }

  allEntities() {
    const out = [];
    for (const q of this.queues.values()) out.push(q);
    for (const t of this.topics.values()) for (const s of t.subscriptions.values()) out.push(s);
    return out;
  }

  // send stores a message sent to a queue or topic. Returns the records
  // created (empty when duplicate detection dropped it).
  send(target, stored) {
    const now = this.now();
    const window = target instanceof Topic
      ? (target.cfg.duplicateDetectionHistoryTimeWindowMs || 0)
      : (target.dupWindowMs || 0);
    const id = stored.properties.message_id;
    if (window > 0 && id !== undefined && id !== null) {
      const key = String(id);
      const dkey = this.dedupKeyOf(target.path);
      let seen = this.dedup.get(dkey);
      if (!seen) this.dedup.set(dkey, (seen = new Map()));
      const at = seen.get(key);
      if (at !== undefined && now - at < window) return [];
      seen.set(key, now);
    }
    const out = [];
    if (target instanceof Topic) {
      const sched = codec.mapGet(stored.messageAnnotations, 'x-opt-scheduled-enqueue-time');
      const at = sched && sched.value instanceof Date ? sched.value.getTime() : null;
      if (at !== null && at > now) {
        const seq = target.nextSeq++;
        target.scheduled.set(seq, {stored, at});
        return [{seq}];
      }
      target.nextSeq++;
      for (const sub of target.subscriptions.values()) {
        out.push(sub.add(cloneStored(stored), now));
        this.kick(sub);
      }
    } else {
      out.push(target.add(stored, now));
      this.kick(target);
    }
    return out;
  }

  // fanOut delivers a due scheduled topic message to every subscription.
  fanOut(topic, stored, now) {
    for (const sub of topic.subscriptions.values()) {
      sub.add(cloneStored(stored), now);
      this.kick(sub);
    }
  }

  cancelScheduled(target, seq) {
    if (target instanceof Topic) {
      target.scheduled.delete(seq);
      return;
    }
    const rec = target.messages.get(seq);
    if (rec && rec.state === 'scheduled') target.remove(rec);
  }

  kick(entity) {
    this.kicked.add(entity);
    if (!this.kickScheduled) {
      this.kickScheduled = true;
      setImmediate(() => this.flush());
    }
  }

  flush() {
    this.kickScheduled = false;
    const now = this.now();
    while (this.kicked.size) {
      const list = Array.from(this.kicked);
      this.kicked.clear();
      for (const e of list) e.pump(now);
    }
  }

  tick() {
    const now = this.now();
    for (const t of this.topics.values()) {
      for (const [seq, item] of Array.from(t.scheduled)) {
        if (item.at <= now) {
          t.scheduled.delete(seq);
          this.fanOut(t, item.stored, now);
        }
      }
    }
    for (const e of this.allEntities()) e.tick(now);
    for (const [path, seen] of this.dedup) {
      for (const [id, at] of seen) if (now - at > 24 * 3600 * 1000) seen.delete(id);
      if (!seen.size) this.dedup.delete(path);
    }
    this.flush();
  }
}

function cloneStored(s) {
  return {
    header: Object.assign({}, s.header),
    messageAnnotations: s.messageAnnotations ? s.messageAnnotations.slice() : null,
    propertiesRaw: s.propertiesRaw,
    appProps: s.appProps ? s.appProps.slice() : null,
    restRaw: s.restRaw,
    properties: s.properties,
    applicationProperties: s.applicationProperties,
  };
}

module.exports = {Broker, Entity, Topic, FAR_FUTURE};
