"""Talking to the Solana coordinator program (anchorpy client, IDL)."""
