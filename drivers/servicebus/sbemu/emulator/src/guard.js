'use strict';
// Guards rhea's AMQP decoder (3.0.5) against counts that the frame cannot
// hold. An array or list declares its element count before its elements;
// rhea trusts it, so a 24-byte frame declaring 2^32-1 elements of a
// zero-width type (null) makes it loop and allocate until the process runs
// out of memory. Every element of a list takes at least one byte, and an
// array cannot sensibly hold more elements than the frame has bytes, so a
// count above the bytes left is refused as a protocol error: rhea ends
// that connection, and the emulator keeps serving the others.
//
// Required once, before the first connection is accepted.

const types = require('rhea/lib/types.js');
const errors = require('rhea/lib/errors.js');

const Reader = types.Reader.prototype;

function checkCount(reader, count) {
  const left = reader.buffer.length - reader.position;
  if (count > left) {
    throw new errors.ProtocolError(`declared ${count} elements with only ${left} bytes left in the frame`);
  }
}

const readSizeCount = Reader.read_size_count;
Reader.read_size_count = function (width) {
  const limits = readSizeCount.call(this, width);
  checkCount(this, limits.count);
  return limits;
};

module.exports = {};
