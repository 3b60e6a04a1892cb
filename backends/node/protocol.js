// The lab's holder protocol, for a Node.js program: one JSON request a line on stdin, one answer a line on
// stdout (lab/holder/protocol.py describes it whole). A holder program hands serve() one async
// function per request it implements; each returns ok(value) or fail(error), and an exception becomes an
// `info` answer (nobody knows) with what the library threw.
'use strict';

const readline = require('readline');

function describe(error) {
  if (error === undefined || error === null) return undefined;
  const message = String(error.message === undefined ? error : error.message).split('\n')[0];
  return { type: (error.constructor && error.constructor.name) || 'Error', message };
}

const ok = (value = null) => ({ type: 'ok', value });
// A refusal: by an exception (what the library threw), or, with no error, by what it returned.
const fail = (error) => ({ type: 'fail', error: describe(error) });

function write(message) {
  process.stdout.write(JSON.stringify(message) + '\n');
}

// What the library said unasked ('error' events, warnings): the lab records it as the library's log line.
function said(source, message) {
  write({ said: String(message && message.message !== undefined ? message.message : message), source });
}

function serve(handlers, close) {
  // stop: every connection closed, the lock forgotten; close() must leave the program ready for a new start.
  handlers = { ...handlers, stop: async () => { await close(); return ok(); } };
  const lines = readline.createInterface({ input: process.stdin });
  lines.on('line', (line) => {
    const request = JSON.parse(line);
    const handler = handlers[request.op];
    if (handler === undefined) {
      write({ id: request.id, type: 'fail', error: { type: 'UnknownOp', message: `no ${request.op} here` } });
      return;
    }
    Promise.resolve()
      .then(() => handler(request))
      .then((answer) => write({ id: request.id, ...answer }),
            (error) => write({ id: request.id, type: 'info', error: describe(error) }));
  });
  // End of stdin: close every connection, release nothing, exit.
  lines.on('close', () => {
    Promise.resolve().then(close).finally(() => process.exit(0));
  });
}

// The lab's PostgreSQL address as node-postgres' client config: the host that accepts writes among several
// (as libpq's target_session_attrs=read-write picks it) is found by the caller; sslmode as libpq reads it.
// Parameters of the address node-postgres has no way to take are said once, never applied in silence.
const TAKEN = new Set(['sslmode', 'target_session_attrs']);

function pgConfig(address, host, settings) {
  const params = address.params || {};
  for (const name of Object.keys(params).filter((n) => !TAKEN.has(n))) {
    said('holder program', `node-postgres takes no libpq parameter ${name}: left out`);
  }
  const sslmode = params.sslmode;
  const config = {
    host: host[0], port: host[1], user: address.user, password: address.password, database: address.database,
    connectionTimeoutMillis: 5000, application_name: 'locklab',
  };
  if (sslmode && sslmode !== 'disable' && sslmode !== 'allow') {
    config.ssl = sslmode.startsWith('verify') ? true : { rejectUnauthorized: false };
  }
  const options = Object.entries(settings || {}).map(([name, value]) => `-c ${name}=${value}`).join(' ');
  if (options) config.options = options;
  return config;
}

module.exports = { serve, ok, fail, said, describe, pgConfig };
