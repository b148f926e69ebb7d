//! Seeded routing: which experts each token of each rank selects, and with what weight.
//!
//! Every rank's routing is a pure function of (generator, seed, rank), so any rank can rebuild
//! any other rank's routing and the whole dispatch layout without communication (as NCCL EP's
//! ep_bench does). Every impl sees the same routing.
use crate::error::{Error, Result};
use crate::harness::check::Seeds;

/// xoshiro256** seeded by splitmix64: small, fast and well tested; no crate needed.
pub struct Rng([u64; 4]);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        let mut x = seed;
        let mut next = || {
            x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = x;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        };
        Rng([next(), next(), next(), next()])
    }

    pub fn next_u64(&mut self) -> u64 {
        let s = &mut self.0;
        let r = s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        r
    }

    /// Uniform in (0, 1).
    pub fn uniform(&mut self) -> f64 {
        ((self.next_u64() >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }

    /// Standard normal (Box-Muller).
    pub fn normal(&mut self) -> f64 {
        let (u, v) = (self.uniform(), self.uniform());
        (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
}

/// How tokens choose experts.
#[derive(Debug, Clone, PartialEq)]
pub enum Generator {
    /// Top-k of |randn| + 1 scores (DeepEP / NCCL EP low-latency tests).
    Uniform,
    /// Weighted sampling without replacement: rank 0's experts are `ratio` times as likely.
    Hot { ratio: f64 },
    /// Weighted sampling without replacement, expert e weighted 1 / (e + 1)^s.
    Zipf { s: f64 },
    /// DeepSeek's group-limited gating: experts in `groups` equal groups, keep the `keep` groups
    /// with the highest maximum score, top-k inside them.
    GroupLimited { groups: usize, keep: usize },
}

impl Generator {
    pub fn name(&self) -> String {
        match self {
            Generator::Uniform => "uniform".into(),
            Generator::Hot { ratio } => format!("hot:{ratio}"),
            Generator::Zipf { s } => format!("zipf:{s}"),
            Generator::GroupLimited { groups, keep } => format!("group-limited:{groups}:{keep}"),
        }
    }

    /// `uniform`, `hot:RATIO`, `zipf:S`, `group-limited:GROUPS:KEEP`.
    pub fn parse(text: &str) -> Result<Generator> {
        let parts: Vec<&str> = text.split(':').collect();
        let bad = || {
            Error::usage(
                format!("bad routing '{text}'"),
                "use uniform, hot:RATIO, zipf:S or group-limited:GROUPS:KEEP (e.g. hot:4, zipf:1.1, group-limited:8:4)",
            )
        };
        let num = |s: &str| s.parse::<f64>().ok().filter(|v| v.is_finite() && *v > 0.0).ok_or_else(bad);
        let int = |s: &str| s.parse::<usize>().ok().filter(|v| *v > 0).ok_or_else(bad);
        match parts.as_slice() {
            ["uniform"] => Ok(Generator::Uniform),
            ["hot", r] => Ok(Generator::Hot { ratio: num(r)? }),
            ["zipf", s] => Ok(Generator::Zipf { s: num(s)? }),
            ["group-limited", g, k] => Ok(Generator::GroupLimited { groups: int(g)?, keep: int(k)? }),
            _ => Err(bad()),
        }
    }

    /// Check against the shape: groups divide the experts and hold enough of them.
    pub fn validate(&self, experts: usize, topk: usize) -> Result<()> {
        if let Generator::GroupLimited { groups, keep } = *self {
            if !experts.is_multiple_of(groups) || keep > groups || keep * (experts / groups) < topk {
                return Err(Error::usage(
                    format!("group-limited:{groups}:{keep} does not fit {experts} experts with top-{topk}"),
                    "groups must divide the experts, keep <= groups, and keep x experts-per-group >= topk",
                ));
            }
        }
        Ok(())
    }
}

/// One rank's routing: `idx[t * topk + k]` is the expert (or -1, masked), `weight` its weight.
#[derive(Debug, Clone, PartialEq)]
pub struct Routing {
    pub tokens: usize,
    pub topk: usize,
    pub idx: Vec<i32>,
    pub weight: Vec<f32>,
}

impl Routing {
    pub fn get(&self, t: usize, k: usize) -> i32 {
        self.idx[t * self.topk + k]
    }

    /// The negative control of the layout check (`GINBENCH_CHECK_BREAK=layout`): the same routing
    /// with its first selection that goes anywhere moved to the next of `experts`.
    pub fn with_first_moved(&self, experts: usize) -> Routing {
        let mut r = self.clone();
        if let Some(e) = r.idx.iter_mut().find(|e| **e >= 0) {
            *e = (*e + 1) % experts as i32;
        }
        r
    }
}

/// What determines every rank's routing.
#[derive(Debug, Clone, PartialEq)]
pub struct RoutingSpec {
    pub gen: Generator,
    pub seed: u64,
    /// Selections set to -1 per rank (dropped, as DeepEP's tests do with 10).
    pub masked: usize,
    /// The seed of a checked run; None for the timed runs. A checked routing masks one whole
    /// token first where `masked` >= top-k (random masks almost never drop all of a token's
    /// selections: a token that goes nowhere) and routes an uneven token count per rank
    /// ([`RoutingSpec::tokens_of`]).
    pub check: Option<u32>,
    /// Ranks (experts are split evenly, rank r owns experts [r·L, (r+1)·L)).
    pub ranks: usize,
}

impl RoutingSpec {
    /// The routing of checked run `check_seed` (never 0): the same generator, mask count and
    /// ranks, another seed, a whole token masked where the masks cover one, and uneven token
    /// counts. A layout output the checked dispatch failed to write (descriptors, counts,
    /// metadata) then still holds another routing's (a decoy's, or the timed runs') and reads
    /// wrong.
    pub fn for_check(&self, check_seed: u32) -> RoutingSpec {
        RoutingSpec { seed: self.seed.wrapping_add((check_seed as u64) << 32), check: Some(check_seed), ..self.clone() }
    }

    /// The routing of a checked run's decoy launches: another seed, the same token counts, so
    /// the layout outputs (counts, offsets, descriptors) differ from the checked routing's.
    pub fn for_decoy(&self) -> RoutingSpec {
        RoutingSpec { seed: !self.seed, ..self.clone() }
    }

    /// Every rank's routing, at most `tokens` tokens each ([`RoutingSpec::tokens_of`]), as any
    /// rank can rebuild it.
    pub fn every_rank(&self, tokens: usize, experts: usize, topk: usize) -> Vec<Routing> {
        (0..self.ranks).map(|r| self.generate(r, self.tokens_of(r, tokens), experts, topk)).collect()
    }

    /// The tokens rank `rank` routes where every rank's buffers hold `tokens`, by the round of
    /// the check ([`Seeds::round`]). The timed runs route them all. Where fewer, each rank routes
    /// a different count (where `tokens` allows) down to a little over half, turning with the
    /// check's seed, so a kernel that sized a peer's rows by its own count reads wrong:
    /// - round 0: all of them on one rank in turn (on none one turn in n + 1), fewer on the rest,
    ///   so a full rank meets partial peers;
    /// - rounds 1 and 2: all of them on every rank, as the timed runs do, so the receive buffers
    ///   are checked as full as those fill them (every slot, where every token picks one rank's
    ///   experts), on both halves of the kernels' buffers (see `Phases::check_once`);
    /// - round 3: fewer on every rank, so a kernel that walked its buffers' capacity instead of
    ///   its tokens reads wrong, a rank alone too.
    ///
    /// [`Seeds::round`]: crate::harness::check::Seeds::round
    pub fn tokens_of(&self, rank: usize, tokens: usize) -> usize {
        let Some(seed) = self.check else { return tokens };
        let (round, seed) = Seeds::split(seed);
        let n = self.ranks.max(1);
        let fewer = |k: usize| tokens - tokens * k / (2 * (n + 1));
        match round {
            0 => fewer((rank + seed as usize) % (n + 1)),
            1 | 2 => tokens,
            _ => fewer((rank + seed as usize) % n + 1),
        }
    }

    /// Rank `rank`'s routing for `tokens` tokens.
    pub fn generate(&self, rank: usize, tokens: usize, experts: usize, topk: usize) -> Routing {
        let mut rng = Rng::new(self.seed.wrapping_mul(0x1000_0001).wrapping_add(rank as u64 * 7919 + tokens as u64));
        let mut idx = Vec::with_capacity(tokens * topk);
        let local = experts / self.ranks.max(1);
        let mut scores = vec![0f64; experts];
        for _ in 0..tokens {
            match self.gen {
                Generator::Uniform => scores.iter_mut().for_each(|s| *s = rng.normal().abs() + 1.0),
                Generator::Hot { ratio } => {
                    for (e, s) in scores.iter_mut().enumerate() {
                        let w = if e < local { ratio } else { 1.0 };
                        // Efraimidis-Spirakis: the top-k of u^(1/w) is a weighted sample
                        // without replacement.
                        *s = rng.uniform().powf(1.0 / w);
                    }
                }
                Generator::Zipf { s: z } => {
                    for (e, s) in scores.iter_mut().enumerate() {
                        *s = rng.uniform().powf((e as f64 + 1.0).powf(z));
                    }
                }
                Generator::GroupLimited { groups, keep } => {
                    scores.iter_mut().for_each(|s| *s = rng.normal().abs() + 1.0);
                    let per = experts / groups;
                    let best = |g: usize| scores[g * per..(g + 1) * per].iter().cloned().fold(f64::MIN, f64::max);
                    let mut order: Vec<usize> = (0..groups).collect();
                    order.sort_by(|&a, &b| best(b).total_cmp(&best(a)).then(a.cmp(&b)));
                    for &g in &order[keep..] {
                        scores[g * per..(g + 1) * per].iter_mut().for_each(|s| *s = f64::NEG_INFINITY);
                    }
                }
            }
            let mut order: Vec<usize> = (0..experts).collect();
            order.select_nth_unstable_by(topk - 1, |&a, &b| scores[b].total_cmp(&scores[a]).then(a.cmp(&b)));
            let mut chosen: Vec<i32> = order[..topk].iter().map(|&e| e as i32).collect();
            chosen.sort_by(|&a, &b| scores[b as usize].total_cmp(&scores[a as usize]).then(a.cmp(&b)));
            idx.extend(chosen);
        }
        // Weights in (0.5, 1]: no selection is a small part of its token's sum, so the combine
        // check (BF16 precision, src/kernels/ep.cu) sees one that goes missing on many channels. They take one
        // normal draw each, as before, so the masks below stay where they were.
        let weight = (0..tokens * topk).map(|_| (0.5 + 0.5 * (-rng.normal().abs()).exp()) as f32).collect();
        let mut r = Routing { tokens, topk, idx, weight };
        let total = tokens * topk;
        // Exactly `masked` distinct entries: the head of a partial Fisher-Yates shuffle, whose
        // first `topk` are one token's where a whole token is masked.
        let masked = self.masked.min(total);
        let mut at: Vec<usize> = (0..total).collect();
        let mut first = 0;
        if self.check.is_some() && masked >= topk {
            let t = rng.below(tokens);
            for k in 0..topk {
                at.swap(k, t * topk + k);
            }
            first = topk;
        }
        for i in first..masked {
            at.swap(i, i + rng.below(total - i));
        }
        for &i in &at[..masked] {
            r.idx[i] = -1;
        }
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::check::Seeds;

    fn spec(gen: Generator) -> RoutingSpec {
        RoutingSpec { gen, seed: 1, masked: 0, ranks: 4, check: None }
    }

    #[test]
    fn seeded_and_distinct_per_rank() {
        let s = spec(Generator::Uniform);
        assert_eq!(s.generate(1, 64, 256, 8), s.generate(1, 64, 256, 8));
        assert_ne!(s.generate(1, 64, 256, 8).idx, s.generate(2, 64, 256, 8).idx);
        let other = RoutingSpec { seed: 2, ..s.clone() };
        assert_ne!(s.generate(1, 64, 256, 8).idx, other.generate(1, 64, 256, 8).idx);
    }

    #[test]
    fn topk_distinct_in_range_positive_weights() {
        for gen in [
            Generator::Uniform,
            Generator::Hot { ratio: 4.0 },
            Generator::Zipf { s: 1.1 },
            Generator::GroupLimited { groups: 8, keep: 4 },
        ] {
            let r = spec(gen.clone()).generate(0, 200, 256, 8);
            for t in 0..200 {
                let mut row: Vec<i32> = (0..8).map(|k| r.get(t, k)).collect();
                assert!(row.iter().all(|&e| (0..256).contains(&e)), "{gen:?}");
                row.sort();
                row.dedup();
                assert_eq!(row.len(), 8, "{gen:?}: an expert chosen twice");
            }
            assert!(r.weight.iter().all(|&w| w > 0.5 && w <= 1.0), "{gen:?}: weights in (0.5, 1]");
        }
    }

    #[test]
    fn a_check_routes_differently_with_the_same_masks_count() {
        let s = RoutingSpec { masked: 10, ..spec(Generator::Hot { ratio: 4.0 }) };
        let timed = s.generate(1, 64, 256, 8);
        for seed in [1, 2, u32::MAX] {
            let c = s.for_check(seed).generate(1, 64, 256, 8);
            assert_ne!(c.idx, timed.idx, "check {seed}");
            assert_eq!(c.idx.iter().filter(|&&e| e == -1).count(), 10);
        }
        assert_ne!(s.for_check(1).generate(1, 64, 256, 8), s.for_check(2).generate(1, 64, 256, 8));
    }

    #[test]
    fn a_check_masks_a_whole_token_where_the_masks_cover_one() {
        let s = RoutingSpec { masked: 10, ..spec(Generator::Uniform) };
        for seed in 1..20 {
            let r = s.for_check(seed).generate(2, 64, 256, 8);
            assert_eq!(r.idx.iter().filter(|&&e| e == -1).count(), 10);
            assert!((0..64).any(|t| (0..8).all(|k| r.get(t, k) == -1)), "check {seed}: no token goes nowhere");
        }
        // Fewer masks than top-k: the masks are random ones, as without a whole token.
        let few = RoutingSpec { masked: 7, ..s.clone() }.for_check(1);
        assert_eq!(few.generate(2, 64, 256, 8), RoutingSpec { check: None, ..few.clone() }.generate(2, 64, 256, 8));
    }

    #[test]
    fn a_checks_rounds_route_these_token_counts() {
        let s = spec(Generator::Uniform);
        assert!((0..4).all(|r| s.tokens_of(r, 128) == 128), "the timed runs route every token");
        let counts = |seed: u32, round: usize| -> Vec<usize> {
            (0..4).map(|r| s.for_check(Seeds::round(seed, round)).tokens_of(r, 128)).collect()
        };
        let distinct = |v: &[usize]| {
            let mut d = v.to_vec();
            d.sort();
            d.dedup();
            d.len()
        };
        for seed in [1, 2, 3, 4, 5, 7, (1 << 29) - 1] {
            // Round 0: at most one rank routes all, each a different count above half.
            let c = counts(seed, 0);
            assert!(c.iter().all(|&t| t > 64 && t <= 128), "check {seed}: {c:?}");
            assert!(c.iter().filter(|&&t| t == 128).count() <= 1, "check {seed}: {c:?}");
            assert_eq!(distinct(&c), 4, "check {seed}: {c:?}");
            // Rounds 1 and 2 fill the buffers as the timed runs do.
            assert_eq!(counts(seed, 1), vec![128; 4]);
            assert_eq!(counts(seed, 2), vec![128; 4]);
            // Round 3: every rank fewer, each a different count.
            let c = counts(seed, 3);
            assert!(c.iter().all(|&t| t > 64 && t < 128), "check {seed}: {c:?}");
            assert_eq!(distinct(&c), 4, "check {seed}: {c:?}");
            let routing = s.for_check(Seeds::round(seed, 3)).every_rank(128, 256, 8);
            assert_eq!(routing.iter().map(|r| r.tokens).collect::<Vec<_>>(), c);
            assert!(routing.iter().all(|r| r.idx.len() == r.tokens * 8 && r.weight.len() == r.tokens * 8));
        }
        // In round 0 every rank routes all its tokens in one check of n + 1, fewer in the others.
        for r in 0..4 {
            let full = (1..=5).filter(|&seed| counts(seed, 0)[r] == 128).count();
            assert_eq!(full, 1, "rank {r}");
        }
        // Decoys route as many tokens, differently.
        let (c, d) = (s.for_check(3), s.for_check(3).for_decoy());
        for r in 0..4 {
            assert_eq!(d.tokens_of(r, 128), c.tokens_of(r, 128));
            assert_ne!(d.generate(r, 100, 256, 8).idx, c.generate(r, 100, 256, 8).idx);
        }
        // One token stays one token.
        assert!((0..4).all(|r| s.for_check(3).tokens_of(r, 1) == 1));
        // A rank alone routes fewer than its buffers hold in round 3 of every check, all in 1 and 2.
        let one = RoutingSpec { ranks: 1, ..s.clone() };
        for seed in [1, 2, 1000] {
            let rounds: Vec<usize> = (0..4).map(|r| one.for_check(Seeds::round(seed, r)).tokens_of(0, 64)).collect();
            assert!(rounds[1] == 64 && rounds[2] == 64 && rounds[3] < 64, "check {seed}: {rounds:?}");
        }
    }

    #[test]
    fn the_layout_control_moves_one_selection() {
        let r = Routing { tokens: 2, topk: 2, idx: vec![-1, 7, 3, -1], weight: vec![1.0; 4] };
        assert_eq!(r.with_first_moved(8).idx, vec![-1, 0, 3, -1], "the first that goes anywhere, wrapped");
        let none = Routing { tokens: 1, topk: 2, idx: vec![-1, -1], weight: vec![1.0; 2] };
        assert_eq!(none.with_first_moved(8), none);
    }

    #[test]
    fn masked_entries_are_minus_one() {
        let r = RoutingSpec { masked: 10, ..spec(Generator::Uniform) }.generate(0, 128, 256, 8);
        assert_eq!(r.idx.iter().filter(|&&e| e == -1).count(), 10);
    }

    #[test]
    fn hot_rank_receives_more() {
        let r = spec(Generator::Hot { ratio: 8.0 }).generate(3, 2000, 256, 8);
        let hot = r.idx.iter().filter(|&&e| e < 64).count() as f64 / r.idx.len() as f64;
        // Uniform would be 0.25.
        assert!(hot > 0.5, "{hot}");
        let z = spec(Generator::Zipf { s: 1.2 }).generate(0, 2000, 256, 8);
        let low = z.idx.iter().filter(|&&e| e < 16).count() as f64 / z.idx.len() as f64;
        assert!(low > 0.25, "zipf favours low experts: {low}");
    }

    #[test]
    fn group_limited_stays_in_kept_groups() {
        let r = spec(Generator::GroupLimited { groups: 8, keep: 2 }).generate(0, 300, 256, 8);
        for t in 0..300 {
            let mut groups: Vec<i32> = (0..8).map(|k| r.get(t, k) / 32).collect();
            groups.sort();
            groups.dedup();
            assert!(groups.len() <= 2, "token {t} spans {groups:?}");
        }
    }

    #[test]
    fn parse_and_validate() {
        assert_eq!(Generator::parse("hot:4").unwrap(), Generator::Hot { ratio: 4.0 });
        assert_eq!(Generator::parse("group-limited:8:4").unwrap(), Generator::GroupLimited { groups: 8, keep: 4 });
        for bad in ["", "hot", "hot:-1", "zipf:x", "group-limited:8", "pareto:1"] {
            assert!(Generator::parse(bad).is_err(), "{bad}");
        }
        assert!(Generator::GroupLimited { groups: 8, keep: 1 }.validate(16, 8).is_err());
        assert!(Generator::GroupLimited { groups: 3, keep: 1 }.validate(16, 2).is_err());
        assert!(Generator::GroupLimited { groups: 4, keep: 2 }.validate(16, 8).is_ok());
    }

    #[test]
    fn parse_and_validate_at_the_edges() {
        assert_eq!(Generator::parse("zipf:1.1").unwrap(), Generator::Zipf { s: 1.1 });
        assert_eq!(Generator::parse("uniform").unwrap(), Generator::Uniform);
        // The results record a routing by its name, which parses back to it.
        for text in ["uniform", "hot:4", "zipf:1.1", "group-limited:8:4"] {
            assert_eq!(Generator::parse(text).unwrap().name(), text);
        }
        // A weight or exponent of 0, and a group count of 0, are not routings.
        for bad in ["hot:0", "zipf:0", "group-limited:0:4", "group-limited:8:0"] {
            assert!(Generator::parse(bad).is_err(), "{bad}");
        }
        // Keeping every group is plain top-k; keeping more groups than there are is an error
        // (generate would index past its groups).
        assert!(Generator::GroupLimited { groups: 8, keep: 8 }.validate(256, 8).is_ok());
        assert!(Generator::GroupLimited { groups: 4, keep: 8 }.validate(16, 8).is_err());
    }

    #[test]
    fn the_generator_is_xoshiro256_starstar_seeded_by_splitmix64() {
        // Known answers of the reference algorithms (splitmix64 filling xoshiro256**'s state):
        // every rank rebuilds every other rank's routing from the same stream.
        let mut r = Rng::new(1);
        let first: Vec<u64> = (0..4).map(|_| r.next_u64()).collect();
        assert_eq!(first, [0xb3f2_af6d_0fc7_10c5, 0x853b_5596_4736_4cea, 0x92f8_9756_082a_4514, 0x642e_1c7b_c266_a3a7]);
        let mut r = Rng::new(1);
        assert_eq!([r.uniform(), r.uniform()], [0.7029218331588505, 0.520436619938857]);
        assert_eq!(Rng::new(1).below(1000), 557);
        // Box-Muller over the first two uniforms (the last digits are the platform's libm).
        assert!((Rng::new(1).normal() - -0.8327414344656706).abs() < 1e-12);
    }

    #[test]
    fn selections_are_the_top_scores() {
        // Uniform and group-limited draw the same scores: the best expert's group is always kept,
        // so their first choices agree, and a top-1 routing is a top-8 routing's first column.
        let s = spec(Generator::Uniform);
        let (one, eight) = (s.generate(0, 300, 256, 1), s.generate(0, 300, 256, 8));
        assert!((0..300).all(|t| one.get(t, 0) == eight.get(t, 0)));
        let grouped = spec(Generator::GroupLimited { groups: 8, keep: 1 }).generate(0, 300, 256, 1);
        assert_eq!(grouped.idx, one.idx);
        // Keeping two groups: those of the two best group maxima, read off uniform's full ranking.
        let full = s.generate(0, 50, 256, 256);
        let two = spec(Generator::GroupLimited { groups: 8, keep: 2 }).generate(0, 50, 256, 8);
        for t in 0..50 {
            let ranking: Vec<i32> = (0..256).map(|k| full.get(t, k)).collect();
            let best = ranking[0] / 32;
            let next = ranking.iter().map(|e| e / 32).find(|&g| g != best).unwrap();
            let want: Vec<i32> = ranking.iter().copied().filter(|e| [best, next].contains(&(e / 32))).take(8).collect();
            assert_eq!((0..8).map(|k| two.get(t, k)).collect::<Vec<_>>(), want, "token {t}");
        }
        // Top-k of k experts: every token selects all of them.
        let all = RoutingSpec { ranks: 1, ..s.clone() }.generate(0, 16, 8, 8);
        for t in 0..16 {
            let mut row: Vec<i32> = (0..8).map(|k| all.get(t, k)).collect();
            row.sort();
            assert_eq!(row, (0..8).collect::<Vec<_>>());
        }
    }

    #[test]
    fn hot_and_zipf_weigh_the_right_experts() {
        // A huge ratio: every selection is one of the hot rank's (rank 0's) 64 experts.
        let r = spec(Generator::Hot { ratio: 1e9 }).generate(0, 200, 256, 8);
        assert!(r.idx.iter().all(|&e| (0..64).contains(&e)), "{:?}", r.idx.iter().filter(|&&e| e >= 64).count());
        // Zipf weighs expert e by 1 / (e + 1)^s: expert 0 is likely, not certain.
        let z = spec(Generator::Zipf { s: 1.2 }).generate(0, 2000, 256, 8);
        let with0 = (0..2000).filter(|&t| (0..8).any(|k| z.get(t, k) == 0)).count();
        assert!(with0 > 1000 && with0 < 2000, "{with0}");
    }

    #[test]
    fn masks_fall_anywhere_and_differ_per_rank() {
        let s = RoutingSpec { masked: 10, ..spec(Generator::Uniform) };
        let at = |r: usize| -> Vec<usize> {
            let g = s.generate(r, 128, 256, 8);
            (0..g.idx.len()).filter(|&i| g.idx[i] == -1).collect()
        };
        assert_ne!(at(0), at(1));
        assert!(at(0).iter().any(|&i| i >= 10), "the masks are not the first selections");
    }

    #[test]
    fn every_rank_count_gets_a_partial_round_and_a_full_one() {
        for ranks in 1..=4 {
            let s = RoutingSpec { ranks, ..spec(Generator::Uniform) };
            for seed in [1, 2, 3, 1000] {
                let counts = |round| {
                    (0..ranks).map(|r| s.for_check(Seeds::round(seed, round)).tokens_of(r, 64)).collect::<Vec<_>>()
                };
                let (full, fewer) = (counts(1), counts(3));
                assert!(full.iter().zip(&fewer).all(|(a, b)| b < a), "{ranks} ranks, check {seed}");
            }
        }
    }
}
