"""A lock client outside the lab, for the holder protocol's server test: a Redis lease with a fencing token.

It imports nothing of the lab (only redis-py), reads requests on stdin and answers on stdout as
lab/holder/protocol.py says, as a program in any language would: SET NX PX with a random value,
a counter INCRed in the same script as the token, PEXPIRE and DEL only while the value is still its own.
"""

import json
import sys
import threading
import uuid

import redis

GRANT = """
if redis.call('set', KEYS[1], ARGV[1], 'nx', 'px', ARGV[2]) then
  return redis.call('incr', KEYS[2])
end
return false
"""
RENEW = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) end return 0"
RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0"

state: dict = {}
write = threading.Lock()


def say(message: dict) -> None:
    with write:
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()


def error(exc: BaseException) -> dict:
    return {"type": type(exc).__name__, "message": str(exc).splitlines()[0] if str(exc) else ""}


def handle(request: dict) -> dict:
    op = request["op"]
    if op == "start":
        ttl = request["ttl_s"]
        state.update(key=f"locklab:{request['key']}", ttl_ms=int(ttl * 1000), value=None, token=None,
                     client=redis.Redis.from_url(request["lock"]["redis"], socket_timeout=ttl,
                                                 socket_connect_timeout=ttl),
                     monitor=redis.Redis.from_url(request["monitor"]["redis"], socket_timeout=ttl))
        return {"type": "ok", "value": {"library": "redis", "version": redis.__version__}}
    client, key = state["client"], state["key"]
    if op == "acquire":
        value = uuid.uuid4().hex
        token = client.eval(GRANT, 2, key, key + ":fence", value, state["ttl_ms"])
        if token is None:
            return {"type": "fail"}
        state.update(value=value, token=int(token))
        return {"type": "ok", "value": {"token": int(token), "ttl_s": state["ttl_ms"] / 1000, "lock_pid": None}}
    if op == "renew":
        return {"type": "ok"} if client.eval(RENEW, 1, key, state["value"] or "", state["ttl_ms"]) else {"type": "fail"}
    if op == "held":
        return {"type": "ok", "value": state["value"] is not None and state["monitor"].get(key) == state["value"].encode()}
    if op == "token":
        return {"type": "ok", "value": state["token"]}
    if op == "release":
        released = client.eval(RELEASE, 1, key, state["value"] or "")
        state["value"] = None
        return {"type": "ok"} if released else {"type": "fail"}
    if op == "stop":
        for name in ("client", "monitor"):
            state.pop(name).close()
        return {"type": "ok"}
    return {"type": "fail", "error": {"type": "UnknownOp", "message": f"no {op} here"}}


def answer(request: dict) -> None:
    try:
        reply = handle(request)
    except Exception as exc:  # nobody knows what happened: a timeout, a broken connection
        reply = {"type": "info", "error": error(exc)}
    say({"id": request["id"], **reply})


for line in sys.stdin:
    request = json.loads(line)
    if request["op"] in ("renew", "held"):  # the keep-alive's and the run's requests may overlap
        threading.Thread(target=answer, args=(request,), daemon=True).start()
    else:
        answer(request)
