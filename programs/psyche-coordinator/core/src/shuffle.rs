//! Deterministic permutations from a seed (`shuffle.py`): swap-or-not (committees) and an LCG
//! Fisher-Yates (trainer order). Integer-only; no allocation; at most 512 bytes of stack.

#[cfg(not(target_os = "solana"))]
use sha2::{Digest, Sha256};

use crate::constants::{MAX_CLIENTS, SHUFFLE_ROUND_COUNT};

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

/// Pivot and source hash of swap-or-not round `r`:
/// pivot = u64_le(sha256(seed||r)) % n, source = sha256(seed||r||u32_le(0)).
fn swap_round(seed: &[u8; 32], r: u8, n: usize) -> (usize, [u8; 32]) {
    let rb = [r];
    let pivot = (u64_le(&sha256(&[seed, &rb])) % n as u64) as usize;
    let source = sha256(&[seed, &rb, &0u32.to_le_bytes()]);
    (pivot, source)
}

#[inline]
fn swap_step(idx: usize, pivot: usize, source: &[u8; 32], n: usize) -> usize {
    let flip = (pivot + n - idx) % n;
    let pos = idx.max(flip);
    if (source[(pos % 256) / 8] >> (pos % 8)) & 1 == 1 {
        flip
    } else {
        idx
    }
}

/// `swap_or_not_permutation(seed, n)[idx]`: the shuffled position of one index (n <= 256).
/// Returns 0 for the invalid n = 0 (Python asserts; never called with it).
pub fn swap_or_not_position(seed: &[u8; 32], n: usize, idx: usize) -> usize {
    if n == 0 || n > MAX_CLIENTS || idx >= n {
        return 0;
    }
    let mut idx = idx;
    for r in 0..SHUFFLE_ROUND_COUNT {
        let (pivot, source) = swap_round(seed, r, n);
        idx = swap_step(idx, pivot, &source, n);
    }
    idx
}

/// The whole permutation, computed round-major: `out[i]` = shuffled position of index i for
/// i < n (n <= 256); the hashes of one round at a time, never all 90 at once.
pub fn swap_or_not_permutation(seed: &[u8; 32], n: usize, out: &mut [u16; MAX_CLIENTS]) {
    let n = n.min(MAX_CLIENTS);
    for (i, p) in out.iter_mut().enumerate() {
        *p = i as u16;
    }
    if n == 0 {
        return;
    }
    for r in 0..SHUFFLE_ROUND_COUNT {
        let (pivot, source) = swap_round(seed, r, n);
        for p in out[..n].iter_mut() {
            *p = swap_step(*p as usize, pivot, &source, n) as u16;
        }
    }
}

/// The indices at positions 0..count of the permutation (`out[p]` = the index whose position
/// is p), without computing the rest: each swap-or-not round is an involution (it swaps pairs
/// whose choice is symmetric), so the rounds applied backwards from a position give its
/// index. count x 90 steps instead of n x 90: electing 32 witnesses among 256 clients is an
/// eighth of the whole permutation, which under Solana's VM cost some 600,000 compute units.
pub fn swap_or_not_first(seed: &[u8; 32], n: usize, count: usize, out: &mut [u16; MAX_CLIENTS]) {
    let n = n.min(MAX_CLIENTS);
    let count = count.min(n);
    for (p, o) in out[..count].iter_mut().enumerate() {
        *o = p as u16;
    }
    for r in (0..SHUFFLE_ROUND_COUNT).rev() {
        let (pivot, source) = swap_round(seed, r, n);
        for o in out[..count].iter_mut() {
            *o = swap_step(*o as usize, pivot, &source, n) as u16;
        }
    }
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

    fn perm(seed: &[u8; 32], n: usize) -> Vec<u16> {
        let mut out = [0u16; MAX_CLIENTS];
        swap_or_not_permutation(seed, n, &mut out);
        out[..n].to_vec()
    }

    #[test]
    fn swap_or_not_is_a_permutation() {
        for n in 1..=MAX_CLIENTS {
            for s in [b"a".as_slice(), b"psyche"] {
                let seed = sha256(&[s, &(n as u32).to_le_bytes()]);
                let p = perm(&seed, n);
                let mut seen = vec![false; n];
                for &v in &p {
                    assert!((v as usize) < n, "n={n}: {v} out of range");
                    assert!(!seen[v as usize], "n={n}: {v} twice");
                    seen[v as usize] = true;
                }
            }
        }
    }

    #[test]
    fn single_position_agrees_with_the_permutation() {
        for n in [1usize, 2, 3, 7, 64, 255, 256] {
            let seed = sha256(&[b"pos", &(n as u32).to_le_bytes()]);
            let p = perm(&seed, n);
            for idx in [0, n / 2, n - 1] {
                assert_eq!(swap_or_not_position(&seed, n, idx), p[idx] as usize);
            }
        }
    }

    #[test]
    fn the_first_positions_invert_the_permutation() {
        for n in [1usize, 2, 3, 7, 31, 64, 200, 255, 256] {
            let seed = sha256(&[b"first", &(n as u32).to_le_bytes()]);
            let p = perm(&seed, n);
            for count in [0, 1, n / 3, n] {
                let mut first = [0u16; MAX_CLIENTS];
                swap_or_not_first(&seed, n, count, &mut first);
                for (pos, &idx) in first[..count].iter().enumerate() {
                    assert_eq!(p[idx as usize] as usize, pos, "n={n} count={count}");
                }
            }
        }
    }

    #[test]
    fn swap_or_not_known_answers_from_python() {
        // swap_or_not_permutation(sha256(b"x"), 10) and (.., 1)
        assert_eq!(perm(&sha256(&[b"x"]), 10), [0, 7, 4, 8, 9, 5, 2, 3, 6, 1]);
        assert_eq!(perm(&sha256(&[b"x"]), 1), [0]);
        // swap_or_not_permutation(sha256(b"y"), 256): first 16 and sum(i * perm[i])
        let p = perm(&sha256(&[b"y"]), 256);
        assert_eq!(
            p[..16],
            [142, 179, 236, 134, 125, 201, 168, 71, 228, 224, 144, 234, 248, 83, 69, 95]
        );
        let weighted: usize = p.iter().enumerate().map(|(i, &v)| i * v as usize).sum();
        assert_eq!(weighted, 4263146);
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
