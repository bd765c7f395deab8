from pathlib import Path

import pytest

FIX = Path(__file__).parent / "fixtures"


@pytest.fixture
def fixtures():
    return FIX


@pytest.fixture(scope="module")
def server():
    """The web server on a free local port, one per test module (faces/web/server.py)."""
    from tokenmath.faces.web.server import start_in_thread
    srv, thread = start_in_thread("127.0.0.1", 0)
    yield srv
    srv.shutdown()
    srv.server_close()
    thread.join(5)


@pytest.fixture(scope="module")
def api():
    """The web API's dispatcher, called in-process (no HTTP)."""
    from tokenmath.faces.web.api import Api
    return Api()
