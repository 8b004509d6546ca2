"""Errors of the peer-to-peer side that callers handle (no iroh import here, so catching them
does not load the native binding)."""


class P2PError(Exception):
    """Anything that went wrong between peers: an unknown peer, a bad ticket, a refused
    announcement; the classes below say more."""


class BlobError(P2PError):
    """A blob could not be had: unreachable peer, timeout, reset, refusal, or a bad hash."""


class BlobNotFound(BlobError):
    pass


class BlobTooLarge(BlobError):
    """The peer announced a size over the fetcher's limit; nothing of it was read."""


class BlobHashMismatch(BlobError):
    """What arrived does not hash to the blob asked for."""


class RequestError(P2PError):
    """A request/reply exchange failed: unreachable peer, timeout, refusal or oversized reply."""


class BadRequest(P2PError):
    """Raised by a request handler to refuse the request; its message goes back to the peer."""


class ProtocolMismatch(BlobError, RequestError):
    """The peer does not speak this protocol at this version: the QUIC handshake found no
    common ALPN (each protocol's ALPN ends in its version, `psyche/blob/1`), so the two run
    releases that cannot talk. A BlobError and a RequestError too: every caller that treats a
    failed peer as failed treats this one so."""


class ModelSharingError(P2PError):
    """No verified model could be had from the peers in the time allowed."""
