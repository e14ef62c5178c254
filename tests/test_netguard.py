import socket
import subprocess
import sys

import pytest

from headlab.inputs import netguard


@pytest.fixture
def guard():
    netguard.install()
    yield
    netguard.uninstall()


def test_guard_refuses_other_hosts_and_allows_loopback(guard):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    client = socket.socket()
    client.connect(server.getsockname())  # loopback: allowed
    client.close()
    server.close()
    with pytest.raises(netguard.NetworkBlocked, match="203.0.113.5"):
        socket.socket().connect(("203.0.113.5", 443))
    with pytest.raises(netguard.NetworkBlocked):
        socket.create_connection(("pypi.org", 443), timeout=1)


def test_importing_headlab_with_the_variable_set_installs_the_guard():
    code = (
        "import socket, headlab\n"
        "try:\n socket.socket().connect(('198.51.100.7', 80))\nexcept ConnectionError as e: print('BLOCKED', e)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        env={"HEADLAB_NO_NETWORK": "1", "PATH": "/usr/bin:/bin"},
    )
    assert "BLOCKED" in out.stdout and "198.51.100.7" in out.stdout
