// A PostgreSQL session advisory lock on node-postgres' default connection: new pg.Client(config), connect(),
// then pg_try_advisory_lock on it, as its documentation's examples query. node-postgres sends each query as
// it comes, with no transaction unless the code opens one: the lock's session is idle, not idle in
// transaction, between queries. held() asks pg_locks for the lock session's pid from a session of its own
// (never through a fault), as the lab's own session locks do.
'use strict';

const { Client } = require('pg');
const { serve, ok, fail, said, pgConfig } = require('../protocol');

const TRY_LOCK = 'select pg_try_advisory_lock(hashtextextended($1, 0)) as got, pg_backend_pid() as pid';
const UNLOCK = 'select pg_advisory_unlock(hashtextextended($1, 0)) as released';
const HELD = "select count(*) > 0 as held from pg_locks where locktype = 'advisory' and granted and pid = $1 " +
  'and objsubid = 1 and ((classid::bigint << 32) | objid::bigint) = hashtextextended($2, 0)';
const REFUSED = 'unsupported startup parameter: options';  // a pooler (PgBouncer) refuses libpq's options

let start = null;
let session = null;  // the lock's own connection, opened at the first acquire as the lab's session locks open theirs
let monitor = null;
let pid = null;

async function connectTo(address, settings, source) {
  // Several hosts (a primary and its standby): the first that accepts writes, as target_session_attrs=read-write.
  let last = null;
  for (const host of address.hosts) {
    let client;
    try {
      client = await open(pgConfig(address, host, settings), settings, source);
    } catch (error) {
      if (address.hosts.length === 1) throw error;
      last = error;  // a host that is down: the next one, as libpq goes down its list
      continue;
    }
    if (address.hosts.length > 1) {
      const { rows } = await client.query('select pg_is_in_recovery() as standby');
      if (rows[0].standby) {
        await client.end();
        last = new Error(`${host[0]}:${host[1]} is a standby`);
        continue;
      }
    }
    return client;
  }
  throw last;
}

async function open(config, settings, source) {
  let client = new Client(config);
  // node-postgres' documentation: a client that errors while idle emits 'error', which must be listened to.
  client.on('error', (error) => said(source, error));
  try {
    await client.connect();
    return client;
  } catch (error) {
    if (!String(error.message).includes(REFUSED) || config.options === undefined) throw error;
  }
  delete config.options;  // the settings once connected, session-wide, as the lab's own sessions get them there
  client = new Client(config);
  client.on('error', (error) => said(source, error));
  await client.connect();
  for (const [name, value] of Object.entries(settings)) {
    await client.query('select set_config($1, $2, false)', [name, String(value)]);
  }
  return client;
}

serve({
  async start(request) {
    start = request;
    return ok({ library: 'pg', version: require('pg/package.json').version });
  },
  async acquire() {
    if (session === null) session = await connectTo(start.lock.postgres, start.settings, "pg Client 'error' event");
    const { rows } = await session.query(TRY_LOCK, [start.key]);
    pid = rows[0].pid;
    if (!rows[0].got) return fail();
    return ok({ token: null, ttl_s: null, lock_pid: pid });
  },
  async held() {
    if (pid === null) return ok(false);
    if (monitor === null) {
      const pinned = Object.fromEntries(Object.keys(start.settings).map((name) => [name, '0']));
      monitor = await connectTo(start.monitor.postgres, pinned, "pg Client 'error' event (monitor)");
    }
    const { rows } = await monitor.query(HELD, [pid, start.key]);
    return ok(rows[0].held);
  },
  async token() {
    return ok(null);  // an advisory lock has no fencing token
  },
  async touch() {
    await session.query('select 1');
    return ok();
  },
  async release() {
    if (session === null) return fail();
    let rows;
    try {
      ({ rows } = await session.query(UNLOCK, [start.key]));
    } catch (error) {
      return fail(error);  // the session is gone, and its lock with it
    }
    return rows[0].released ? ok() : fail();
  },
}, async () => {
  for (const client of [session, monitor]) {
    if (client !== null) await client.end().catch(() => {});
  }
  [session, monitor, pid] = [null, null, null];
});
