"""Plugins from a real installed package: every seam, and broken plugins that stop nothing."""

from __future__ import annotations

import json
from pathlib import Path

from .conftest import PluginVenv


def test_plugins_list_shows_each_plugin_its_distribution_location_and_what_it_adds(
    plugin_venv: PluginVenv,
) -> None:
    found = plugin_venv.plugins()
    acme = found["acme"]
    assert acme["status"] == "loaded" and acme["error"] is None
    assert (acme["distribution"], acme["version"]) == ("acme-codemode", "1.2.3")
    assert acme["location"].startswith(str(plugin_venv.root))
    assert set(acme["provides"]) >= {
        "tool source acme",
        "storage acme-store",
        "executor acme-inproc",
        "recognizer ACME_ID",
        "step type shout",
        "capability acme",
        "command acme-hello",
    }
    assert found["stampcap"]["status"] == "loaded"
    assert found["stampcap"]["provides"] == ["capability stampcap"]


def test_a_plugin_that_fails_to_import_is_reported_with_its_name_and_error(
    plugin_venv: PluginVenv,
) -> None:
    found = plugin_venv.plugins()
    broken = found["broken"]
    assert broken["status"] == "failed"
    assert "ImportError" in broken["error"] and "frobnicate" in broken["error"]
    text = plugin_venv.codemode("plugins", "list")
    assert text.returncode == 0
    assert "broken  [failed]" in text.stdout and "frobnicate" in text.stdout
    assert "CODEMODE_PLUGINS_DISABLE=broken" in text.stdout


def test_a_plugin_claiming_a_codemode_command_fails_and_its_other_parts_are_withdrawn(
    plugin_venv: PluginVenv,
) -> None:
    clash = plugin_venv.plugins()["clash"]
    assert clash["status"] == "failed"
    assert "'run' is already provided by codemode" in clash["error"]
    assert clash["provides"] == []
    # its storage was withdrawn with it
    out = plugin_venv.run("-c", "from codemode.plugins import names; print(names('storages'))")
    assert out.stdout.strip() == "['acme-store']"


def test_an_entry_point_that_is_neither_capability_nor_function_is_reported(
    plugin_venv: PluginVenv,
) -> None:
    bad = plugin_venv.plugins()["notaplugin"]
    assert bad["status"] == "failed"
    assert "must name a Capability or a function setup(api)" in bad["error"]


def test_broken_plugins_do_not_stop_codemode_commands(plugin_venv: PluginVenv) -> None:
    out = plugin_venv.codemode("run", "--no-tools", "-c", "6 * 7")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "42"
    helped = plugin_venv.codemode("--help")
    assert "acme-hello" in helped.stdout and "plugins" in helped.stdout


def test_a_plugin_command_runs_as_a_codemode_subcommand(plugin_venv: PluginVenv) -> None:
    out = plugin_venv.codemode("acme-hello", "tester")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "acme says hello to tester"
    # codemode's own `run` was not shadowed by the clashing plugin
    assert "Run Python CODE or FILE" in plugin_venv.codemode("run", "--help").stdout


def test_plugin_tool_sources_and_middleware_reach_agents_code(
    plugin_venv: PluginVenv, tmp_path: Path
) -> None:
    code = "print(tools.acme.greet(name='ada', excited=True))"
    out = plugin_venv.codemode(
        "run", "--base", str(tmp_path), "--executor", "subprocess", "-c", code
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[acme] hello ada!"  # the plugin's audit-stage layer


def test_a_plugin_capability_adds_its_config_section_and_run_hook(
    plugin_venv: PluginVenv, tmp_path: Path
) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"stampcap": {"refuse": "NOPE"}}))
    args = ("run", "--base", str(tmp_path), "--executor", "subprocess", "-c")
    refused = plugin_venv.codemode(*args, "x = 'NOPE'")
    assert refused.returncode == 1 and "NOPE is refused" in refused.stderr
    assert plugin_venv.codemode(*args, "'FORBIDDEN'").returncode == 0  # configured away


def test_a_plugin_storage_backend_is_chosen_by_the_storage_setting(
    plugin_venv: PluginVenv, tmp_path: Path
) -> None:
    store = tmp_path / "elsewhere"
    (tmp_path / "config.json").write_text(json.dumps({"storage": "acme-store"}))
    env = {"ACME_STORE": str(store)}
    out = plugin_venv.codemode(
        "run", "--base", str(tmp_path), "--executor", "subprocess",
        "-c", "state.set('k', 41); state.get('k') + 1", env=env,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "42"
    assert list(store.rglob("*state*")), "the state was stored by the plugin's backend"
    shown = plugin_venv.codemode("state", "get", "k", "--base", str(tmp_path), env=env)
    assert shown.stdout.strip() == "41", shown.stderr
    assert not (tmp_path / "state").exists(), "nothing went to the default file storage"


def test_a_plugin_executor_is_chosen_by_the_executor_setting(
    plugin_venv: PluginVenv, tmp_path: Path
) -> None:
    code = "import os; os.getpid()"
    env = {"CODEMODE_EXECUTOR": "acme-inproc"}
    out = plugin_venv.run(
        "-c",
        "import asyncio, os, sys\n"
        "from codemode import Session\n"
        "async def main():\n"
        f"    async with Session.from_base({str(tmp_path)!r}) as s:\n"
        f"        r = await s.run({code!r})\n"
        "        print(type(s.executor).__name__, r.value == os.getpid())\n"
        "asyncio.run(main())\n",
        env=env,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "InProcessExecutor True"


def test_an_unknown_executor_or_storage_names_the_plugins_choices(
    plugin_venv: PluginVenv, tmp_path: Path
) -> None:
    out = plugin_venv.codemode(
        "run", "--base", str(tmp_path), "-c", "1", env={"CODEMODE_STORAGE": "s4"}
    )
    assert out.returncode != 0
    assert (
        'storage: expected one of "file", "redis", "acme-store", got the string "s4"' in out.stderr
    )


def test_recognizers_are_offered_to_privacy_by_name(plugin_venv: PluginVenv) -> None:
    out = plugin_venv.run(
        "-c",
        "from codemode.plugins import recognizers\n"
        "d = recognizers()['ACME_ID']()\n"
        "print(d.entities, list(d.find('id ACME-123456 here')))\n",
    )
    assert out.stdout.strip() == "('ACME_ID',) [(3, 14, 'ACME_ID')]"


def test_disabling_a_plugin_skips_it_without_importing_it(plugin_venv: PluginVenv) -> None:
    found = plugin_venv.plugins(env={"CODEMODE_PLUGINS_DISABLE": "broken, acme"})
    assert found["broken"]["status"] == "disabled" and found["broken"]["error"] is None
    assert found["acme"]["status"] == "disabled"
    assert found["stampcap"]["status"] == "loaded"
