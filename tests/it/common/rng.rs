//! The one deterministic generator of the tests: the runtime's SplitMix64
//! with the draws the property, fuzz and chaos tests need. The same seed
//! gives the same choices on every machine, so a failing case is replayed
//! from the seed it prints.

use tollgate_runtime::backoff::SplitMix64;

#[derive(Debug, Clone)]
pub struct Rng(SplitMix64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(SplitMix64::new(seed))
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// Uniform in `0..n` (`0..1` when `n` is 0), in the type of `n`.
    pub fn below<N>(&mut self, n: N) -> N
    where
        N: TryInto<u64> + TryFrom<u64>,
    {
        let bound = n.try_into().ok().filter(|&n| n > 0).unwrap_or(1);
        N::try_from(self.next_u64() % bound)
            .unwrap_or_else(|_| unreachable!("a draw below n fits n's type"))
    }

    /// Uniform in `lo..=hi`.
    pub fn between(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi.saturating_sub(lo) + 1)
    }

    /// True with probability `percent` / 100.
    pub fn percent(&mut self, percent: u64) -> bool {
        self.below(100u64) < percent
    }

    /// True one time in `n`.
    pub fn one_in(&mut self, n: usize) -> bool {
        self.below(n) == 0
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }

    /// Between `min` and `max` (exclusive) random bytes.
    pub fn bytes(&mut self, min: usize, max: usize) -> Vec<u8> {
        let n = min + self.below(max - min);
        (0..n).map(|_| self.next_u64() as u8).collect()
    }

    /// A new generator for another stream of choices, derived from this one.
    pub fn fork(&mut self) -> Rng {
        Rng::new(self.next_u64())
    }
}
