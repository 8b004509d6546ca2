"""IrohNode: one iroh (QUIC) endpoint per client, with its connection cache, the announcement
protocol and request/reply protocols; the blob protocol's streams are handled by blobs.py.

The protocols' wire formats, addresses and relays are described in the package docstring
(p2p/__init__.py). Importing this module installs the send fast path of iroh_fastpath (and
fails with IrohFastPathError on any iroh other than 1.2.0)."""

import asyncio
import inspect
import ipaddress
import json
import logging
import socket
import time
from collections import deque

from psyche_coordinator_core.ops_json import loads as read_json

from . import blobs, iroh_fastpath
from .blobs import BLOB_ALPN, DEFAULT_MAX_BLOB, BlobStore, hash_bytes
from .errors import BadRequest, BlobError, P2PError, ProtocolMismatch, RequestError

iroh_fastpath.install()

import iroh  # noqa: E402  (after the fast path is in place)

ANNOUNCE_ALPN = b"psyche/announce/1"
MAX_ANNOUNCEMENT = 64 << 10
# An announcement a peer did not take (no path yet, a lost handshake) waits in that peer's
# outbox and is sent again, oldest first, for ANNOUNCE_RETRY_SECONDS: about two rounds, after
# which a result is of no use. At most OUTBOX_LIMIT wait per peer (the oldest leave first).
ANNOUNCE_RETRY_SECONDS = 60.0
OUTBOX_LIMIT = 256
RETRY_FIRST, RETRY_MAX = 0.5, 8.0  # seconds between tries of a peer, doubling

_REPLY_OK, _REPLY_BAD_REQUEST, _REPLY_FAILED = 0, 2, 3
MAX_REASON = 200  # bytes of a refusal's reason that travel back
_CLOSE_NORMAL, _CLOSE_UNKNOWN_ALPN = 0, 1  # application error codes for closing a connection

logger = logging.getLogger(__name__)


class _V6Preset(iroh.Preset):
    """The minimal preset (no discovery) with the IPv6 socket where we want it: [::1] beside a
    127.0.0.1 socket (tests stay on loopback), [::]:port beside 0.0.0.0:port (a contributor's
    fixed port on both families; the minimal preset alone picks a random IPv6 port)."""

    def __init__(self, v6_bind: str):
        super().__init__()
        self.v6_bind = v6_bind

    def apply(self, builder):
        builder.apply_minimal()
        builder.bind_addr(self.v6_bind)


def relay_mode(url):
    """The endpoint's relay: none, or the run's. A plain-HTTP relay (scripts/relay) has no
    QUIC address discovery (it needs TLS), so no port is named for it; an https one keeps
    iroh's default discovery port."""
    if not url:
        return iroh.RelayMode.disabled()
    if url.startswith("http://"):
        relays = iroh.RelayMap.empty()
        relays.insert(iroh.RelayConfig(url=url, quic_port=None))
        return iroh.RelayMode.custom(relays)
    return iroh.RelayMode.custom_from_urls([url])


def protocol_mismatch(e: Exception, peer, alpn: bytes):
    """A ProtocolMismatch when `e` is the handshake's refusal of `alpn` (TLS alert 120,
    no_application_protocol: the peer lists no ALPN we offered), else None."""
    text = f"{e} {e!r}"  # the binding's IrohError keeps its message in its repr
    if "error 120" not in text and "support any known protocol" not in text:
        return None
    return ProtocolMismatch(f"peer {peer} does not speak {alpn.decode(errors='replace')}: it "
                            "runs a release with another version of this protocol")


def parse_addr(addr: str) -> "iroh.EndpointAddr":
    """An iroh ticket string (what IrohNode.start returns) to an EndpointAddr."""
    try:
        return iroh.EndpointTicket.from_string(addr).endpoint_addr()
    except Exception as e:  # IrohError, or a non-string
        raise P2PError(f"not an iroh endpoint ticket: {addr!r}: {e}") from None


class IrohNode:
    """One iroh endpoint serving blobs and receiving announcements; PeerMesh's shape where it
    fits (start -> address string, set_peers, broadcast/announce, on_message, close)."""

    def __init__(self, own_id_hex=None, on_announcement=None, host="127.0.0.1", port=0,
                 secret_key: bytes = None, relay_url: str = None, max_blob_size=DEFAULT_MAX_BLOB,
                 timeout=10.0, store: BlobStore = None, close_timeout=1.0, stun=(),
                 known_addrs=None, retry_for=ANNOUNCE_RETRY_SECONDS):
        self.own = own_id_hex
        self.on_announcement = on_announcement  # called with each announcement dict
        self.host, self.port = host, port
        self.secret_key, self.relay_url = secret_key, relay_url
        # STUN servers ("host:port") to learn this node's public address from (p2p/stun.py)
        self.stun = tuple(stun)
        self.public_addr = None  # "ip:port" as the STUN server saw it, when one answered
        # p2p id hex -> ["ip:port", ...]: peers this node can reach at an address it was given
        # (a bootstrap peer), with or without a relay
        self.known_addrs = {k.lower(): list(v) for k, v in (known_addrs or {}).items()}
        self.max_blob_size, self.timeout, self.close_timeout = max_blob_size, timeout, close_timeout
        self.store = store if store is not None else BlobStore()
        self.peers = {}  # p2p id hex -> ticket string
        self._tickets = {}  # p2p id hex -> the last ticket it had, also after it left
        self._addrs = {}  # p2p id hex -> EndpointAddr
        self._by_endpoint = {}  # endpoint id hex -> EndpointAddr
        self._conns = {}  # (endpoint id hex, alpn) -> Connection
        self._incoming = {}  # endpoint id hex -> set of Connections it opened to us
        self._dialing = {}  # (endpoint id hex, alpn) -> Future of a Connection
        self._tasks = set()
        self._protocols = {}  # alpn -> (handler, max_request) for request/reply protocols
        self.retry_for = retry_for  # seconds an announcement a peer missed is sent again
        self._outbox = {}  # endpoint id hex -> deque of (expiry, bytes) the peer has not taken
        # (expiry, bytes, p2p ids excluded) of the announcements made in the last retry_for
        # seconds: a peer that enters the peer list later gets them (see set_peers)
        self._recent = deque(maxlen=OUTBOX_LIMIT)
        self.endpoint = None
        self.endpoint_id = None

    # PeerMesh compatibility
    @property
    def on_message(self):
        return self.on_announcement

    @on_message.setter
    def on_message(self, fn):
        self.on_announcement = fn

    async def broadcast(self, msg: dict) -> int:
        return await self.announce(msg)

    def serve(self, alpn: bytes, handler, max_request: int) -> None:
        """Answer requests on `alpn` with `handler(request: bytes, peer: str) -> bytes` (or an
        awaitable of bytes), `peer` being the requester's endpoint id (hex). Before start():
        the endpoint's protocols are fixed when it binds."""
        if self.endpoint is not None:
            raise P2PError("register protocols before start()")
        if alpn in (BLOB_ALPN, ANNOUNCE_ALPN) or alpn in self._protocols:
            raise P2PError(f"protocol {alpn!r} is already served")
        self._protocols[alpn] = (handler, max_request)

    # lifecycle
    async def start(self) -> str:
        try:
            ip = ipaddress.ip_address(self.host)
        except ValueError:
            raise P2PError(f"bind host must be an IP address, not {self.host!r}") from None
        if self.stun and ip.is_unspecified:
            await self._ask_stun()  # before the endpoint takes the port
        if ip.version == 4 and ip.is_loopback:
            preset = _V6Preset("[::1]:0")
        elif ip.version == 4 and ip.is_unspecified:
            preset = _V6Preset(f"[::]:{self.port}")
        else:
            preset = iroh.preset_minimal()
        opts = iroh.EndpointOptions(
            preset=preset,
            bind_addr=f"{ip}:{self.port}" if ip.version == 4 else f"[{ip}]:{self.port}",
            secret_key=self.secret_key,
            alpns=[BLOB_ALPN, ANNOUNCE_ALPN, *self._protocols],
            relay_mode=relay_mode(self.relay_url))
        try:
            self.endpoint = await iroh.Endpoint.bind(opts)
        except iroh.IrohError as e:  # the cause ("Address already in use") is its last line
            lines = str(e).split("Caused by:")[-1].strip().splitlines() or [str(e)]
            cause = lines[0].strip(' ",')
            raise P2PError(f"cannot bind p2p port {self.port} on {self.host}: {cause}") from None
        self.endpoint_id = str(self.endpoint.id())
        if self.public_addr:
            await self.endpoint.add_external_addr(self.public_addr)
        self._spawn(self._accept_loop())
        if self.relay_url:  # not awaited: a client its firewall keeps from the relay (one that
            self._spawn(self._await_relay())  # reaches a peer only) must not wait on it
        return self.addr()

    async def _await_relay(self) -> None:
        try:
            await asyncio.wait_for(self.endpoint.online(), self.timeout)
        except asyncio.TimeoutError:
            logger.warning("relay %s not reached in %ss; peers reach this client directly "
                           "only", self.relay_url, self.timeout)

    async def _ask_stun(self) -> None:
        """Fix the port (a free one when 0) and learn its public address from a STUN server."""
        from .stun import public_address

        if not self.port:
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                s.bind(("0.0.0.0", 0))
                self.port = s.getsockname()[1]
        self.public_addr = await public_address(self.stun, self.port)
        if self.public_addr:
            logger.info("public address %s (STUN), port %d here", self.public_addr, self.port)
        else:
            logger.warning("no STUN server answered (%s): peers behind other NATs reach this "
                           "client through the relay only", ", ".join(self.stun))

    def addr(self) -> str:
        return str(iroh.EndpointTicket.from_addr(self.endpoint.addr()))

    async def close(self):
        """Close every connection and the endpoint. The endpoint's graceful close waits for
        peers to acknowledge; a dead peer (or a dial in flight) would hold it for seconds, so it
        gets close_timeout at most."""
        for conn in list(self._conns.values()):
            conn.close(_CLOSE_NORMAL, b"closing")
        self._conns.clear()
        for t in list(self._tasks) + list(self._dialing.values()):
            t.cancel()
        if self.endpoint is not None:
            try:
                await asyncio.wait_for(self.endpoint.close(), self.close_timeout)
            except (asyncio.TimeoutError, iroh.IrohError):
                pass

    def _spawn(self, coro):
        t = asyncio.ensure_future(coro)
        self._tasks.add(t)
        t.add_done_callback(self._tasks.discard)
        return t

    def _by_key(self, p2p_id: str):
        """A peer known by its key (its p2p id is its endpoint id) reached through the run's
        relay and at the addresses it was given (`known_addrs`): iroh dials it there and moves to
        a direct path when one works."""
        try:
            key = iroh.EndpointId.from_bytes(bytes.fromhex(p2p_id))
        except (ValueError, TypeError, iroh.IrohError) as e:
            raise P2PError(f"not a p2p id (64 hex digits): {p2p_id!r}: {e}") from None
        return iroh.EndpointAddr(key, self.relay_url, self.known_addrs.get(p2p_id, []))

    def _with_relay(self, addr):
        """A ticket made before its endpoint had reached the relay names none: the run's relay
        (ours) is its relay too."""
        if addr.relay_url() or not self.relay_url:
            return addr
        return iroh.EndpointAddr(addr.id(), self.relay_url, addr.direct_addresses())

    def set_peers(self, peers: dict) -> None:
        """{p2p id hex: ticket, or None when only its key is known (then reached through the
        relay and its `known_addrs`; left out without either)}; ourselves and unparsable
        tickets are left out. A peer whose ticket changed has restarted (same key, new
        sockets), and one that left may come back so: connections with its old process, ours
        and the ones it opened, would only end at QUIC's idle timeout, and while one is open
        iroh cannot dial the new process (measured: every dial times out), so they are
        closed.

        A peer that enters the list (new, back, or moved) is sent the announcements of the last
        `retry_for` seconds it was not excluded from: a list can leave out a peer for a while
        (a restarted coordinator lists clients as they reconnect), and what was announced
        meanwhile would otherwise never reach it. Receivers drop what they already have."""
        new, addrs, by_ep, moved = {}, {}, {}, set()
        entered = []  # (p2p id, endpoint id) of each peer new to the list, back, or moved
        for k, v in peers.items():
            if k == self.own or not (v or self.relay_url or k in self.known_addrs):
                continue
            if k in self.peers and v == self.peers[k]:
                a = self._addrs[k]
            else:
                try:
                    a = self._with_relay(parse_addr(v)) if v else self._by_key(k)
                except P2PError as e:
                    logger.warning("peer %s: %s", k, e)
                    continue
                if self._tickets.get(k, v) != v:  # now, or when it left
                    moved.add(str(a.id()))
            ep = str(a.id())
            if ep == self.endpoint_id:
                continue
            new[k], addrs[k], by_ep[ep] = v, a, a
            if k not in self.peers or ep in moved:
                entered.append((k, ep))
        gone = (set(self._by_endpoint) - set(by_ep)) | moved
        self.peers, self._addrs, self._by_endpoint = new, addrs, by_ep
        self._tickets.update(new)
        for key in list(self._conns):
            if key[0] not in by_ep or key[0] in moved:
                self._conns.pop(key).close(_CLOSE_NORMAL, b"peer left or moved")
        for ep in gone:
            for conn in self._incoming.pop(ep, ()):
                conn.close(_CLOSE_NORMAL, b"peer left or moved")
        now = time.monotonic()
        for k, ep in entered:
            for expiry, data, excluded in self._recent:
                if expiry > now and k not in excluded:
                    self._queue(ep, data)

    def knows(self, peer) -> bool:
        """Whether `peer` can be reached now: whatever `_resolve` takes (a listed p2p id or
        endpoint id, a ticket)."""
        try:
            self._resolve(peer)
        except P2PError:
            return False
        return True

    def _resolve(self, peer):
        """A p2p id, an endpoint id (hex) of a known peer, a ticket or an EndpointAddr."""
        if isinstance(peer, iroh.EndpointAddr):
            return peer
        if peer in self._addrs:
            return self._addrs[peer]
        if peer in self._by_endpoint:
            return self._by_endpoint[peer]
        if isinstance(peer, str) and peer.startswith("endpoint"):
            return parse_addr(peer)
        raise P2PError(f"unknown peer {peer!r}")

    def path_kind(self, peer):
        """How this node reaches `peer` (see _resolve) now: "direct" (an IP path selected),
        "relay", or None when no connection to it is open."""
        ep = str(self._resolve(peer).id())
        for (to, _), conn in list(self._conns.items()):
            if to != ep or conn.close_reason() is not None:
                continue
            for path in conn.paths():
                if path.is_selected:
                    return "relay" if path.is_relay else "direct"
        return None

    # outgoing connections
    async def _connection(self, addr, alpn):
        """(connection, whether it was cached): one connection per peer and protocol."""
        key = (str(addr.id()), alpn)
        conn = self._conns.get(key)
        if conn is not None and conn.close_reason() is None:
            return conn, True
        self._conns.pop(key, None)
        fut = self._dialing.get(key)
        if fut is None:  # one dial per peer and protocol at a time
            fut = self._dialing[key] = asyncio.ensure_future(self.endpoint.connect(addr, alpn))

            def done(f):
                self._dialing.pop(key, None)
                if not f.cancelled():
                    f.exception()  # retrieved, for when every caller gave up waiting

            fut.add_done_callback(done)
        conn = await asyncio.shield(fut)
        self._conns[key] = conn
        return conn, False

    def _drop(self, addr, alpn, conn):
        key = (str(addr.id()), alpn)
        if self._conns.get(key) is conn:
            del self._conns[key]

    def _forget(self, addr, alpn):
        """After a timeout: the cached connection may lead nowhere (a hung or restarted peer),
        so the next call dials afresh."""
        conn = self._conns.pop((str(addr.id()), alpn), None)
        if conn is not None:
            conn.close(_CLOSE_NORMAL, b"timed out")

    async def _on_connection(self, addr, alpn, use):
        """`await use(conn)` on the peer's connection; when a cached one turns out dead, once
        more on a fresh one. An unreachable peer costs the caller's timeout (QUIC over UDP
        does not learn that nobody listens)."""
        while True:
            conn, cached = await self._connection(addr, alpn)
            try:
                return await use(conn)
            except iroh.IrohError:
                self._drop(addr, alpn, conn)
                if not cached:
                    raise

    # announcements
    async def announce(self, msg: dict, exclude=()) -> int:
        """Push a JSON-able dict to every known peer but those in `exclude` (p2p ids hex);
        returns how many acknowledged it (within the node's timeout, which bounds the call).
        A peer that did not is sent it again later (its outbox), as is every announcement
        after it while that peer's outbox is not empty, so that each peer gets them in order."""
        data = json.dumps(msg, separators=(",", ":")).encode()
        if len(data) > MAX_ANNOUNCEMENT:
            raise P2PError(f"announcement of {len(data)} bytes exceeds {MAX_ANNOUNCEMENT}")
        if self.retry_for > 0:
            self._recent.append((time.monotonic() + self.retry_for, data, frozenset(exclude)))
        addrs = [a for p, a in self._addrs.items() if p not in exclude]
        sent = await asyncio.gather(*(self._announce_or_queue(a, data) for a in addrs))
        return sum(sent)

    async def _announce_or_queue(self, addr, data) -> bool:
        ep = str(addr.id())
        if ep in self._outbox:  # its retry loop is on: behind the ones waiting
            self._queue(ep, data)
            return False
        sent = await self._announce_to(addr, data)
        if sent is None:
            self._queue(ep, data)
        return bool(sent)

    def _queue(self, ep, data) -> None:
        if self.retry_for <= 0 or self.endpoint is None:
            return
        box = self._outbox.get(ep)
        if box is None:
            box = self._outbox[ep] = deque(maxlen=OUTBOX_LIMIT)
            self._spawn(self._retry(ep, box))
        box.append((time.monotonic() + self.retry_for, data))

    async def _retry(self, ep, box) -> None:
        """Sends a peer's outbox, oldest first, trying again with a doubling wait while the
        peer does not take them; ends when the outbox is empty or the peer left."""
        wait = RETRY_FIRST
        try:
            while True:
                while box and box[0][0] < time.monotonic():
                    box.popleft()  # stale: the round it was for is over
                addr = self._by_endpoint.get(ep)
                if not box or addr is None:
                    return
                await asyncio.sleep(wait)
                while box:
                    sent = await self._announce_to(addr, box[0][1])
                    if sent is None:
                        wait = min(wait * 2, RETRY_MAX)
                        break
                    box.popleft()  # taken, or refused for good (another version)
                    wait = RETRY_FIRST
        finally:
            if self._outbox.get(ep) is box:
                del self._outbox[ep]

    async def _announce_to(self, addr, data):
        """True when the peer took it; None when it may take it later (no path, a timeout);
        False when it never will (another protocol version)."""
        async def push(conn):
            s = await conn.open_uni()
            await s.write_all(data)
            await s.finish()
            return await s.stopped() is None  # None: the peer has all of it

        try:
            return await asyncio.wait_for(self._on_connection(addr, ANNOUNCE_ALPN, push),
                                          self.timeout) or None
        except asyncio.TimeoutError:
            logger.debug("announce to %s: timed out", addr.id())
            self._forget(addr, ANNOUNCE_ALPN)
            return None
        except iroh.IrohError as e:
            mismatch = protocol_mismatch(e, addr.id(), ANNOUNCE_ALPN)
            if mismatch is not None:
                logger.warning("announce: %s", mismatch)
                return False
            logger.debug("announce to %s: %r", addr.id(), e)
            return None

    # blobs
    def add(self, data) -> str:
        """Store a blob to serve; returns its hash (hex SHA-256)."""
        return self.store.add(data)

    async def fetch(self, peer, hash_hex: str, max_size=None, timeout=None) -> bytes:
        """The blob `hash_hex` from `peer` (see _resolve), verified against its hash.

        Raises BlobNotFound, BlobTooLarge (over `max_size`, default the node's max_blob_size),
        BlobHashMismatch, or BlobError for anything else (unreachable peer, timeout, reset)."""
        raw = hash_bytes(hash_hex)
        addr = self._resolve(peer)
        limit = self.max_blob_size if max_size is None else max_size

        async def exchange():
            recv, status = await self._on_connection(addr, BLOB_ALPN,
                                                     lambda conn: blobs.ask(conn, raw))
            return await blobs.receive(recv, status, raw, limit, addr.id())

        try:
            return await asyncio.wait_for(exchange(), self.timeout if timeout is None else timeout)
        except asyncio.TimeoutError:
            self._forget(addr, BLOB_ALPN)
            raise BlobError(f"fetching blob {hash_hex[:16]} from {addr.id()}: timed out") from None
        except iroh.IrohError as e:
            raise (protocol_mismatch(e, addr.id(), BLOB_ALPN) or BlobError(
                f"fetching blob {hash_hex[:16]} from {addr.id()}: {e}")) from None

    # request/reply
    async def request(self, peer, alpn: bytes, data: bytes, max_reply: int,
                      timeout=None) -> bytes:
        """Send one request on `alpn` to `peer` (see _resolve) and return the reply body.
        Raises RequestError when the peer refuses or fails it, or nothing usable comes back
        within `timeout` (default the node's), or the reply exceeds `max_reply` bytes."""
        addr = self._resolve(peer)

        async def ask(conn):
            bi = await conn.open_bi()
            send = bi.send()
            await send.write_all(data)
            await send.finish()
            return bi.recv()

        async def exchange():
            recv = await self._on_connection(addr, alpn, ask)
            return await recv.read_to_end(max_reply + 1)  # + the status byte

        try:
            raw = await asyncio.wait_for(exchange(), self.timeout if timeout is None else timeout)
        except asyncio.TimeoutError:
            self._forget(addr, alpn)
            raise RequestError(f"request to {addr.id()}: timed out") from None
        except iroh.IrohError as e:  # unreachable, reset, or a reply over max_reply
            raise (protocol_mismatch(e, addr.id(), alpn) or RequestError(
                f"request to {addr.id()}: {e or 'failed'}")) from None
        if not raw:
            raise RequestError(f"request to {addr.id()}: empty reply")
        if raw[0] == _REPLY_OK:
            return raw[1:]
        why = raw[1:].decode(errors="replace")
        kind = "refused" if raw[0] == _REPLY_BAD_REQUEST else "failed"
        raise RequestError(f"peer {addr.id()} {kind} the request: {why}")

    async def _serve_request(self, alpn, bi, peer):
        handler, limit = self._protocols[alpn]
        send, recv = bi.send(), bi.recv()
        try:
            try:
                request = await asyncio.wait_for(recv.read_to_end(limit), self.timeout)
            except iroh.IrohError:  # mostly: over the limit
                reply = bytes([_REPLY_BAD_REQUEST]) + f"request over {limit} bytes".encode()
            else:
                try:
                    body = handler(request, peer)
                    if inspect.isawaitable(body):
                        body = await body
                    reply = bytes([_REPLY_OK]) + bytes(body)
                except BadRequest as e:
                    reply = bytes([_REPLY_BAD_REQUEST]) + str(e).encode()[:MAX_REASON]
                except Exception as e:  # a bug or a bad state must not end the node
                    logger.exception("request handler for %r failed", alpn)
                    reply = bytes([_REPLY_FAILED]) + type(e).__name__.encode()[:MAX_REASON]
            await send.write_all(reply)
            await send.finish()
        except (iroh.IrohError, asyncio.TimeoutError) as e:
            logger.debug("serving a %r request: %s", alpn, e)  # e.g. the requester went away

    # incoming connections
    async def _accept_loop(self):
        while True:
            try:
                incoming = await self.endpoint.accept_next()
            except iroh.IrohError as e:
                logger.debug("accept: %s", e)
                return
            if incoming is None:  # endpoint closed
                return
            self._spawn(self._handle(incoming))

    async def _handle(self, incoming):
        try:
            accepting = await incoming.accept()
            alpn = await accepting.alpn()
            conn = await asyncio.wait_for(accepting.connect(), self.timeout)
        except (iroh.IrohError, asyncio.TimeoutError) as e:
            logger.debug("incoming connection failed: %s", e)
            return
        remote = str(conn.remote_id())
        self._incoming.setdefault(remote, set()).add(conn)
        try:
            if alpn == BLOB_ALPN:
                while True:
                    bi = await conn.accept_bi()
                    self._spawn(blobs.serve(bi, self.store, self.timeout))
            elif alpn == ANNOUNCE_ALPN:
                while True:
                    stream = await conn.accept_uni()
                    self._spawn(self._receive_announcement(stream, remote))
            elif alpn in self._protocols:
                while True:
                    bi = await conn.accept_bi()
                    self._spawn(self._serve_request(alpn, bi, remote))
            else:
                conn.close(_CLOSE_UNKNOWN_ALPN, b"unknown protocol")
        except iroh.IrohError as e:
            logger.debug("incoming connection ended: %s", e)  # mostly: the peer closed it
        finally:
            conns = self._incoming.get(remote)
            if conns is not None:
                conns.discard(conn)
                if not conns:
                    del self._incoming[remote]

    async def _receive_announcement(self, stream, sender):
        try:
            raw = await asyncio.wait_for(stream.read_to_end(MAX_ANNOUNCEMENT), self.timeout)
            msg = read_json(raw)  # ValueError (MalformedJson) on anything not JSON
        except (iroh.IrohError, asyncio.TimeoutError, ValueError) as e:
            logger.debug("dropped an announcement from %s: %s", sender, e)
            return
        if isinstance(msg, dict) and self.on_announcement is not None:
            msg["from"] = sender
            try:
                self.on_announcement(msg)
            except Exception:
                logger.exception("on_announcement failed")
