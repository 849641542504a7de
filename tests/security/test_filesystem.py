"""Host files, secrets and other sessions' workspaces are out of reach.

Only /workspace, the private /tmp and /dev/shm are writable.
"""

from __future__ import annotations

import os

import pytest

from .conftest import Arena, blocked

pytestmark = [pytest.mark.anyio, pytest.mark.security]


async def test_a_canary_in_the_hosts_tmp_is_not_visible(arena: Arena) -> None:
    v = await arena.value(f"attempt(read, {arena.host.tmp_canary!r})")
    assert blocked(v)


async def test_a_canary_in_the_hosts_home_is_not_visible(arena: Arena) -> None:
    v = await arena.value(f"attempt(read, {arena.host.home_canary!r})")
    assert blocked(v)
    assert await arena.value("os.path.exists(os.path.expanduser('~/.ssh'))") is False


async def test_a_canary_environment_variable_of_the_host_is_not_inherited(arena: Arena) -> None:
    code = (
        f"[{arena.host.env_name!r} in os.environ,"
        f" {arena.host.secret!r}.encode() in read('/proc/self/environ')]"
    )
    assert await arena.value(code) == [False, False]


async def test_the_environment_holds_only_what_the_worker_needs(arena: Arena) -> None:
    keys = await arena.value("sorted(os.environ)")
    assert set(keys) <= {"PATH", "HOME", "TMPDIR", "LANG", "USER", "PWD"}  # type: ignore[arg-type]


async def test_proc_1_environ_is_the_sandboxs_own_init(arena: Arena) -> None:
    code = (
        "def scan():\n"
        "    found = []\n"
        "    for p in os.listdir('/proc'):\n"
        "        if p.isdigit():\n"
        "            try:\n"
        "                data = read(f'/proc/{p}/environ')\n"
        "            except OSError:\n"
        "                continue\n"
        f"            found.append({arena.host.secret!r}.encode() in data)\n"
        "    return found\n"
        "[scan(), open('/proc/1/cmdline', 'rb').read().split(b'\\0')[0].decode()]"
    )
    found, init = await arena.value(code)  # type: ignore[misc]
    assert found and not any(found), "a host process's environment was readable"
    assert init.endswith("bwrap")  # pid 1 is the sandbox's own init, not the host's


async def test_host_processes_are_not_visible(arena: Arena) -> None:
    pids = await arena.value("sorted(int(p) for p in os.listdir('/proc') if p.isdigit())")
    assert len(pids) <= 4  # type: ignore[arg-type]
    assert os.getpid() not in pids or os.getpid() <= 4  # type: ignore[operator]


async def test_host_mount_table_is_not_visible(arena: Arena) -> None:
    text = await arena.value("read('/proc/self/mountinfo').decode()")
    assert isinstance(text, str)
    for host_only in (" /sys ", "cgroup", "/root", " /home", "/etc/shadow"):
        assert host_only not in text
    assert len(text.splitlines()) < 30


async def test_etc_shadow_and_passwd_do_not_exist(arena: Arena) -> None:
    code = "[attempt(read, '/etc/' + f) for f in ('shadow', 'passwd', 'hostname')]"
    assert all(blocked(v) for v in await arena.value(code))  # type: ignore[attr-defined]


async def test_sys_and_run_and_home_are_absent(arena: Arena) -> None:
    code = (
        "[os.path.exists(p) for p in ('/sys', '/run', '/home', '/root', '/var', '/mnt', '/work')]"
    )
    assert await arena.value(code) == [False] * 7


async def test_writes_outside_the_workspace_fail(arena: Arena) -> None:
    code = (
        "def w(p):\n    open(p, 'w').write('x')\n"
        "[attempt(w, p + 'evil') for p in ('/usr/', '/etc/', '/', '/opt/', '/proc/', '/dev/')]"
    )
    assert all(blocked(v) for v in await arena.value(code))  # type: ignore[attr-defined]
    assert not os.path.exists("/usr/evil") and not os.path.exists("/evil")


async def test_the_worker_package_cannot_be_modified(arena: Arena) -> None:
    code = (
        "import codemode_worker, os\n"
        "p = os.path.join(os.path.dirname(codemode_worker.__file__), 'main.py')\n"
        "[attempt(lambda: open(p, 'a').write('#pwned')), attempt(os.unlink, p)]"
    )
    assert all(blocked(v) for v in await arena.value(code))  # type: ignore[attr-defined]


async def test_tmp_is_private_and_empty(arena: Arena) -> None:
    assert await arena.value("os.listdir('/tmp')") == []
    await arena.value("open('/tmp/mine', 'w').write('x')")
    assert not os.path.exists("/tmp/mine")


async def test_a_symlink_made_inside_to_a_host_file_resolves_inside_the_sandbox(
    arena: Arena,
) -> None:
    code = f"os.symlink({arena.host.tmp_canary!r}, 'link')\nattempt(read, 'link')"
    assert blocked(await arena.value(code))


async def test_a_symlink_planted_by_the_host_cannot_lead_out(arena: Arena) -> None:
    os.symlink(arena.host.tmp_canary, os.path.join(arena.host.attacker_ws, "planted"))
    os.symlink("/", os.path.join(arena.host.attacker_ws, "rootlink"))
    code = "[attempt(read, 'planted'), sorted(os.listdir('rootlink'))]"
    v = await arena.value(code)
    assert blocked(v[0])  # type: ignore[index]
    assert "root" not in v[1] and "home" not in v[1]  # type: ignore[index]


async def test_a_hardlink_to_a_host_file_cannot_be_made(arena: Arena) -> None:
    code = f"attempt(os.link, {arena.host.tmp_canary!r}, 'hard')"
    assert blocked(await arena.value(code))


async def test_another_sessions_workspace_is_unreachable(arena: Arena) -> None:
    path = os.path.join(arena.host.bystander_ws, "notes.txt")
    code = (
        f"[attempt(read, {path!r}), attempt(os.listdir, '/var/tmp'),"
        f" attempt(lambda: open({path!r}, 'w').write('pwned'))]"
    )
    assert all(blocked(v) for v in await arena.value(code))  # type: ignore[attr-defined]


async def test_devices_beyond_the_basics_do_not_exist(arena: Arena) -> None:
    code = "[attempt(read, '/dev/' + d) for d in ('kvm', 'mem', 'sda', 'vda', 'port', 'kmsg')]"
    assert all(blocked(v) for v in await arena.value(code))  # type: ignore[attr-defined]
    basics = {"console", "core", "fd", "full", "null", "ptmx", "pts", "random", "shm", "stderr",
              "stdin", "stdout", "tty", "urandom", "zero"}  # fmt: skip
    assert set(await arena.value("os.listdir('/dev')")) <= basics  # type: ignore[call-overload]


async def test_there_is_no_controlling_terminal_to_inject_into(arena: Arena) -> None:
    assert blocked(await arena.value("attempt(open, '/dev/tty', 'w')"))


async def test_kernel_knobs_in_proc_are_read_only(arena: Arena) -> None:
    code = (
        "def w(p, v):\n    open(p, 'w').write(v)\n"
        "[attempt(w, '/proc/sys/kernel/hostname', 'pwned'), attempt(w, '/proc/sysrq-trigger', 'b'),"
        " attempt(w, '/proc/sys/vm/drop_caches', '3')]"
    )
    assert all(blocked(v) for v in await arena.value(code))  # type: ignore[attr-defined]
