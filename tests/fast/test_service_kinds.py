"""Each lock service declares itself in its own package (lab/servers/<package>/service.py), and the code that starts,
attaches, describes and routes services reads those declarations instead of branching on a service's name."""

import ast
from pathlib import Path

from lab.servers.service_kinds import ENV_VARS, KINDS, OS_PACKAGES, SERVICE_NAMES

ROOT = Path(__file__).resolve().parents[2]


def service_names_compared(path: Path, names: set[str]) -> list[str]:
    """Where a module compares with a service's name or keys a dict by one: a branch on the name."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        values: list[ast.expr] = []
        if isinstance(node, ast.Compare):
            values = [node.left, *node.comparators]
        elif isinstance(node, ast.Dict):
            values = [k for k in node.keys if k is not None]
        found += [f"{path.name}:{v.lineno} {v.value!r}" for v in values
                  if isinstance(v, ast.Constant) and v.value in names]
    return found


def test_every_service_is_declared_in_its_own_package():
    assert SERVICE_NAMES == ("postgres", "redis", "etcd", "redlock", "zookeeper", "mariadb")
    for kind in KINDS.values():
        module = type(kind).__module__.split(".")
        assert module[:2] == ["lab", "servers"] and module[3] == "service", module
        assert (ROOT / "lab" / "servers" / module[2] / "service.py").is_file()
    assert ENV_VARS["postgres"] == "LAB_PG_DSN" and OS_PACKAGES == {"zookeeper": "zookeeper", "mariadb": "mariadb-server"}


def test_services_never_branches_on_a_service_name():
    assert service_names_compared(ROOT / "lab" / "servers" / "services.py", set(SERVICE_NAMES)) == []


def test_a_planted_branch_on_a_service_name_is_caught(tmp_path):
    planted = tmp_path / "services.py"
    planted.write_text('if name == "postgres":\n    pass\nstart = {"redis": 1, key: 2}\nok = name in wanted\n')
    assert service_names_compared(planted, set(SERVICE_NAMES)) == ["services.py:1 'postgres'", "services.py:3 'redis'"]
