"""No capabilities, no privileged syscalls: ptrace, mount, setuid, namespaces, bpf..."""

from __future__ import annotations

import pytest

from .conftest import X86_64, Arena, blocked, denied

pytestmark = [pytest.mark.anyio, pytest.mark.security]
x86_64_only = pytest.mark.skipif(not X86_64, reason="raw syscall numbers are for x86_64")

# x86_64 numbers, with arguments that would otherwise be valid or harmless
SYSCALLS = {
    "ptrace_attach_to_init": (101, 16, 1, 0, 0),  # PTRACE_ATTACH pid 1
    "ptrace_traceme": (101, 0, 0, 0, 0),
    "process_vm_readv": (310, 1, 0, 0, 0, 0, 0),
    "mount_tmpfs": (165, 0, 0, 0, 0, 0),
    "umount_workspace": (166, 0, 0),
    "unshare_user_namespace": (272, 0x10000000),
    "setns": (308, 0, 0),
    "chroot": (161, 0),
    "pivot_root": (155, 0, 0),
    "bpf": (321, 0, 0, 0),
    "keyctl": (250, 0, 0, 0, 0, 0),
    "add_key": (248, 0, 0, 0, 0, 0),
    "userfaultfd": (323, 0),
    "perf_event_open": (298, 0, 0, -1, -1, 0),
    "kexec_load": (246, 0, 0, 0, 0),
    "init_module": (175, 0, 0, 0),
    "finit_module": (313, 0, 0, 0),
    "delete_module": (176, 0, 0),
    "swapon": (167, 0, 0),
    "reboot": (169, 0, 0, 0, 0),
    "io_uring_setup": (425, 1, 0),
    "sethostname": (170, 0, 0),
    "clone_with_new_user_namespace": (56, 0x10000000 | 17, 0, 0, 0, 0),
}


@x86_64_only
@pytest.mark.parametrize("name", sorted(SYSCALLS))
async def test_privileged_syscall_is_refused(arena: Arena, name: str) -> None:
    nr, *args = SYSCALLS[name]
    v = await arena.value(f"list(syscall({nr}, *{args!r}))")
    assert denied(v), f"{name} returned {v}"


async def test_no_capabilities_remain(arena: Arena) -> None:
    code = "[l.split()[1] for l in status().splitlines() if l.startswith('Cap')]"
    caps = await arena.value(code)
    assert caps == ["0000000000000000"] * 5


async def test_setuid_to_root_fails(arena: Arena) -> None:
    code = "[attempt(os.setuid, 0), attempt(os.setgid, 0), attempt(os.setgroups, [0]), os.getuid()]"
    v = await arena.value(code)
    assert all(blocked(x) for x in v[:3]) and v[3] != 0


async def test_no_new_privileges_is_set(arena: Arena) -> None:
    code = (
        "[l.split()[1] for l in status().splitlines() if l.startswith(('NoNewPrivs', 'Seccomp:'))]"
    )
    assert await arena.value(code) == ["1", "2"]


async def test_raising_resource_limits_fails(arena: Arena) -> None:
    code = (
        "import resource\nattempt(resource.setrlimit, resource.RLIMIT_NOFILE, (1 << 20, 1 << 20))"
    )
    assert blocked(await arena.value(code))


async def test_the_mount_command_cannot_remount_the_root_writable(arena: Arena) -> None:
    code = (
        "import subprocess\n"
        "r = subprocess.run(['mount', '-o', 'remount,rw', '/'], capture_output=True)\n"
        "[r.returncode != 0, attempt(lambda: open('/usr/pwned', 'w'))]"
    )
    v = await arena.value(code)
    assert v[0] is True and blocked(v[1])


async def test_nested_user_namespaces_cannot_be_created(arena: Arena) -> None:
    code = (
        "import subprocess\n"
        "[subprocess.run(argv, capture_output=True).returncode for argv in"
        " (['unshare', '-U', 'true'], ['bwrap', '--ro-bind', '/', '/', 'true'])]"
    )
    v = await arena.value(code)
    assert isinstance(v, list) and all(rc != 0 for rc in v)
