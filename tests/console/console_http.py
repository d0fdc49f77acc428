"""Helpers for the console's tests: ``gregor console`` in a child process, and a small HTTP
client (``http.client``) that sends exactly the headers a test gives, a forged ``Host`` or
``Origin`` included, and keeps the console's cookies as a browser would."""

from __future__ import annotations

import http.client
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from http.cookies import SimpleCookie
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit


@dataclass
class Answer:
    status: int
    headers: http.client.HTTPMessage
    text: str

    @property
    def location(self) -> str:
        return self.headers.get("Location", "")

    def cookies(self) -> list[str]:
        return self.headers.get_all("Set-Cookie") or []


@dataclass
class Console:
    """A running ``gregor console``: its URL and a way to talk to it."""

    url: str
    proc: subprocess.Popen[str] | None = None
    stderr_path: Path | None = None
    ssl_context: Any = None

    @property
    def netloc(self) -> str:
        return urlsplit(self.url).netloc

    @property
    def port(self) -> int:
        return int(urlsplit(self.url).port or 0)

    def stderr(self) -> str:
        return self.stderr_path.read_text() if self.stderr_path else ""

    def visitor(self) -> Visitor:
        return Visitor(self)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(30)


@dataclass
class Visitor:
    """One browser: a cookie jar and the console's address."""

    console: Console
    jar: dict[str, str] = field(default_factory=dict)

    def request(
        self,
        method: str,
        path: str,
        form: dict[str, str] | None = None,
        headers: dict[str, str] | None = None,
        *,
        origin: str | None = "same",
        host: str | None = None,
        cookies: bool = True,
    ) -> Answer:
        """``origin="same"``: the console's own origin; None: no Origin header."""
        c = self.console
        split = urlsplit(c.url)
        if split.scheme == "https":
            conn: http.client.HTTPConnection = http.client.HTTPSConnection(
                split.hostname or "", split.port, context=c.ssl_context, timeout=60
            )
        else:
            conn = http.client.HTTPConnection(split.hostname or "", split.port, timeout=60)
        h = {"Host": host or c.netloc}
        if method == "POST" and origin is not None:
            h["Origin"] = f"{split.scheme}://{c.netloc}" if origin == "same" else origin
        if cookies and self.jar:
            h["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.jar.items())
        body = None
        if form is not None:
            body = urlencode(form)
            h["Content-Type"] = "application/x-www-form-urlencoded"
        h.update(headers or {})
        try:
            conn.request(method, path, body=body, headers=h)
            resp = conn.getresponse()
            text = resp.read().decode(errors="replace")
        finally:
            conn.close()
        for raw in resp.headers.get_all("Set-Cookie") or []:
            jar = SimpleCookie()
            jar.load(raw)
            for name, morsel in jar.items():
                if morsel["max-age"] == "0" or not morsel.value:
                    self.jar.pop(name, None)
                else:
                    self.jar[name] = morsel.value
        return Answer(resp.status, resp.headers, text)

    def get(self, path: str, **kw: Any) -> Answer:
        return self.request("GET", path, **kw)

    def post(self, path: str, form: dict[str, str], **kw: Any) -> Answer:
        return self.request("POST", path, form, **kw)

    def token(self, path: str = "/") -> str:
        """The CSRF token in the forms of the page at ``path`` ("" on a page without one, as
        the console's pages had none before issue 35: a test then fails on what the console
        does with the form, not on the missing token)."""
        answer = self.get(path)
        assert answer.status == 200, (answer.status, answer.text[:500])
        m = re.search(r"name='csrf_token' value='([^']+)'", answer.text)
        return m.group(1) if m else ""

    def submit(self, page: str, action: str, **values: str) -> Answer:
        """Post ``values`` to ``action`` as the form on ``page`` would (with its CSRF token)."""
        return self.post(action, {"csrf_token": self.token(page), **values})

    def login(self, username: str | None, password: str) -> Answer:
        page = self.get("/login")
        assert page.status == 200, (page.status, page.text[:500])
        form = {"csrf_token": csrf_token(page.text), "password": password}
        if username is not None:
            form["username"] = username
        return self.post("/login", form)


def csrf_token(html: str) -> str:
    m = re.search(r"name='csrf_token' value='([^']+)'", html)
    assert m, f"no CSRF token in {html[:500]!r}"
    return m.group(1)


def start_console(
    *args: str, env: dict[str, str] | None = None, ssl_context: Any = None
) -> Console:
    """``gregor console ARGS`` (listening on 127.0.0.1:0 unless ARGS say otherwise); raises
    ``ConsoleRefused`` with its stderr when it exits instead of printing its URL."""
    if "--listen" not in args:
        args = (*args, "--listen", "127.0.0.1:0")
    err = Path(tempfile.mkstemp(prefix="gregor-console-", suffix=".err")[1])
    with open(err, "w") as f:
        proc = subprocess.Popen(
            [sys.executable, "-m", "gregor", "console", *args],
            stdout=subprocess.PIPE,
            stderr=f,
            text=True,
            env={**os.environ, **(env or {})},
        )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    m = re.search(r"(https?://\S+/)", line)
    if not m:
        proc.wait(60)
        raise ConsoleRefused(proc.returncode, err.read_text() + line)
    return Console(m.group(1), proc, err, ssl_context)


def refused(*args: str, env: dict[str, str] | None = None) -> str:
    """What ``gregor console ARGS`` says when it refuses to start; a test fails (after stopping
    it) when it starts instead."""
    try:
        c = start_console(*args, env=env)
    except ConsoleRefused as e:
        assert e.code not in (0, None), e.output
        return e.output
    c.stop()
    raise AssertionError(
        f"gregor console {' '.join(args)} started on {c.url} instead of refusing to"
    )


class ConsoleRefused(Exception):
    def __init__(self, code: int | None, output: str) -> None:
        super().__init__(f"exit {code}: {output}")
        self.code = code
        self.output = output
