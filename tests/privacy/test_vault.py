"""The vault: stable tokens, encrypted at rest, TTL, shared by processes, keys."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

import pytest

from codemode.errors import ConfigError
from codemode.privacy.config import KEY_ENV, VaultConfig
from codemode.privacy.tokens import TOKEN_RE, TokenMaker
from codemode.privacy.vault import (
    Entry,
    FileStore,
    Vault,
    default_key_path,
    load_key,
    new_key,
)

KEY = new_key().encode()


def test_the_same_value_gets_the_same_token_and_different_values_different_ones() -> None:
    v = Vault(KEY)
    a = v.token("EMAIL", "alice@example.com")
    assert a == v.token("EMAIL", "alice@example.com")
    assert TOKEN_RE.fullmatch(a)
    assert a != v.token("EMAIL", "bob@example.com")
    assert a != Vault(new_key().encode()).token("EMAIL", "alice@example.com")
    assert v.value(a) == "alice@example.com"
    assert v.value("[EMAIL_abcdefghij]") is None


def test_the_persisted_vault_is_encrypted_and_resolves_in_a_new_vault(tmp_path: Path) -> None:
    v = Vault(KEY, FileStore(tmp_path, KEY))
    token = v.token("PHONE", "+44 20 7946 0958")
    v.flush()
    blobs = b"".join(p.read_bytes() for p in tmp_path.iterdir())
    assert b"7946" not in blobs and b"PHONE" not in blobs
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in tmp_path.iterdir())
    assert Vault(KEY, FileStore(tmp_path, KEY)).value(token) == "+44 20 7946 0958"


def test_a_vault_written_with_another_key_is_a_clear_error(tmp_path: Path) -> None:
    v = Vault(KEY, FileStore(tmp_path, KEY))
    v.token("EMAIL", "a@example.com")
    v.flush()
    other = new_key().encode()
    with pytest.raises(ConfigError, match="written with another key"):
        Vault(other, FileStore(tmp_path, other))


def test_tokens_expire_after_the_ttl_unless_used_again() -> None:
    now = [1000.0]
    v = Vault(KEY, ttl=100, clock=lambda: now[0])
    token = v.token("EMAIL", "a@example.com")
    now[0] += 60
    assert v.token("EMAIL", "a@example.com") == token  # used again: expiry pushed back
    now[0] += 90
    assert v.value(token) == "a@example.com"
    now[0] += 200
    assert v.value(token) is None
    assert v.purge() == 1


def test_a_token_issued_by_another_process_resolves_here(tmp_path: Path) -> None:
    here = Vault(KEY, FileStore(tmp_path, KEY))
    code = (
        "import sys\nfrom pathlib import Path\n"
        "from codemode.privacy.vault import FileStore, Vault\n"
        "key = sys.argv[2].encode()\n"
        "v = Vault(key, FileStore(Path(sys.argv[1]), key))\n"
        "print(v.token('EMAIL', 'carol@example.com'))\nv.flush()\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path), KEY.decode()],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    token = out.stdout.strip()
    here._last_refresh = 0.0
    assert here.value(token) == "carol@example.com"


def test_many_segments_are_merged_into_one(tmp_path: Path) -> None:
    v = Vault(KEY, FileStore(tmp_path, KEY))
    tokens = []
    for i in range(70):
        tokens.append(v.token("EMAIL", f"user{i}@example.com"))
        v.flush()
    assert len(list(tmp_path.glob("*.seg2"))) == 70
    again = Vault(KEY, FileStore(tmp_path, KEY))
    assert len(list(tmp_path.glob("*.seg2"))) == 1
    assert [again.value(t) for t in tokens] == [f"user{i}@example.com" for i in range(70)]


def test_segments_of_the_first_format_still_resolve_and_are_merged_away(tmp_path: Path) -> None:
    from cryptography.fernet import Fernet

    # A vault written before segments grouped their entries by expiry (``*.seg``, rows of
    # [token, value, expires]), beside one written now, with entries of two expiries.
    old = Vault(KEY)
    t_old = old.token("EMAIL", "old@example.com")
    later = time.time() + 3600
    rows = [[t_old, "old@example.com", later]]
    blob = Fernet(KEY).encrypt(json.dumps({"v": 1, "entries": rows}).encode())
    (tmp_path / "00000000000000000001-1-abcd.seg").write_bytes(blob)
    store = FileStore(tmp_path, KEY)
    store.append(
        {
            "[EMAIL_aaaaaaaaaa]": Entry("a@example.com", later),
            "[EMAIL_bbbbbbbbbb]": Entry("b@example.com", later + 1),
            "[EMAIL_cccccccccc]": Entry('c\x00 "é', later),
        }
    )
    loaded = FileStore(tmp_path, KEY).load()
    assert loaded == {
        t_old: Entry("old@example.com", later),
        "[EMAIL_aaaaaaaaaa]": Entry("a@example.com", later),
        "[EMAIL_bbbbbbbbbb]": Entry("b@example.com", later + 1),
        "[EMAIL_cccccccccc]": Entry('c\x00 "é', later),
    }
    # Compaction (past COMPACT_AFTER segments) merges both formats into one new segment.
    for i in range(70):
        store.append({f"[EMAIL_{i:0>10}]": Entry(f"u{i}@example.com", later)})
    again = FileStore(tmp_path, KEY).load()
    assert again[t_old] == Entry("old@example.com", later)
    assert len(again) == 74
    assert sorted(p.suffix for p in tmp_path.iterdir()) == [".seg2"]


def test_a_damaged_segment_is_a_clear_error(tmp_path: Path) -> None:
    from cryptography.fernet import Fernet

    blob = Fernet(KEY).encrypt(json.dumps({"v": 2, "groups": [[1.0, ["[EMAIL_x]"]]]}).encode())
    (tmp_path / "00000000000000000001-1-abcd.seg2").write_bytes(blob)
    with pytest.raises(ConfigError, match="unreadable vault segment"):
        FileStore(tmp_path, KEY).load()


def test_the_key_comes_from_the_environment_then_a_file_then_a_new_file(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    env = {"HOME": str(tmp_path / "home")}
    key, where = load_key(VaultConfig(), ws, env | {KEY_ENV: KEY.decode()})
    assert (key, where) == (KEY, f"${KEY_ENV}")
    key1, where1 = load_key(VaultConfig(), ws, env)
    path = default_key_path(ws, env)
    assert where1 == str(path) and path.exists()
    assert ws not in path.parents  # the key never lives in the workspace
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert load_key(VaultConfig(), ws, env)[0] == key1  # created once, then read
    own = tmp_path / "own.key"
    own.write_text(new_key())
    os.chmod(own, 0o600)
    assert load_key(VaultConfig(key_file=own), ws, env)[1] == str(own)


def test_a_new_key_file_is_written_through_no_link_planted_beside_it(tmp_path: Path) -> None:
    """The key is made where servers may write too (a configured key_file, made before
    they start): the temporary file's name was the pid's, and a symlink planted there
    made codemode (root) write the key over the file it pointed to."""
    victim = tmp_path / "victim"
    victim.write_text("precious")
    keys = tmp_path / "keys"
    keys.mkdir()
    (keys / f".privacy.key.{os.getpid()}.tmp").symlink_to(victim)
    _, where = load_key(VaultConfig(key_file=keys / "privacy.key"), None, {})
    assert victim.read_text() == "precious"
    assert where == str(keys / "privacy.key") and not (keys / "privacy.key").is_symlink()
    assert stat.S_IMODE((keys / "privacy.key").stat().st_mode) == 0o600


def test_bad_keys_are_refused_with_the_fix(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="codemode privacy keygen"):
        load_key(VaultConfig(), tmp_path, {KEY_ENV: "not-a-key"})
    loose = tmp_path / "loose.key"
    loose.write_text(new_key())
    os.chmod(loose, 0o644)
    with pytest.raises(ConfigError, match="chmod 600"):
        load_key(VaultConfig(key_file=loose), tmp_path, {})


@pytest.mark.redis
def test_a_redis_vault_is_shared_by_two_vaults_and_stores_only_ciphertext() -> None:
    import shutil
    import uuid

    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed (scripts/setup.sh installs it)")
    sys.path.insert(0, str(Path(__file__).parents[1] / "storage"))
    import redis
    from redis_server import RedisServer

    from codemode.privacy.vault import RedisStore

    with RedisServer() as server:
        name = f"t-{uuid.uuid4().hex[:8]}:privacy:default:vault"
        one = Vault(KEY, RedisStore(server.url, name, KEY))
        token = one.token("IBAN", "DE89370400440532013000")
        one.flush()
        two = Vault(KEY, RedisStore(server.url, name, KEY))
        assert two.value(token) == "DE89370400440532013000"
        late = one.token("EMAIL", "late@example.com")
        one.flush()
        assert two.value(late) == "late@example.com"  # fetched on demand
        stored = redis.Redis.from_url(server.url).hgetall(name)
        values = [v for v in stored.values() if isinstance(v, bytes)]
        assert len(values) == len(stored) == 2 and b"DE89" not in b"".join(values)


def test_a_batch_of_values_gets_the_tokens_each_value_gets_alone() -> None:
    alone, batch = Vault(KEY), Vault(KEY)
    items = [("EMAIL", "alice@example.com"), ("PHONE", "+1 415-555-0132")] * 2
    tokens = batch.token_many(items)
    assert tokens == [alone.token(e, v) for e, v in items]
    assert tokens[0] == tokens[2] and len(batch) == 2
    assert [batch.value(t) for t in tokens[:2]] == ["alice@example.com", "+1 415-555-0132"]


def test_tokens_persisted_in_the_background_resolve_in_a_new_vault(tmp_path: Path) -> None:
    v = Vault(KEY, FileStore(tmp_path, KEY))
    tokens = v.token_many([("EMAIL", f"user{i}@example.com") for i in range(500)])
    v.flush_soon()
    v.wait()
    fresh = Vault(KEY, FileStore(tmp_path, KEY))
    assert [fresh.value(t) for t in tokens] == [f"user{i}@example.com" for i in range(500)]


class _FailingOnce(FileStore):
    def __init__(self, directory: Path, key: bytes) -> None:
        super().__init__(directory, key)
        self.failures = 1

    def append(self, entries: Mapping[str, Entry]) -> None:
        if self.failures:
            self.failures -= 1
            raise OSError("disk full")
        super().append(entries)


def test_tokens_a_background_write_failed_to_persist_are_written_by_the_next_flush(
    tmp_path: Path,
) -> None:
    v = Vault(KEY, _FailingOnce(tmp_path, KEY))
    token = v.token("PHONE", "+44 20 7946 0958")
    v.flush_soon()
    v.wait()
    assert Vault(KEY, FileStore(tmp_path, KEY)).value(token) is None  # not written yet
    v.flush()
    assert Vault(KEY, FileStore(tmp_path, KEY)).value(token) == "+44 20 7946 0958"


def test_a_value_seen_before_keeps_its_token_after_the_vault_forgot_it() -> None:
    now = [1000.0]
    v = Vault(KEY, ttl=100, clock=lambda: now[0])
    token = v.token("EMAIL", "a@example.com")
    now[0] += 150
    assert v.purge() == 1
    assert v.token("EMAIL", "a@example.com") == token  # issued again, not from a stale memo
    assert v.value(token) == "a@example.com"


def test_a_batch_of_new_values_is_stored_as_the_values_one_at_a_time_are(tmp_path: Path) -> None:
    items = [("EMAIL", f"user{i}@example.com") for i in range(50)]
    now = lambda: 1000.0  # noqa: E731
    one, batch = Vault(KEY, ttl=100, clock=now), Vault(KEY, ttl=100, clock=now)
    assert batch.token_many(items) == [one.token(e, v) for e, v in items]
    assert batch._entries == one._entries and batch._pending == one._pending
    assert batch.held() == one.held()


def test_a_batch_finds_the_tokens_a_vault_loaded_from_disk_already_holds(tmp_path: Path) -> None:
    first = Vault(KEY, FileStore(tmp_path, KEY))
    old = first.token_many([("EMAIL", f"user{i}@example.com") for i in range(10)])
    first.flush()
    later = Vault(KEY, FileStore(tmp_path, KEY))
    items = [("EMAIL", f"user{i}@example.com") for i in range(20)]
    tokens = later.token_many(items)
    assert tokens[:10] == old and len(set(tokens)) == 20
    assert [later.value(t) for t in tokens] == [v for _, v in items]


class _Colliding(TokenMaker):
    """Every value's first token is the same (a 50-bit collision, forced)."""

    def token(self, entity: str, value: str, salt: int = 0) -> str:
        return super().token(entity, value if salt else "same", salt)

    def tokens(self, items: list[tuple[str, str]]) -> list[str]:
        return [self.token(e, v) for e, v in items]


def test_values_whose_tokens_collide_in_a_batch_get_distinct_tokens() -> None:
    v = Vault(KEY)
    v._ids = _Colliding(KEY)
    a, b = v.token_many([("EMAIL", "a@example.com"), ("EMAIL", "b@example.com")])
    assert a != b
    assert (v.value(a), v.value(b)) == ("a@example.com", "b@example.com")
