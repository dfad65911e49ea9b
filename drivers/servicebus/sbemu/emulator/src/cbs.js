'use strict';
// $cbs: claims-based security. The emulator accepts every token (the
// connection string carries a dummy key) and answers like the service.

const {types} = require('rhea');

function handle(request) {
  const props = request.application_properties || {};
  if (props.operation !== 'put-token') {
    return {
      properties: {'status-code': types.wrap_int(400), 'status-description': `unsupported operation '${props.operation}'`},
      body: null,
    };
  }
  return {
    properties: {'status-code': types.wrap_int(202), 'status-description': 'Accepted'},
    body: null,
  };
}

module.exports = {handle};
