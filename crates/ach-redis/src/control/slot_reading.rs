//! The controller's per-slot reading: keys per slot and, with per-slot statistics, each slot's
//! cpu and the counter that splits its owner's load among its slots; read at every
//! [`SlotStatsReading::every`]-th observation and reused between.

use std::time::Instant;

use crate::backend::{SlotFigures, SlotStatsReading};
use crate::cluster::{Cluster, Snapshot};
use crate::error::Error;
use crate::slot::SLOT_COUNT;
use crate::telemetry::{SlotCpuSample, SlotRateStatistic, SlotRateWindow};

/// Which per-slot counter splits a master's load among its slots (`--slot-split`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SlotSplit {
    /// `cpu-usec`: the time the slot's commands ran. Valkey adds each command's duration in
    /// whole microseconds, so a command shorter than one (a GET: about 0.2 to 0.3 us on
    /// average) mostly adds 0, and a slot with a request or two in the interval mostly reads
    /// no load at all.
    #[default]
    Cpu,
    /// `network-bytes-in` plus `network-bytes-out`: every request and reply counted to the
    /// byte, so every slot that was asked anything reads a load, in proportion to the bytes
    /// its requests and replies carried.
    Network,
}

impl SlotSplit {
    /// The name `--slot-split` takes.
    pub fn name(self) -> &'static str {
        match self {
            SlotSplit::Cpu => "cpu",
            SlotSplit::Network => "network",
        }
    }
}

/// One observation's per-slot reading.
pub(super) struct SlotReading {
    /// Keys per slot (and the raw counters).
    pub figures: SlotFigures,
    /// The cpu (cores) of every slot (`None` without per-slot statistics).
    pub cpu: Option<Vec<f64>>,
    /// What splits each master's load among its slots, per slot (`None` without per-slot
    /// statistics): the cpu, or the bytes per microsecond under [`SlotSplit::Network`]; their
    /// medians under [`SlotRateStatistic::Median`].
    pub split: Option<Vec<f64>>,
    /// Under [`SlotRateStatistic::Median`], the mean rates of the same counter: a slot's part
    /// of its master's load is its `split` over the sum of these over the master's slots
    /// (`None`: over the sum of `split`).
    pub split_total: Option<Vec<f64>>,
    /// Observations since the figures were read (0: read for this one).
    pub age: u32,
}

/// The per-slot counters of the last readings, and the last figures for the observations that
/// reuse them.
pub(super) struct SlotReader {
    split: SlotSplit,
    statistic: SlotRateStatistic,
    /// The last samples of `cpu-usec`.
    cpu_window: SlotRateWindow,
    /// The cpu (cores) of every slot over the window's intervals it was sampled in (kept
    /// from before when it was sampled in none of them; NaN: never sampled).
    cpu_rates: Vec<f64>,
    /// The last samples of the bytes in and out.
    network_window: SlotRateWindow,
    /// The bytes per microsecond of every slot, likewise.
    network_rates: Vec<f64>,
    /// The medians of the split counter's rates over its window (NaN: never sampled); kept
    /// under [`SlotRateStatistic::Median`] only.
    split_medians: Vec<f64>,
    last: Option<LastReading>,
}

/// The per-slot rates of one reading ([`SlotReading`] says what each is).
#[derive(Debug, PartialEq)]
struct SlotRates {
    cpu: Vec<f64>,
    split: Vec<f64>,
    split_total: Option<Vec<f64>>,
}

/// The figures of the last reading, the masters they were read from, and the observations
/// since.
struct LastReading {
    figures: SlotFigures,
    masters: Vec<String>,
    age: u32,
}

impl SlotReader {
    /// A reader whose rates are over the last [`SlotStatsReading::window`] readings, the
    /// split weighted by [`SlotStatsReading::statistic`].
    pub(super) fn new(split: SlotSplit, reading: &SlotStatsReading) -> SlotReader {
        let window = reading.window.max(1) as usize;
        SlotReader {
            split,
            statistic: reading.statistic,
            cpu_window: SlotRateWindow::new(window),
            cpu_rates: vec![f64::NAN; SLOT_COUNT],
            network_window: SlotRateWindow::new(window),
            network_rates: vec![f64::NAN; SLOT_COUNT],
            split_medians: vec![f64::NAN; SLOT_COUNT],
            last: None,
        }
    }

    /// Takes the first counters as the base of the next reading's rates. The first
    /// observation reads its own figures: these have no rates yet.
    pub(super) fn prime(
        &mut self,
        cluster: &mut Cluster,
        snapshot: &Snapshot,
        reading: &SlotStatsReading,
    ) -> Result<(), Error> {
        let figures = cluster.backend().slot_figures(cluster, snapshot, reading)?;
        self.rates(snapshot, &figures);
        self.last = None;
        Ok(())
    }

    /// The per-slot reading of an observation. It is read at every
    /// [`SlotStatsReading::every`]-th observation and whenever the masters are not those of
    /// the last reading; the observations between reuse the last reading. Keys travel with
    /// their slot, so a reused count is still the slot's after a move (only keys written or
    /// deleted since are missing), and a slot's rates are measured over the longer interval
    /// between two readings.
    pub(super) fn observe(
        &mut self,
        cluster: &mut Cluster,
        snapshot: &Snapshot,
        reading: &SlotStatsReading,
    ) -> Result<SlotReading, Error> {
        match &mut self.last {
            Some(last)
                if last.age + 1 < reading.every.max(1)
                    && snapshot.masters.iter().map(|m| &m.id).eq(&last.masters) =>
            {
                last.age += 1;
            }
            _ => {
                let figures = cluster.backend().slot_figures(cluster, snapshot, reading)?;
                self.rates(snapshot, &figures);
                self.last = Some(LastReading {
                    figures,
                    masters: snapshot.masters.iter().map(|m| m.id.clone()).collect(),
                    age: 0,
                });
            }
        }
        let last = self.last.as_ref().expect("read or kept above");
        let rates = self.current_rates(&last.figures);
        let (cpu, split, split_total) = match rates {
            Some(rates) => (Some(rates.cpu), Some(rates.split), rates.split_total),
            None => (None, None, None),
        };
        Ok(SlotReading {
            figures: last.figures.clone(),
            cpu,
            split,
            split_total,
            age: last.age,
        })
    }

    /// The rates kept, for figures with per-slot statistics (`None` for figures without).
    fn current_rates(&self, figures: &SlotFigures) -> Option<SlotRates> {
        figures.cpu_usec.as_ref()?;
        let means = match self.split {
            SlotSplit::Cpu => &self.cpu_rates,
            SlotSplit::Network => &self.network_rates,
        };
        let (split, split_total) = match self.statistic {
            SlotRateStatistic::Mean => (means.clone(), None),
            SlotRateStatistic::Median => (self.split_medians.clone(), Some(means.clone())),
        };
        Some(SlotRates {
            cpu: self.cpu_rates.clone(),
            split,
            split_total,
        })
    }

    /// Updates the rates with the counters of `figures` (missing samples keep their earlier
    /// rate); forgets the counters when `figures` has none.
    fn rates(&mut self, snapshot: &Snapshot, figures: &SlotFigures) {
        let owners: Vec<Option<String>> = snapshot
            .owners
            .iter()
            .map(|owner| owner.map(|i| snapshot.masters[i].id.clone()))
            .collect();
        let taken = Instant::now();
        if self.split == SlotSplit::Network {
            update(
                &mut self.network_window,
                &mut self.network_rates,
                figures.network_bytes.as_ref(),
                owners.clone(),
                taken,
            );
        }
        update(
            &mut self.cpu_window,
            &mut self.cpu_rates,
            figures.cpu_usec.as_ref(),
            owners,
            taken,
        );
        if self.statistic == SlotRateStatistic::Median {
            let window = match self.split {
                SlotSplit::Cpu => &self.cpu_window,
                SlotSplit::Network => &self.network_window,
            };
            window.medians(&mut self.split_medians);
        }
    }
}

/// One counter's rates over its window, which `counter` joins (`None`: no counter, the
/// window forgotten). The rate of a counter is its growth per microsecond
/// ([`SlotRateWindow`]: cores for `cpu-usec`, bytes per microsecond for bytes).
fn update(
    window: &mut SlotRateWindow,
    rates: &mut [f64],
    counter: Option<&Vec<u64>>,
    owners: Vec<Option<String>>,
    taken: Instant,
) {
    let Some(counter) = counter else {
        window.forget();
        return;
    };
    let now = SlotCpuSample {
        owners,
        usec: counter.clone(),
        taken,
    };
    window.push(now, rates);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::Master;

    /// One master owning every slot.
    fn snapshot() -> Snapshot {
        Snapshot {
            masters: vec![Master {
                id: "a".repeat(40),
                address: "127.0.0.1:7000".into(),
                slots: SLOT_COUNT,
                replicas: Vec::new(),
            }],
            owners: vec![Some(0); SLOT_COUNT],
            open: Vec::new(),
            problems: Vec::new(),
        }
    }

    /// Counters where slot 1 ran 10 us and read 500 bytes, slot 2 ran under a microsecond
    /// (0 us) and read 50 bytes, and the others nothing, after `base`.
    fn figures(base: u64) -> SlotFigures {
        let mut cpu = vec![base; SLOT_COUNT];
        let mut network = vec![base; SLOT_COUNT];
        cpu[1] += 10;
        network[1] += 500;
        network[2] += 50;
        SlotFigures {
            keys: vec![1; SLOT_COUNT],
            cpu_usec: Some(cpu),
            network_bytes: Some(network),
            stats_off: Vec::new(),
        }
    }

    fn median_over(window: u32) -> SlotStatsReading {
        SlotStatsReading {
            window,
            statistic: SlotRateStatistic::Median,
            ..SlotStatsReading::default()
        }
    }

    fn split_of(split: SlotSplit) -> (Vec<f64>, Vec<f64>) {
        let mut reader = SlotReader::new(split, &SlotStatsReading::default());
        let snapshot = snapshot();
        let start = SlotFigures {
            cpu_usec: Some(vec![0; SLOT_COUNT]),
            network_bytes: Some(vec![0; SLOT_COUNT]),
            ..figures(0)
        };
        reader.rates(&snapshot, &start);
        std::thread::sleep(std::time::Duration::from_millis(2));
        let later = figures(0);
        reader.rates(&snapshot, &later);
        let rates = reader.current_rates(&later).expect("per-slot statistics");
        assert_eq!(rates.split_total, None);
        (rates.cpu, rates.split)
    }

    #[test]
    fn the_network_split_sees_a_slot_whose_cpu_reads_zero() {
        let (cpu, split) = split_of(SlotSplit::Network);
        assert!(
            cpu[1] > 0.0 && cpu[2] == 0.0 && cpu[3] == 0.0,
            "{:?}",
            &cpu[..4]
        );
        assert!(split[1] > 0.0 && split[2] > 0.0 && split[3] == 0.0);
        // Shares follow the bytes: slot 2 has a tenth of slot 1's.
        assert!((split[2] / split[1] - 0.1).abs() < 1e-12);
        let (cpu, split) = split_of(SlotSplit::Cpu);
        assert_eq!(cpu, split);
        assert_eq!(split[2], 0.0);
    }

    #[test]
    fn without_per_slot_statistics_there_are_no_rates() {
        let mut reader = SlotReader::new(SlotSplit::Network, &median_over(1));
        let none = SlotFigures {
            keys: vec![1; SLOT_COUNT],
            ..SlotFigures::default()
        };
        reader.rates(&snapshot(), &none);
        assert_eq!(reader.current_rates(&none), None);
    }

    #[test]
    fn the_median_leaves_out_one_readings_spike() {
        let mut reader = SlotReader::new(SlotSplit::Cpu, &median_over(3));
        let snapshot = snapshot();
        // Slot 1 runs 10 us in every interval; slot 2 nothing, then 5 000 us in the third.
        let grown = |slot_1: u64, slot_2: u64| {
            let mut cpu = vec![0; SLOT_COUNT];
            cpu[1] = slot_1;
            cpu[2] = slot_2;
            SlotFigures {
                keys: vec![1; SLOT_COUNT],
                cpu_usec: Some(cpu),
                network_bytes: Some(vec![0; SLOT_COUNT]),
                stats_off: Vec::new(),
            }
        };
        let readings = [grown(0, 0), grown(10, 0), grown(20, 0), grown(30, 5_000)];
        for figures in &readings {
            reader.rates(&snapshot, figures);
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        let rates = reader
            .current_rates(&readings[3])
            .expect("per-slot statistics");
        let (cpu, split, total) = (rates.cpu, rates.split, rates.split_total.unwrap());
        assert_eq!(cpu, total, "the totals are the mean rates");
        assert!(split[1] > 0.0 && total[1] > 0.0);
        assert_eq!(split[2], 0.0, "the median of 0, 0 and a spike");
        assert!(
            total[2] > 100.0 * total[1],
            "{} against {}",
            total[2],
            total[1]
        );
    }
}
