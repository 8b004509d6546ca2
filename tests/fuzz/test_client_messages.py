"""Hostile messages from a coordinator server to the centralized backend's reader (its
_dispatch, in process): none escapes it, and a valid message after them is still taken."""

import asyncio
import json

from hypothesis import given
from hypothesis import strategies as st

from psyche_client.backends.centralized import CentralizedBackend

from .mutate import fuzz, json_values, mutated_text

PEERS = json.dumps({"type": "peers", "peers": {"ab" * 32: {"addr": "127.0.0.1:1"}}})


@fuzz
@given(st.one_of(mutated_text(PEERS),
                 json_values().map(json.dumps)))
def test_hostile_server_messages_are_dropped_and_the_reader_goes_on(text):
    async def read():  # the backend is made inside its event loop, as the client makes it
        backend = CentralizedBackend("ws://127.0.0.1:1", "run")
        backend._dispatch(text)  # logged and dropped, or taken when a mutation left it valid
        backend._dispatch(PEERS)
        return backend.peers()

    assert asyncio.run(read()) == json.loads(PEERS)["peers"]
