"""Peer to peer: how training results and model snapshots move between a run's clients.

Modules, each importing only modules above it in this list:

- ``errors``: ``P2PError`` and its family (``BlobError`` and its kinds, ``RequestError``,
  ``BadRequest``, ``ModelSharingError``); no iroh import, so callers can catch them cheaply;
- ``iroh_fastpath``: patches the send path of the iroh 1.2.0 binding (one memcpy instead of a
  per-byte copy); refuses any other version;
- ``blobs``: ``BlobStore``, ``blob_hash`` and the blob protocol's two sides (``ask``/``receive``
  to fetch, ``serve`` to answer);
- ``iroh_node``: ``IrohNode``, one endpoint per client: the connection cache, announcements,
  request/reply protocols, and blob fetches through ``blobs``;
- ``relay_server``: starts a local iroh relay (``scripts/relay``'s binary) for tests and
  benchmarks; no iroh import;
- ``iroh_results``: a training result as an announcement plus a blob;
- ``model_sharing``: snapshots of the model for clients that join a run in progress;
- ``applied_sharing``: the applied result sets of recent steps, for syncing clients to replay;
- ``mesh``: ``PeerMesh``, a websocket mesh for the transport without a native dependency;
- ``transport``: ``IrohTransport`` / ``WebSocketTransport``, the one interface the daemon uses.

This file imports nothing: ``import psyche_client.p2p.transport`` with the websocket transport
must not load the native iroh binding.

Protocols. iroh 1.2.0's Python binding offers endpoints, connections and streams only, so the
protocols are built here on top of them, each its own ALPN on the node's one endpoint. Each ALPN
ends in its protocol's version: a change that an older peer cannot read takes a new one, and a
peer that lists no ALPN in common fails the QUIC handshake, which the caller gets as
``ProtocolMismatch`` (naming the protocol) rather than a bare connection error. Snapshot
manifests carry their ``format`` (``ManifestFormatUnsupported`` for another).

- ``BLOB_ALPN`` (``b"psyche/blob/1"``, blobs.py): the fetcher opens a bi stream, sends the
  32-byte SHA-256 of the blob it wants and finishes its side. The server answers one status byte
  (0 found, 1 not found, 2 bad request); when found, an 8-byte big-endian size and the blob, then
  finishes. The fetcher refuses a size over its limit before reading any of it, hashes what
  arrives and raises ``BlobHashMismatch`` when it is not the blob asked for. Connections are
  cached per peer and protocol; every request is one stream.
- ``ANNOUNCE_ALPN`` (``b"psyche/announce/1"``, iroh_node.py): one uni stream per announcement,
  holding one JSON object of at most ``MAX_ANNOUNCEMENT`` bytes. The receiver sets
  ``msg["from"]`` to the sender's endpoint id (hex) as QUIC's TLS handshake authenticated it,
  overwriting whatever the sender put there, and calls ``on_announcement(msg)``. Announcements
  are small and say what is available ("result R of client C is at blob H"); the data moves as
  a blob, fetched by whoever needs it (iroh_results.py).
- request/reply (iroh_node.py), protocols registered with ``IrohNode.serve(alpn, handler,
  max_request)`` before ``start()``; model sharing's ``MODEL_ALPN`` and applied-set sharing's
  ``APPLIED_ALPN`` are two. Each request is one bi stream: the asker sends at most
  ``max_request`` bytes and finishes; the server answers one status byte (0 ok, 2 bad request, 3
  failed) and the body (for 2 and 3 a UTF-8 reason), then finishes. A handler refuses by raising
  ``BadRequest``; any other exception is logged and answered with 3, so no request can take the
  serving node down. ``IrohNode.request`` raises ``RequestError`` on 2 and 3.

Hash: SHA-256 (hashlib, about 1.3 GB/s with SHA-NI here): no new dependency, the hash results
are already committed with, and far faster than the link. BLAKE3 would make ids match
iroh-blobs' but adds a package without buying verified streaming, which this protocol does not
do: a blob is checked once it has arrived whole.

Addresses: ``IrohNode.start()`` returns the endpoint's iroh ticket string (endpoint id, relay
url if any, direct addresses); peers publish it, and ``set_peers({p2p_id_hex: ticket})`` takes
it. Given the client's identity seed as ``secret_key``, the endpoint id is the client's ed25519
public key, its p2p id: a peer's transport identity is its signing identity.

Relays are off unless ``relay_url`` is given (the client's ``--iroh-relay``: then that relay
only; no discovery service either way). With a relay, a peer known only by its p2p id (its
key: ``set_peers({id: None})``) is dialled through the relay, and iroh moves the connection to
a direct path when one works (``IrohNode.path_kind`` says which). ``scripts/relay`` serves one:
iroh-relay 1.4.1, the version this binding is built from (docs/across-machines.md). With the
default host 127.0.0.1 the endpoint binds 127.0.0.1 and [::1] only, so tests stay on loopback;
with 0.0.0.0 it binds every interface on the given port, IPv4 and IPv6 alike.
"""
