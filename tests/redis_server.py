"""A real redis-server for tests: free 127.0.0.1 port, temp dir, no persistence.

    server = RedisServer(tmp_path).start()
    server.url            redis://127.0.0.1:<port>/0
    server.pause()        SIGSTOP: connections are accepted by the kernel, nothing answers
    server.resume()       SIGCONT
    server.kill()         SIGKILL
    server.restart()      a fresh, empty server on the same port

Fixture: `redis_server` (one per test). Import it into a test module with
`from redis_server import redis_server  # noqa: F401` (pytest puts tests/ on sys.path).
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest
import redis

REDIS_SERVER = shutil.which("redis-server") or "/usr/bin/redis-server"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class RedisServer:
    def __init__(self, directory: Path, port: int = 0, user: tuple = None, tls: bool = False):
        """`user=(name, password)`: only that ACL user may connect (the default user is off).
        `tls=True`: TLS only, with a self-signed certificate for 127.0.0.1 (needs openssl)."""
        self.directory = Path(directory)
        self.port = port or free_port()
        self.user = user
        self.tls = tls
        self.process = None

    @property
    def ca_file(self) -> Path:
        return self.directory / "cert.pem"

    @property
    def url(self) -> str:
        credentials = f"{self.user[0]}:{self.user[1]}@" if self.user else ""
        if self.tls:
            return f"rediss://{credentials}127.0.0.1:{self.port}/0?ssl_ca_certs={self.ca_file}"
        return f"redis://{credentials}127.0.0.1:{self.port}/0"

    def client(self) -> redis.Redis:
        return redis.Redis.from_url(self.url, socket_timeout=5)

    def _args(self) -> list:
        args = ["--port", str(self.port)]
        if self.tls:
            self._make_certificate()
            args = ["--port", "0", "--tls-port", str(self.port), "--tls-auth-clients", "no",
                    "--tls-cert-file", str(self.ca_file),
                    "--tls-key-file", str(self.directory / "key.pem"),
                    "--tls-ca-cert-file", str(self.ca_file)]
        if self.user:
            args += ["--user", "default", "off",
                     "--user", self.user[0], "on", ">" + self.user[1], "~*", "&*", "+@all"]
        return args

    def _make_certificate(self) -> None:
        if not self.ca_file.exists():
            subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes",
                            "-keyout", str(self.directory / "key.pem"), "-out", str(self.ca_file),
                            "-days", "1", "-subj", "/CN=127.0.0.1",
                            "-addext", "subjectAltName=IP:127.0.0.1"],
                           check=True, capture_output=True)

    def start(self, timeout_s: float = 10.0) -> "RedisServer":
        if not os.path.exists(REDIS_SERVER):
            raise RuntimeError(f"redis-server not found at {REDIS_SERVER}; install it with "
                               f"`apt-get install redis-server` (CI does this in .ci/run)")
        self.directory.mkdir(parents=True, exist_ok=True)
        self.process = subprocess.Popen(
            [REDIS_SERVER, *self._args(), "--bind", "127.0.0.1",
             "--save", "", "--appendonly", "no", "--dir", str(self.directory),
             "--protected-mode", "yes"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                if self.client().ping():
                    return self
            except redis.RedisError:
                pass
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"redis-server on port {self.port} did not start "
                                   f"(exit code {self.process.poll()})")
            time.sleep(0.02)

    def pause(self) -> None:
        self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        self.process.send_signal(signal.SIGCONT)

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)    # a stopped process still dies, but
            self.process.kill()                         # CONT first keeps wait() prompt
            self.process.wait(timeout=10)

    def restart(self) -> "RedisServer":
        self.kill()
        return self.start()

    def stop(self) -> None:
        self.kill()


@pytest.fixture
def redis_server(tmp_path):
    server = RedisServer(tmp_path / "redis").start()
    yield server
    server.stop()


# --- entries to put into it -------------------------------------------------------------------
def make_entry_blob(key: str = "ab" * 32, secret: bytes = None, cubin: bytes = b"\x7fELF-cubin",
                    arch: str = "sm_90a", compiler: str = "nvrtc 13.0") -> bytes:
    """A well-formed entry blob (dgemm.jit.entry format) for `key`, without compiling."""
    from dgemm.heuristics import select
    from dgemm.jit import entry
    spec = entry.canonical_spec(select("fp8_gemm_nt", 128, 4096, 7168, arch=arch))
    return entry.pack(entry.Entry(key=key, spec=spec, compiler=compiler, flags=("-O3",),
                                  symbol="_Z6kernelv", cubin=cubin, created=time.time(),
                                  compile_seconds=0.5), secret)
