"""psyche-solana-client: take part in, or create and manage, a training run on Solana."""

import click

from .solana_admin import admin_commands
from .solana_train import train


@click.group(help="Psyche on Solana: create and manage runs (run creators) and contribute to "
             "them. Options may also come from $PSYCHE_RPC and $PSYCHE_KEYPAIR.")
def main():
    pass


admin_commands(main)
main.add_command(train)

if __name__ == "__main__":
    main()
