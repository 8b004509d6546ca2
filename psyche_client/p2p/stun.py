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

from ..training.spec import parse_stun_server

logger = logging.getLogger(__name__)


async def public_address(servers, local_port: int, timeout: float = 2.0):
    """"ip:port" of UDP packets from `local_port` (all interfaces) as the first STUN server that
    answers sees them, or None when none does. The socket is closed again before it returns,
    so the caller can bind the port."""
    for server in servers:
        host, port = parse_stun_server(server)
        try:
            client = aiostun.Client(host=host, port=port, local_addr="0.0.0.0",
                                    local_port=local_port, timeout=timeout)
            async with client as c:
                mapped = await c.get_mapped_address()
        except (OSError, RuntimeError, asyncio.TimeoutError) as e:
            logger.warning("STUN server %s: %s", server, e)
            continue
        finally:
            await asyncio.sleep(0.01)  # the transport closes its socket on the next loop turn
        if mapped.get("ip") and mapped.get("port"):
            return f"{mapped['ip']}:{mapped['port']}"
        logger.warning("STUN server %s did not answer", server)
    return None
