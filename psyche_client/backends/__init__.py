"""Where a client finds its run's coordinator: one backend per deployment, one interface.

- ``base``: ``Backend``, what the daemon needs (connect, the spec, states, send, peers), and
  ``BackendError`` / ``FatalBackendError``;
- ``centralized``: ``CentralizedBackend``, the coordinator server over one websocket;
- ``solana``: ``SolanaBackend``, the program's coordinator account over PubSub, operations as
  signed instructions.

The modules are imported one by one (``solana`` pulls in the Solana libraries, which a client of a
centralized run does not need).
"""
