//! psyche-localnet: a local Solana chain with the Psyche coordinator program, behind JSON-RPC
//! (default 127.0.0.1:8899) and PubSub (default 127.0.0.1:8900).

use clap::Parser;
use psyche_localnet::{http, node, pubsub, server, LocalChain};

#[derive(Parser)]
#[command(
    name = "psyche-localnet",
    about = "A local Solana chain for Psyche runs: a real Solana runtime (LiteSVM, agave 2.3) with \
             the coordinator program running natively (or from its SBF build: --program-elf), behind \
             standard JSON-RPC and PubSub. \
             Slots advance every 400 ms and the Clock follows the wall clock. Without --ledger \
             the state lives in memory: restarting starts a fresh chain.",
    version
)]
struct Args {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    bind_address: String,
    /// JSON-RPC port (0: any free port).
    #[arg(long, default_value_t = 8899)]
    rpc_port: u16,
    /// PubSub (websocket) port (0: any free port; default: the RPC port + 1).
    #[arg(long)]
    ws_port: Option<u16>,
    /// Credit SOL at start: PUBKEY=SOL (repeatable).
    #[arg(long = "airdrop", value_name = "PUBKEY=SOL")]
    airdrops: Vec<String>,
    /// Keep the chain's accounts in this directory: killed and started again with the same
    /// directory, the chain resumes with every transaction it acknowledged.
    #[arg(long, value_name = "DIR")]
    ledger: Option<std::path::PathBuf>,
    /// Threads serving JSON-RPC and PubSub (0: one per CPU), each keeping the connections it
    /// accepted (whichever wakes first takes a new one). Every call that touches the chain
    /// waits for the same lock, so more threads overlap only the parsing and the writing.
    #[arg(long, default_value_t = 0, value_name = "N")]
    rpc_threads: usize,
    /// Run the coordinator program from this SBF ELF under Solana's VM, metered (compute units
    /// in the logs), instead of natively: sbf/psyche_coordinator.so, from scripts/build-sbf.
    #[arg(long, value_name = "ELF")]
    program_elf: Option<std::path::PathBuf>,
}

fn parse_airdrop(spec: &str) -> Result<(solana_pubkey::Pubkey, u64), String> {
    let (key, sol) = spec.split_once('=').ok_or("expected PUBKEY=SOL")?;
    let key = key.parse().map_err(|_| format!("invalid pubkey {key:?}"))?;
    let sol: u64 = sol
        .parse()
        .map_err(|_| format!("invalid SOL amount {sol:?}"))?;
    Ok((key, sol.saturating_mul(1_000_000_000)))
}

fn fail(msg: String) -> ! {
    eprintln!("psyche-localnet: {msg}");
    std::process::exit(2)
}

fn main() {
    let args = Args::parse();
    let airdrops: Vec<_> = args
        .airdrops
        .iter()
        .map(|s| parse_airdrop(s).unwrap_or_else(|e| fail(format!("--airdrop {s}: {e}"))))
        .collect();
    let ws_port = args.ws_port.unwrap_or(if args.rpc_port == 0 {
        0
    } else {
        args.rpc_port + 1
    });
    let rpc_addr = format!("{}:{}", args.bind_address, args.rpc_port);
    let listen = |addr: String| {
        server::bind(&addr).unwrap_or_else(|e| fail(format!("cannot listen on {addr}: {e}")))
    };
    let http = listen(rpc_addr);
    let ws = listen(format!("{}:{}", args.bind_address, ws_port));

    let chain = match &args.ledger {
        None => LocalChain::new(node::unix_now()),
        Some(dir) => LocalChain::with_ledger(node::unix_now(), dir)
            .unwrap_or_else(|e| fail(format!("--ledger {}: {e}", dir.display()))),
    };
    let mut chain = chain;
    if let Some(path) = &args.program_elf {
        let elf = std::fs::read(path)
            .unwrap_or_else(|e| fail(format!("--program-elf {}: {e}", path.display())));
        chain
            .load_program_elf(&elf)
            .unwrap_or_else(|e| fail(format!("--program-elf {}: {e}", path.display())));
        eprintln!(
            "psyche-localnet: the coordinator program runs from {} ({} bytes) under the VM",
            path.display(),
            elf.len()
        );
    }
    let node = node::Node::new(chain);
    for (key, lamports) in airdrops {
        node.airdrop(&key, lamports)
            .unwrap_or_else(|e| fail(format!("airdrop to {key}: {e}")));
    }
    let rpc_port = http.local_addr().map(|a| a.port()).unwrap_or(args.rpc_port);
    let ws_port = ws.local_addr().map(|a| a.port()).unwrap_or(ws_port);
    // One line a script can wait for and parse.
    println!(
        "psyche-localnet: ready: program {} rpc http://{}:{} pubsub ws://{}:{}",
        psyche_coordinator::ID,
        args.bind_address,
        rpc_port,
        args.bind_address,
        ws_port
    );
    let clock = node.clone();
    std::thread::spawn(move || clock.run_slot_clock());
    let threads = match args.rpc_threads {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    };
    let (rpc, pubsub) = (
        http::listener(http, node.clone()),
        pubsub::listener(ws, node),
    );
    let Err(e) = server::run(threads, move || {
        let (rpc, pubsub) = (rpc.clone(), pubsub.clone());
        async move {
            tokio::join!(rpc.serve(), pubsub.serve());
        }
    });
    fail(format!("JSON-RPC and PubSub: {e}"))
}
