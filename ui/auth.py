"""Serving beyond loopback: credentials are required, and failed logins are throttled.

No gradio here: `exposure_error` is a pure check, `LoginThrottle` pure bookkeeping, and
`LoginGuard` a plain ASGI middleware that gradio's FastAPI app runs in front of its /login.
"""

from __future__ import annotations

import ipaddress
import json
import threading
import time
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any

from rag.config import UISettings

MIN_PASSWORD_CHARS = 8

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


def is_loopback(host: str) -> bool:
    if host.strip().lower() in ("localhost", "localhost.localdomain"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def exposure_error(ui: UISettings) -> str:
    """Why these settings must not be served ("" when they may): a host other than loopback
    needs a user and a password of at least MIN_PASSWORD_CHARS characters."""
    if is_loopback(ui.host):
        return ""
    how = ("set ui.auth_user and ui.auth_password (RAG_UI__AUTH_USER=... "
           "RAG_UI__AUTH_PASSWORD=... in the environment, or [ui] auth_user/auth_password in "
           "the config file), or serve on ui.host = \"127.0.0.1\"")
    if not ui.auth_user or not ui.auth_password:
        return f"ui.host {ui.host!r} serves beyond this machine, so a login is required: {how}"
    if len(ui.auth_password) < MIN_PASSWORD_CHARS:
        return (f"ui.auth_password is {len(ui.auth_password)} characters long; serving on "
                f"{ui.host!r} needs at least {MIN_PASSWORD_CHARS}")
    return ""


@dataclass
class _Record:
    failures: int = 0
    blocked_until: float = 0.0


class LoginThrottle:
    """Failed logins per client address: after `failures` in a row, that address waits
    `pause` seconds before its next try, doubled for each failure after that; a success
    clears it."""

    def __init__(self, failures: int, pause: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.failures, self.pause, self.clock = failures, pause, clock
        self._lock = threading.Lock()
        self._records: dict[str, _Record] = {}

    def wait(self, client: str) -> float:
        """Seconds `client` must still wait before trying again (0: it may try now)."""
        with self._lock:
            r = self._records.get(client)
            return max(0.0, r.blocked_until - self.clock()) if r else 0.0

    def record(self, client: str, ok: bool) -> None:
        with self._lock:
            if ok:
                self._records.pop(client, None)
                return
            if len(self._records) > 10_000:  # bounded: forget the calmest addresses
                for key in sorted(self._records, key=lambda k: self._records[k].failures)[:5_000]:
                    del self._records[key]
            r = self._records.setdefault(client, _Record())
            r.failures += 1
            extra = r.failures - self.failures
            if extra >= 0:
                r.blocked_until = self.clock() + self.pause * 2 ** min(extra, 10)


class LoginGuard:
    """ASGI middleware: refuses a throttled address's POST /login with 429 and a message,
    and feeds every login outcome (200 success, anything else failure) to the throttle."""

    def __init__(self, app: Callable[[Scope, Receive, Send], Awaitable[None]],
                 throttle: LoginThrottle) -> None:
        self.app, self.throttle = app, throttle

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (scope.get("type") != "http" or scope.get("method") != "POST"
                or not str(scope.get("path", "")).rstrip("/").endswith("/login")):
            await self.app(scope, receive, send)
            return
        client = (scope.get("client") or ("unknown",))[0]
        wait = self.throttle.wait(client)
        if wait > 0:
            body = json.dumps({"detail": f"Too many failed logins from this address; try "
                                         f"again in {wait:.0f} s."}).encode()
            await send({"type": "http.response.start", "status": 429,
                        "headers": [(b"content-type", b"application/json"),
                                    (b"retry-after", str(int(wait + 0.999)).encode())]})
            await send({"type": "http.response.body", "body": body})
            return
        status: dict[str, int] = {}

        async def capture(message: Message) -> None:
            if message.get("type") == "http.response.start":
                status["code"] = int(message["status"])
            await send(message)

        await self.app(scope, receive, capture)
        self.throttle.record(client, status.get("code") == 200)
