"""Refuse every network connection except to this machine.

headlab needs no network at run time once its assets are cached. With ``HEADLAB_NO_NETWORK=1`` (the tests and
``make book`` set it) importing headlab installs this guard, so a stray download — a model hub lookup, a CDN —
fails loudly instead of happening quietly.
"""

from __future__ import annotations

import ipaddress
import socket

_original_connect = socket.socket.connect
_original_connect_ex = socket.socket.connect_ex


class NetworkBlocked(ConnectionError):
    """A connection to another machine was attempted while the network guard is on."""


def _is_local(address) -> bool:
    if isinstance(address, (str, bytes)):  # a Unix socket path
        return True
    host = address[0]
    if host in ("localhost", ""):
        return True
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return False  # a host name other than localhost would need a DNS lookup: not local


def _check(sock, address):
    if sock.family in (socket.AF_INET, socket.AF_INET6) and not _is_local(address):
        raise NetworkBlocked(
            f"headlab network guard: connection to {address!r} refused (only localhost is allowed; "
            "unset HEADLAB_NO_NETWORK to allow it)"
        )


def _guarded_connect(self, address):
    _check(self, address)
    return _original_connect(self, address)


def _guarded_connect_ex(self, address):
    _check(self, address)
    return _original_connect_ex(self, address)


def install() -> None:
    """Refuse connections to other machines from now on (:class:`NetworkBlocked`)."""
    socket.socket.connect = _guarded_connect
    socket.socket.connect_ex = _guarded_connect_ex


def uninstall() -> None:
    """Allow every connection again (the socket methods as they were)."""
    socket.socket.connect = _original_connect
    socket.socket.connect_ex = _original_connect_ex
