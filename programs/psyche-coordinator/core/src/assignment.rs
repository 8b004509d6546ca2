//! Which sequences each trainer trains in a round, from the round seed alone (`assignment.py`).
//!
//! A round's batch is the sequence range [data_index, data_index + batch_size). Trainers (in index
//! order) are shuffled by an LCG Fisher-Yates seeded with the round seed; walking that order,
//! trainer i takes base + (1 if i < remainder else 0) consecutive sequences. Verifiers each
//! re-check one trainer's batch, chosen by the same shuffle.

use crate::committee;
use crate::config::RunConfig;
use crate::constants::{MAX_CLIENTS, VERIFY_SAMPLE, VERIFY_SEED_XOR};
use crate::shuffle::lcg_shuffle;
use crate::state::{bit, set_bit, Round};

/// Inclusive range of sequence indices [start, end].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct BatchId {
    pub start: u64,
    pub end: u64,
}

impl BatchId {
    pub fn len(&self) -> u64 {
        self.end - self.start + 1
    }

    pub fn is_empty(&self) -> bool {
        false
    }
}

/// Sequences in the global batch once `tokens` tokens have been trained: a linear ramp from
/// start to end over `global_batch_size_warmup_tokens`, rounded half up, in integers. With
/// tokens < ramp <= 2^44 and end - start < 2^16 every product stays below 2^62.
pub fn batch_size(config: &RunConfig, tokens: u64) -> u64 {
    let start = config.global_batch_size_start as u64;
    let end = config.global_batch_size_end as u64;
    let ramp = config.global_batch_size_warmup_tokens;
    if ramp == 0 || tokens >= ramp {
        return end;
    }
    start + ((end - start) * tokens * 2 + ramp) / (2 * ramp)
}

/// `batch_size(config, data_index * max_seq_len)`. A product past u64 is past any ramp
/// (ramp <= 2^44), so it saturates instead of needing u128.
pub fn round_batch_size(config: &RunConfig, rnd: &Round) -> u64 {
    let tokens = rnd.data_index.saturating_mul(config.max_seq_len as u64);
    batch_size(config, tokens)
}

/// The shuffled trainer order of a round and how its batch splits over it.
struct Shares {
    order: [u8; MAX_CLIENTS],
    n: usize,
    base: u64,
    rem: usize,
    data_index: u64,
}

impl Shares {
    fn of(config: &RunConfig, rnd: &Round) -> Shares {
        let mut order = [0u8; MAX_CLIENTS];
        let n = committee::trainers(rnd, config.verification_percent, &mut order);
        Shares::of_trainers(config, rnd, order, n)
    }

    /// From the round's trainers (index order, `committee::trainers`).
    fn of_trainers(
        config: &RunConfig,
        rnd: &Round,
        mut order: [u8; MAX_CLIENTS],
        n: usize,
    ) -> Shares {
        lcg_shuffle(&mut order[..n], rnd.random_seed);
        let (base, rem) = if n == 0 {
            (0, 0)
        } else {
            let total = round_batch_size(config, rnd);
            (total / n as u64, (total % n as u64) as usize)
        };
        Shares {
            order,
            n,
            base,
            rem,
            data_index: rnd.data_index,
        }
    }

    /// The batch of the i-th trainer in shuffled order, None for an empty share.
    fn batch_at(&self, i: usize) -> Option<BatchId> {
        let size = self.base + u64::from(i < self.rem);
        if i >= self.n || size == 0 {
            return None;
        }
        let start = self.data_index + self.base * i as u64 + i.min(self.rem) as u64;
        Some(BatchId {
            start,
            end: start + size - 1,
        })
    }

    fn position(&self, client_index: usize) -> Option<usize> {
        self.order[..self.n]
            .iter()
            .position(|&c| c as usize == client_index)
    }
}

/// `assign_batches`: `out[client_index]` = its batch for every trainer with a non-empty share,
/// None for everyone else. `out` must hold at least `MAX_CLIENTS` entries (the caller owns the
/// 6 KiB; on chain prefer [`batch_for`] / [`batch_mask`]). Returns the number of batches.
pub fn assign_batches(config: &RunConfig, rnd: &Round, out: &mut [Option<BatchId>]) -> usize {
    for o in out.iter_mut() {
        *o = None;
    }
    let shares = Shares::of(config, rnd);
    let mut count = 0;
    for i in 0..shares.n {
        if let Some(b) = shares.batch_at(i) {
            out[shares.order[i] as usize] = Some(b);
            count += 1;
        }
    }
    count
}

/// Calls `f(client_index, batch)` for every trainer with a non-empty share of the round's
/// batch, in shuffled order (`assign_batches` without the caller's 6 KiB table).
pub fn for_each_batch(config: &RunConfig, rnd: &Round, mut f: impl FnMut(usize, BatchId)) {
    let shares = Shares::of(config, rnd);
    for i in 0..shares.n {
        if let Some(b) = shares.batch_at(i) {
            f(shares.order[i] as usize, b);
        }
    }
}

/// The batch of one client in a round (`assign_batches(...).get(client_index)`).
pub fn batch_for(config: &RunConfig, rnd: &Round, client_index: usize) -> Option<BatchId> {
    let shares = Shares::of(config, rnd);
    shares.batch_at(shares.position(client_index)?)
}

/// Bitmask (bit i = client i) of the clients that have a batch in a round.
pub fn batch_mask(config: &RunConfig, rnd: &Round) -> [u8; MAX_CLIENTS / 8] {
    let shares = Shares::of(config, rnd);
    let mut mask = [0u8; MAX_CLIENTS / 8];
    for i in 0..shares.n {
        if shares.batch_at(i).is_some() {
            set_bit(&mut mask, shares.order[i] as usize);
        }
    }
    mask
}

/// Verifier `client_index`'s position j among the round's verifiers (index order), with the
/// round's shares; None for a non-verifier. One election gives both.
fn verifier_position(
    config: &RunConfig,
    rnd: &Round,
    client_index: usize,
) -> Option<(usize, Shares)> {
    let (mut trainers, mut verifiers) = ([0u8; MAX_CLIENTS], [0u8; MAX_CLIENTS]);
    let (t, v) = committee::split(
        rnd,
        config.verification_percent,
        &mut trainers,
        &mut verifiers,
    );
    let j = verifiers[..v]
        .iter()
        .position(|&c| c as usize == client_index)?;
    Some((j, Shares::of_trainers(config, rnd, trainers, t)))
}

/// The verification order: the trainers with a batch, sorted by index, shuffled by the LCG
/// (seed ^ 0x5645524946590000); position p of the (reversed) order is `keys[n - 1 - p]`.
/// Returns n.
fn verify_order(shares: &Shares, rnd: &Round, keys: &mut [u8; MAX_CLIENTS]) -> usize {
    let mut has = [0u8; MAX_CLIENTS / 8];
    for i in 0..shares.n {
        if shares.batch_at(i).is_some() {
            set_bit(&mut has, shares.order[i] as usize);
        }
    }
    let mut n = 0;
    for c in 0..MAX_CLIENTS {
        if bit(&has, c) {
            keys[n] = c as u8;
            n += 1;
        }
    }
    lcg_shuffle(&mut keys[..n], rnd.random_seed ^ VERIFY_SEED_XOR);
    n
}

/// Results each verifier judges: the config's `verify_sample`, 0 meaning `VERIFY_SAMPLE`.
fn sample_size(config: &RunConfig) -> usize {
    match config.verify_sample {
        0 => VERIFY_SAMPLE,
        s => s as usize,
    }
}

/// `assign_verifications(...).get(client_index)`: the batch of the first trainer of the
/// verifier's sample (see [`in_verification_sample`]).
pub fn verification_for(config: &RunConfig, rnd: &Round, client_index: usize) -> Option<BatchId> {
    let (j, shares) = verifier_position(config, rnd, client_index)?;
    let mut keys = [0u8; MAX_CLIENTS];
    let n = verify_order(&shares, rnd, &mut keys);
    if n == 0 {
        return None;
    }
    let target = keys[n - 1 - j * sample_size(config) % n] as usize; // reversed order
    shares.batch_at(shares.position(target)?)
}

/// `target in verification_sample(config, rnd, verifier)`: with s = `sample_size` and n
/// trainers in the verification order (the trainers with a batch, sorted by index, shuffled by
/// the LCG with seed ^ 0x5645524946590000, reversed), the j-th verifier (index order) judges the
/// min(s, n) positions from j * s on, around the order. The samples lie end to end, so every
/// result has floor(m * s / n) or one more of the m verifiers as judges.
pub fn in_verification_sample(
    config: &RunConfig,
    rnd: &Round,
    verifier: usize,
    target: usize,
) -> bool {
    let Some((j, shares)) = verifier_position(config, rnd, verifier) else {
        return false;
    };
    let mut keys = [0u8; MAX_CLIENTS];
    let n = verify_order(&shares, rnd, &mut keys);
    if n == 0 {
        return false;
    }
    let s = sample_size(config);
    let first = j * s % n;
    (0..s.min(n)).any(|t| keys[n - 1 - (first + t) % n] as usize == target)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shuffle::sha256;
    use crate::testutil::sample_round;
    use bytemuck::Zeroable;

    fn sample_config() -> RunConfig {
        // RunConfig(global_batch_size_start=5, global_batch_size_end=37,
        //           global_batch_size_warmup_tokens=1000, max_seq_len=10,
        //           verification_percent=25, witness_nodes=1, min_clients=1, init_min_clients=1)
        let mut c = RunConfig::DEFAULT;
        c.global_batch_size_start = 5;
        c.global_batch_size_end = 37;
        c.global_batch_size_warmup_tokens = 1000;
        c.max_seq_len = 10;
        c.verification_percent = 25;
        c.witness_nodes = 1;
        c
    }

    #[test]
    fn batch_size_ramp_known_answers_from_python() {
        let c = sample_config();
        let tokens = [
            0u64,
            1,
            15,
            16,
            49,
            50,
            99,
            100,
            500,
            999,
            1000,
            1_000_000_000,
        ];
        let got: Vec<u64> = tokens.iter().map(|&t| batch_size(&c, t)).collect();
        assert_eq!(got, [5, 5, 5, 6, 7, 7, 8, 8, 21, 37, 37, 37]);
        let r = sample_round();
        assert_eq!(round_batch_size(&c, &r), 18);
        let mut big = RunConfig::DEFAULT;
        big.global_batch_size_warmup_tokens = 1 << 44;
        big.global_batch_size_end = u16::MAX;
        big.global_batch_size_start = 1;
        big.max_seq_len = u32::MAX;
        let mut r2 = Box::new(Round::zeroed());
        r2.data_index = u64::MAX / 2; // product overflows u64: past the ramp
        assert_eq!(round_batch_size(&big, &r2), u16::MAX as u64);
        assert_eq!(batch_size(&big, (1 << 44) - 1), u16::MAX as u64);
    }

    #[test]
    fn assign_batches_known_answers_from_python() {
        let c = sample_config();
        let r = sample_round();
        let mut out = vec![None; MAX_CLIENTS];
        assert_eq!(assign_batches(&c, &r, &mut out), 7);
        let got: Vec<(usize, u64, u64)> = out
            .iter()
            .enumerate()
            .filter_map(|(i, b)| b.map(|b| (i, b.start, b.end)))
            .collect();
        assert_eq!(
            got,
            [
                (0, 52, 53),
                (2, 43, 45),
                (3, 40, 42),
                (5, 54, 55),
                (6, 46, 48),
                (9, 49, 51),
                (11, 56, 57)
            ]
        );
        for (i, b) in out.iter().enumerate() {
            assert_eq!(batch_for(&c, &r, i), *b);
            assert_eq!(bit(&batch_mask(&c, &r), i), b.is_some());
        }
        // assign_verifications: {4: B[49, 51], 8: B[46, 48]}
        let ver: Vec<(usize, u64, u64)> = (0..MAX_CLIENTS)
            .filter_map(|i| verification_for(&c, &r, i).map(|b| (i, b.start, b.end)))
            .collect();
        assert_eq!(ver, [(4, 49, 51), (8, 46, 48)]);
        // verification_sample(c with verify_sample s, r, v) for the verifiers 4 and 8
        for (s, samples) in [
            (0u8, [vec![9, 2, 5], vec![6, 3, 11]]),
            (2, [vec![9, 2], vec![5, 6]]),
            (5, [vec![9, 2, 5, 6, 3], vec![11, 0, 9, 2, 5]]),
        ] {
            let mut cs = c;
            cs.verify_sample = s;
            for (v, want) in [4usize, 8].into_iter().zip(samples) {
                let got: Vec<usize> = (0..MAX_CLIENTS)
                    .filter(|&t| in_verification_sample(&cs, &r, v, t))
                    .collect();
                let mut want = want;
                want.sort();
                assert_eq!(got, want, "verify_sample {s}, verifier {v}");
            }
        }
    }

    #[test]
    fn assign_batches_partitions_the_batch_exactly() {
        let mut out = vec![None; MAX_CLIENTS];
        let mut rnd = Box::new(Round::zeroed());
        for case in 0u32..400 {
            let h = sha256(&[b"partition", &case.to_le_bytes()]);
            rnd.random_seed = u64::from_le_bytes(h[..8].try_into().unwrap());
            rnd.data_index = u64::from(h[8]) * 1000;
            rnd.participants.copy_from_slice(&h);
            let n_clients = [1usize, 2, 3, 17, 100, 256][case as usize % 6];
            for i in n_clients..MAX_CLIENTS {
                rnd.participants[i / 8] &= !(1 << (i % 8));
            }
            if case % 7 == 0 {
                rnd.participants = [0xff; 32]; // all 256
            }
            let mut config = RunConfig::DEFAULT;
            config.verification_percent = [0u8, 10, 25, 50][case as usize % 4];
            config.global_batch_size_start = [1u16, 3, 16, 255, 1024][case as usize % 5];
            config.global_batch_size_end = config.global_batch_size_start * 2;
            config.global_batch_size_warmup_tokens = if case % 3 == 0 { 0 } else { 1 << 20 };
            let total = round_batch_size(&config, &rnd);
            let count = assign_batches(&config, &rnd, &mut out);

            let mut trainers_buf = [0u8; MAX_CLIENTS];
            let t = committee::trainers(&rnd, config.verification_percent, &mut trainers_buf);
            let trainers = &trainers_buf[..t];
            let participants = rnd.participant_total();
            assert_eq!(
                t,
                participants - committee::verifier_count(participants, config.verification_percent)
            );
            assert_eq!(count as u64, total.min(t as u64), "case {case}");

            let mut batches: Vec<BatchId> = Vec::new();
            for (i, b) in out.iter().enumerate() {
                if let Some(b) = b {
                    assert!(
                        trainers.contains(&(i as u8)),
                        "case {case}: non-trainer {i} has a batch"
                    );
                    assert!(b.end >= b.start);
                    batches.push(*b);
                }
            }
            batches.sort();
            // contiguous, disjoint, covering [data_index, data_index + total)
            let mut next = rnd.data_index;
            for b in &batches {
                assert_eq!(b.start, next, "case {case}: gap or overlap");
                next = b.end + 1;
            }
            assert_eq!(
                next,
                rnd.data_index + if t == 0 { 0 } else { total },
                "case {case}"
            );
            // shares differ by at most one
            if let (Some(min), Some(max)) = (
                batches.iter().map(BatchId::len).min(),
                batches.iter().map(BatchId::len).max(),
            ) {
                assert!(max - min <= 1);
            }
        }
    }
}
