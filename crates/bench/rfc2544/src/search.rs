//! The NDR/PDR search, sans-IO.
//!
//! # Algorithm
//!
//! RFC 2544 section 26.1 defines throughput as the highest offered rate at
//! which a trial loses no frame; everyone finds it by bisection. Like FD.io
//! CSIT's MLRsearch (draft-ietf-bmwg-mlrsearch), one search serves two loss
//! goals at once, because every trial tells something about both:
//!
//! * **NDR** (non-drop rate): loss ratio 0;
//! * **PDR** (partial-drop rate): loss ratio at most [`SearchConfig::pdr_loss`]
//!   (default 0.5 %).
//!
//! For each goal the search keeps no state but the list of trials: the
//! *upper bound* is the lowest rate at which any trial failed the goal, the
//! *lower bound* the highest rate below it at which a trial passed. A trial
//! fails a goal when it lost more than the goal allows **or when it was
//! invalid**: the generator achieved less than [`SearchConfig::min_achieved`]
//! (99 %) of the offered rate, or sent nothing. An invalid trial is never a
//! pass.
//!
//! 1. The first trial runs at [`SearchConfig::max_fps`] (the line rate or
//!    the generator's ceiling).
//! 2. While the interval `(upper - lower) / upper` is wider than
//!    [`SearchConfig::resolution`], the next trial bisects it: a short trial
//!    ([`SearchConfig::short_trial`]) while the interval is wider than
//!    [`SearchConfig::short_above`], a full-length one
//!    ([`SearchConfig::final_trial`]) after.
//! 3. Once narrow, the lower bound is confirmed by a full-length trial if
//!    only a short one passed there; should it fail, it becomes the new upper
//!    bound and the search continues below it, with full-length trials only
//!    (short passes are disproven on this device) from the highest
//!    full-length pass or `min_fps`.
//!
//! With an *expected interval* for a goal ([`SearchConfig::expected_ndr`],
//! [`SearchConfig::expected_pdr`]: the bounds an earlier search of the same
//! device and frame size found, as MLRsearch reuses earlier results), the
//! search first runs full-length trials at its lower end and, if that
//! passed, at its upper end. A repeat that agrees with the earlier search
//! is then done in two trials a goal. One on a device that moved steps
//! away from the interval at full length, by its width doubled each time,
//! until a pass and a failure bracket the rate again (or the step passes
//! [`SearchConfig::short_above`]), and goes on by the rules above from the
//! bounds those trials gave. An expectation saves trials but never decides
//! a result: the bounds come from trials alone.
//!
//! So the rate reported for a goal always passed a full-length valid trial,
//! and no trial at that rate or below it failed (the upper bound is the
//! lowest failure). NDR is never a rate at which a trial lost a frame.
//!
//! # Cost
//!
//! On a monotone device each goal needs about `log2(1 / resolution)` trials
//! plus one confirmation; NDR and PDR share the trials that land below
//! both. [`SearchConfig::max_trials`] bounds a noisy device; a search that
//! reaches it reports its confirmed bounds with `converged: false`.
//! [`SearchConfig::estimate`] gives the expected wall time of one search.

use std::time::Duration;

use serde::Serialize;

/// Default relative resolution: the search stops when
/// `(upper - lower) / upper <= 0.01`, so the reported rate is within 1 % of
/// the true one (on a monotone device). 7 bisections from the maximum.
pub const DEFAULT_RESOLUTION: f64 = 0.01;

/// Default PDR loss goal: 0.5 % (MLRsearch, TRex).
pub const DEFAULT_PDR_LOSS: f64 = 0.005;

/// A trial in which the generator achieved less than this share of the
/// offered rate is invalid.
pub const DEFAULT_MIN_ACHIEVED: f64 = 0.99;

/// Search parameters.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SearchConfig {
    /// Highest rate tried (frames/s), and the first: the line rate or the
    /// generator's ceiling.
    pub max_fps: f64,
    /// Lowest rate tried (frames/s). A device that fails here gets no NDR
    /// (`rate: None`). Default 1000.
    pub min_fps: f64,
    /// Relative width of the final interval (default [`DEFAULT_RESOLUTION`]).
    pub resolution: f64,
    /// PDR's loss goal (default [`DEFAULT_PDR_LOSS`]).
    pub pdr_loss: f64,
    /// Validity threshold (default [`DEFAULT_MIN_ACHIEVED`]).
    pub min_achieved: f64,
    /// Length of a full trial (RFC 2544 section 24: at least 60 s, the default).
    #[serde(rename = "final_trial_s", serialize_with = "crate::json::secs")]
    pub final_trial: Duration,
    /// Length of a short trial (default 1 s, never longer than `final_trial`).
    #[serde(rename = "short_trial_s", serialize_with = "crate::json::secs")]
    pub short_trial: Duration,
    /// Short trials while the interval is relatively wider than this
    /// (default 0.1).
    pub short_above: f64,
    /// Wait after each trial, for queues to drain (RFC 2544: 2 s).
    #[serde(rename = "wait_s", serialize_with = "crate::json::secs")]
    pub wait: Duration,
    /// Learning frames before each trial (RFC 2544 section 23); their time.
    #[serde(rename = "learning_s", serialize_with = "crate::json::secs")]
    pub learning: Duration,
    /// Trials at most, for both goals together (default 40).
    pub max_trials: u32,
    /// `(lower, upper)` where an earlier search found NDR: tried first, at
    /// full length (default `None`). Ignored unless
    /// `min_fps <= lower < upper <= max_fps`.
    pub expected_ndr: Option<(f64, f64)>,
    /// The same for PDR.
    pub expected_pdr: Option<(f64, f64)>,
}

impl SearchConfig {
    /// The defaults above, searching up to `max_fps`.
    pub fn new(max_fps: f64) -> SearchConfig {
        SearchConfig {
            max_fps,
            min_fps: 1000.0,
            resolution: DEFAULT_RESOLUTION,
            pdr_loss: DEFAULT_PDR_LOSS,
            min_achieved: DEFAULT_MIN_ACHIEVED,
            final_trial: Duration::from_secs(60),
            short_trial: Duration::from_secs(1),
            short_above: 0.1,
            wait: Duration::from_secs(2),
            learning: Duration::from_millis(100),
            max_trials: 40,
            expected_ndr: None,
            expected_pdr: None,
        }
    }

    /// Checks the values; the error names the field.
    pub fn validate(&self) -> Result<(), SearchError> {
        let bad = |field: &'static str, why: String| Err(SearchError::Config { field, why });
        if !(self.max_fps.is_finite() && self.max_fps > 0.0) {
            return bad("max_fps", format!("must be positive, not {}", self.max_fps));
        }
        if !(self.min_fps.is_finite() && self.min_fps > 0.0 && self.min_fps < self.max_fps) {
            return bad(
                "min_fps",
                format!("must be positive and below max_fps ({}), not {}", self.max_fps, self.min_fps),
            );
        }
        if !(self.resolution > 0.0 && self.resolution < 1.0) {
            return bad("resolution", format!("must be in (0, 1), not {}", self.resolution));
        }
        if !(self.pdr_loss >= 0.0 && self.pdr_loss < 1.0) {
            return bad("pdr_loss", format!("must be in [0, 1), not {}", self.pdr_loss));
        }
        if !(self.min_achieved > 0.0 && self.min_achieved <= 1.0) {
            return bad("min_achieved", format!("must be in (0, 1], not {}", self.min_achieved));
        }
        if self.final_trial.is_zero() || self.short_trial.is_zero() {
            return bad("final_trial", "trials must last longer than 0 s".into());
        }
        if self.max_trials == 0 {
            return bad("max_trials", "must be at least 1".into());
        }
        Ok(())
    }

    fn short(&self) -> Duration {
        self.short_trial.min(self.final_trial)
    }

    /// Expected trials of one search on a monotone device: (short, full).
    /// With both expected intervals, and a device that agrees with them: two
    /// full-length trials a goal.
    pub fn expected_trials(&self) -> (u32, u32) {
        if self.expected_ndr.is_some() && self.expected_pdr.is_some() {
            return (0, 4);
        }
        let halvings = |from: f64, to: f64| if from <= to { 0 } else { (from / to).log2().ceil() as u32 };
        let start = 1.0 - self.min_fps / self.max_fps;
        let short = 1 + halvings(start, self.short_above.max(self.resolution));
        let full = halvings(self.short_above.max(self.resolution), self.resolution) + 2;
        // NDR and PDR each narrow their own interval once they separate.
        (short + 1, full * 2)
    }

    /// Expected wall time of one search (learning, trial and wait per trial).
    pub fn estimate(&self) -> Duration {
        let (short, full) = self.expected_trials();
        let per = |d: Duration| d + self.wait + self.learning;
        per(self.short()) * short + per(self.final_trial) * full
    }
}

/// What went wrong.
#[derive(Debug, thiserror::Error)]
pub enum SearchError {
    /// A configuration value is out of range.
    #[error("search {field}: {why}")]
    Config { field: &'static str, why: String },
    /// The trial runner failed.
    #[error("trial at {offered_fps:.0} frames/s: {source}")]
    Trial { offered_fps: f64, source: Box<dyn std::error::Error + Send + Sync> },
}

/// A trial to run.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct TrialSpec {
    /// Offered rate, frames/s.
    pub offered_fps: f64,
    /// Trial length.
    #[serde(rename = "duration_s", serialize_with = "crate::json::secs")]
    pub duration: Duration,
    /// Full length (counts as a confirmation) or short.
    pub full: bool,
}

/// What a trial measured. `sent` is what the generator put on the wire,
/// `received` what the receiver counted of the frames sent in this trial
/// (duplicates and foreign frames excluded).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct TrialOutcome {
    /// Frames sent.
    pub sent: u64,
    /// Frames received.
    pub received: u64,
    /// How long the generator took to send them, seconds.
    pub duration_s: f64,
}

/// A trial as recorded: what was asked and what came of it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct TrialRecord {
    /// Offered rate, frames/s.
    pub offered_fps: f64,
    /// Rate the generator achieved (`sent / duration_s`).
    pub achieved_fps: f64,
    /// Frames sent.
    pub sent: u64,
    /// Frames received.
    pub received: u64,
    /// `(sent - received) / sent` (0 when nothing was lost, 1 when nothing was sent).
    pub loss_ratio: f64,
    /// Trial length, seconds.
    pub duration_s: f64,
    /// Full-length trial.
    pub full: bool,
    /// The generator achieved at least `min_achieved` of the offered rate.
    pub valid: bool,
}

impl TrialRecord {
    /// Classifies a trial's outcome against the validity threshold.
    pub fn new(spec: &TrialSpec, out: &TrialOutcome, min_achieved: f64) -> TrialRecord {
        let achieved_fps = if out.duration_s > 0.0 { out.sent as f64 / out.duration_s } else { 0.0 };
        // Enough frames for the planned length at the offered rate, sent
        // fast enough: a generator that stalls is caught either way.
        let planned = spec.offered_fps * spec.duration.as_secs_f64();
        let valid = out.sent > 0
            && achieved_fps >= spec.offered_fps * min_achieved
            && out.sent as f64 >= planned * min_achieved;
        let lost = out.sent.saturating_sub(out.received);
        let loss_ratio = if out.sent == 0 { 1.0 } else { lost as f64 / out.sent as f64 };
        TrialRecord {
            offered_fps: spec.offered_fps,
            achieved_fps,
            sent: out.sent,
            received: out.received,
            loss_ratio,
            duration_s: out.duration_s,
            full: spec.full,
            valid,
        }
    }

    /// Lost frames.
    pub fn lost(&self) -> u64 {
        self.sent.saturating_sub(self.received)
    }

    /// The trial passes a loss goal: valid, and lost no more than allowed
    /// (a goal of 0 allows no frame at all).
    pub fn passes(&self, goal: f64) -> bool {
        self.valid && if goal == 0.0 { self.lost() == 0 } else { self.loss_ratio <= goal }
    }
}

/// One goal's result.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct GoalResult {
    /// Loss goal (0 for NDR).
    pub loss_goal: f64,
    /// Highest rate that passed a full-length valid trial below every
    /// failure; `None` when none did (the device fails at `min_fps`).
    pub rate_fps: Option<f64>,
    /// Lowest rate that failed (a loss above the goal or an invalid trial);
    /// `None` when nothing failed up to `max_fps`.
    pub upper_fps: Option<f64>,
    /// The interval reached the resolution (false when `max_trials` ran out).
    pub converged: bool,
}

/// A finished search.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SearchOutcome {
    /// Zero-loss goal.
    pub ndr: GoalResult,
    /// Partial-drop goal.
    pub pdr: GoalResult,
    /// Every trial, in order.
    pub trials: Vec<TrialRecord>,
}

/// What to do next.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Run this trial and hand its outcome to [`Search::record`].
    Trial(TrialSpec),
    /// The search is over.
    Done(SearchOutcome),
}

/// Where a goal stands: its bounds from the trials so far.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bounds {
    /// Lowest failing rate.
    pub upper: Option<f64>,
    /// Highest passing rate below `upper`: any trial length while short
    /// trials are trusted, full-length ones only after.
    pub lower: Option<f64>,
    /// Highest passing rate below `upper` among full-length trials.
    pub lower_full: Option<f64>,
    /// No full-length trial has failed at or below a rate a short trial
    /// passed; once one has, every further trial is full-length.
    pub short_trusted: bool,
}

/// The search state: the configuration and the trials so far.
#[derive(Debug, Clone)]
pub struct Search {
    cfg: SearchConfig,
    trials: Vec<TrialRecord>,
}

enum Next {
    Run(TrialSpec),
    Done(GoalResult),
}

impl Search {
    /// A search with a checked configuration.
    pub fn new(cfg: SearchConfig) -> Result<Search, SearchError> {
        cfg.validate()?;
        Ok(Search { cfg, trials: Vec::new() })
    }

    /// The configuration.
    pub fn config(&self) -> &SearchConfig {
        &self.cfg
    }

    /// The trials so far.
    pub fn trials(&self) -> &[TrialRecord] {
        &self.trials
    }

    /// Records the outcome of the trial [`Search::next_step`] asked for.
    pub fn record(&mut self, spec: &TrialSpec, out: &TrialOutcome) -> TrialRecord {
        let rec = TrialRecord::new(spec, out, self.cfg.min_achieved);
        self.trials.push(rec);
        rec
    }

    /// A goal's bounds from the trials so far.
    pub fn bounds(&self, goal: f64) -> Bounds {
        let upper = self.trials.iter().filter(|t| !t.passes(goal)).map(|t| t.offered_fps).reduce(f64::min);
        let below = |t: &&TrialRecord| t.passes(goal) && upper.is_none_or(|u| t.offered_fps < u);
        let lower_full = self.trials.iter().filter(below).filter(|t| t.full).map(|t| t.offered_fps).reduce(f64::max);
        // A full-length failure at or below a short pass disproves short
        // trials on this device: from then on only full ones count.
        let full_fail =
            self.trials.iter().filter(|t| t.full && !t.passes(goal)).map(|t| t.offered_fps).reduce(f64::min);
        let short_pass =
            self.trials.iter().filter(|t| !t.full && t.passes(goal)).map(|t| t.offered_fps).reduce(f64::max);
        let short_trusted = match (full_fail, short_pass) {
            (Some(f), Some(s)) => s < f,
            _ => true,
        };
        let lower = if short_trusted {
            self.trials.iter().filter(below).map(|t| t.offered_fps).reduce(f64::max)
        } else {
            lower_full
        };
        Bounds { upper, lower, lower_full, short_trusted }
    }

    fn spec(&self, rate: f64, full: bool) -> TrialSpec {
        let duration = if full { self.cfg.final_trial } else { self.cfg.short() };
        TrialSpec { offered_fps: rate, duration, full: full || duration == self.cfg.final_trial }
    }

    /// The expected interval of a goal, when it is a usable one.
    fn expected(&self, goal: f64) -> Option<(f64, f64)> {
        let c = &self.cfg;
        let interval = if goal == 0.0 { c.expected_ndr } else { c.expected_pdr };
        interval.filter(|&(lo, hi)| c.min_fps <= lo && lo < hi && hi <= c.max_fps)
    }

    /// A full-length trial the expected interval asks for, while the
    /// trials so far have not settled it: its lower end first, its upper
    /// end once the lower one passed. Should the device have moved, the
    /// search steps away from the interval at full length, by the
    /// interval's width doubled each time (up while everything passes, down
    /// while everything fails), until a pass and a failure bracket the rate
    /// or the step grows past [`SearchConfig::short_above`]; from there the
    /// rules of a cold search go on.
    fn next_expected(&self, goal: f64, b: &Bounds) -> Option<TrialSpec> {
        let c = &self.cfg;
        let (lo, hi) = self.expected(goal)?;
        let full_at = |rate: f64| self.trials.iter().any(|t| t.full && t.offered_fps == rate);
        if !full_at(lo) {
            return b.upper.is_none_or(|u| lo < u).then(|| self.spec(lo, true));
        }
        let step = (hi - lo).max(lo * c.resolution);
        let within = |rate: f64| (rate - lo).abs() <= c.short_above * lo && rate > c.min_fps && rate < c.max_fps;
        if b.lower_full.is_some_and(|l| l >= lo) {
            // The lower end passed: up to the upper end, then beyond it
            // while nothing has failed.
            if b.upper.is_some() {
                return None;
            }
            let above = self.trials.iter().filter(|t| t.full && t.offered_fps > lo).count() as i32;
            let rate = if above == 0 { hi } else { lo + step * 2f64.powi(above) };
            return (above == 0 || within(rate)).then(|| self.spec(rate, true));
        }
        // The lower end failed: down while nothing passes below the lowest
        // failure.
        if b.lower_full.is_some() || b.lower.is_some() {
            return None;
        }
        let at_or_below = self.trials.iter().filter(|t| t.full && t.offered_fps <= lo).count() as i32;
        let rate = lo - step * 2f64.powi(at_or_below);
        within(rate).then(|| self.spec(rate, true))
    }

    fn next_for(&self, goal: f64) -> Next {
        let c = &self.cfg;
        let b = self.bounds(goal);
        let done = |rate: Option<f64>, converged: bool| {
            Next::Done(GoalResult { loss_goal: goal, rate_fps: rate, upper_fps: b.upper, converged })
        };
        if let Some(spec) = self.next_expected(goal, &b) {
            return Next::Run(spec);
        }
        let Some(upper) = b.upper else {
            // Nothing failed yet: everything happens at max_fps.
            return match (b.lower_full, b.lower) {
                (Some(full), _) if full >= c.max_fps => done(Some(full), true),
                (_, Some(any)) if any >= c.max_fps => Next::Run(self.spec(c.max_fps, true)),
                _ => Next::Run(self.spec(c.max_fps, false)),
            };
        };
        if upper <= c.min_fps {
            return done(None, true);
        }
        let lower = b.lower.unwrap_or(c.min_fps);
        let width = (upper - lower) / upper;
        if width > c.resolution {
            let full = width <= c.short_above || !b.short_trusted;
            return Next::Run(self.spec((upper + lower) / 2.0, full));
        }
        match b.lower_full {
            Some(full) if full >= lower => done(Some(full), true),
            _ => Next::Run(self.spec(lower, true)),
        }
    }

    fn goal_now(&self, goal: f64) -> GoalResult {
        let b = self.bounds(goal);
        GoalResult { loss_goal: goal, rate_fps: b.lower_full, upper_fps: b.upper, converged: false }
    }

    /// The next trial, or the result. NDR is searched first, then PDR
    /// (which reuses every trial NDR ran).
    pub fn next_step(&self) -> Step {
        let out_of_trials = self.trials.len() >= self.cfg.max_trials as usize;
        let ndr = match self.next_for(0.0) {
            Next::Done(r) => r,
            Next::Run(_) if out_of_trials => self.goal_now(0.0),
            Next::Run(spec) => return Step::Trial(spec),
        };
        let pdr = match self.next_for(self.cfg.pdr_loss) {
            Next::Done(r) => r,
            Next::Run(_) if out_of_trials => self.goal_now(self.cfg.pdr_loss),
            Next::Run(spec) => return Step::Trial(spec),
        };
        Step::Done(SearchOutcome { ndr, pdr, trials: self.trials.clone() })
    }

    /// The goal being searched and its interval `(lower, upper)`, for a
    /// progress display: `None` when the search is done.
    pub fn interval(&self) -> Option<(&'static str, f64, f64)> {
        for (name, goal) in [("NDR", 0.0), ("PDR", self.cfg.pdr_loss)] {
            if let Next::Run(_) = self.next_for(goal) {
                let b = self.bounds(goal);
                return Some((name, b.lower.unwrap_or(self.cfg.min_fps), b.upper.unwrap_or(self.cfg.max_fps)));
            }
        }
        None
    }
}

/// Runs trials for a search. Implemented by the live harness and by the
/// tests' simulated devices.
pub trait TrialRunner {
    /// Runs one trial: learning frames, the trial at `spec.offered_fps` for
    /// `spec.duration`, then the wait after it.
    fn run_trial(&mut self, spec: &TrialSpec) -> Result<TrialOutcome, Box<dyn std::error::Error + Send + Sync>>;
}

/// Runs a whole search; `progress` sees each trial as it is recorded.
pub fn run(
    cfg: SearchConfig,
    runner: &mut dyn TrialRunner,
    progress: &mut dyn FnMut(&Search, &TrialRecord),
) -> Result<SearchOutcome, SearchError> {
    let mut search = Search::new(cfg)?;
    loop {
        match search.next_step() {
            Step::Done(out) => return Ok(out),
            Step::Trial(spec) => {
                let out = runner
                    .run_trial(&spec)
                    .map_err(|source| SearchError::Trial { offered_fps: spec.offered_fps, source })?;
                let rec = search.record(&spec, &out);
                progress(&search, &rec);
            }
        }
    }
}

/// Median, minimum and maximum of repeated searches' rates (`None` rates,
/// a device that failed at the floor, count as 0).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Spread {
    /// Median (the mean of the two middle values for an even count).
    pub median: f64,
    /// Minimum.
    pub min: f64,
    /// Maximum.
    pub max: f64,
}

impl Spread {
    /// The spread of `values`; `None` for no values.
    pub fn of(values: &[f64]) -> Option<Spread> {
        let mut v: Vec<f64> = values.iter().copied().filter(|x| !x.is_nan()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 };
        Some(Spread { median, min: v[0], max: v[n - 1] })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(rate: f64, secs: u64) -> TrialSpec {
        TrialSpec { offered_fps: rate, duration: Duration::from_secs(secs), full: true }
    }

    #[test]
    fn an_underachieving_trial_is_invalid_and_fails_every_goal() {
        let rec = TrialRecord::new(
            &spec(1_000_000.0, 1),
            &TrialOutcome { sent: 980_000, received: 980_000, duration_s: 1.0 },
            DEFAULT_MIN_ACHIEVED,
        );
        assert!(!rec.valid);
        assert_eq!(rec.loss_ratio, 0.0);
        assert!(!rec.passes(0.0) && !rec.passes(0.5));
    }

    #[test]
    fn a_trial_that_sent_nothing_is_invalid() {
        let rec = TrialRecord::new(&spec(1000.0, 1), &TrialOutcome { sent: 0, received: 0, duration_s: 0.0 }, 0.99);
        assert!(!rec.valid);
        assert_eq!(rec.loss_ratio, 1.0);
    }

    #[test]
    fn one_lost_frame_fails_ndr_but_passes_pdr() {
        let rec = TrialRecord::new(
            &spec(1_000_000.0, 1),
            &TrialOutcome { sent: 1_000_000, received: 999_999, duration_s: 1.0 },
            0.99,
        );
        assert!(rec.valid);
        assert!(!rec.passes(0.0));
        assert!(rec.passes(DEFAULT_PDR_LOSS));
    }

    #[test]
    fn spread_median_min_max() {
        assert_eq!(Spread::of(&[3.0, 1.0, 2.0]), Some(Spread { median: 2.0, min: 1.0, max: 3.0 }));
        assert_eq!(Spread::of(&[4.0, 1.0, 2.0, 3.0]).map(|s| s.median), Some(2.5));
        assert_eq!(Spread::of(&[]), None);
    }

    #[test]
    fn bad_configurations_name_their_field() {
        let mut c = SearchConfig::new(1e6);
        c.resolution = 0.0;
        assert!(matches!(c.validate(), Err(SearchError::Config { field: "resolution", .. })));
        let mut c = SearchConfig::new(1e6);
        c.min_fps = 2e6;
        assert!(matches!(c.validate(), Err(SearchError::Config { field: "min_fps", .. })));
    }

    #[test]
    fn the_estimate_counts_trials_waits_and_learning() {
        let mut c = SearchConfig::new(1e6);
        c.final_trial = Duration::from_secs(10);
        let (short, full) = c.expected_trials();
        assert!(short >= 2 && full >= 2);
        let per_short = Duration::from_secs(1) + c.wait + c.learning;
        let per_full = Duration::from_secs(10) + c.wait + c.learning;
        assert_eq!(c.estimate(), per_short * short + per_full * full);
    }
}
