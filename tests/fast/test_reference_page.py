"""docs/reference.md is what the code declares: `lab list --markdown` renders it, and the committed page must match.

The page is the same on every machine: an adapter whose library is not installed is still listed, read from its
declarations, and nothing on the page says what this machine has installed."""

import subprocess
import sys
from pathlib import Path

import pytest

from lab.reference import REGENERATE

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "reference.md"


def rendered(capsys) -> str:
    from lab.cli import main

    assert main(["list", "--markdown"]) == 0
    return capsys.readouterr().out


def test_the_committed_reference_page_is_what_the_code_declares(capsys):
    page = rendered(capsys)
    if PAGE.read_text() != page:
        pytest.fail(f"docs/reference.md differs from the code's declarations; regenerate it: {REGENERATE}",
                    pytrace=False)


def test_it_names_every_declared_backend_scenario_fault_column_and_capability(capsys):
    import backends
    import scenarios
    from lab.declarations.capabilities import Capability

    page = rendered(capsys)
    for name in [*backends.BUILTIN, *backends.ADAPTERS, *scenarios.names()]:
        assert f"| `{name}` |" in page, name
    for fault in scenarios.fault_columns():
        for column in fault.columns:
            assert f"| `{fault.scenario}` | `{column.variant}` | {column.label} |" in page
    assert all(f"| `{c.value}` | {c.__doc__} |" in page for c in Capability)


def test_the_page_is_the_same_where_no_adapter_library_is_installed(capsys):
    """Every adapter's library made unimportable (None in sys.modules) in a process of its own: the same page,
    every adapter row still there with its declarations; the stand-ins leave nothing behind."""
    import backends

    hidden = sorted({module for _, *needs in backends.ADAPTERS.values() for module in needs})
    script = (
        "import sys\n"
        "import lab.cli, backends\n"
        f"hidden = [m for m in {hidden!r} if m not in sys.modules]\n"  # what the lab itself imported stays
        "for m in hidden: sys.modules[m] = None\n"
        "code = lab.cli.main(['list', '--markdown'])\n"
        "assert all(sys.modules[m] is None for m in hidden), 'a stand-in was left behind'\n"
        "from lab.reference import _StandIn\n"
        "assert not [n for n, m in sys.modules.items() if isinstance(m, _StandIn)], 'a stand-in module stays'\n"
        "assert 'backends.adapters.tooz_redis' not in sys.modules, 'an adapter read on stand-ins stays'\n"
        "print('hidden:', ' '.join(hidden), file=sys.stderr)\n"
        "sys.exit(code)\n")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "tooz" in result.stderr.splitlines()[-1]  # the libraries really were hidden
    assert result.stdout == rendered(capsys)
