"""A real redis-server for tests: free 127.0.0.1 port, temp dir, no persistence.

    server = RedisServer(tmp_path).start()
    server.url            redis://127.0.0.1:<port>/0
                          (unix_socket=True: unix://<tmp_path>/redis.sock, no port to race for)
    server.pause()        SIGSTOP: connections are accepted by the kernel, nothing answers
    server.resume()       SIGCONT
    server.kill()         SIGKILL
    server.restart()      a fresh, empty server on the same port
    server.fill_up()      full: every write refused (maxmemory, noeviction), reads still served

NotRedis: a server that speaks Redis's protocol but is not Redis (answers given by the test).
tools/cache_probe.py uses both classes too (it puts tests/ on sys.path).

Fixture: `redis_server` (one per test). Import it into a test module with
`from redis_server import redis_server  # noqa: F401` (pytest puts tests/ on sys.path).
"""
from __future__ import annotations

import itertools
import os
import shutil
import signal
import socket
import subprocess
import threading
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
    def __init__(self, directory: Path, port: int = 0, user: tuple = None, tls: bool = False,
                 unix_socket: bool = False, args: tuple = ()):
        """`user=(name, password)`: only that ACL user may connect (the default user is off).
        `tls=True`: TLS only, with a self-signed certificate for 127.0.0.1 (needs openssl).
        `unix_socket=True`: a unix socket in `directory` instead of a port (not with tls).
        `args`: more redis-server arguments, e.g. ("--maxmemory", "8mb")."""
        if tls and unix_socket:
            raise ValueError("redis-server speaks TLS on a port only: pass tls or unix_socket")
        self.directory = Path(directory)
        self.unix_socket = unix_socket
        self.port = 0 if unix_socket else port or free_port()
        self.user = user
        self.tls = tls
        self.extra_args = tuple(args)
        self.process = None

    @property
    def socket_path(self) -> Path:
        return self.directory / "redis.sock"

    @property
    def address(self) -> str:
        return str(self.socket_path) if self.unix_socket else f"port {self.port}"

    @property
    def ca_file(self) -> Path:
        return self.directory / "cert.pem"

    @property
    def url(self) -> str:
        credentials = f"{self.user[0]}:{self.user[1]}@" if self.user else ""
        if self.unix_socket:
            return f"unix://{credentials}{self.socket_path}"
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
        if self.unix_socket:
            # 777: the probe's ranks that run as another uid connect too.
            args += ["--unixsocket", str(self.socket_path), "--unixsocketperm", "777"]
        return args + list(self.extra_args)

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
                raise RuntimeError(f"redis-server on {self.address} did not start "
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

    def fill_up(self) -> None:
        """Make it refuse every write as a full Redis does under its default policy, noeviction,
        while it keeps (and serves) what it holds: 4 MB of filler, then maxmemory 2 MB below
        the memory in use, so that no write fits, whatever its size."""
        client = self.client()
        for number in range(40):
            client.set(f"filler:{number}", b"x" * 100_000)
        client.config_set("maxmemory-policy", "noeviction")
        client.config_set("maxmemory", client.info("memory")["used_memory"] - 2_000_000)
        try:
            client.set("filler:one-more", b"x")
        except redis.exceptions.OutOfMemoryError:
            return
        raise RuntimeError(f"redis-server on {self.address} still takes writes past maxmemory")


@pytest.fixture
def redis_server(tmp_path):
    server = RedisServer(tmp_path / "redis").start()
    yield server
    server.stop()


# --- a server that speaks Redis's protocol but is not Redis ------------------------------------
class NotRedis:
    """A server in threads that reads Redis commands (RESP arrays, pipelined or not, or inline
    commands) and answers each as a misconfigured proxy or another service would: with
    `answer(command)` (the command as a list of bytes) where `answer` is a function, else with
    the next of the replies in the list `answer`, in a cycle that starts over on each connection.

        NotRedis(answer)                      on a free 127.0.0.1 port
        NotRedis(answer, unix_socket=path)    on a unix socket at `path`
        server.url, server.commands (commands answered), server.close()
    """

    def __init__(self, answer, unix_socket: Path = None):
        self.answer = answer
        self.commands = 0
        self.unix_socket = unix_socket
        if unix_socket is None:
            self._listener = socket.create_server(("127.0.0.1", 0))
        else:
            self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self._listener.bind(str(unix_socket))
            self._listener.listen(64)
        self._connections = []
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        if self.unix_socket is not None:
            return f"unix://{self.unix_socket}"
        return f"redis://127.0.0.1:{self._listener.getsockname()[1]}/0"

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self._listener.accept()
            except OSError:
                return
            self._connections.append(connection)
            threading.Thread(target=self._answer, args=(connection,), daemon=True).start()

    def _answer_of_one_connection(self):
        if callable(self.answer):
            return self.answer
        replies = itertools.cycle(self.answer)
        return lambda command: next(replies)

    def _answer(self, connection: socket.socket) -> None:
        answer = self._answer_of_one_connection()
        try:
            reader = connection.makefile("rb")
            while True:
                header = reader.readline()
                if not header:
                    return
                command = header.split()                # an inline command
                if header.startswith(b"*"):             # an array of bulk strings
                    command = []
                    for _ in range(int(header[1:])):
                        length = int(reader.readline()[1:])
                        command.append(reader.read(length + 2)[:-2])
                self.commands += 1
                connection.sendall(answer(command))
        except (OSError, ValueError):
            return

    def close(self) -> None:
        for sock in [self._listener, *self._connections]:
            try:
                sock.shutdown(socket.SHUT_RDWR)         # wakes the accept() and the readers
            except OSError:
                pass
            sock.close()

    kill = close        # the name RedisServer's callers (the probe's cleanup) use


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
