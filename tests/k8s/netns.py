"""Network plumbing between the tests' host and processes in their own network namespace.

A vCluster's syncer listens on fixed ports (its API server on 6443, its proxy on 8443),
so each one runs in a network namespace of its own with only loopback. Two forwarders
join it to the host, the way a pod network and a load balancer would:

- inside the namespace, the host API server's loopback port leads to the host's (the pod
  reaches the API server at the address its kubeconfig names);
- on the host, an address of the vCluster's own (a loopback address such as 127.77.3.9,
  port 443) leads to the proxy inside: the load balancer in front of the vCluster's
  Service.

Sockets belong to the network namespace of the thread that creates them, so a forwarder
makes its namespace-side sockets in a thread switched into that namespace (setns), and
everything else on the host.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from typing import TypeVar

T = TypeVar("T")
CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)


def inside(netns: str, make: Callable[[], T]) -> T:
    """``make()`` run in a thread switched into the network namespace at path ``netns``."""
    box: dict[str, T] = {}
    failure: list[BaseException] = []

    def run() -> None:
        try:
            fd = os.open(netns, os.O_RDONLY)
            try:
                if _libc.setns(fd, CLONE_NEWNET) != 0:
                    errno = ctypes.get_errno()
                    raise OSError(errno, f"setns {netns}: {os.strerror(errno)}")
            finally:
                os.close(fd)
            box["value"] = make()
        except BaseException as exc:  # handed back to the caller
            failure.append(exc)

    thread = threading.Thread(target=run, name="netns")
    thread.start()
    thread.join()
    if failure:
        raise failure[0]
    return box["value"]


def _pump(source: socket.socket, target: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            target.sendall(data)
    except OSError:
        pass
    finally:
        for s in (source, target):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)


class Forwarder:
    """Accepts on ``listener`` and joins each connection to a fresh ``connect()``."""

    def __init__(self, listener: socket.socket, connect: Callable[[], socket.socket]) -> None:
        self.listener = listener
        self.connect = connect
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._accept, name="forwarder", daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                near, _ = self.listener.accept()
            except OSError:
                return
            try:
                far = self.connect()
            except OSError:
                near.close()
                continue
            with self._lock:
                self._open.update((near, far))
            for a, b in ((near, far), (far, near)):
                threading.Thread(target=self._run, args=(a, b), daemon=True).start()

    def _run(self, source: socket.socket, target: socket.socket) -> None:
        _pump(source, target)
        with self._lock:
            self._open.discard(source)
        source.close()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.listener.shutdown(socket.SHUT_RDWR)
        self.listener.close()
        with self._lock:
            live = list(self._open)
        for s in live:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)


def _listen(host: str, port: int) -> socket.socket:
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((host, port))
    s.listen(64)
    return s


def _connector(host: str, port: int, netns: str | None = None) -> Callable[[], socket.socket]:
    def connect() -> socket.socket:
        s = inside(netns, socket.socket) if netns else socket.socket()
        try:
            s.settimeout(5)
            s.connect((host, port))
            s.settimeout(None)
        except OSError:
            s.close()
            raise
        return s

    return connect


def into_host(netns: str, port: int) -> Forwarder:
    """Inside the namespace, 127.0.0.1:``port`` leads to the host's 127.0.0.1:``port``."""
    listener = inside(netns, lambda: _listen("127.0.0.1", port))
    return Forwarder(listener, _connector("127.0.0.1", port))


def into_namespace(netns: str, address: str, port: int, target_port: int) -> Forwarder:
    """On the host, ``address``:``port`` leads to 127.0.0.1:``target_port`` inside."""
    return Forwarder(_listen(address, port), _connector("127.0.0.1", target_port, netns))


@contextlib.contextmanager
def forwarding(*forwarders: Forwarder) -> Iterator[None]:
    try:
        yield
    finally:
        for f in forwarders:
            f.close()


def namespace_of(process: subprocess.Popen[bytes], timeout: float = 10) -> str:
    """The new network namespace of ``process`` (an ``unshare --net --fork``), once
    unshare has made it (its own is the child's)."""
    own = os.readlink("/proc/self/ns/net")
    path = f"/proc/{process.pid}/ns/net"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"unshare exited with {process.returncode}")
        try:
            if os.readlink(path) != own:
                return path
        except OSError:
            pass
        time.sleep(0.02)
    raise RuntimeError("the process's network namespace did not appear")
