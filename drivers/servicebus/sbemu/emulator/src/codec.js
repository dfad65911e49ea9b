'use strict';
// Message encoding for the emulator.
//
// The bare message (properties, application-properties, body, footer) is
// kept as the bytes the client sent, so every value reaches the receiver with
// the AMQP type it was sent with. The broker-owned sections (header,
// delivery-annotations, message-annotations) are decoded, edited and
// re-encoded. Application properties are re-encoded only when a settlement
// carries properties-to-modify.

const crypto = require('crypto');
const rhea = require('rhea');
const types = rhea.types;
const message = rhea.message;

const SECTION = {
  header: 0x70,
  deliveryAnnotations: 0x71,
  messageAnnotations: 0x72,
  properties: 0x73,
  applicationProperties: 0x74,
  footer: 0x78,
};

// .NET DateTime ticks (100ns since 0001-01-01) of the Unix epoch.
const EPOCH_TICKS = 621355968000000000n;

function descriptorCode(section) {
  const d = section.descriptor;
  if (!d) return undefined;
  const v = d.value;
  if (typeof v === 'number') return v;
  if (Buffer.isBuffer(v)) return Number(v.readBigUInt64BE(0));
  if (typeof v === 'string') {
    const byName = {
      'amqp:header:list': 0x70, 'amqp:delivery-annotations:map': 0x71,
      'amqp:message-annotations:map': 0x72, 'amqp:properties:list': 0x73,
      'amqp:application-properties:map': 0x74, 'amqp:data:binary': 0x75,
      'amqp:amqp-sequence:list': 0x76, 'amqp:value:*': 0x77, 'amqp:footer:map': 0x78,
    };
    return byName[v];
  }
  return undefined;
}

// parse splits an encoded AMQP message into the pieces the broker needs.
function parse(buf) {
  const reader = new types.Reader(buf);
  const out = {
    header: {},
    messageAnnotations: null, // typed map entries [k, v, k, v...]
    propertiesRaw: Buffer.alloc(0),
    appProps: null, // typed map entries, or null when absent
    restRaw: [], // body and footer bytes
    properties: {},
    applicationProperties: {},
  };
  while (reader.remaining() > 0) {
    const start = reader.position;
    const section = reader.read();
    const raw = buf.subarray(start, reader.position);
    const code = descriptorCode(section);
    switch (code) {
      case SECTION.header: {
        const decoded = message.decode(raw);
        for (const f of ['durable', 'priority', 'ttl', 'first_acquirer', 'delivery_count']) {
          if (decoded[f] !== undefined) out.header[f] = decoded[f];
        }
        break;
      }
      case SECTION.deliveryAnnotations:
        break; // delivery annotations are per hop: dropped
      case SECTION.messageAnnotations:
        out.messageAnnotations = section.value.slice();
        break;
      case SECTION.properties:
        out.propertiesRaw = Buffer.from(raw);
        out.properties = message.decode(raw);
        break;
      case SECTION.applicationProperties:
        out.appProps = section.value.slice();
        out.applicationProperties = types.unwrap_map_simple(section);
        break;
      default:
        out.restRaw.push(Buffer.from(raw));
    }
  }
  out.restRaw = Buffer.concat(out.restRaw);
  return out;
}

// typed map helpers: entries are [key, value, key, value...] of rhea Typed.
function mapGet(entries, key) {
  if (!entries) return undefined;
  for (let i = 0; i + 1 < entries.length; i += 2) {
    if (String(entries[i].value) === key) return entries[i + 1];
  }
  return undefined;
}

function mapSet(entries, key, typedValue, symbolKey) {
  for (let i = 0; i + 1 < entries.length; i += 2) {
    if (String(entries[i].value) === key) {
      entries[i + 1] = typedValue;
      return;
    }
  }
  entries.push(symbolKey ? types.wrap_symbol(key) : types.wrap_string(key), typedValue);
}

function mapDelete(entries, key) {
  for (let i = 0; i + 1 < entries.length; i += 2) {
    if (String(entries[i].value) === key) {
      entries.splice(i, 2);
      return;
    }
  }
}

function wrapLong(n) {
  if (typeof n === 'bigint') {
    const b = Buffer.alloc(8);
    b.writeBigInt64BE(n);
    return types.Long(b);
  }
  return types.Long(n);
}

function wrapTimestamp(ms) {
  return types.wrap_timestamp(ms);
}

function msToTicks(ms) {
  return BigInt(Math.floor(ms)) * 10000n + EPOCH_TICKS;
}

// toTyped converts a JS value (as decoded by rhea) back to a typed value for
// properties-to-modify; Typed values pass through.
function toTyped(v) {
  if (v instanceof Date) return types.wrap_timestamp(v.getTime());
  if (typeof v === 'number' && Number.isInteger(v)) {
    return v >= -2147483648 && v <= 2147483647 ? types.wrap_int(v) : types.Long(v);
  }
  return types.wrap(v);
}

function encodeSection(code, typed) {
  const w = new types.Writer();
  w.write(types.described(types.wrap_ulong(code), typed));
  return w.toBuffer();
}

// encode builds the bytes delivered to a receiver.
//   header: {durable, priority, ttl, first_acquirer, delivery_count}
//   deliveryAnnotations / messageAnnotations: typed map entries (may be null)
function encode(stored, header, deliveryAnnotations, messageAnnotations) {
  const parts = [];
  parts.push(encodeHeader(header));
  if (deliveryAnnotations && deliveryAnnotations.length) {
    parts.push(encodeSection(SECTION.deliveryAnnotations, types.Map32(deliveryAnnotations)));
  }
  if (messageAnnotations && messageAnnotations.length) {
    parts.push(encodeSection(SECTION.messageAnnotations, types.Map32(messageAnnotations)));
  }
  parts.push(stored.propertiesRaw);
  if (stored.appProps) {
    parts.push(encodeSection(SECTION.applicationProperties, types.Map32(stored.appProps)));
  }
  parts.push(stored.restRaw);
  return Buffer.concat(parts);
}

// encodeHeader encodes just the header section.
function encodeHeader(header) {
  const c = message.header(header);
  const w = new types.Writer();
  w.write(c.described());
  return w.toBuffer();
}

// GUID byte order: .NET's Guid.ToByteArray swaps the first three groups.
function toDotNetGuid(rfc) {
  const b = Buffer.from(rfc);
  b[0] = rfc[3]; b[1] = rfc[2]; b[2] = rfc[1]; b[3] = rfc[0];
  b[4] = rfc[5]; b[5] = rfc[4];
  b[6] = rfc[7]; b[7] = rfc[6];
  return b;
}

function newLockToken() {
  return crypto.randomBytes(16);
}

function uuidString(b) {
  const h = b.toString('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

module.exports = {
  parse, encode, encodeHeader, mapGet, mapSet, mapDelete,
  wrapLong, wrapTimestamp, msToTicks, toTyped, toDotNetGuid, newLockToken,
  uuidString, types, SECTION,
};
