//! A transaction's signatures verified ahead of the bank (`chain::Checked`), with a faster
//! verifier than the runtime's own: ed25519-dalek 2, whose curve arithmetic uses AVX2 where the
//! CPU has it, where the runtime (solana-signature 2.3) verifies with the 1.0 line, serial
//! arithmetic only: ~0.7 of its time per signature here. Verification was nearly half of a
//! lone transfer's CPU in the node (benchmarks/README.md, `chain_tps`, "Session 24").
//!
//! Only an acceptance here counts, and this verifier accepts nothing the runtime's would refuse:
//! both verify strictly (canonical S; R and the key not of small order; the cofactorless
//! equation), and here R is compared as the signature's own bytes, where the runtime compares
//! points, so the one difference refuses a non-canonical encoding of R that the runtime would
//! let through. A refusal decides nothing: the transaction goes to the bank unverified, and the
//! bank checks it with the runtime's verifier and fails it with its own error.

use solana_message::VersionedMessage;
use solana_pubkey::Pubkey;
use solana_signature::Signature;

/// Whether each signature verifies against the signer key at its place and the message, as
/// the runtime pairs them (`VersionedTransaction::verify_with_results`: the signatures and the
/// message's first keys side by side, as far as both go).
pub fn all_verify(signatures: &[Signature], message: &VersionedMessage) -> bool {
    let bytes = message.serialize();
    signatures
        .iter()
        .zip(message.static_account_keys())
        .all(|(signature, key)| verifies(signature, key, &bytes))
}

/// One signature of `message` by `key`, strictly: see the module's doc for why an acceptance
/// here is one of the runtime's too.
pub fn verifies(signature: &Signature, key: &Pubkey, message: &[u8]) -> bool {
    let Ok(key) = ed25519_dalek::VerifyingKey::from_bytes(&key.to_bytes()) else {
        return false;
    };
    let signature = ed25519_dalek::Signature::from_bytes(&<[u8; 64]>::from(*signature));
    key.verify_strict(message, &signature).is_ok()
}
