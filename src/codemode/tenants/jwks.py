"""The issuer's signing keys, fetched at most once per ``jwks_retry`` seconds.

PyJWT's ``PyJWKClient`` fetches under one lock, for the whole lookup: while the issuer's
JWKS endpoint is unreachable, every token whose key id is not cached (a bogus one costs
nothing to make) waits its turn for a fetch of up to 10 s, and valid tokens wait behind
them. Here a lookup that needs no fetch never waits; one fetch runs at a time (the others
wait for its outcome instead of starting their own); and after a failed fetch, or a fresh
set that lacks the key id asked for, no fetch is tried for ``retry`` seconds: such tokens
are refused at once meanwhile.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable

import anyio
import jwt

log = logging.getLogger(__name__)


class JWKSUnavailable(jwt.PyJWKClientError):
    """The issuer's JWKS could not be fetched lately; no fetch is tried before ``retry_in``."""

    def __init__(self, message: str, *, retry_in: int) -> None:
        super().__init__(message)
        self.retry_in = retry_in


class SigningKeys:
    """``await key(kid) -> PyJWK``: a key of the issuer's JWKS (cached ``lifespan`` s)."""

    def __init__(
        self,
        uri: str,
        *,
        lifespan: float = 600.0,
        timeout: float = 10.0,
        retry: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._client = jwt.PyJWKClient(uri, cache_jwk_set=False, cache_keys=False, timeout=timeout)
        self.lifespan, self.retry = lifespan, retry
        self._clock = clock
        self._keys: dict[str, jwt.PyJWK] = {}
        self._fetched = -math.inf
        """When the set in ``_keys`` was fetched."""
        self._tried = -math.inf
        """When a fetch last ended, well or not."""
        self._failure: str | None = None
        """Why the last fetch failed (None: it worked)."""
        self._fetching = anyio.Lock()

    async def key(self, kid: str | None) -> jwt.PyJWK:
        found = self._cached(kid)
        if found is not None:
            return found
        async with self._fetching:
            found = self._cached(kid)  # the fetch this call waited for may have brought it
            if found is not None:
                return found
            await self._fetch()
        found = self._cached(kid, fetched_now=True)
        assert found is not None  # _cached raises when it cannot answer
        return found

    def _cached(self, kid: str | None, *, fetched_now: bool = False) -> jwt.PyJWK | None:
        """The key if the fresh set has it; None if a fetch may help now; else raises."""
        now = self._clock()
        fresh = now - self._fetched < self.lifespan
        key = self._keys.get(kid or "")
        if key is not None and fresh:
            return key
        wait = self.retry - (now - self._tried)
        if not fetched_now and wait <= 0:
            return None
        retry_in = max(1, math.ceil(wait))
        if self._failure is not None:
            raise JWKSUnavailable(
                f"the issuer's JWKS could not be fetched ({self._failure}); next try in "
                f"{retry_in} s",
                retry_in=retry_in,
            )
        raise jwt.PyJWKClientError(f"no key of the issuer's JWKS has the key id {kid!r}")

    async def _fetch(self) -> None:
        try:
            keys = await anyio.to_thread.run_sync(self._client.get_signing_keys, True)
        except jwt.PyJWKClientError as exc:
            self._failure = str(exc) or type(exc).__name__
            log.warning("fetching the issuer's JWKS failed: %s", self._failure)
        else:
            self._keys = {k.key_id: k for k in keys if k.key_id}
            self._failure = None
            self._fetched = self._clock()
        finally:
            self._tried = self._clock()


__all__ = ["JWKSUnavailable", "SigningKeys"]
