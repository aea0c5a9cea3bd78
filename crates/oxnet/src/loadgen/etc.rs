//! The distributions of a memcached load as mutilate (Leverich and
//! Kozyrakis, "Reconciling High Server Utilization and Sub-millisecond
//! Quality-of-Service", EuroSys 2014) generates them, for the ETC
//! workload of Atikoglu et al., "Workload Analysis of a Large-Scale
//! Key-Value Store" (SIGMETRICS 2012) that the NIC-feature study uses
//! (issue 13; `../shared/papers/nic-features-baremetal-libos.txt` §4).
//!
//! A generator is written as mutilate's `-K`, `-V` and `-i` take it:
//! a number (fixed), `fixed:V`, `uniform:S`, `normal:MEAN,SD`,
//! `exponential:LAMBDA`, `pareto:LOC,SCALE,SHAPE` (generalized Pareto),
//! `gev:LOC,SCALE,SHAPE` (generalized extreme value), or one of the ETC
//! fits:
//!
//! | name | what | distribution |
//! |---|---|---|
//! | `fb_key` | key length, bytes | GEV(30.7984, 8.20449, 0.078688) |
//! | `fb_value` | value length, bytes | a discrete head for 0..14 bytes (their measured shares), else generalized Pareto(15, 214.476, 0.348238) |
//! | `fb_ia` | gap between requests, seconds | generalized Pareto(0, 16.0292, 0.154971), its scale set for the target rate |
//!
//! The formulas (inverse transforms of a uniform U in (0, 1]):
//! generalized Pareto `LOC + SCALE (U^-SHAPE - 1) / SHAPE`; GEV the same
//! with U replaced by an exponential(1) sample `-ln U`; its mean, for
//! SHAPE < 1, is `LOC + SCALE / (1 - SHAPE)`, so a rate λ sets
//! `SCALE = (1 - SHAPE) (1/λ - LOC)` (mutilate's `set_lambda`: the mean
//! gap is then 1/λ). Sizes are the generated value truncated to an
//! integer, as mutilate's `int` conversion does.
//!
//! Keys (mutilate's KeyGenerator): record `i` of `-r RECORDS` is the
//! decimal `i`, zero-padded to a length drawn from the key generator with
//! U = FNV-1a-64(the 8 little-endian bytes of i) / 2^64, at least the
//! digits of RECORDS and at most 249 characters (memcached's limit is
//! 250). The same record always has the same key.

/// A generator of one quantity.
#[derive(Debug, Clone, PartialEq)]
pub enum Generator {
    Fixed(f64),
    /// Uniform in [0, scale).
    Uniform(f64),
    Normal {
        mean: f64,
        sd: f64,
    },
    Exponential(f64),
    GPareto {
        loc: f64,
        scale: f64,
        shape: f64,
    },
    Gev {
        loc: f64,
        scale: f64,
        shape: f64,
    },
    /// Values with given probabilities (tried in order), else `tail`.
    Discrete {
        head: Vec<(f64, f64)>,
        tail: Box<Generator>,
    },
}

/// ETC's value sizes below 15 bytes and their shares (Atikoglu et al.,
/// as mutilate's `fb_value` has them).
const FB_VALUE_HEAD: [(f64, f64); 15] = [
    (0.00536, 0.0),
    (0.00047, 1.0),
    (0.17820, 2.0),
    (0.09239, 3.0),
    (0.00018, 4.0),
    (0.02740, 5.0),
    (0.00065, 6.0),
    (0.00606, 7.0),
    (0.00023, 8.0),
    (0.00837, 9.0),
    (0.00837, 10.0),
    (0.08989, 11.0),
    (0.00092, 12.0),
    (0.00326, 13.0),
    (0.01980, 14.0),
];

impl Generator {
    /// `fb_key`: ETC's key sizes.
    pub fn fb_key() -> Generator {
        Generator::Gev {
            loc: 30.7984,
            scale: 8.20449,
            shape: 0.078688,
        }
    }

    /// `fb_value`: ETC's value sizes.
    pub fn fb_value() -> Generator {
        Generator::Discrete {
            head: FB_VALUE_HEAD.to_vec(),
            tail: Box::new(Generator::GPareto {
                loc: 15.0,
                scale: 214.476,
                shape: 0.348238,
            }),
        }
    }

    /// `fb_ia`: ETC's gaps between requests (set the rate with
    /// [`Generator::set_rate`]).
    pub fn fb_ia() -> Generator {
        Generator::GPareto {
            loc: 0.0,
            scale: 16.0292,
            shape: 0.154971,
        }
    }

    /// Parses mutilate's syntax (module doc).
    pub fn parse(spec: &str) -> Result<Generator, String> {
        let spec = spec.trim();
        match spec {
            "fb_key" => return Ok(Generator::fb_key()),
            "fb_value" => return Ok(Generator::fb_value()),
            "fb_ia" => return Ok(Generator::fb_ia()),
            _ => {}
        }
        if let Ok(v) = spec.parse::<f64>() {
            return finite(v, spec).map(Generator::Fixed);
        }
        let (name, params) = spec
            .split_once(':')
            .ok_or_else(|| format!("'{spec}': expected a number, fb_key, fb_value, fb_ia or NAME:PARAMETERS"))?;
        let values: Vec<f64> = params
            .split(',')
            .map(|p| {
                p.trim()
                    .parse::<f64>()
                    .map_err(|_| format!("'{spec}': '{p}' is not a number"))
                    .and_then(|v| finite(v, spec))
            })
            .collect::<Result<_, _>>()?;
        let want = |n: usize| -> Result<(), String> {
            if values.len() == n {
                Ok(())
            } else {
                Err(format!(
                    "'{spec}': {name} takes {n} parameter(s), {} given",
                    values.len()
                ))
            }
        };
        let shape_nonzero = |shape: f64| -> Result<(), String> {
            if shape == 0.0 {
                Err(format!("'{spec}': the shape must not be 0"))
            } else {
                Ok(())
            }
        };
        Ok(match name.to_ascii_lowercase().as_str() {
            "fixed" => {
                want(1)?;
                Generator::Fixed(values[0])
            }
            "uniform" => {
                want(1)?;
                Generator::Uniform(values[0])
            }
            "normal" => {
                want(2)?;
                Generator::Normal {
                    mean: values[0],
                    sd: values[1],
                }
            }
            "exponential" => {
                want(1)?;
                Generator::Exponential(values[0])
            }
            "pareto" => {
                want(3)?;
                shape_nonzero(values[2])?;
                Generator::GPareto {
                    loc: values[0],
                    scale: values[1],
                    shape: values[2],
                }
            }
            "gev" => {
                want(3)?;
                shape_nonzero(values[2])?;
                Generator::Gev {
                    loc: values[0],
                    scale: values[1],
                    shape: values[2],
                }
            }
            other => return Err(format!("'{spec}': unknown distribution '{other}'")),
        })
    }

    /// One value, from uniform draws of `rng`.
    pub fn generate(&self, rng: &mut Uniform01) -> f64 {
        match self {
            Generator::Fixed(v) => *v,
            Generator::Uniform(scale) => scale * (1.0 - rng.draw()),
            Generator::Normal { mean, sd } => {
                // Box-Muller with two independent draws.
                let (u, v) = (rng.draw(), rng.draw());
                mean + sd * (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
            }
            Generator::Exponential(lambda) => {
                if *lambda <= 0.0 {
                    0.0
                } else {
                    -rng.draw().ln() / lambda
                }
            }
            Generator::GPareto { loc, scale, shape } => gpareto(*loc, *scale, *shape, rng.draw()),
            Generator::Gev { loc, scale, shape } => gev(*loc, *scale, *shape, rng.draw()),
            Generator::Discrete { head, tail } => {
                let u = 1.0 - rng.draw();
                let mut sum = 0.0;
                for &(p, v) in head {
                    sum += p;
                    if u < sum {
                        return v;
                    }
                }
                tail.generate(rng)
            }
        }
    }

    /// Sets the mean to `1/rate` (mutilate's `set_lambda`, for the gap
    /// generator of `-i` at a target rate per connection); a rate of 0
    /// or less makes every gap 0. Generators without a scale to set
    /// (normal keeps its deviation, GEV) have their mean set where they
    /// have one, and are left alone otherwise.
    pub fn set_rate(&mut self, rate: f64) {
        let gap = if rate > 0.0 { 1.0 / rate } else { 0.0 };
        match self {
            Generator::Fixed(v) => *v = gap,
            Generator::Uniform(scale) => *scale = 2.0 * gap,
            Generator::Normal { mean, .. } => *mean = gap,
            Generator::Exponential(lambda) => *lambda = rate.max(0.0),
            Generator::GPareto { loc, scale, shape } => {
                *scale = if rate > 0.0 { (1.0 - *shape) * (gap - *loc) } else { 0.0 }
            }
            Generator::Gev { .. } | Generator::Discrete { .. } => {}
        }
    }
}

fn finite(v: f64, spec: &str) -> Result<f64, String> {
    if v.is_finite() {
        Ok(v)
    } else {
        Err(format!("'{spec}': not a finite number"))
    }
}

/// Generalized Pareto by inversion of `u` in (0, 1].
pub fn gpareto(loc: f64, scale: f64, shape: f64, u: f64) -> f64 {
    loc + scale * (u.powf(-shape) - 1.0) / shape
}

/// Generalized extreme value by inversion: the exponential(1) sample
/// `-ln u` in place of the uniform.
pub fn gev(loc: f64, scale: f64, shape: f64, u: f64) -> f64 {
    let e = -u.ln();
    loc + scale * (e.powf(-shape) - 1.0) / shape
}

/// Uniform draws in (0, 1] from xorshift64* (53 bits of it).
#[derive(Debug, Clone)]
pub struct Uniform01(u64);

impl Uniform01 {
    pub fn new(seed: u64) -> Uniform01 {
        Uniform01(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn draw(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let x = self.0.wrapping_mul(0x2545_F491_4F6C_DD1D);
        ((x >> 11) + 1) as f64 / (1u64 << 53) as f64
    }

    /// A record index in 0..n (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.draw() * n as f64) as u64).min(n - 1)
    }
}

/// FNV-1a, 64 bits, of `i`'s 8 little-endian bytes.
pub fn fnv1a_64(i: u64) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in i.to_le_bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// Keys of `records` records, lengths from `lengths` (module doc).
#[derive(Debug, Clone)]
pub struct Keys {
    lengths: Generator,
    min_len: usize,
}

/// memcached's key limit is 250 bytes; mutilate writes at most 249.
pub const MAX_KEY: usize = 249;

impl Keys {
    pub fn new(lengths: Generator, records: u64) -> Keys {
        let digits = records.max(1).ilog10() as usize + 1;
        Keys {
            lengths,
            min_len: digits,
        }
    }

    /// Record `i`'s key.
    pub fn key(&self, i: u64) -> String {
        let u = fnv1a_64(i) as f64 / u64::MAX as f64;
        // The key generator is driven by the hash, not by a random draw:
        // one uniform, for the inverse transforms (GEV, Pareto) and the
        // fixed and uniform ones.
        let drawn = match &self.lengths {
            Generator::Gev { loc, scale, shape } => gev(*loc, *scale, *shape, u.max(f64::MIN_POSITIVE)),
            Generator::GPareto { loc, scale, shape } => gpareto(*loc, *scale, *shape, u.max(f64::MIN_POSITIVE)),
            Generator::Uniform(scale) => scale * u,
            other => other.generate(&mut Uniform01::new(i)),
        };
        let len = (drawn.round().max(0.0) as usize).max(self.min_len).min(MAX_KEY);
        format!("{i:0len$}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mean(g: &Generator, n: usize) -> f64 {
        let mut rng = Uniform01::new(7);
        (0..n).map(|_| g.generate(&mut rng)).sum::<f64>() / n as f64
    }

    #[test]
    fn inverse_transforms_at_known_points() {
        // u = 1: both at LOC.
        assert_eq!(gpareto(15.0, 214.476, 0.348238, 1.0), 15.0);
        // u = 1/2: LOC + SCALE (2^SHAPE - 1) / SHAPE.
        let want = 15.0 + 214.476 * (2f64.powf(0.348238) - 1.0) / 0.348238;
        assert!((gpareto(15.0, 214.476, 0.348238, 0.5) - want).abs() < 1e-9);
        // GEV at u = 1/e: the exponential sample is 1, the value LOC.
        assert!((gev(30.7984, 8.20449, 0.078688, (-1f64).exp()) - 30.7984).abs() < 1e-9);
    }

    #[test]
    fn fb_value_has_its_head_and_a_tail_from_15_bytes() {
        let g = Generator::fb_value();
        let head: f64 = FB_VALUE_HEAD.iter().map(|(p, _)| p).sum();
        let mut rng = Uniform01::new(3);
        let n = 200_000;
        let mut small = 0usize;
        let mut twos = 0usize;
        for _ in 0..n {
            let v = g.generate(&mut rng);
            if v < 15.0 {
                small += 1;
                assert_eq!(v.fract(), 0.0, "head values are whole");
            }
            if v == 2.0 {
                twos += 1;
            }
        }
        let share = small as f64 / n as f64;
        assert!(
            (share - head).abs() < 0.005,
            "{share} of values under 15 bytes, the head is {head}"
        );
        assert!((twos as f64 / n as f64 - 0.1782).abs() < 0.005);
    }

    #[test]
    fn fb_ia_at_a_rate_has_that_mean_gap() {
        for rate in [1_000.0, 50_000.0] {
            let mut g = Generator::fb_ia();
            g.set_rate(rate);
            let m = mean(&g, 400_000);
            assert!((m * rate - 1.0).abs() < 0.03, "rate {rate}: mean gap {m}");
        }
        let mut e = Generator::parse("exponential:1").unwrap();
        e.set_rate(200.0);
        assert!((mean(&e, 200_000) * 200.0 - 1.0).abs() < 0.02);
    }

    /// The empirical q-quantile of `n` samples of `g` (seed 11).
    fn quantile(g: &Generator, n: usize, q: f64) -> f64 {
        let mut rng = Uniform01::new(11);
        let mut v: Vec<f64> = (0..n).map(|_| g.generate(&mut rng)).collect();
        v.sort_by(f64::total_cmp);
        v[((n as f64 * q) as usize).min(n - 1)]
    }

    #[test]
    fn quantiles_follow_the_distributions_definitions() {
        // Generalized Pareto (fb_ia's shape, rate 1000/s): F^-1(q) =
        // LOC + SCALE ((1 - q)^-SHAPE - 1) / SHAPE.
        let mut ia = Generator::fb_ia();
        ia.set_rate(1000.0);
        let Generator::GPareto { scale, shape, .. } = ia.clone() else {
            unreachable!()
        };
        // GEV (fb_key): F^-1(q) = LOC + SCALE ((-ln q)^-SHAPE - 1) / SHAPE.
        let (kl, ks, kk) = (30.7984, 8.20449, 0.078688);
        for q in [0.1f64, 0.5, 0.9, 0.99] {
            let want = scale * ((1.0 - q).powf(-shape) - 1.0) / shape;
            let got = quantile(&ia, 200_000, q);
            assert!((got / want - 1.0).abs() < 0.03, "fb_ia q{q}: {got} against {want}");
            let want = kl + ks * ((-f64::ln(q)).powf(-kk) - 1.0) / kk;
            let got = quantile(&Generator::fb_key(), 200_000, q);
            assert!((got / want - 1.0).abs() < 0.01, "fb_key q{q}: {got} against {want}");
        }
        // fb_value: its head holds 44.1 % of the mass below 15 bytes; the
        // tail's median is Pareto's at (0.5 - 0.441) / 0.559 of the tail.
        let head: f64 = FB_VALUE_HEAD.iter().map(|(p, _)| p).sum();
        let qt = (0.5 - head) / (1.0 - head);
        let want = 15.0 + 214.476 * ((1.0 - qt).powf(-0.348238) - 1.0) / 0.348238;
        let got = quantile(&Generator::fb_value(), 200_000, 0.5);
        assert!((got / want - 1.0).abs() < 0.05, "fb_value median {got} against {want}");
    }

    #[test]
    fn fb_key_lengths_are_about_31_bytes() {
        // GEV's mean for shape k: LOC + SCALE (Gamma(1 - k) - 1) / k;
        // Gamma(1 - 0.078688) is 1.052027.
        let m = mean(&Generator::fb_key(), 200_000);
        let want = 30.7984 + 8.20449 * (1.052027 - 1.0) / 0.078688;
        assert!((m - want).abs() < 0.3, "{m} against {want}");
    }

    #[test]
    fn keys_are_the_zero_padded_record_and_stable() {
        let keys = Keys::new(Generator::fb_key(), 1_000_000);
        let k = keys.key(42);
        assert_eq!(k, keys.key(42), "the same record, the same key");
        assert!(k.len() >= 7 && k.len() <= MAX_KEY, "{k}");
        assert_eq!(k.trim_start_matches('0'), "42");
        let fixed = Keys::new(Generator::Fixed(10.0), 100);
        assert_eq!(fixed.key(5), "0000000005");
        // Never shorter than the records' digits, never over the limit.
        assert_eq!(Keys::new(Generator::Fixed(1.0), 100_000).key(7), "000007");
        assert_eq!(Keys::new(Generator::Fixed(1e6), 10).key(7).len(), MAX_KEY);
        // FNV-1a-64 of the index's 8 little-endian bytes (values computed
        // independently).
        assert_eq!(fnv1a_64(0), 0xa8c7_f832_281a_39c5);
        assert_eq!(fnv1a_64(42), 0xff3a_dd6b_3789_daef);
    }

    #[test]
    fn mutilate_syntax_parses_and_errors_are_clear() {
        assert_eq!(Generator::parse("200").unwrap(), Generator::Fixed(200.0));
        assert_eq!(
            Generator::parse("pareto:0,16.0292,0.154971").unwrap(),
            Generator::fb_ia()
        );
        assert_eq!(
            Generator::parse("gev:30.7984,8.20449,0.078688").unwrap(),
            Generator::fb_key()
        );
        assert_eq!(
            Generator::parse("normal:5,1").unwrap(),
            Generator::Normal { mean: 5.0, sd: 1.0 }
        );
        for (bad, says) in [
            ("pareto:1,2", "takes 3"),
            ("gev:1,2,0", "shape"),
            ("zipf:1", "unknown distribution"),
            ("normal:a,1", "not a number"),
            ("fb_vaule", "expected a number"),
            ("inf", "finite"),
        ] {
            let e = Generator::parse(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }
}
