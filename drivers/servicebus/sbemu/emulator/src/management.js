'use strict';
// $management: the request/response operations the SDK sends to
// <entity>/$management. Lock tokens here are in RFC 4122 byte order (the
// delivery tag of a transfer carries them in .NET GUID order).

const codec = require('./codec.js');
const {render} = require('./render.js');

const types = codec.types;

function status(code, description, body) {
  return {
    properties: {statusCode: types.wrap_int(code), statusDescription: description},
    body: body === undefined ? null : body,
  };
}

const ok = (body) => status(200, 'OK', body);
const lockLost = () => status(410, 'The lock supplied is invalid. Either the lock expired, or the message has already been removed from the queue.');
const sessionLockLost = (sid) => status(410, `The session lock has expired on the MessageSession. Session ${sid}.`);
const badRequest = (d) => status(400, d);

function uuidList(v) {
  if (!v) return [];
  return (Array.isArray(v) ? v : [v]).map((b) => Buffer.from(b));
}

function numberList(v) {
  if (v === undefined || v === null) return [];
  return (Array.isArray(v) ? v : [v]).map(Number);
}

// handle(server, resolved, request, connection) -> {properties, body}
function handle(server, resolved, request, conn) {
  const props = request.application_properties || {};
  const op = props.operation;
  const body = request.body || {};
  const broker = server.broker;
  const entity = resolved.entity; // queue, subscription or dead-letter queue
  const target = resolved.sendTarget; // queue or topic (for scheduling)
  const now = broker.now();
  const associated = server.consumerByLinkName(conn, props['associated-link-name']);
  switch (op) {
    case 'com.microsoft:renew-lock': {
      if (!entity) return badRequest('renew-lock needs a queue or subscription');
      const expirations = [];
      for (const token of uuidList(body['lock-tokens'])) {
        const rec = entity.locks.get(token.toString('hex'));
        if (!rec || !entity.lockValid(rec, now)) return lockLost();
        if (entity.requiresSession && rec.sessionId !== undefined && rec.lock.consumer) {
          return badRequest('renew-lock is not supported on messages of a session: renew the session lock');
        }
        rec.lock.until = now + entity.lockDurationMs;
        expirations.push(rec.lock.until);
      }
      return ok({expirations: types.wrap_array(expirations, 0x83)});
    }
    case 'com.microsoft:update-disposition': {
      if (!entity) return badRequest('update-disposition needs a queue or subscription');
      const recs = [];
      for (const token of uuidList(body['lock-tokens'])) {
        const rec = entity.locks.get(token.toString('hex'));
        if (!rec || !entity.lockValid(rec, now)) return lockLost();
        recs.push(rec);
      }
      const toModify = body['properties-to-modify'] || null;
      for (const rec of recs) {
        switch (body['disposition-status']) {
          case 'completed': entity.complete(rec); break;
          case 'abandoned': entity.abandon(rec, toModify, now); break;
          case 'defered': entity.defer(rec, toModify, now); break;
          case 'suspended':
            entity.deadLetter(rec, body['deadletter-reason'], body['deadletter-description'], toModify, now);
            break;
          default: return badRequest(`unknown disposition-status '${body['disposition-status']}'`);
        }
      }
      broker.kick(entity);
      return ok({});
    }
    case 'com.microsoft:renew-session-lock': {
      const sid = body['session-id'];
      if (!entity || !entity.requiresSession) return badRequest('the entity does not require sessions');
      const until = entity.renewSession(sid, associated, now);
      if (until === null) return sessionLockLost(sid);
      return ok({expiration: codec.wrapTimestamp(until)});
    }
    case 'com.microsoft:get-session-state':
    case 'com.microsoft:set-session-state': {
      const sid = body['session-id'];
      if (!entity || !entity.requiresSession) return badRequest('the entity does not require sessions');
      const holder = associated || findHolder(entity, sid);
      if (!holder || !entity.sessionHeldBy(sid, holder, now)) return sessionLockLost(sid);
      const s = entity.sessions.get(sid);
      if (op === 'com.microsoft:get-session-state') {
        return ok({'session-state': s.state === null ? null : types.wrap_binary(s.state)});
      }
      const state = body['session-state'];
      // the SDK sends nil as an empty binary: both clear the state
      s.state = state === null || state === undefined || state.length === 0 ? null : Buffer.from(state);
      return ok({});
    }
    case 'com.microsoft:peek-message': {
      if (!entity) return badRequest('peek needs a queue or subscription');
      const from = Number(body['from-sequence-number'] || 0);
      const count = Math.max(1, Number(body['message-count'] || 1));
      const sid = body['session-id'] !== undefined ? body['session-id']
        : (associated && associated.sessionId);
      const found = Array.from(entity.messages.values())
        .filter((r) => r.seq >= from && (sid === undefined || sid === null || r.sessionId === sid))
        .filter((r) => r.state !== 'active' || r.lock || entity.expiresAt(r) > now)
        .sort((a, b) => a.seq - b.seq)
        .slice(0, count);
      if (!found.length) return status(204, 'No messages');
      return ok({messages: found.map((r) => ({message: types.wrap_binary(render(entity, r, null, now, false))}))});
    }
    case 'com.microsoft:schedule-message': {
      if (!target) return badRequest('schedule-message needs a queue or topic');
      const seqs = [];
      for (const item of body.messages || []) {
        const stored = codec.parse(Buffer.from(item.message));
        if (target.requiresSession && stored.properties.group_id === undefined) {
          return badRequest('The SessionId was not set on a message, and it cannot be sent to an entity that requires sessions.');
        }
        const recs = broker.send(target, stored);
        seqs.push(recs.length ? recs[0].seq : 0);
      }
      return ok({'sequence-numbers': types.wrap_array(seqs, 0x81)});
    }
    case 'com.microsoft:cancel-scheduled-message': {
      if (!target) return badRequest('cancel-scheduled-message needs a queue or topic');
      for (const seq of numberList(body['sequence-numbers'])) broker.cancelScheduled(target, seq);
      return ok({});
    }
    case 'com.microsoft:receive-by-sequence-number': {
      if (!entity) return badRequest('receive-by-sequence-number needs a queue or subscription');
      const peekLock = Number(body['receiver-settle-mode']) === 1;
      const sid = body['session-id'] !== undefined ? body['session-id']
        : (associated && associated.sessionId);
      const out = [];
      for (const seq of numberList(body['sequence-numbers'])) {
        const rec = entity.messages.get(seq);
        if (!rec || rec.state !== 'deferred' || rec.lock ||
            (entity.requiresSession && sid !== undefined && rec.sessionId !== sid)) {
          return status(404, `The message with sequence number ${seq} could not be found (MessageNotFound).`);
        }
        if (peekLock) {
          const lock = entity.lock(rec, null, now);
          out.push({
            'lock-token': types.wrap_uuid(lock.token),
            message: types.wrap_binary(render(entity, rec, lock, now, true)),
          });
        } else {
          const bytes = render(entity, rec, null, now, false);
          entity.remove(rec);
          out.push({message: types.wrap_binary(bytes)});
        }
      }
      return ok({messages: out});
    }
    case 'com.microsoft:get-message-sessions': {
      if (!entity || !entity.requiresSession) return badRequest('the entity does not require sessions');
      const ids = [];
      for (const [sid, s] of entity.sessions) {
        const hasMessages = Array.from(entity.messages.values()).some((r) => r.sessionId === sid);
        if (hasMessages || s.state !== null) ids.push(sid);
      }
      const skip = Number(body.skip || 0);
      const top = Number(body.top || ids.length);
      const page = ids.slice(skip, skip + top);
      if (!page.length) return status(204, 'No sessions');
      return ok({skip: types.wrap_int(skip + page.length), 'sessions-ids': types.wrap_array(page, 0xb1)});
    }
    default:
      return status(501, `The operation '${op}' is not implemented by the emulator.`);
  }
}

function findHolder(entity, sid) {
  const s = entity.sessions.get(sid);
  return s && s.lock ? s.lock.owner : undefined;
}

module.exports = {handle};
