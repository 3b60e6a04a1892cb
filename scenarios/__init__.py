"""The registry of experiments: a new scenario is one module plus one line here."""

from lab.registry import Registry

# name -> "module:Class", in the order runs execute them and the report shows them.
REGISTRY = Registry("scenario", {
    "cases": "scenarios.cases:Cases",
    "calibrate": "scenarios.calibrate:Calibrate",
    "overlap": "scenarios.overlap:Overlap",
    "kill": "scenarios.kill:Kill",
    "conflicts": "scenarios.conflicts:Conflicts",
    "rules": "scenarios.rules:Rules",
    "pause": "scenarios.pause:Pause",
    "cut": "scenarios.cut:Cut",
    "restart": "scenarios.restart:Restart",
    "timing": "scenarios.timing:Timing",
    "lookalikes": "scenarios.lookalikes:Lookalikes",
    "killpoints": "scenarios.killpoints:Killpoints",
    "perf": "scenarios.perf:Perf",
})

names = REGISTRY.names
resolve = REGISTRY.resolve


def load(name: str):
    """A fresh instance of the scenario registered under name."""
    return REGISTRY.load(name)()
