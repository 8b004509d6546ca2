//! Deterministic shuffles from a seed (`shuffle.py`): a SHA-256-driven partial Fisher-Yates
//! (committees) and an LCG Fisher-Yates (trainer order). Integer-only; no allocation; at most
//! 256 bytes of stack.

#[cfg(not(target_os = "solana"))]
use sha2::{Digest, Sha256};

use crate::constants::MAX_CLIENTS;

pub const LCG_A: u64 = 6364136223846793005;
pub const LCG_C: u64 = 1442695040888963407;

/// SHA-256 of the concatenation of `parts`.
#[cfg(not(target_os = "solana"))]
pub fn sha256(parts: &[&[u8]]) -> [u8; 32] {
    let mut h = Sha256::new();
    for p in parts {
        h.update(p);
    }
    h.finalize().into()
}

/// SHA-256 of the concatenation of `parts`, by the VM's `sol_sha256` syscall: about 100
/// compute units a call, where sha2 compiled to SBF costs some 7,000, and a witness election
/// takes 180 of them (two per swap-or-not round).
#[cfg(target_os = "solana")]
pub fn sha256(parts: &[&[u8]]) -> [u8; 32] {
    solana_sha256_hasher::hashv(parts).to_bytes()
}

pub fn u64_le(b: &[u8; 32]) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[..8]);
    u64::from_le_bytes(w)
}

/// `draw_first(seed, n, count)` (`shuffle.py`): the first `count` values of a Fisher-Yates
/// shuffle of 0..n (n <= 256) into `out[..count]`; draw i swaps slot i with slot
/// i + r_i % (n - i), r_i being the (i % 4)-th little-endian u64 of sha256(seed || u32_le(i / 4)).
/// Only the kept draws are made: ceil(count / 4) hashes, where the 90-round swap-or-not shuffle
/// this replaced cost some 160,000 compute units to elect 64 of 256 on Solana's VM. Returns
/// `count` (clamped to n).
pub fn draw_first(seed: &[u8; 32], n: usize, count: usize, out: &mut [u8; MAX_CLIENTS]) -> usize {
    let n = n.min(MAX_CLIENTS);
    let count = count.min(n);
    for (i, o) in out.iter_mut().enumerate() {
        *o = i as u8;
    }
    let mut block = [0u8; 32];
    for i in 0..count {
        if i % 4 == 0 {
            block = sha256(&[seed, &((i / 4) as u32).to_le_bytes()]);
        }
        let mut w = [0u8; 8];
        w.copy_from_slice(&block[8 * (i % 4)..8 * (i % 4) + 8]);
        let j = i + (u64::from_le_bytes(w) % (n - i) as u64) as usize;
        out.swap(i, j);
    }
    count
}

/// Fisher-Yates driven by a 64-bit LCG: for i from len-1 down to 1, swap i with next % (i+1).
pub fn lcg_shuffle<T>(items: &mut [T], seed: u64) {
    let mut state = seed;
    let mut i = items.len();
    while i > 1 {
        i -= 1;
        state = state.wrapping_mul(LCG_A).wrapping_add(LCG_C);
        let j = (state % (i as u64 + 1)) as usize;
        items.swap(i, j);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drawn(seed: &[u8; 32], n: usize, count: usize) -> Vec<u8> {
        let mut out = [0u8; MAX_CLIENTS];
        let c = draw_first(seed, n, count, &mut out);
        out[..c].to_vec()
    }

    #[test]
    fn the_whole_draw_is_a_permutation_and_fewer_draws_its_start() {
        for n in 1..=MAX_CLIENTS {
            let seed = sha256(&[b"draw", &(n as u32).to_le_bytes()]);
            let whole = drawn(&seed, n, n);
            let mut seen = vec![false; n];
            for &v in &whole {
                assert!((v as usize) < n, "n={n}: {v} out of range");
                assert!(!seen[v as usize], "n={n}: {v} twice");
                seen[v as usize] = true;
            }
            for count in [0, 1, n / 3, n] {
                assert_eq!(
                    drawn(&seed, n, count),
                    whole[..count],
                    "n={n} count={count}"
                );
            }
            assert_eq!(drawn(&seed, n, n + 5), whole, "count clamps to n");
        }
    }

    #[test]
    fn draw_known_answers_from_python() {
        // draw_first(sha256(b"x"), 10, 10) and (.., 1, 1)
        assert_eq!(
            drawn(&sha256(&[b"x"]), 10, 10),
            [9, 5, 6, 0, 4, 3, 8, 7, 2, 1]
        );
        assert_eq!(drawn(&sha256(&[b"x"]), 1, 1), [0]);
        // draw_first(sha256(b"y"), 256, 256): first 16 and sum(i * v)
        let p = drawn(&sha256(&[b"y"]), 256, 256);
        assert_eq!(
            p[..16],
            [216, 123, 53, 57, 17, 175, 69, 161, 24, 143, 214, 188, 20, 7, 234, 242]
        );
        let weighted: usize = p.iter().enumerate().map(|(i, &v)| i * v as usize).sum();
        assert_eq!(weighted, 4071296);
    }
    #[test]
    fn lcg_known_answers_from_python() {
        let mut a: Vec<u32> = (0..10).collect();
        lcg_shuffle(&mut a, 12345);
        assert_eq!(a, [1, 7, 3, 9, 0, 2, 4, 6, 5, 8]);
        let mut b: Vec<u32> = (0..5).collect();
        lcg_shuffle(&mut b, u64::MAX);
        assert_eq!(b, [2, 4, 0, 1, 3]);
        let mut empty: [u8; 0] = [];
        lcg_shuffle(&mut empty, 1);
        let mut one = [9u8];
        lcg_shuffle(&mut one, 1);
        assert_eq!(one, [9]);
    }
}
