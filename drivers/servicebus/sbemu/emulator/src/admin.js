'use strict';
// The administration API's subset over plain HTTP on loopback: the ATOM
// entries azservicebus/admin sends and reads for queues, topics and
// subscriptions (create, get, delete), so tests create fresh entities at run
// time. Any Authorization header is accepted, as any AMQP token is.
//
// GET /$emulator/state/<entity path> answers JSON about an entity's
// receivers, for the emulator's own tests; GET /$emulator/stats counts the
// connections the emulator dropped and the stale end frames it ignored.

const http = require('http');
const {FAR_FUTURE} = require('./store.js');
const {stats} = require('./server.js');

const ATOM_NS = 'http://www.w3.org/2005/Atom';
const SB_NS = 'http://schemas.microsoft.com/netservices/2010/10/servicebus/connect';
const XSI_NS = 'http://www.w3.org/2001/XMLSchema-instance';
const MAX_TIMESPAN = 'P10675199DT2H48M5.4775807S'; // .NET TimeSpan.MaxValue
const MAX_BODY = 1 << 20;

// parseDuration reads an ISO 8601 duration as the SDK writes it (PnDTnHnMn.nS).
function parseDuration(s) {
  if (s === undefined) return undefined;
  if (s === MAX_TIMESPAN) return FAR_FUTURE;
  const m = /^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?$/.exec(s.trim());
  if (!m) throw new Error(`malformed duration ${JSON.stringify(s)}`);
  const [, d, h, min, sec] = m;
  return Math.round(((Number(d || 0) * 24 + Number(h || 0)) * 60 + Number(min || 0)) * 60000 + Number(sec || 0) * 1000);
}

function formatDuration(msv) {
  if (msv >= FAR_FUTURE) return MAX_TIMESPAN;
  let rest = msv;
  const d = Math.floor(rest / 86400000);
  rest -= d * 86400000;
  const h = Math.floor(rest / 3600000);
  rest -= h * 3600000;
  const m = Math.floor(rest / 60000);
  rest -= m * 60000;
  const s = rest / 1000;
  let out = 'P' + (d ? `${d}D` : '') + 'T';
  if (h) out += `${h}H`;
  if (m) out += `${m}M`;
  if (s || (!d && !h && !m)) out += `${s}S`;
  return out === 'PT' ? 'PT0S' : out.replace(/T$/, '');
}

// field reads one element's text from the request's description.
function field(xml, name) {
  const m = new RegExp(`<(?:[\\w-]+:)?${name}(?:\\s[^>]*)?>([^<]*)</(?:[\\w-]+:)?${name}>`).exec(xml);
  return m ? m[1] : undefined;
}

function bool(v) {
  return v === undefined ? undefined : v.trim() === 'true';
}

function int(v) {
  return v === undefined ? undefined : Number(v);
}

function escape(s) {
  return String(s).replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

// configFrom turns a QueueDescription or SubscriptionDescription into the
// emulator's entity config.
function configFrom(name, xml) {
  const cfg = {name};
  const lock = parseDuration(field(xml, 'LockDuration'));
  if (lock !== undefined) cfg.lockDurationMs = lock;
  const ttl = parseDuration(field(xml, 'DefaultMessageTimeToLive'));
  if (ttl !== undefined && ttl < FAR_FUTURE) cfg.defaultMessageTimeToLiveMs = ttl;
  const mdc = int(field(xml, 'MaxDeliveryCount'));
  if (mdc !== undefined) cfg.maxDeliveryCount = mdc;
  cfg.requiresSession = !!bool(field(xml, 'RequiresSession'));
  cfg.deadLetteringOnMessageExpiration = !!bool(field(xml, 'DeadLetteringOnMessageExpiration'));
  if (bool(field(xml, 'RequiresDuplicateDetection'))) {
    const w = parseDuration(field(xml, 'DuplicateDetectionHistoryTimeWindow'));
    cfg.duplicateDetectionHistoryTimeWindowMs = w === undefined ? 600000 : w;
  }
  for (const k of ['lockDurationMs', 'maxDeliveryCount', 'defaultMessageTimeToLiveMs', 'duplicateDetectionHistoryTimeWindowMs']) {
    if (cfg[k] !== undefined && !(Number.isFinite(cfg[k]) && cfg[k] > 0)) throw new Error(`invalid ${k}`);
  }
  return cfg;
}

function entry(base, path, title, kind, body) {
  const now = new Date().toISOString();
  return `<?xml version="1.0" encoding="utf-8"?><entry xmlns="${ATOM_NS}">` +
    `<id>${escape(base + path)}</id><title type="text">${escape(title)}</title>` +
    `<published>${now}</published><updated>${now}</updated>` +
    `<content type="application/xml"><${kind} xmlns="${SB_NS}" xmlns:i="${XSI_NS}">${body}</${kind}></content></entry>`;
}

function el(name, v) {
  return v === undefined ? '' : `<${name}>${escape(v)}</${name}>`;
}

class Admin {
  constructor(broker, server, opts) {
    this.broker = broker;
    this.server = server; // the AMQP side: closes receivers of deleted entities
    this.maxMessageSize = opts.maxMessageSize || 262144;
  }

  listen(port, host) {
    return new Promise((resolve, reject) => {
      const srv = http.createServer((req, res) => this.handle(req, res));
      srv.once('listening', () => resolve(srv.address().port));
      srv.once('error', reject);
      srv.listen(port, host);
      this.http = srv;
    });
  }

  handle(req, res) {
    const chunks = [];
    let size = 0;
    req.on('data', (c) => {
      size += c.length;
      if (size <= MAX_BODY) chunks.push(c);
    });
    req.on('end', () => {
      let out;
      try {
        out = size > MAX_BODY ? {status: 413, text: 'request too large'}
          : this.route(req, Buffer.concat(chunks).toString('utf8'));
      } catch (err) {
        out = {status: 400, text: String(err && err.message)};
      }
      const type = out.json !== undefined ? 'application/json' : (out.xml ? 'application/atom+xml;type=entry;charset=utf-8' : 'text/plain');
      const body = out.json !== undefined ? JSON.stringify(out.json) : (out.xml || out.text || '');
      res.writeHead(out.status, {'Content-Type': type});
      res.end(body);
    });
  }

  route(req, body) {
    const url = new URL(req.url, 'http://emulator');
    const path = decodeURIComponent(url.pathname).replace(/^\/+/, '').replace(/\/+$/, '');
    const base = `https://${req.headers.host || 'emulator'}/`;
    if (path === '$emulator/stats' && req.method === 'GET') return {status: 200, json: {...stats}};
    if (path.startsWith('$emulator/state/')) return this.state(path.slice('$emulator/state/'.length));
    const parts = path.split('/');
    const isSub = parts.length === 3 && parts[1].toLowerCase() === 'subscriptions';
    if (!(parts.length === 1 || isSub) || parts.some((p) => !p)) return {status: 404, text: 'not found'};
    switch (req.method) {
      case 'GET': return this.get(base, path, parts, isSub);
      case 'PUT': return this.put(base, path, parts, isSub, body, req.headers['if-match'] !== undefined);
      case 'DELETE':
        return this.broker.deleteEntity(path, (e) => this.server.closeEntity(e))
          ? {status: 200, text: ''} : {status: 404, text: 'not found'};
      default: return {status: 405, text: 'method not allowed'};
    }
  }

  get(base, path, parts, isSub) {
    if (isSub) {
      const t = this.broker.topics.get(parts[0].toLowerCase());
      const s = t && t.subscriptions.get(parts[2].toLowerCase());
      return s ? {status: 200, xml: this.subscriptionEntry(base, path, s)} : {status: 404, text: 'not found'};
    }
    const q = this.broker.queues.get(path.toLowerCase());
    if (q) return {status: 200, xml: this.queueEntry(base, path, q)};
    const t = this.broker.topics.get(path.toLowerCase());
    if (t) return {status: 200, xml: this.topicEntry(base, path, t)};
    return {status: 404, text: 'not found'};
  }

  put(base, path, parts, isSub, body, update) {
    if (update) return {status: 400, text: 'updating an entity is not implemented by the emulator'};
    if (isSub) {
      if (!/SubscriptionDescription/.test(body)) return {status: 400, text: 'expected a SubscriptionDescription'};
      const s = this.broker.createSubscription(parts[0], configFrom(parts[2], body));
      if (s === undefined) return {status: 404, text: `topic ${parts[0]} not found`};
      if (s === null) return {status: 409, text: 'subscription already exists'};
      return {status: 201, xml: this.subscriptionEntry(base, path, s)};
    }
    if (/TopicDescription/.test(body)) {
      const cfg = {name: path};
      if (bool(field(body, 'RequiresDuplicateDetection'))) {
        const w = parseDuration(field(body, 'DuplicateDetectionHistoryTimeWindow'));
        cfg.duplicateDetectionHistoryTimeWindowMs = w === undefined ? 600000 : w;
      }
      const t = this.broker.createTopic(cfg);
      if (!t) return {status: 409, text: 'entity already exists'};
      return {status: 201, xml: this.topicEntry(base, path, t)};
    }
    if (!/QueueDescription/.test(body)) return {status: 400, text: 'expected a QueueDescription or TopicDescription'};
    const q = this.broker.createQueue(configFrom(path, body));
    if (!q) return {status: 409, text: 'entity already exists'};
    return {status: 201, xml: this.queueEntry(base, path, q)};
  }

  common(e) {
    return el('LockDuration', formatDuration(e.lockDurationMs)) +
      el('RequiresSession', String(e.requiresSession)) +
      el('DefaultMessageTimeToLive', formatDuration(e.defaultTtlMs)) +
      el('DeadLetteringOnMessageExpiration', String(e.deadLetterOnExpiry)) +
      el('MaxDeliveryCount', String(e.maxDeliveryCount));
  }

  queueEntry(base, path, q) {
    return entry(base, path, q.path, 'QueueDescription',
      el('LockDuration', formatDuration(q.lockDurationMs)) +
      el('MaxSizeInMegabytes', '1024') +
      el('RequiresDuplicateDetection', String(q.dupWindowMs > 0)) +
      el('RequiresSession', String(q.requiresSession)) +
      el('DefaultMessageTimeToLive', formatDuration(q.defaultTtlMs)) +
      el('DeadLetteringOnMessageExpiration', String(q.deadLetterOnExpiry)) +
      el('DuplicateDetectionHistoryTimeWindow', formatDuration(q.dupWindowMs > 0 ? q.dupWindowMs : 600000)) +
      el('MaxDeliveryCount', String(q.maxDeliveryCount)) +
      el('EnableBatchedOperations', 'true') +
      el('MessageCount', String(q.messages.size)) +
      el('Status', 'Active') +
      el('EnablePartitioning', 'false') +
      el('MaxMessageSizeInKilobytes', String(Math.floor(this.maxMessageSize / 1024))));
  }

  topicEntry(base, path, t) {
    const w = t.cfg.duplicateDetectionHistoryTimeWindowMs || 0;
    return entry(base, path, t.path, 'TopicDescription',
      el('DefaultMessageTimeToLive', MAX_TIMESPAN) +
      el('MaxSizeInMegabytes', '1024') +
      el('RequiresDuplicateDetection', String(w > 0)) +
      el('DuplicateDetectionHistoryTimeWindow', formatDuration(w > 0 ? w : 600000)) +
      el('EnableBatchedOperations', 'true') +
      el('Status', 'Active') +
      el('SubscriptionCount', String(t.subscriptions.size)) +
      el('EnablePartitioning', 'false') +
      el('MaxMessageSizeInKilobytes', String(Math.floor(this.maxMessageSize / 1024))));
  }

  subscriptionEntry(base, path, s) {
    const name = s.path.split('/').pop();
    return entry(base, path, name, 'SubscriptionDescription',
      this.common(s) + el('MessageCount', String(s.messages.size)) +
      el('EnableBatchedOperations', 'true') + el('Status', 'Active'));
  }

  state(path) {
    const r = this.broker.resolve(path);
    if (!r || !r.entity) return {status: 404, text: 'not found'};
    const e = r.entity;
    return {status: 200, json: {
      consumers: e.consumers.length,
      pendingAccepts: e.pendingAccepts.length,
      messages: e.messages.size,
      lockedSessions: Array.from(e.sessions.entries())
        .filter(([, s]) => s.lock && s.lock.until > this.broker.now()).map(([id]) => id),
    }};
  }
}

module.exports = {Admin, parseDuration, formatDuration};
