"""Pieces shared by the command lines."""

import sys
import time

import click


def stamp() -> str:
    return time.strftime("%H:%M:%S")


def make_logger(prefix: str = ""):
    def log(line: str) -> None:
        print(f"{stamp()} {prefix}{line}", flush=True)
    return log


def tui_enabled(flag: bool) -> bool:
    """The TUI needs a terminal; without one (CI, pipes, the local testnet) it stays off."""
    return bool(flag) and sys.stdout.isatty()


def fail(message: str, code: int = 2):
    click.echo(f"error: {message}", err=True)
    sys.exit(code)
