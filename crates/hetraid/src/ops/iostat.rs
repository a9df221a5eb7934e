//! `hetraid iostat`: the I/O counters of served (or held) arrays, as
//! rates over intervals. The counters live in the process holding the
//! array (`Array::measure_io`); this asks it for its status each interval.

pub use crate::cli::iostat::IostatCmd;
use crate::render::iostat::{ArrayRates, IostatReport, MemberRates, Rates};
use hetraid_core::Failure;
use hetraid_engine::iostat::IoStats;
use hetraid_nbd::control::HeldStatus;
use std::time::{Duration, Instant};

/// Reports at most this often (and at least this rarely).
const INTERVAL_S_MIN: f64 = 0.1;
const INTERVAL_S_MAX: f64 = 86_400.0;

/// What `iostat` was asked: the arrays (each a member list), and the
/// interval and count given after them.
struct Asked {
    arrays: Vec<Vec<String>>,
    interval: Option<f64>,
    count: Option<u64>,
}

impl IostatCmd {
    fn parse(&self) -> Result<Asked, Failure> {
        let mut words = self.args.clone();
        let mut numbers = Vec::new();
        while numbers.len() < 2
            && words
                .last()
                .is_some_and(|w| w.parse::<f64>().is_ok() && !std::path::Path::new(w).exists())
        {
            numbers.insert(0, words.pop().unwrap());
        }
        let interval = match numbers.first() {
            Some(w) => {
                let s: f64 = w.parse().unwrap_or(0.0);
                if !(INTERVAL_S_MIN..=INTERVAL_S_MAX).contains(&s) {
                    return Err(format!(
                        "interval {w} is out of range: give {INTERVAL_S_MIN} to {INTERVAL_S_MAX} seconds"
                    )
                    .into());
                }
                Some(s)
            }
            None => None,
        };
        let count = match numbers.get(1) {
            Some(w) => Some(w.parse::<u64>().ok().filter(|&c| c > 0).ok_or_else(|| {
                format!("count {w} is not a whole number of reports (1 or more)")
            })?),
            None => None,
        };
        let loaded = crate::config::Config::load(self.config.as_deref())?;
        let arrays = if words.is_empty() {
            let names: Vec<Vec<String>> = loaded
                .config
                .arrays
                .iter()
                .map(|a| vec![a.uuid.clone()])
                .collect();
            if names.is_empty() {
                return Err(format!(
                    "no array given and none in {}: give an array's name or members",
                    loaded.path.display()
                )
                .into());
            }
            names
        } else if words
            .iter()
            .all(|w| !w.contains('/') && !std::path::Path::new(w).exists())
        {
            words.into_iter().map(|w| vec![w]).collect()
        } else {
            vec![words]
        };
        let mut resolved = Vec::new();
        for mut members in arrays {
            crate::ops::array::names::resolve_members(&mut members, &loaded)?;
            resolved.push(members);
        }
        Ok(Asked {
            arrays: resolved,
            interval,
            count,
        })
    }

    pub fn run(&self) -> Result<(), Failure> {
        let Asked {
            arrays,
            interval,
            count,
        } = self.parse()?;
        let look = |members: &[String]| -> Result<HeldStatus, Failure> {
            match crate::ops::array::remote_status(members) {
                Some(r) => r,
                None => Err(format!(
                    "the array of {} is not served or held by a command: iostat reads the counters of the process that holds it (hetraid serve)",
                    members.join(" ")
                )
                .into()),
            }
        };
        let mut before: Vec<HeldStatus> =
            arrays.iter().map(|m| look(m)).collect::<Result<_, _>>()?;
        let mut t_before = Instant::now();
        // The first report: since each array began counting.
        let first: Vec<(HeldStatus, f64)> = before
            .iter()
            .map(|h| (h.clone(), h.status.io_seconds.unwrap_or(0.0)))
            .collect();
        self.print(&first, &[])?;
        let Some(interval) = interval else {
            return Ok(());
        };
        let reports = count.map_or(u64::MAX, |c| c.saturating_sub(1));
        for _ in 0..reports {
            std::thread::sleep(Duration::from_secs_f64(interval));
            let now: Vec<HeldStatus> = arrays.iter().map(|m| look(m)).collect::<Result<_, _>>()?;
            let secs = t_before.elapsed().as_secs_f64();
            t_before = Instant::now();
            let pairs: Vec<(HeldStatus, f64)> = now.iter().map(|h| (h.clone(), secs)).collect();
            self.print(&pairs, &before)?;
            before = now;
        }
        Ok(())
    }

    /// One report: each array's counters (minus `before`'s, when given)
    /// over its seconds.
    fn print(&self, now: &[(HeldStatus, f64)], before: &[HeldStatus]) -> Result<(), Failure> {
        let delta = |n: Option<IoStats>, b: Option<IoStats>| match (n, b) {
            (Some(n), Some(b)) => n.since(&b),
            (Some(n), None) => n,
            _ => IoStats::default(),
        };
        let mut arrays = Vec::new();
        for (i, (h, secs)) in now.iter().enumerate() {
            let st = &h.status;
            let prev = before.get(i).map(|b| &b.status);
            let members = st
                .member_states
                .iter()
                .map(|m| {
                    let was = prev
                        .and_then(|p| p.member_states.get(m.device))
                        .and_then(|x| x.io);
                    MemberRates {
                        slot: m.device,
                        path: m
                            .path
                            .clone()
                            .or_else(|| m.last_path.clone())
                            .unwrap_or_else(|| format!("slot {}", m.device)),
                        state: m.state.to_string(),
                        rates: Rates::of(&delta(m.io, was), *secs),
                    }
                })
                .collect();
            let progress = st
                .progress
                .as_ref()
                .map(crate::render::progress_line)
                .or_else(|| st.change.as_ref().map(crate::render::status::change_line));
            arrays.push(ArrayRates {
                name: st.name.clone(),
                uuid: st.uuid.clone(),
                state: st.state.to_string(),
                rates: Rates::of(&delta(st.io, prev.and_then(|p| p.io)), *secs),
                members,
                progress,
            });
        }
        let report = IostatReport {
            time_unix_ms: hetraid_engine::annex::now_ms(),
            interval_s: now.first().map_or(0.0, |x| x.1),
            arrays,
        };
        if self.json {
            println!(
                "{}",
                serde_json::to_string(&report).map_err(|e| e.to_string())?
            );
        } else {
            crate::render::emit(&report, false)?;
        }
        use std::io::Write;
        let _ = std::io::stdout().flush();
        Ok(())
    }
}
