"""Hostile input: hypothesis fuzzing of every decoder a peer or the server reaches, and the
operation-JSON edge cases the Python and the Rust core must read alike (docs/testing.md)."""
