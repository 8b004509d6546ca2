//! `msg!` and `sol_log`: a program's log messages. On Solana's VM they are the `sol_log_`
//! syscall. Off-chain, where a program runs natively (tests, psyche-localnet), they go to the
//! hook a host installed with [`set_log_hook`] (the localnet writes them into the running
//! transaction's log as `Program log: ...`, as the VM does), else to stdout.

/// Logs a message: `msg!("text")` passes a `&str` as it is; `msg!("{} of {}", a, b)` formats
/// first (which costs compute units on the VM).
#[macro_export]
macro_rules! msg {
    ($msg:expr) => {
        $crate::sol_log($msg)
    };
    ($($arg:tt)*) => ($crate::sol_log(&format!($($arg)*)));
}

/// The syscalls this crate calls on the VM.
#[cfg(target_os = "solana")]
pub mod syscalls {
    pub use solana_define_syscall::definitions::{
        sol_log_, sol_log_64_, sol_log_compute_units_, sol_log_data,
    };
}

#[cfg(not(target_os = "solana"))]
static LOG_HOOK: std::sync::OnceLock<fn(&str)> = std::sync::OnceLock::new();

/// Off-chain: sends every later message to `hook` instead of stdout. Once per process; false
/// when a hook was already set (it stays).
#[cfg(not(target_os = "solana"))]
pub fn set_log_hook(hook: fn(&str)) -> bool {
    LOG_HOOK.set(hook).is_ok()
}

/// Logs `message`.
#[inline]
pub fn sol_log(message: &str) {
    #[cfg(target_os = "solana")]
    // SAFETY: the syscall reads `len` bytes at `ptr`, a live &str.
    unsafe {
        syscalls::sol_log_(message.as_ptr(), message.len() as u64);
    }
    #[cfg(not(target_os = "solana"))]
    match LOG_HOOK.get() {
        Some(hook) => hook(message),
        None => println!("{message}"),
    }
}
