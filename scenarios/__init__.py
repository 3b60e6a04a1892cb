"""The registry of experiments: a new scenario is one module plus one line here."""

from lab.declarations.registry import Registry

# name -> "module:Class", in the order runs execute them and the report shows them.
REGISTRY = Registry("scenario", {
    "cases": "scenarios.cases:Cases",
    "calibrate": "scenarios.calibrate:Calibrate",
    "overlap": "scenarios.overlap:Overlap",
    "kill": "scenarios.kill:Kill",
    "conflicts": "scenarios.conflicts:Conflicts",
    "rules": "scenarios.rules:Rules",
    "pause": "scenarios.pause:Pause",
    "holder_clock": "scenarios.holder_clock:HolderClock",
    "cut": "scenarios.cut:Cut",
    "slow_network": "scenarios.slow_network:SlowNetwork",
    "restart": "scenarios.restart:Restart",
    "server_pause": "scenarios.server_pause:ServerPause",
    "server_clock": "scenarios.server_clock:ServerClock",
    "etcd_partition": "scenarios.etcd_partition:EtcdPartition",
    "zookeeper_partition": "scenarios.zookeeper_partition:ZooKeeperPartition",
    "failover": "scenarios.failover:Failover",
    "patroni": "scenarios.patroni:Patroni",
    "redis_failover": "scenarios.redis_failover:RedisFailover",
    "sentinel": "scenarios.sentinel:Sentinel",
    "redlock_restart": "scenarios.redlock_restart:RedlockRestart",
    "margin": "scenarios.margin:Margin",
    "pooler": "scenarios.pooler:Pooler",
    "netdrop": "scenarios.netdrop:NetDrop",
    "timing": "scenarios.timing:Timing",
    "lookalikes": "scenarios.lookalikes:Lookalikes",
    "killpoints": "scenarios.killpoints:Killpoints",
    "perf": "scenarios.perf:Perf",
    "cost_per_company": "scenarios.cost_per_company:CostPerCompany",
    "whynot": "scenarios.whynot:WhyNot",
    "latency": "scenarios.latency:Latency",
})

names = REGISTRY.names


def resolve(spec: str | None) -> list[str]:
    """None (no --scenario) -> the scenarios that declare default_run; otherwise 'all' or names, as the registry
    resolves them."""
    if spec is None:
        return [name for name in names() if load(name).default_run]
    return REGISTRY.resolve(spec)


def load(name: str):
    """A fresh instance of the scenario registered under name."""
    return REGISTRY.load(name)()


def measured() -> dict[str, str]:
    """What each registered scenario's trials measure (lab/measures/kinds.py), for runs that did not record it."""
    return {name: load(name).measured.value for name in names()}


def fault_columns():
    """Every registered scenario's fault declaration (lab/declarations/columns.py), for runs that did not record theirs."""
    return [f for name in names() if (f := REGISTRY.load(name).fault_columns()) is not None]
