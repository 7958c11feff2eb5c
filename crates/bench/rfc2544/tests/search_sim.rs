//! The search against simulated devices: a loss curve (loss ratio as a
//! function of the offered rate and the trial length) and a generator with
//! a ceiling. No clock, no I/O: a trial "sends" `rate * duration` frames.

use std::time::Duration;

use flowsteer_rfc2544::search::{self, SearchConfig, TrialOutcome, TrialRunner, TrialSpec};
use proptest::prelude::*;

type Curve = Box<dyn Fn(f64, bool) -> f64>;

/// A device: `loss(rate, full)` is its loss ratio; the generator sends at
/// most `gen_max` frames/s.
struct SimDut {
    loss: Curve,
    gen_max: f64,
    trials: u32,
}

impl SimDut {
    fn new(gen_max: f64, loss: impl Fn(f64, bool) -> f64 + 'static) -> SimDut {
        SimDut { loss: Box::new(loss), gen_max, trials: 0 }
    }
}

impl TrialRunner for SimDut {
    fn run_trial(&mut self, spec: &TrialSpec) -> Result<TrialOutcome, Box<dyn std::error::Error + Send + Sync>> {
        self.trials += 1;
        let secs = spec.duration.as_secs_f64();
        let achieved = spec.offered_fps.min(self.gen_max);
        let sent = (achieved * secs).round() as u64;
        let ratio = (self.loss)(achieved, spec.full).clamp(0.0, 1.0);
        let lost = ((sent as f64) * ratio).ceil() as u64;
        Ok(TrialOutcome { sent, received: sent - lost.min(sent), duration_s: secs })
    }
}

/// Loses nothing up to `knee`, then `slope` of the excess share.
fn knee_curve(knee: f64, slope: f64) -> impl Fn(f64, bool) -> f64 {
    move |rate, _| if rate <= knee { 0.0 } else { slope * (rate - knee) / rate }
}

fn cfg(max: f64) -> SearchConfig {
    let mut c = SearchConfig::new(max);
    c.final_trial = Duration::from_secs(10);
    c
}

fn run(c: SearchConfig, dut: &mut SimDut) -> search::SearchOutcome {
    search::run(c, dut, &mut |_, _| {}).expect("search")
}

/// Trials a monotone device may take: two bisections to the resolution from
/// the full range, the confirmations, and the first trial.
fn trial_bound(c: &SearchConfig) -> usize {
    let bisect = ((c.max_fps / c.min_fps).log2() + (1.0 / c.resolution).log2()).ceil() as usize;
    2 * bisect + 6
}

#[test]
fn finds_ndr_and_pdr_of_a_knee_within_the_resolution() {
    // Zero loss to 600k; above it, loss grows: 0.5 % at about 603k.
    let mut dut = SimDut::new(2e6, knee_curve(600_000.0, 1.0));
    let c = cfg(1e6);
    let out = run(c.clone(), &mut dut);
    let ndr = out.ndr.rate_fps.expect("an NDR");
    assert!(ndr <= 600_000.0 && ndr >= 600_000.0 * (1.0 - c.resolution), "NDR {ndr}");
    let pdr_true = 600_000.0 / (1.0 - c.pdr_loss);
    let pdr = out.pdr.rate_fps.expect("a PDR");
    assert!(pdr <= pdr_true && pdr >= pdr_true * (1.0 - c.resolution), "PDR {pdr} (true {pdr_true})");
    assert!(out.ndr.converged && out.pdr.converged);
    assert!(out.trials.len() <= trial_bound(&c), "{} trials", out.trials.len());
}

#[test]
fn the_reported_rates_passed_a_full_length_trial() {
    let mut dut = SimDut::new(2e6, knee_curve(300_000.0, 1.0));
    let out = run(cfg(1e6), &mut dut);
    for goal in [out.ndr, out.pdr] {
        let rate = goal.rate_fps.expect("a rate");
        assert!(out.trials.iter().any(|t| t.offered_fps == rate && t.full && t.passes(goal.loss_goal)));
    }
}

#[test]
fn short_trials_while_wide_and_full_ones_at_the_end() {
    let mut dut = SimDut::new(2e6, knee_curve(400_000.0, 1.0));
    let out = run(cfg(1e6), &mut dut);
    assert!(!out.trials[0].full, "the first trial is short");
    assert!(out.trials.iter().filter(|t| !t.full).count() >= 2);
    assert!(out.trials.last().is_some_and(|t| t.full));
}

#[test]
fn a_device_that_never_loses_gets_max_confirmed_at_full_length() {
    let mut dut = SimDut::new(2e6, |_, _| 0.0);
    let out = run(cfg(1e6), &mut dut);
    assert_eq!(out.ndr.rate_fps, Some(1e6));
    assert_eq!(out.pdr.rate_fps, Some(1e6));
    assert_eq!(out.trials.len(), 2, "{:?}", out.trials);
    assert!(out.trials[1].full);
}

#[test]
fn a_device_that_loses_at_the_floor_has_no_ndr() {
    let mut dut = SimDut::new(2e6, |_, _| 0.5);
    let c = cfg(1e6);
    let out = run(c.clone(), &mut dut);
    assert_eq!(out.ndr.rate_fps, None);
    assert_eq!(out.pdr.rate_fps, None);
    assert!(out.trials.len() <= trial_bound(&c));
}

#[test]
fn invalid_trials_are_never_a_pass() {
    // A lossless device behind a generator that tops out at 450k: every
    // trial above it is invalid, so the rates stay below the ceiling.
    let mut dut = SimDut::new(450_000.0, |_, _| 0.0);
    let c = cfg(1e6);
    let out = run(c.clone(), &mut dut);
    let ndr = out.ndr.rate_fps.expect("an NDR");
    assert!(ndr <= 450_000.0 / c.min_achieved && ndr >= 450_000.0 * (1.0 - c.resolution), "NDR {ndr}");
    assert!(out.trials.iter().any(|t| !t.valid));
    for t in out.trials.iter().filter(|t| !t.valid) {
        assert!(t.offered_fps > ndr, "invalid trial at {} below NDR {ndr}", t.offered_fps);
    }
}

#[test]
fn a_short_trial_pass_that_fails_at_full_length_is_not_reported() {
    // Buffers absorb short trials up to 800k; full trials lose above 500k.
    let mut dut = SimDut::new(2e6, |rate, full| {
        let knee = if full { 500_000.0 } else { 800_000.0 };
        if rate <= knee {
            0.0
        } else {
            (rate - knee) / rate
        }
    });
    let c = cfg(1e6);
    let out = run(c.clone(), &mut dut);
    let ndr = out.ndr.rate_fps.expect("an NDR");
    assert!(ndr <= 500_000.0 && ndr >= 500_000.0 * (1.0 - c.resolution), "NDR {ndr}");
    assert!(out.ndr.converged && out.pdr.converged);
    assert!(out.trials.len() <= trial_bound(&c) + 6, "{} trials", out.trials.len());
}

#[test]
fn a_search_that_runs_out_of_trials_says_so() {
    let mut dut = SimDut::new(2e6, knee_curve(600_000.0, 1.0));
    let mut c = cfg(1e6);
    c.max_trials = 3;
    let out = run(c, &mut dut);
    assert_eq!(out.trials.len(), 3);
    assert!(!out.ndr.converged);
}

#[test]
fn progress_sees_every_trial_and_the_interval_narrows() {
    let mut dut = SimDut::new(2e6, knee_curve(600_000.0, 1.0));
    let mut widths = Vec::new();
    let out = search::run(cfg(1e6), &mut dut, &mut |s, _| {
        if let Some(("NDR", lo, hi)) = s.interval() {
            widths.push(hi - lo);
        }
    })
    .expect("search");
    assert!(widths.len() <= out.trials.len());
    assert!(widths.windows(2).all(|w| w[1] <= w[0]), "{widths:?}");
}

/// A search that starts from the interval `earlier` found.
fn warm(mut c: SearchConfig, earlier: &search::SearchOutcome) -> SearchConfig {
    c.expected_ndr = earlier.ndr.rate_fps.zip(earlier.ndr.upper_fps);
    c.expected_pdr = earlier.pdr.rate_fps.zip(earlier.pdr.upper_fps);
    c
}

#[test]
fn a_repeat_that_agrees_with_the_one_before_takes_two_full_trials_a_goal() {
    let c = cfg(1e6);
    let cold = run(c.clone(), &mut SimDut::new(2e6, knee_curve(600_000.0, 1.0)));
    let again = run(warm(c, &cold), &mut SimDut::new(2e6, knee_curve(600_000.0, 1.0)));
    assert_eq!((again.ndr.rate_fps, again.pdr.rate_fps), (cold.ndr.rate_fps, cold.pdr.rate_fps));
    assert!(again.ndr.converged && again.pdr.converged);
    assert!(again.trials.len() <= 4, "{:?}", again.trials);
    assert!(again.trials.iter().all(|t| t.full));
    assert!(cold.trials.len() > 2 * again.trials.len(), "cold {} warm {}", cold.trials.len(), again.trials.len());
}

#[test]
fn a_repeat_on_a_device_that_changed_finds_the_new_rate() {
    let c = cfg(1e6);
    let cold = run(c.clone(), &mut SimDut::new(2e6, knee_curve(600_000.0, 1.0)));
    for knee in [300_000.0, 601_000.0, 900_000.0] {
        let out = run(warm(c.clone(), &cold), &mut SimDut::new(2e6, knee_curve(knee, 1.0)));
        let ndr = out.ndr.rate_fps.expect("an NDR");
        assert!(ndr <= knee && ndr >= knee * (1.0 - c.resolution), "knee {knee}: NDR {ndr}");
        assert!(out.trials.len() <= trial_bound(&c) + 4, "knee {knee}: {} trials", out.trials.len());
    }
}

#[test]
fn a_repeat_on_a_device_that_moved_a_little_steps_out_at_full_length() {
    let c = cfg(1e6);
    let cold = run(c.clone(), &mut SimDut::new(2e6, knee_curve(600_000.0, 1.0)));
    for knee in [580_000.0, 590_000.0, 612_000.0, 630_000.0] {
        let out = run(warm(c.clone(), &cold), &mut SimDut::new(2e6, knee_curve(knee, 1.0)));
        let ndr = out.ndr.rate_fps.expect("an NDR");
        assert!(ndr <= knee && ndr >= knee * (1.0 - c.resolution), "knee {knee}: NDR {ndr}");
        assert!(out.trials.iter().all(|t| t.full), "knee {knee}: {:?}", out.trials);
        assert!(
            out.trials.len() < cold.trials.len(),
            "knee {knee}: {} trials, cold {}",
            out.trials.len(),
            cold.trials.len()
        );
    }
}

#[test]
fn an_expected_interval_outside_the_range_is_ignored() {
    let mut c = cfg(1e6);
    c.expected_ndr = Some((2e6, 3e6));
    c.expected_pdr = Some((5e5, 4e5));
    let with = run(c.clone(), &mut SimDut::new(2e6, knee_curve(400_000.0, 1.0)));
    let without = run(cfg(1e6), &mut SimDut::new(2e6, knee_curve(400_000.0, 1.0)));
    assert_eq!(with.trials, without.trials);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Whatever interval a repeat expects, right or wrong: NDR within the
    /// resolution of the knee, never a rate that lost, in bounded trials.
    #[test]
    fn an_expected_interval_never_decides_the_result(
        knee in 2_000.0f64..1e6,
        lo in 1_000.0f64..1e6,
        width in 0.0001f64..0.5,
        pdr_lo in 1_000.0f64..1e6,
    ) {
        let mut c = cfg(1e6);
        c.expected_ndr = Some((lo, (lo * (1.0 + width)).min(1e6)));
        c.expected_pdr = Some((pdr_lo, (pdr_lo * (1.0 + width)).min(1e6)));
        let out = run(c.clone(), &mut SimDut::new(2e6, knee_curve(knee, 1.0)));
        let ndr = out.ndr.rate_fps.expect("an NDR");
        prop_assert!(ndr <= knee && ndr >= knee * (1.0 - c.resolution) - 1e-6, "NDR {} knee {}", ndr, knee);
        for t in out.trials.iter().filter(|t| t.offered_fps <= ndr) {
            prop_assert!(t.valid && t.lost() == 0, "trial {:?} at or below NDR {}", t, ndr);
        }
        prop_assert!(out.trials.len() <= trial_bound(&c) + 4, "{} trials", out.trials.len());
    }

    /// Monotone knees anywhere in the range: NDR within the resolution of
    /// the knee, in a bounded number of trials.
    #[test]
    fn ndr_within_resolution_of_any_knee(knee in 2_000.0f64..1e6, slope in 0.01f64..1.0, res in 0.002f64..0.05) {
        let mut c = cfg(1e6);
        c.resolution = res;
        let mut dut = SimDut::new(2e6, knee_curve(knee, slope));
        let out = run(c.clone(), &mut dut);
        let ndr = out.ndr.rate_fps.expect("an NDR");
        prop_assert!(ndr <= knee && ndr >= knee * (1.0 - res) - 1e-6, "NDR {} knee {}", ndr, knee);
        prop_assert!(out.pdr.rate_fps.expect("a PDR") >= ndr);
        prop_assert!(out.trials.len() <= trial_bound(&c), "{} trials", out.trials.len());
    }

    /// Any loss curve at all, noisy or not: no rate at which a trial lost a
    /// frame (or was invalid) is reported as NDR, and no trial at or below
    /// the reported NDR lost one.
    #[test]
    fn ndr_never_a_rate_that_lost(
        points in proptest::collection::vec(0.0f64..0.02, 2..12),
        zero_below in 0.0f64..1.2e6,
        gen_max in 1e5f64..2e6,
        noisy in any::<u64>(),
    ) {
        let curve = move |rate: f64, full: bool| {
            if rate <= zero_below { return 0.0; }
            // Piecewise-constant noise keyed by the rate and the trial length.
            let k = (rate as u64 / 997).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ noisy ^ u64::from(full);
            points[(k % points.len() as u64) as usize]
        };
        let mut dut = SimDut::new(gen_max, curve);
        let out = run(cfg(1e6), &mut dut);
        if let Some(ndr) = out.ndr.rate_fps {
            for t in &out.trials {
                if t.offered_fps <= ndr {
                    prop_assert!(t.valid && t.lost() == 0, "trial {:?} at or below NDR {}", t, ndr);
                }
            }
        }
        if let Some(pdr) = out.pdr.rate_fps {
            for t in out.trials.iter().filter(|t| t.offered_fps <= pdr) {
                prop_assert!(t.passes(out.pdr.loss_goal), "trial {:?} at or below PDR {}", t, pdr);
            }
        }
        prop_assert!(out.trials.len() <= 40);
    }
}
