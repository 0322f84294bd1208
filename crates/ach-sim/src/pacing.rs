//! Pacing: how long a plan's moves take on a live cluster, and when its controller plans next.
//!
//! The paper's model switches a plan at once: the moves planned at step `t` route the requests
//! of step `t + 1`, and the algorithm plans again at every step. A live rebalance loop is
//! slower: its control step reads the telemetry and plans, then runs the plan's migrations one
//! job after another, then waits before the next control step; a slot serves from its new
//! owner only once its job has ended. A series' `[[pacing]]` entries (opt-in; without them a
//! series is exactly the paper's) give the algorithms they name that clock, in seconds:
//!
//! - A control step happens at time `T` (the first at `step_s`, the end of step 0). It plans
//!   on the loads of the step `T` falls in the second half of or the first half after, that
//!   is at step `t` with `(t + 0.5) step_s <= T < (t + 1.5) step_s` (at a step boundary it
//!   plans on the step that just ended, as the instant model does).
//! - Its jobs run one after another from `T + control_s`: one per (source, target) pair in the
//!   order of each pair's first move (the live loop's groups), or one per token in that order;
//!   a job takes `job_s + key_s * keys`, its keys being its tokens' arcs times the series'
//!   keys.
//! - A job's moves switch at the step boundary nearest to its end: step `t` routes with the
//!   moves of every job that ended by `(t + 0.5) step_s`, and the algorithm is told of them
//!   then ([`ach_control::Balancer::confirm`]).
//! - The next control step is at the end of the last job plus `wait_s` (`T + control_s +
//!   wait_s` for a plan without moves), and never before the jobs' moves have switched.
//!
//! With `control_s = job_s = key_s = 0` and `wait_s = step_s` this is the instant model, step
//! for step (a test holds the two to the same records).
//!
//! # Example
//!
//! ACH's control step takes 0.2 s besides its jobs, then waits 1 s; a job (one per source and
//! target) takes 0.5 s plus 0.3 ms per key:
//!
//! ```
//! use ach_sim::{Profile, RunSpec, SeriesConfig, simulate};
//!
//! let series = SeriesConfig::from_toml(
//!     r#"
//!     name = "paced"
//!     runs = 1
//!     steps = 40
//!     warmup = 4
//!     tokens = 200
//!     keys = 2000
//!     algorithms = ["Static-W", "ACH"]
//!
//!     [[pacing]]
//!     algorithms = ["ACH"]
//!     step_s = 1.0
//!     control_s = 0.2
//!     wait_s = 1.0
//!     job_s = 0.5
//!     key_s = 0.0003
//!     jobs = "source-target"
//!     "#,
//! )
//! .unwrap();
//! series.validate(Profile::Paper).unwrap();
//! let record = simulate(&RunSpec { config: &series, point: None, profile: Profile::Paper, run_index: 0 })
//!     .unwrap();
//! // ACH moves, and a plan with moves takes at least 1.7 s: never two in a row.
//! let m = &record.algorithms[1].m_trace;
//! assert!(m.iter().any(|&m| m > 0.0));
//! assert!(m.windows(2).all(|w| w[0] == 0.0 || w[1] == 0.0));
//! ```

use std::collections::VecDeque;

use ach_control::Plan;
use ach_ring::{TokenMove, TokenRing};
use serde::{Deserialize, Serialize};

/// The clock of the algorithms a series paces (see the module documentation).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pacing {
    /// The algorithms paced this way: names of the series' algorithms, each in at most one
    /// entry.
    pub algorithms: Vec<String>,
    /// Seconds one step of the series stands for (> 0).
    pub step_s: f64,
    /// Seconds from the start of a control step to its first job: reading the telemetry and
    /// planning (>= 0).
    pub control_s: f64,
    /// Seconds from the end of a control step's last job to the next control step (>= 0).
    pub wait_s: f64,
    /// Seconds one job takes besides its keys (>= 0).
    pub job_s: f64,
    /// Seconds a job takes per key it moves (>= 0).
    pub key_s: f64,
    /// How a plan's moves form jobs.
    pub jobs: JobGrouping,
}

/// How a plan's moves form the jobs that carry them out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum JobGrouping {
    /// One job per (source, target) pair, in the order of each pair's first move, its slots
    /// switching together (Valkey's `CLUSTER MIGRATESLOTS`, one per group).
    SourceTarget,
    /// One job per token, in the order of the pairs (`redis-cli`, which moves one slot at a
    /// time).
    Token,
}

impl Pacing {
    /// The rule one entry breaks, as (field, value, rule); `index` is the entry's and
    /// `algorithms` the series'.
    pub(crate) fn check(
        &self,
        index: usize,
        algorithms: &[String],
    ) -> Result<(), (String, String, String)> {
        let field = |name: &str| format!("pacing[{index}].{name}");
        if !(self.step_s.is_finite() && self.step_s > 0.0) {
            return Err((
                field("step_s"),
                self.step_s.to_string(),
                "must be > 0".into(),
            ));
        }
        for (name, value) in [
            ("control_s", self.control_s),
            ("wait_s", self.wait_s),
            ("job_s", self.job_s),
            ("key_s", self.key_s),
        ] {
            if !(value.is_finite() && value >= 0.0) {
                return Err((field(name), value.to_string(), "must be >= 0".into()));
            }
        }
        if self.algorithms.is_empty() {
            return Err((
                field("algorithms"),
                "[]".into(),
                "must name an algorithm".into(),
            ));
        }
        for (k, name) in self.algorithms.iter().enumerate() {
            if !algorithms.contains(name) {
                return Err((
                    format!("pacing[{index}].algorithms[{k}]"),
                    format!("{name:?}"),
                    "must be one of the series' algorithms".into(),
                ));
            }
        }
        Ok(())
    }
}

/// One job of a plan: when it ends, and the moves it switches.
#[derive(Debug)]
struct Job {
    ends_s: f64,
    moves: Vec<TokenMove>,
}

/// A paced arm's clock: when its next control step is, and its jobs that have not switched.
#[derive(Debug)]
pub(crate) struct Pacer {
    pacing: Pacing,
    keys: f64,
    next_control_s: f64,
    jobs: VecDeque<Job>,
}

impl Pacer {
    /// The clock of an arm paced by `pacing` in a series of `keys` keys.
    pub(crate) fn new(pacing: &Pacing, keys: usize) -> Pacer {
        Pacer {
            pacing: pacing.clone(),
            keys: keys as f64,
            next_control_s: pacing.step_s,
            jobs: VecDeque::new(),
        }
    }

    /// Whether the arm makes a control step at step `t`.
    pub(crate) fn plans_at(&self, t: u32) -> bool {
        self.jobs.is_empty() && self.next_control_s < (f64::from(t) + 1.5) * self.pacing.step_s
    }

    /// Schedules the jobs of `plan`, made at step `t` on `ring`, and the next control step.
    pub(crate) fn schedule(&mut self, t: u32, plan: &Plan, ring: &TokenRing) {
        let step_s = self.pacing.step_s;
        let control_at = self.next_control_s.max((f64::from(t) + 0.5) * step_s);
        let mut clock = control_at + self.pacing.control_s;
        for moves in self.jobs_of(plan) {
            let arcs: f64 = moves.iter().map(|mv| ring.arcs()[mv.token]).sum();
            clock += self.pacing.job_s + self.pacing.key_s * arcs * self.keys;
            self.jobs.push_back(Job {
                ends_s: clock,
                moves,
            });
        }
        self.next_control_s = clock + self.pacing.wait_s;
    }

    /// The moves of `plan` (those that change an owner) as jobs, in order.
    fn jobs_of(&self, plan: &Plan) -> Vec<Vec<TokenMove>> {
        let mut groups: Vec<Vec<TokenMove>> = Vec::new();
        for mv in plan.moves.iter().filter(|mv| mv.from != mv.to) {
            let pair =
                |group: &&mut Vec<TokenMove>| group[0].from == mv.from && group[0].to == mv.to;
            match groups.iter_mut().find(pair) {
                Some(group) => group.push(*mv),
                None => groups.push(vec![*mv]),
            }
        }
        match self.pacing.jobs {
            JobGrouping::SourceTarget => groups,
            JobGrouping::Token => groups.into_iter().flatten().map(|mv| vec![mv]).collect(),
        }
    }

    /// The moves of the jobs that have ended by the time step `t`'s requests are routed, as
    /// one plan on `ring` (moves in token order); `None` when no job has.
    pub(crate) fn take_switched(&mut self, t: u32, ring: &TokenRing) -> Option<Plan> {
        let due_s = (f64::from(t) + 0.5) * self.pacing.step_s;
        let mut moves = Vec::new();
        while let Some(job) = self.jobs.front().filter(|job| job.ends_s <= due_s) {
            moves.extend_from_slice(&job.moves);
            self.jobs.pop_front();
        }
        (!moves.is_empty()).then(|| Plan::from_moves(ring, moves))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ach_ring::NodeId;

    fn pacing(jobs: JobGrouping) -> Pacing {
        Pacing {
            algorithms: vec!["ACH".into()],
            step_s: 1.0,
            control_s: 0.2,
            wait_s: 1.0,
            job_s: 0.5,
            key_s: 0.002,
            jobs,
        }
    }

    fn ring() -> TokenRing {
        let positions: Vec<f64> = (0..8).map(|i| f64::from(i) / 8.0).collect();
        TokenRing::round_robin(positions, 2).unwrap()
    }

    fn mv(token: usize, from: u32, to: u32) -> TokenMove {
        TokenMove {
            token,
            from: NodeId(from),
            to: NodeId(to),
        }
    }

    #[test]
    fn jobs_run_one_after_another_and_switch_half_a_step_after_they_end() {
        let ring = ring();
        let mut pacer = Pacer::new(&pacing(JobGrouping::SourceTarget), 800);
        assert!(pacer.plans_at(0));
        // Tokens 0 and 2 go from node 0 to 1, token 1 from 1 to 0: two jobs, of 200 and 100
        // keys (arcs of 1/8 of 800 keys each).
        let plan = Plan::from_moves(&ring, vec![mv(0, 0, 1), mv(1, 1, 0), mv(2, 0, 1)]);
        pacer.schedule(0, &plan, &ring);
        // The control step is at 1.0 s; the jobs end at 1.2 + 0.5 + 0.4 = 2.1 s and at
        // 2.1 + 0.5 + 0.2 = 2.8 s; the next control step is at 3.8 s.
        let ends: Vec<f64> = pacer.jobs.iter().map(|job| job.ends_s).collect();
        assert!(
            (ends[0] - 2.1).abs() < 1e-12 && (ends[1] - 2.8).abs() < 1e-12,
            "{ends:?}"
        );
        assert!(!pacer.plans_at(1));
        assert_eq!(pacer.take_switched(1, &ring), None);
        let first = pacer.take_switched(2, &ring).unwrap();
        assert_eq!(first.moves, [mv(0, 0, 1), mv(2, 0, 1)]);
        assert!(!pacer.plans_at(2), "a job is still running");
        let second = pacer.take_switched(3, &ring).unwrap();
        assert_eq!(second.moves, [mv(1, 1, 0)]);
        assert!(pacer.plans_at(3), "3.8 s is in step 3's window [3.5, 4.5)");
    }

    #[test]
    fn one_job_per_token_keeps_the_order_of_the_pairs() {
        let ring = ring();
        let mut pacer = Pacer::new(&pacing(JobGrouping::Token), 800);
        let plan = Plan::from_moves(&ring, vec![mv(0, 0, 1), mv(1, 1, 0), mv(2, 0, 1)]);
        pacer.schedule(0, &plan, &ring);
        let tokens: Vec<usize> = pacer.jobs.iter().map(|job| job.moves[0].token).collect();
        assert_eq!(tokens, [0, 2, 1]);
    }

    #[test]
    fn a_plan_without_moves_waits_for_the_next_control_step() {
        let ring = ring();
        let mut pacer = Pacer::new(&pacing(JobGrouping::SourceTarget), 800);
        pacer.schedule(0, &Plan::none(), &ring);
        // 1.0 + 0.2 + 1.0 = 2.2 s: step 1's window is [1.5, 2.5).
        assert!(pacer.plans_at(1));
        assert!(!pacer.plans_at(0));
    }

    #[test]
    fn every_rule_names_its_field() {
        let algorithms = vec!["ACH".to_string()];
        let mut bad = pacing(JobGrouping::Token);
        bad.key_s = -1.0;
        assert_eq!(bad.check(2, &algorithms).unwrap_err().0, "pacing[2].key_s");
        let mut bad = pacing(JobGrouping::Token);
        bad.algorithms = vec!["Nope".into()];
        let error = bad.check(0, &algorithms).unwrap_err();
        assert_eq!(error.0, "pacing[0].algorithms[0]");
        assert!(error.2.contains("series' algorithms"));
        let mut bad = pacing(JobGrouping::Token);
        bad.step_s = 0.0;
        assert_eq!(bad.check(0, &algorithms).unwrap_err().0, "pacing[0].step_s");
        assert_eq!(pacing(JobGrouping::Token).check(0, &algorithms), Ok(()));
    }
}
