//! A model of the SBF program heap for the runtime suites that measure (`suites/heap.rs`,
//! `suites/fuzz.rs`). It declares the test binary's global allocator, which counts only on a
//! thread inside a measuring window: the other suites run beside it uncounted.
//!
//! On SBF a program gets a 32 KiB bump heap (`solana_program_entrypoint::BumpAllocator`) that
//! never frees: what matters is the total allocated during one instruction, alignment padding
//! included, not the peak. The allocator here replays every allocation made while the program
//! runs into a model of that allocator (`used = align_up(used + size, align)`; a `realloc` is a
//! fresh allocation, as the bump allocator's default `realloc` is).
//!
//! What the window holds, so that it matches what the SBF heap would hold:
//! - The program's `entry` (a builtin registered by [`install`] in place of `LocalChain`'s,
//!   calling the same `native::run_entry`): everything Anchor and the handlers allocate.
//! - The loader input's `Vec<AccountInfo>` and its two `Rc`s per unique account, which the
//!   SBF entrypoint's `deserialize` allocates on the program heap (natively the shim does it
//!   before `entry`): allocated again, with the same types, inside the window.
//! - For a CPI, the copy of the instruction that `invoke_signed` makes on SBF
//!   (`StableInstruction::from(instruction.clone())`; natively there is no copy).
//! - Not the syscalls: the native stubs (`program_stubs`: sysvars, CPI, logs) run on the
//!   host's heap; on SBF they are syscalls. The stubs are wrapped to pause the count.
//! - Not `msg!`'s `println!` (natively it writes to stdout, on SBF it is a syscall): output
//!   buffers are allocated before measuring (print something first), and a `realloc` of memory
//!   that the window did not allocate is not counted.
//! - Host-only, still counted: `Pubkey::find_program_address` (Anchor's `init` with `seeds`)
//!   loops over `create_program_address` with a `Vec` of the seeds per try; on SBF it is one
//!   syscall. [`pda_search_bytes`] measures that share for given seeds.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Once;

use anchor_lang::solana_program::account_info::AccountInfo;
use anchor_lang::solana_program::entrypoint::ProgramResult;
use anchor_lang::solana_program::program_stubs::{self, SyscallStubs};
use psyche_localnet::ix::PROGRAM_ID;
use solana_instruction::Instruction;
use solana_pubkey::Pubkey;

use crate::support::Env;

/// The SBF program heap (`HEAP_LENGTH`); the bump allocator keeps its position in the first 8
/// bytes.
pub const HEAP: usize = 32 * 1024;
pub const USABLE: usize = HEAP - 8;

// ------------------------------------------------------------------------------ allocator

const MAX_TRACKED: usize = 4096;

thread_local! {
    /// Counting on this thread (inside the program, outside the stubs).
    static ON: Cell<bool> = const { Cell::new(false) };
    /// Bytes of the modelled bump heap in use.
    static USED: Cell<usize> = const { Cell::new(0) };
    static ALLOCS: Cell<usize> = const { Cell::new(0) };
    /// Live allocations made in the current window (a realloc of anything else is
    /// host-only). Cleared when a window opens and closes.
    static TRACKED: RefCell<[usize; MAX_TRACKED]> = const { RefCell::new([0; MAX_TRACKED]) };
    static OVERFLOW: Cell<bool> = const { Cell::new(false) };
}

fn on() -> bool {
    ON.with(|c| c.get())
}

/// One allocation on the SBF bump allocator: `pos = (pos - size) & !(align - 1)` from the top
/// of an aligned heap, i.e. `used = align_up(used + size, align)`.
fn bump(layout: Layout) {
    USED.with(|u| {
        let a = layout.align();
        u.set((u.get() + layout.size()).div_ceil(a) * a);
    });
    ALLOCS.with(|c| c.set(c.get() + 1));
}

fn track(ptr: *mut u8) {
    TRACKED.with(|t| {
        let mut t = t.borrow_mut();
        match t.iter().position(|&p| p == 0) {
            Some(i) => t[i] = ptr as usize,
            None => OVERFLOW.with(|o| o.set(true)),
        }
    });
}

/// Forgets `ptr`; whether it was allocated in the window.
fn untrack(ptr: *mut u8) -> bool {
    TRACKED.with(|t| {
        let mut t = t.borrow_mut();
        match t.iter().position(|&p| p == ptr as usize) {
            Some(i) => {
                t[i] = 0;
                true
            }
            None => false,
        }
    })
}

fn clear_tracked() {
    TRACKED.with(|t| t.borrow_mut().fill(0));
}

struct Counting;

// SAFETY: every call is forwarded to `System`; the bookkeeping is thread-local and does not
// allocate.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() && on() {
            bump(layout);
            track(p);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() && on() {
            bump(layout);
            track(p);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if on() {
            untrack(ptr);
        }
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let ours = on() && untrack(ptr);
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if ours {
            // the bump allocator's realloc: a new block, the old one is never reused
            bump(Layout::from_size_align(new_size, layout.align()).unwrap());
            track(if p.is_null() { ptr } else { p });
        }
        p
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Pauses the count until dropped.
struct Pause(bool);

impl Pause {
    fn new() -> Pause {
        Pause(ON.with(|c| c.replace(false)))
    }
}

impl Drop for Pause {
    fn drop(&mut self) {
        ON.with(|c| c.set(self.0));
    }
}

#[derive(Clone, Copy, Debug, Default)]
pub struct Measured {
    pub used: usize,
    pub allocs: usize,
}

thread_local! {
    static LAST: Cell<Option<Measured>> = const { Cell::new(None) };
}

/// Counts from creation to drop (a panic in the program included).
pub struct Window;

impl Window {
    pub fn open() -> Window {
        clear_tracked();
        USED.with(|u| u.set(0));
        ALLOCS.with(|c| c.set(0));
        ON.with(|c| c.set(true));
        Window
    }
}

impl Drop for Window {
    fn drop(&mut self) {
        ON.with(|c| c.set(false));
        clear_tracked();
        let m = Measured {
            used: USED.with(|u| u.get()),
            allocs: ALLOCS.with(|c| c.get()),
        };
        LAST.with(|l| l.set(Some(m)));
    }
}

/// The measurement of the program's last instruction on this thread, once.
pub fn take_last() -> Option<Measured> {
    LAST.with(|l| l.take())
}

/// Whether more allocations were live in a window than the tracker holds (the counts would be
/// too low for `realloc`s).
pub fn overflowed() -> bool {
    OVERFLOW.with(|o| o.get())
}

// ------------------------------------------------------------------------------ the program

solana_program_runtime::declare_process_instruction!(CountingBuiltin, 1, |invoke_context| {
    psyche_localnet::native::run_entry(invoke_context, counting_entry)
});

/// `psyche_coordinator::entry` inside a counting window, after the allocations of the SBF
/// entrypoint's `deserialize`.
fn counting_entry<'info>(
    program_id: &Pubkey,
    accounts: &'info [AccountInfo<'info>],
    data: &[u8],
) -> ProgramResult {
    let _window = Window::open();
    deserialize_allocations(accounts);
    psyche_coordinator::entry(program_id, accounts, data)
}

/// What `solana_program_entrypoint::deserialize` allocates: `Vec::with_capacity(n)` of
/// `AccountInfo`, and per account that is not a duplicate an `Rc<RefCell<&mut u64>>`
/// (lamports) and an `Rc<RefCell<&mut [u8]>>` (data). Same types, so same sizes.
fn deserialize_allocations(accounts: &[AccountInfo]) {
    let infos: Vec<AccountInfo> = Vec::with_capacity(accounts.len());
    let (mut lamports, mut data) = (0u64, [0u8; 0]);
    for (i, a) in accounts.iter().enumerate() {
        if accounts[..i].iter().any(|b| b.key == a.key) {
            continue; // a duplicate is a clone of the first AccountInfo: no allocation
        }
        drop(Rc::new(RefCell::new(&mut lamports)));
        drop(Rc::new(RefCell::new(&mut data[..])));
    }
    drop(infos);
}

/// The native syscall stubs, not counted (SBF syscalls do not use the program heap). A CPI
/// first copies its instruction, as `invoke_signed` does on SBF.
struct Uncounted(Box<dyn SyscallStubs>);

impl SyscallStubs for Uncounted {
    fn sol_log(&self, message: &str) {
        let _p = Pause::new();
        self.0.sol_log(message)
    }
    fn sol_log_compute_units(&self) {
        let _p = Pause::new();
        self.0.sol_log_compute_units()
    }
    fn sol_remaining_compute_units(&self) -> u64 {
        let _p = Pause::new();
        self.0.sol_remaining_compute_units()
    }
    fn sol_invoke_signed(
        &self,
        instruction: &Instruction,
        account_infos: &[AccountInfo],
        signers_seeds: &[&[&[u8]]],
    ) -> ProgramResult {
        // SBF: `StableInstruction::from(instruction.clone())` on the program heap
        let copy = instruction.clone();
        let _p = Pause::new();
        let r = self
            .0
            .sol_invoke_signed(instruction, account_infos, signers_seeds);
        drop(copy);
        r
    }
    fn sol_get_sysvar(&self, id: *const u8, var: *mut u8, offset: u64, length: u64) -> u64 {
        let _p = Pause::new();
        self.0.sol_get_sysvar(id, var, offset, length)
    }
    fn sol_get_clock_sysvar(&self, var: *mut u8) -> u64 {
        let _p = Pause::new();
        self.0.sol_get_clock_sysvar(var)
    }
    fn sol_get_epoch_schedule_sysvar(&self, var: *mut u8) -> u64 {
        let _p = Pause::new();
        self.0.sol_get_epoch_schedule_sysvar(var)
    }
    fn sol_get_fees_sysvar(&self, var: *mut u8) -> u64 {
        let _p = Pause::new();
        self.0.sol_get_fees_sysvar(var)
    }
    fn sol_get_rent_sysvar(&self, var: *mut u8) -> u64 {
        let _p = Pause::new();
        self.0.sol_get_rent_sysvar(var)
    }
    fn sol_get_epoch_rewards_sysvar(&self, var: *mut u8) -> u64 {
        let _p = Pause::new();
        self.0.sol_get_epoch_rewards_sysvar(var)
    }
    fn sol_get_last_restart_slot(&self, var: *mut u8) -> u64 {
        let _p = Pause::new();
        self.0.sol_get_last_restart_slot(var)
    }
    fn sol_get_epoch_stake(&self, vote_address: *const u8) -> u64 {
        let _p = Pause::new();
        self.0.sol_get_epoch_stake(vote_address)
    }
    unsafe fn sol_memcpy(&self, dst: *mut u8, src: *const u8, n: usize) {
        let _p = Pause::new();
        unsafe { self.0.sol_memcpy(dst, src, n) }
    }
    unsafe fn sol_memmove(&self, dst: *mut u8, src: *const u8, n: usize) {
        let _p = Pause::new();
        unsafe { self.0.sol_memmove(dst, src, n) }
    }
    unsafe fn sol_memcmp(&self, s1: *const u8, s2: *const u8, n: usize, result: *mut i32) {
        let _p = Pause::new();
        unsafe { self.0.sol_memcmp(s1, s2, n, result) }
    }
    unsafe fn sol_memset(&self, s: *mut u8, c: u8, n: usize) {
        let _p = Pause::new();
        unsafe { self.0.sol_memset(s, c, n) }
    }
    fn sol_get_return_data(&self) -> Option<(Pubkey, Vec<u8>)> {
        // SBF: the returned Vec is the program's (`get_return_data` allocates it): counted
        let r = {
            let _p = Pause::new();
            self.0.sol_get_return_data()
        };
        r.map(|(k, v)| (k, v.to_vec()))
    }
    fn sol_set_return_data(&self, data: &[u8]) {
        let _p = Pause::new();
        self.0.sol_set_return_data(data)
    }
    fn sol_log_data(&self, fields: &[&[u8]]) {
        let _p = Pause::new();
        self.0.sol_log_data(fields)
    }
    fn sol_get_processed_sibling_instruction(&self, index: usize) -> Option<Instruction> {
        let _p = Pause::new();
        self.0.sol_get_processed_sibling_instruction(index)
    }
    fn sol_get_stack_height(&self) -> u64 {
        let _p = Pause::new();
        self.0.sol_get_stack_height()
    }
}

/// Makes `env`'s program count its heap (the host stubs are wrapped once per process, in one
/// swap: a program running on another thread meanwhile always finds working stubs).
pub fn install(env: &mut Env) {
    static WRAP: Once = Once::new();
    WRAP.call_once(|| {
        let host = psyche_localnet::native::host_stubs();
        program_stubs::set_syscall_stubs(Box::new(Uncounted(host)));
    });
    psyche_localnet::chain::register_program(&mut env.chain.svm, CountingBuiltin::vm);
}

/// What natively `find_program_address(seeds)` allocates (host-only: a syscall on SBF).
pub fn pda_search_bytes(seeds: &[&[u8]]) -> usize {
    let window = Window::open();
    let _ = Pubkey::find_program_address(seeds, &PROGRAM_ID);
    drop(window);
    take_last().expect("measured").used
}
