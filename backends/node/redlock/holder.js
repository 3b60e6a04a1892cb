// node-redlock 4 over the lab's Redlock masters, as its README shows it: new Redlock([ioredis clients]),
// redlock.lock(resource, ttl), lock.extend(ttl), lock.unlock(). One attempt per acquire (retryCount 0):
// the lab asks again itself. Renewal is the lab's: it sends `renew` every TTL/3, and this extends.
// held() asks each master (on clients of their own, never through a fault) whether it still has this
// lock's random value, and counts a majority, as the lock itself was counted.
'use strict';

const Redis = require('ioredis');
const Redlock = require('redlock');
const { serve, ok, fail, said } = require('../protocol');

let redlock = null;
let lock = null;
let resource = null;
let ttlMs = 0;
let clients = [];
let monitorUrls = [];
let monitors = [];

function client(url) {
  // The command and connect timeouts are the TTL, as the Python adapters' socket timeouts are. ioredis'
  // default offline queue keeps a command for a master it cannot reach until it reconnects (20 tries): a
  // master that is down then holds its vote past the TTL, and with two of five down no lock was ever taken
  // (measured in redlock_restart). Without the queue a down master's vote fails at once, as redis-py's
  // refused connection fails for pottery.
  return new Redis(url, { commandTimeout: ttlMs, connectTimeout: ttlMs, enableOfflineQueue: false });
}

function connected(redis) {
  // Ready, or its first error (a master that is down): without the offline queue a command must wait for this.
  return new Promise((resolve) => {
    redis.once('ready', resolve);
    redis.once('error', resolve);
  });
}

serve({
  async start(request) {
    ttlMs = Math.round(request.ttl_s * 1000);
    resource = `locklab:${request.key}`;
    clients = request.lock.redlock.map(client);
    await Promise.all(clients.map(connected));
    monitorUrls = request.monitor.redlock;
    redlock = new Redlock(clients, { retryCount: 0 });
    redlock.on('clientError', (error) => said("redlock 'clientError' event", error));
    return ok({ library: 'redlock', version: require('redlock/package.json').version });
  },
  async acquire() {
    try {
      lock = await redlock.lock(resource, ttlMs);
    } catch (error) {
      if (error instanceof Redlock.LockError) return fail(error);
      throw error;
    }
    return ok({ token: null, ttl_s: ttlMs / 1000, lock_pid: null });
  },
  async renew() {
    if (lock === null) return fail();
    try {
      lock = await lock.extend(ttlMs);
    } catch (error) {
      if (error instanceof Redlock.LockError) return fail(error);
      throw error;
    }
    return ok();
  },
  async held() {
    if (lock === null) return ok(false);
    if (monitors.length === 0) monitors = monitorUrls.map((url) => new Redis(url, { commandTimeout: ttlMs }));
    const values = await Promise.all(monitors.map((m) => m.get(resource).catch(() => null)));
    const mine = values.filter((v) => v === lock.value).length;
    return ok(mine >= Math.floor(monitors.length / 2) + 1);
  },
  async token() {
    return ok(null);  // Redlock hands out no fencing token
  },
  async release() {
    if (lock === null) return fail();
    const releasing = lock;
    lock = null;
    try {
      await releasing.unlock();
    } catch (error) {
      if (error instanceof Redlock.LockError) return fail(error);
      throw error;
    }
    return ok();
  },
}, async () => {
  for (const c of [...clients, ...monitors]) c.disconnect();
  [redlock, lock, clients, monitors] = [null, null, [], []];
});
