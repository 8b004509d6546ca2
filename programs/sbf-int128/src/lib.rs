//! The 128-bit multiply and divide that LLVM's BPF backend leaves to a runtime library
//! (`__multi3`, `__udivti3`, `__umodti3`, `__divti3`, `__modti3`), for every SBF program we
//! build (`scripts/build-sbf`): the coordinator and the stack-argument probe link it.
//!
//! Why our own: LLVM 23 calls these helpers with each i128 argument in two registers and takes
//! the i128 result back in r0 (low half) and r2 (high half). rustc, for every Rust or C
//! function on `bpf`, returns an i128 through a hidden pointer in r1 instead, so the helpers of
//! `solana-compiler-builtins` (and of Rust's compiler-builtins) read their arguments one
//! register off and store the result through the caller's first argument: the first happy path
//! under the VM died in `init_coordinator` writing to 0xda0, a size that `u64::checked_mul`
//! had passed to `__multi3` (docs/sbf.md). `extern "unadjusted"` keeps the LLVM signature as
//! written, so the exports below match their callers; `solana-compiler-builtins` is linked with
//! its `weak-linkage` feature so that these strong definitions replace its own.
//!
//! The arithmetic itself is plain Rust on 64-bit halves (a `u128` multiply or divide here
//! would call back into the helpers), and is tested natively against `u128`'s operators.

#![cfg_attr(not(test), no_std)]
#![cfg_attr(
    target_os = "solana",
    feature(abi_unadjusted),
    allow(internal_features)
)]

/// Low and high 64-bit halves.
fn halves(x: u128) -> (u64, u64) {
    (x as u64, (x >> 64) as u64)
}

fn join(lo: u64, hi: u64) -> u128 {
    ((hi as u128) << 64) | lo as u128
}

/// The full 128-bit product of two u64, from four 32-bit partial products.
fn wide_mul(x: u64, y: u64) -> (u64, u64) {
    const MASK: u64 = 0xffff_ffff;
    let (x0, x1) = (x & MASK, x >> 32);
    let (y0, y1) = (y & MASK, y >> 32);
    let p00 = x0 * y0;
    let p01 = x0 * y1;
    let p10 = x1 * y0;
    let p11 = x1 * y1;
    // below 3 * 2^32: cannot overflow
    let mid = (p00 >> 32) + (p01 & MASK) + (p10 & MASK);
    let lo = (p00 & MASK) | (mid << 32);
    let hi = p11 + (p01 >> 32) + (p10 >> 32) + (mid >> 32);
    (lo, hi)
}

/// `a * b` modulo 2^128 (the same bits signed or unsigned).
pub fn mul(a: u128, b: u128) -> u128 {
    let (a_lo, a_hi) = halves(a);
    let (b_lo, b_hi) = halves(b);
    let (lo, hi) = wide_mul(a_lo, b_lo);
    let hi = hi
        .wrapping_add(a_hi.wrapping_mul(b_lo))
        .wrapping_add(a_lo.wrapping_mul(b_hi));
    join(lo, hi)
}

/// Quotient and remainder of `n / d`; `d` is never 0 (Rust checks before it divides), and
/// gives (0, n) if it were.
pub fn udivmod(n: u128, d: u128) -> (u128, u128) {
    if d == 0 || n < d {
        return (0, n);
    }
    let (n_lo, n_hi) = halves(n);
    let (d_lo, d_hi) = halves(d);
    if n_hi == 0 {
        // then d_hi == 0 too (d <= n)
        return ((n_lo / d_lo) as u128, (n_lo % d_lo) as u128);
    }
    if d_hi == 0 && d_lo >> 32 == 0 {
        // schoolbook over the four 32-bit digits of n: each partial dividend is below d * 2^32
        let mut q = 0u128;
        let mut r = 0u64;
        for shift in [96u32, 64, 32, 0] {
            let cur = (r << 32) | ((n >> shift) as u64 & 0xffff_ffff);
            q = (q << 32) | (cur / d_lo) as u128;
            r = cur % d_lo;
        }
        return (q, r as u128);
    }
    // Binary long division: align d under n's top bit, then subtract down to the units. At
    // most 127 steps, each a few 64-bit instructions.
    let mut shift = 0u32;
    while shift < 127 && d << (shift + 1) > d << shift && d << (shift + 1) <= n {
        shift += 1;
    }
    let (mut q, mut r) = (0u128, n);
    loop {
        let part = d << shift;
        if r >= part {
            r -= part;
            q |= 1u128 << shift;
        }
        if shift == 0 {
            return (q, r);
        }
        shift -= 1;
    }
}

/// Signed quotient and remainder, truncating toward zero (Rust's `/` and `%` on i128).
pub fn idivmod(n: i128, d: i128) -> (i128, i128) {
    let (q, r) = udivmod(n.unsigned_abs(), d.unsigned_abs());
    let q = if (n < 0) != (d < 0) {
        (q as i128).wrapping_neg()
    } else {
        q as i128
    };
    let r = if n < 0 {
        (r as i128).wrapping_neg()
    } else {
        r as i128
    };
    (q, r)
}

#[cfg(target_os = "solana")]
mod exports {
    #[no_mangle]
    pub extern "unadjusted" fn __multi3(a: i128, b: i128) -> i128 {
        super::mul(a as u128, b as u128) as i128
    }

    #[no_mangle]
    pub extern "unadjusted" fn __udivti3(n: u128, d: u128) -> u128 {
        super::udivmod(n, d).0
    }

    #[no_mangle]
    pub extern "unadjusted" fn __umodti3(n: u128, d: u128) -> u128 {
        super::udivmod(n, d).1
    }

    #[no_mangle]
    pub extern "unadjusted" fn __divti3(n: i128, d: i128) -> i128 {
        super::idivmod(n, d).0
    }

    #[no_mangle]
    pub extern "unadjusted" fn __modti3(n: i128, d: i128) -> i128 {
        super::idivmod(n, d).1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Edge values and a deterministic spread (splitmix64) of mixed magnitudes.
    fn samples() -> Vec<u128> {
        let mut v: Vec<u128> = vec![
            0,
            1,
            2,
            3,
            7,
            0xffff_ffff,
            0x1_0000_0000,
            u64::MAX as u128,
            u64::MAX as u128 + 1,
            u128::MAX,
            u128::MAX - 1,
            1 << 127,
            (1 << 127) - 1,
            i128::MIN as u128,
            (-1i128) as u128,
        ];
        let mut s = 0x5eed_u64;
        let mut next = || {
            s = s.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = s;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        };
        for i in 0..400u32 {
            let x = join(next(), next());
            // every width from 1 to 128 bits
            v.push(x >> (i % 128));
        }
        v
    }

    #[test]
    fn mul_matches_u128() {
        let s = samples();
        for &a in &s {
            for &b in &s {
                assert_eq!(mul(a, b), a.wrapping_mul(b), "{a} * {b}");
            }
        }
    }

    #[test]
    fn divisions_match_u128_and_i128() {
        let s = samples();
        for &n in &s {
            for &d in s.iter().filter(|&&d| d != 0) {
                assert_eq!(udivmod(n, d), (n / d, n % d), "{n} / {d}");
                let (ni, di) = (n as i128, d as i128);
                if !(ni == i128::MIN && di == -1) {
                    assert_eq!(idivmod(ni, di), (ni / di, ni % di), "{ni} / {di}");
                }
            }
        }
    }
}
