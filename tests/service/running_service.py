"""A real `seisctf serve` for tests: a competition made with `seisctf referee create` from a tiny
CTF bundle, teams added with `seisctf referee add-team`, the server a process of its own on a
loopback port, attached to a Dask scheduler the test gives (or its embedded cluster)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from servers import free_port

SEISCTF = [sys.executable, "-m", "seisctf.cli"]
FINISHED = ("scored", "refused", "failed")


def seisctf(
    *argv: str, check: bool = True, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """`seisctf ARGV`, with `env` over this process's environment."""
    run = subprocess.run(
        [*SEISCTF, *argv],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **(env or {})},
    )
    if check:
        assert run.returncode == 0, run.stderr
    return run


def create_competition(
    root: Path,
    bundle: Path,
    *,
    quota: int = 5,
    max_upload_bytes: int = 64 * 1024**2,
    db: str = "",
    options: Sequence[str] = (),
    env: dict[str, str] | None = None,
) -> Path:
    """A competition of one dataset `tiny` (the bundle folder's public.zarr and truth.zarr);
    `options`: more of `referee create`'s, run with `env` over this process's environment."""
    folder = root / "competition"
    extra = [*(["--db", db] if db else []), *options]
    seisctf(
        "referee",
        "create",
        str(folder),
        "--name",
        "Tiny CTF",
        "--dataset",
        "tiny",
        str(bundle / "public.zarr"),
        str(bundle / "truth.zarr"),
        "--quota",
        str(quota),
        "--max-upload-bytes",
        str(max_upload_bytes),
        *extra,
        env=env,
    )
    return folder


def add_team(competition: Path, name: str, db: str = "") -> str:
    """The new team's token, as `seisctf referee add-team` prints it."""
    extra = ["--db", db] if db else []
    run = seisctf("referee", "add-team", str(competition), name, *extra)
    return re.search(r"token (\S+)", run.stdout).group(1)


def zip_folder(folder: Path, out: Path) -> Path:
    """A .zip of a zarr folder's files (names relative to it), as a participant makes one."""
    shutil.make_archive(str(out.with_suffix("")), "zip", folder)
    return out


@dataclass
class Service:
    """`seisctf serve` of `competition` in a process of its own."""

    competition: Path
    scheduler: str | None = None
    db: str = ""
    lease_s: float = 60.0
    retry_delay_s: float = 5.0
    workers: int = 1
    demo: bool = False  # `competition` is the demo's workdir: `serve --demo` it
    port: int = field(default_factory=free_port)
    env: dict[str, str] = field(default_factory=dict)  # over this process's environment
    options: list[str] = field(default_factory=list)  # more of `serve`'s
    process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 120.0) -> Service:
        argv = [
            *SEISCTF,
            "serve",
            "--demo" if self.demo else "--competition",
            str(self.competition),
            "--port",
            str(self.port),
            "--lease",
            str(self.lease_s),
            "--workers",
            str(self.workers),
            "--retry-delay",
            str(self.retry_delay_s),
            "--quiet",
        ]
        if self.scheduler:
            argv += ["--scheduler", self.scheduler]
        if self.db:
            argv += ["--db", self.db]
        argv += self.options
        log = open(self.competition / f"serve-{self.port}.log", "ab")  # noqa: SIM115
        self.process = subprocess.Popen(
            argv,
            stdout=log,
            stderr=log,
            start_new_session=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **self.env},
        )
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            assert self.process.poll() is None, self.log()
            try:
                if httpx.get(self.url + "/", timeout=2).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            time.sleep(0.3)
        raise AssertionError(f"service did not start: {self.log()}")

    def log(self) -> str:
        return (self.competition / f"serve-{self.port}.log").read_text(errors="replace")

    def kill(self) -> None:
        """SIGKILL to the server's process group: nothing of it gets to clean up."""
        if self.process and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(30)

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()

    def client(self, token: str | None = None) -> httpx.Client:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=60)


def upload(
    client: httpx.Client, path: Path, dataset: str = "tiny", model: str = "persistence"
) -> httpx.Response:
    params = {"dataset": dataset, "filename": path.name, "model": model}
    return client.post("/api/submissions", params=params, content=path.read_bytes())


def wait_finished(client: httpx.Client, ident: str, timeout_s: float = 180.0) -> dict:
    """The submission once scored, refused or failed."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        view = client.get(f"/api/submissions/{ident}").json()
        if view["state"] in FINISHED:
            return view
        time.sleep(0.3)
    raise AssertionError(f"submission {ident} still {view['state']} after {timeout_s} s")


def log_in(browser: httpx.Client, token: str) -> str:
    """Log `browser` (a client of the service keeping cookies) in with `token`: the CSRF token
    of its /team page."""
    from seisctf.service.app import COOKIE

    login = browser.post("/login", data={"token": token})
    assert login.status_code == 303 and COOKIE in browser.cookies, login.text
    page = browser.get("/team")
    assert page.status_code == 200, page.text
    found = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert found is not None, page.text
    return found.group(1)
