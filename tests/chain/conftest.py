import pytest

from .localnet import start_localnet


@pytest.fixture(scope="session")
def localnet():
    """One psyche-localnet for the session (.rpc_url, .ws_url, .binary, .program_id). Its chain
    is shared: give each test's runs their own run ids. Tests that need a fresh chain use
    `start_localnet()` from tests/chain/localnet.py directly."""
    with start_localnet() as net:
        yield net
