"""A client's public address as a STUN server sees it, so that peers behind other NATs can
punch a hole to it.

iroh learns its public address through the relay's QUIC address discovery, which needs a
relay certificate from a public authority (the binding trusts no other, not even through
SSL_CERT_FILE). Without it, two peers behind NATs know only their private addresses and stay
relayed. So before the endpoint binds its port, the client asks the run's STUN servers (any
RFC 5389 server: coturn, a public one) what address a packet from that port comes from, and
then tells the endpoint (`add_external_addr`). Behind a NAT that keeps a port's mapping for
every destination (endpoint-independent), that is the address every peer sees, and hole
punching works; behind a symmetric NAT each destination sees another port, the address is
wrong for them, and the peers stay on the relay (the address does no harm)."""

import asyncio
import logging

import aiostun
from aiostun import attribute, constants, stun

from ..training.spec import parse_stun_server

logger = logging.getLogger(__name__)

# RFC 5389 §7.2.1: over UDP a request is sent again, the same transaction, after 0.5 s, then
# after twice as long each time; one lost datagram must not cost a peer its direct paths.
FIRST_RTO = 0.5
POLL = 0.1  # how often the wait for an answer looks at the clock to send again


async def public_address(servers, local_port: int, timeout: float = 4.0):
    """"ip:port" of UDP packets from `local_port` (all interfaces) as the first STUN server that
    answers sees them, or None when none answers within `timeout` seconds each. The socket is
    closed again before it returns, so the caller can bind the port."""
    for server in servers:
        host, port = parse_stun_server(server)
        try:
            client = aiostun.Client(host=host, port=port, local_addr="0.0.0.0",
                                    local_port=local_port, timeout=POLL)
            async with client as c:
                resp = await _binding(c, timeout)
        except (OSError, RuntimeError) as e:
            logger.warning("STUN server %s: %s", server, e)
            continue
        finally:
            await asyncio.sleep(0.01)  # the transport closes its socket on the next loop turn
        mapped = _mapped(resp) if resp is not None else {}
        if mapped.get("ip") and mapped.get("port"):
            return f"{mapped['ip']}:{mapped['port']}"
        logger.warning("STUN server %s did not answer in %ss", server, timeout)
    return None


async def _binding(c, timeout: float):
    """The answer to one binding request, sent again with a doubling interval until `timeout`;
    answers to other transactions are ignored. None when none came."""
    req = stun.Message(constants.CLASS_REQUEST, constants.METHOD_BINDING, [])
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    resend, rto = loop.time(), FIRST_RTO
    while loop.time() < deadline:
        if loop.time() >= resend:
            c.send_request(req)
            resend, rto = loop.time() + rto, rto * 2
        resp = await c.wait_for_resp()  # None after POLL seconds without a datagram
        if resp is not None and resp.transaction_id == req.transaction_id \
                and resp.msgclass == constants.CLASS_SUCCESS:
            return resp
    return None


def _mapped(resp) -> dict:
    attr = resp.get_attribute(attribute.AttrXorMappedAddr) \
        or resp.get_attribute(attribute.AttrMappedAddr)
    return attr.params if attr is not None else {}
