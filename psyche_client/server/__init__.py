"""The centralized deployment: a server that owns the run's coordinator, and its data server.

- ``coordinator_server``: ``CoordinatorServer``, the core behind a websocket, ticked on time;
- ``persistence``: ``StateStore``, the state written durably before any change is acknowledged;
- ``state_file``: loading and checking ``state.toml`` and ``data.toml``;
- ``transitions``: ``describe_changes``, the log lines for what changed between two states;
- ``data_server``: ``DataServer``, token batches over TCP for the current epoch's clients.
"""
