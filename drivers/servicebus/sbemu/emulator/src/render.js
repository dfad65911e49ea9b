'use strict';
// render builds the bytes of a stored message as a receiver sees it: the
// broker's header and x-opt-* annotations around the sender's bare message.

const codec = require('./codec.js');
const {FAR_FUTURE} = require('./store.js');

const types = codec.types;
const MAX_UINT = 4294967295;

const STATE = {active: 0, deferred: 1, scheduled: 2};

// render(entity, rec, lock, now, lockTokenAnnotation)
//   lock: the lock held for this delivery, or null (receive-and-delete, peek)
//   lockTokenAnnotation: put the lock token in the delivery annotations
//   (messages returned by $management carry no delivery tag)
function render(entity, rec, lock, now, lockTokenAnnotation) {
  const stored = rec.stored;
  const header = {
    durable: stored.header.durable,
    priority: stored.header.priority,
    first_acquirer: rec.deliveryCount === 0,
    delivery_count: rec.deliveryCount,
  };
  if (rec.ttlMs < FAR_FUTURE && rec.ttlMs <= MAX_UINT) header.ttl = rec.ttlMs;
  const ma = stored.messageAnnotations ? stored.messageAnnotations.slice() : [];
  codec.mapSet(ma, 'x-opt-sequence-number', codec.wrapLong(rec.seq), true);
  codec.mapSet(ma, 'x-opt-enqueued-time', codec.wrapTimestamp(rec.enqueuedAt), true);
  if (lock) {
    codec.mapSet(ma, 'x-opt-locked-until', codec.wrapTimestamp(lock.until), true);
  } else {
    codec.mapDelete(ma, 'x-opt-locked-until');
  }
  if (rec.state === 'scheduled') {
    codec.mapSet(ma, 'x-opt-scheduled-enqueue-time', codec.wrapTimestamp(rec.scheduledAt), true);
  }
  codec.mapSet(ma, 'x-opt-message-state', types.wrap_int(STATE[rec.state] || 0), true);
  let da = null;
  if (lock && lockTokenAnnotation) {
    da = [types.wrap_symbol('x-opt-lock-token'), types.wrap_uuid(lock.token)];
  }
  return codec.encode(stored, header, da, ma);
}

module.exports = {render};
