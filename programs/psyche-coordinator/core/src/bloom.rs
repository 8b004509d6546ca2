//! Witness bloom filters with the bit layout of `bloom.py` (pybloom-live on little-endian hosts):
//! for a key k (a lowercase hex string), h = XXH3-128(XXH3-128(u32_le(0)) || utf8(k)), each
//! digest as its canonical 16 big-endian bytes; the 8 little-endian u16 words of h, each mod 353,
//! give one bit per slice; slice s owns bits [353*s, 353*(s+1)). Bit i lives in byte i / 8 at
//! bit i % 8 (least significant first). 2824 bits fill 353 bytes; the 3 padding bytes after
//! them must be zero.

use xxhash_rust::xxh3::Xxh3;

use crate::constants::{BLOOM_BITS, BLOOM_BITS_PER_SLICE, BLOOM_BYTES, BLOOM_SLICES, KEY_LEN};
use crate::error::CoordinatorError;

/// XXH3-128(u32_le(0)) as big-endian bytes: pybloom-live's one salt for these parameters.
pub const SALT0: [u8; 16] = [
    0x2a, 0x33, 0x81, 0x6e, 0xd7, 0xe0, 0xc3, 0x73, 0xdb, 0xe5, 0x63, 0xc7, 0x37, 0x22, 0x0b, 0x65,
];

pub const EMPTY_BLOOM: [u8; BLOOM_BYTES] = [0; BLOOM_BYTES];

/// Bytes that hold the filter's bits (2824 / 8 = 353); the rest is zero padding.
const USED_BYTES: usize = BLOOM_BITS / 8;

/// `check_bloom_bytes`: exactly 356 bytes with the padding bytes clear, else `MalformedBloom`.
pub fn check_bloom_bytes(data: &[u8]) -> Result<&[u8; BLOOM_BYTES], CoordinatorError> {
    let bloom: &[u8; BLOOM_BYTES] = data
        .try_into()
        .map_err(|_| CoordinatorError::MalformedBloom)?;
    if bloom[USED_BYTES..].iter().any(|&b| b != 0) {
        return Err(CoordinatorError::MalformedBloom);
    }
    Ok(bloom)
}

/// Lowercase hex of a 32-byte key (`bytes.hex()`), the form keys take in a bloom.
pub fn key_hex(key: &[u8; KEY_LEN]) -> [u8; 2 * KEY_LEN] {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = [0u8; 2 * KEY_LEN];
    for (i, b) in key.iter().enumerate() {
        out[2 * i] = DIGITS[(b >> 4) as usize];
        out[2 * i + 1] = DIGITS[(b & 15) as usize];
    }
    out
}

/// The 8 bit indices (one per slice, already offset by 353 * slice) of a key given as UTF-8.
pub fn bit_positions(key_utf8: &[u8]) -> [u16; BLOOM_SLICES] {
    let mut hasher = Xxh3::new();
    hasher.update(&SALT0);
    hasher.update(key_utf8);
    let h = hasher.digest128().to_be_bytes();
    let mut out = [0u16; BLOOM_SLICES];
    for (s, o) in out.iter_mut().enumerate() {
        let word = u16::from_le_bytes([h[2 * s], h[2 * s + 1]]) as usize;
        *o = (s * BLOOM_BITS_PER_SLICE + word % BLOOM_BITS_PER_SLICE) as u16;
    }
    out
}

pub(crate) fn has_bits(bloom: &[u8; BLOOM_BYTES], bits: &[u16; BLOOM_SLICES]) -> bool {
    bits.iter()
        .all(|&i| (bloom[i as usize / 8] >> (i % 8)) & 1 == 1)
}

/// Whether a key (a lowercase hex string, as UTF-8 bytes) is in the filter.
pub fn bloom_contains(bloom: &[u8; BLOOM_BYTES], key_utf8: &[u8]) -> bool {
    has_bits(bloom, &bit_positions(key_utf8))
}

/// Whether the hex of a signer key is in the filter (`bloom_contains(data, signer.hex())`).
pub fn bloom_contains_signer(bloom: &[u8; BLOOM_BYTES], signer: &[u8; KEY_LEN]) -> bool {
    bloom_contains(bloom, &key_hex(signer))
}

/// The bits of a signer's key (its hex): hashed once, tested against many blooms.
pub(crate) fn signer_bits(signer: &[u8; KEY_LEN]) -> [u16; BLOOM_SLICES] {
    bit_positions(&key_hex(signer))
}

/// Sets a key's bits (clients build blooms; the coordinator only reads them).
pub fn bloom_add(bloom: &mut [u8; BLOOM_BYTES], key_utf8: &[u8]) {
    for i in bit_positions(key_utf8) {
        bloom[i as usize / 8] |= 1 << (i % 8);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const K1: &str = "84685c3ef3d0083568d3c7fa72646c7125b8aac78c14f321da929faf595c4828";
    const K2: &str = "6b040cd886c321ad9f79909b62e00d281165665bb0cf0c6cf27ed908bc1b7316";
    const K3: &str = "27f66b648d73821fd11db61a8060090818e370500170546d5f2b50ddfe069135";

    /// `bloom_of([K1]).hex()` from the Python core.
    const BLOOM_K1: &str = "0000000000000000000000000000000000000000000000000000000000000000000000000000000000000004000000000000800000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000200000000000000000000000000000000000000000000000000000200000000000000000000000000000000000000000000000000000000000000000000000000000000000000800000000000000000000000000000000000000000000000000000000000000000000000000010000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000800000000000000000000000000000000000000000000000000000000000000000000000000000000000100000000000000000000000000000000000000000000000000000000000000000000000000";
    /// `bloom_of([K1, K2, K3]).hex()` from the Python core.
    const BLOOM_K123: &str = "0000000000000000080000000000000000000000000000001000000000000000000000000000000000000004000000000000800000000000000000000080000000020000000000000000000000000000000000000000000000000080000000000000000000000000000000000000000000000200010000000000000000000000000000000000000000000000000200000000000000000000000000000000000020000000000000000000000020000000000000000000000000808000000000000000000000000000000000000000000000000002000000000000000000000010000000000000000100000000000000000000000000000000000000000000000000000000040000000000000000000000000000000800000000000000008000000000000000002000000000000000000000000000000000000000000000000100000000000000000000000200000000000000000000000000000000400000000000000000";

    fn bloom_of(keys: &[&str]) -> [u8; BLOOM_BYTES] {
        let mut b = EMPTY_BLOOM;
        for k in keys {
            bloom_add(&mut b, k.as_bytes());
        }
        b
    }

    #[test]
    fn salt_is_xxh3_128_of_u32_zero() {
        assert_eq!(
            xxhash_rust::xxh3::xxh3_128(&0u32.to_le_bytes()).to_be_bytes(),
            SALT0
        );
    }

    #[test]
    fn known_answers_from_python() {
        assert_eq!(hex::encode(bloom_of(&[K1])), BLOOM_K1);
        assert_eq!(hex::encode(bloom_of(&[K1, K2, K3])), BLOOM_K123);
        // bloom_of(["psyche"]): set bits
        let b = bloom_of(&["psyche"]);
        let bits: Vec<usize> = (0..BLOOM_BITS)
            .filter(|&i| (b[i / 8] >> (i % 8)) & 1 == 1)
            .collect();
        assert_eq!(bits, [25, 480, 755, 1081, 1603, 2065, 2286, 2526]);
    }

    #[test]
    fn contains_and_signer_hex() {
        let b = bloom_of(&[K1, K3]);
        let k1: [u8; 32] = hex::decode(K1).unwrap().try_into().unwrap();
        let k2: [u8; 32] = hex::decode(K2).unwrap().try_into().unwrap();
        assert_eq!(&key_hex(&k1), K1.as_bytes());
        assert!(bloom_contains_signer(&b, &k1));
        assert!(!bloom_contains_signer(&b, &k2));
        assert!(bloom_contains(&b, K3.as_bytes()));
        assert!(!bloom_contains(&EMPTY_BLOOM, K1.as_bytes()));
        // keys are case-sensitive strings: the uppercase hex is another key
        assert!(!bloom_contains(&b, K1.to_uppercase().as_bytes()));
        let bits = signer_bits(&k1);
        assert!(has_bits(&b, &bits) && !has_bits(&EMPTY_BLOOM, &bits));
    }

    #[test]
    fn malformed_blooms_are_rejected() {
        assert!(check_bloom_bytes(&EMPTY_BLOOM).is_ok());
        for len in [0, 355, 357, 508] {
            assert_eq!(
                check_bloom_bytes(&vec![0u8; len]),
                Err(CoordinatorError::MalformedBloom),
                "length {len}"
            );
        }
        let mut b = [0xffu8; BLOOM_BYTES];
        b[USED_BYTES..].fill(0); // every real bit set: inside the filter
        assert!(check_bloom_bytes(&b).is_ok());
        for pad in USED_BYTES..BLOOM_BYTES {
            let mut bad = EMPTY_BLOOM;
            bad[pad] = 1;
            assert_eq!(
                check_bloom_bytes(&bad),
                Err(CoordinatorError::MalformedBloom),
                "padding byte {pad}"
            );
        }
    }
}
