//! Scrub: read every stripe, ask the core which member of a mismatching page
//! row is wrong (`hetraid_core::scrub`), and rewrite only what the verdict
//! allows. Crash recovery uses the same path with `Trust::Resync`.

use crate::array::Array;
use crate::error::Result;
use crate::format::{ScrubRecord, DATA_OFFSET};
use crate::member::AlignedBuf;
use crate::queue::{run_batch, IoOp};
use crate::RebuildProgress;
use hetraid_core::control::sweep::{Step, Stripes, Sweep, SweepSpec};
use hetraid_core::exec::StripeBufs;
use hetraid_core::scrub::{verify, Trust};
use serde::Serialize;

use hetraid_core::units::PAGE;
/// Mismatch entries a report lists at most (the counts are always complete).
pub const DETAILS_MAX: usize = 1000;

/// One page row of one stripe that did not match, as seen on one member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StripeMismatch {
    pub page: u32,
    /// Members shown to be wrong; None: the layout cannot tell.
    pub located: Option<Vec<usize>>,
    /// Members rewritten.
    pub fixed: Vec<usize>,
}

/// A run of mismatching pages of one stripe with one verdict.
#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq, Eq)]
pub struct ScrubMismatch {
    pub stripe: u64,
    /// 4 KiB pages within the stripe's chunks, first and last.
    pub page_first: u32,
    pub page_last: u32,
    /// The member shown to be wrong (null: the layout cannot tell).
    pub member: Option<usize>,
    pub path: Option<String>,
    /// "repaired", "located, not repaired" or "cannot tell which member is wrong".
    pub action: crate::Word,
}

/// Scrub speed limits, bytes per second per member (as rebuild's).
#[derive(Debug, Clone, Copy)]
pub struct ScrubOptions {
    pub min_speed: u64,
    /// 0 = unlimited.
    pub max_speed: u64,
}

impl Default for ScrubOptions {
    fn default() -> Self {
        let r = crate::RebuildOptions::default();
        Self {
            min_speed: r.min_speed,
            max_speed: r.max_speed,
        }
    }
}

#[derive(Debug, Clone, Default, Serialize, serde::Deserialize)]
pub struct ScrubReport {
    /// Stripes with at least one mismatching page.
    pub mismatches: u64,
    pub stripes_checked: u64,
    pub mismatched_pages: u64,
    /// Stripes where something was rewritten.
    pub repaired: u64,
    pub mismatched_stripes: Vec<u64>,
    /// Pages whose wrong member was located / could not be.
    pub located_pages: u64,
    pub unlocated_pages: u64,
    /// Pages rewritten.
    pub repaired_pages: u64,
    /// Every mismatch (the first [`DETAILS_MAX`]).
    pub details: Vec<ScrubMismatch>,
}

impl Array {
    /// The repair rule from the command line's words: `--repair` rewrites what
    /// was located; `--trust-data` (parity layouts) and `--trust-member I`
    /// (mirror layouts) also say which side to believe where nothing is
    /// located. A word that does not apply to this layout is an error.
    pub fn scrub_trust(
        &self,
        repair: bool,
        trust_data: bool,
        trust_member: Option<usize>,
    ) -> Result<Option<Trust>> {
        use crate::error::EngineError::Refused;
        use hetraid_core::Redundancy;
        let mirrors = matches!(self.layout().redundancy(), Redundancy::Mirror { .. });
        if !repair {
            if trust_data || trust_member.is_some() {
                return Err(Refused(
                    "--trust-data and --trust-member go with --repair".into(),
                ));
            }
            return Ok(None);
        }
        match (trust_data, trust_member) {
            (true, Some(_)) => Err(Refused(
                "give --trust-data or --trust-member, not both".into(),
            )),
            (true, None) if mirrors => Err(Refused(format!(
                "--trust-data rewrites parity from data; {} has mirror copies: name the copy to trust with --trust-member I",
                self.layout().name()
            ))),
            (false, Some(_)) if !mirrors => Err(Refused(format!(
                "--trust-member names a mirror copy; {} has parity: use --trust-data to rewrite parity from the data",
                self.layout().name()
            ))),
            (false, Some(m)) if m >= self.slot_count() => Err(crate::EngineError::Kind(
                hetraid_core::ErrorKind::NotFound,
                format!(
                "member {m} does not exist; members are 0 to {}",
                self.slot_count() - 1
            ),
            )),
            (true, None) => Ok(Some(Trust::Data)),
            (false, Some(m)) => Ok(Some(Trust::Member(m))),
            (false, None) => Ok(Some(Trust::Located)),
        }
    }

    /// Check one stripe; with `trust`, rewrite what the core's verdict allows.
    pub fn scrub_stripe(&self, s: u64, trust: Option<Trust>) -> Result<Vec<StripeMismatch>> {
        let state = self.state();
        let planner = hetraid_core::plan::Planner::new(self.layout(), self.policy(), vec![]);
        let Some(sp) = planner.scrub_stripe(s, &state, false) else {
            return Ok(vec![]);
        };
        let _g = self.lock_many(&[s]);
        let mut bufs = StripeBufs::new(&sp);
        let mut corrected: Vec<StripeMismatch> = Vec::new();
        // A block that cannot be read or fails its checksum names its member
        // itself: with a repair it is reconstructed and rewritten, then the
        // stripe is read again. Bounded by the member count.
        for _ in 0..=self.slot_count() {
            match self.scrub_read(&sp, &mut bufs) {
                Ok(()) => break,
                Err(Some((m, at))) => {
                    let fixed = trust.is_some() && self.correct_locked(m, &[s]);
                    // The page of the stripe's chunks the bad block is in.
                    let page = at
                        .and_then(|at| {
                            sp.columns
                                .iter()
                                .map(|c| c.loc)
                                .find(|l| {
                                    l.member == m
                                        && (l.offset..l.offset + self.layout().chunk_bytes())
                                            .contains(&at)
                                })
                                .map(|l| ((at - l.offset) / PAGE) as u32)
                        })
                        .unwrap_or(bufs.lo);
                    corrected.push(StripeMismatch {
                        page,
                        located: Some(vec![m]),
                        fixed: if fixed { vec![m] } else { vec![] },
                    });
                    if !fixed {
                        return Ok(corrected);
                    }
                }
                Err(None) => return Ok(corrected),
            }
        }
        let verdicts = verify(&sp, &mut bufs, trust);
        let mut ops = Vec::new();
        for v in &verdicts {
            let at = (v.page - bufs.lo) as usize * PAGE as usize;
            for &c in &v.fixed {
                let loc = sp.columns[c].loc;
                let mut b = AlignedBuf::zeroed(PAGE as usize);
                b.copy_from_slice(&bufs.cols[c][at..at + PAGE as usize]);
                ops.push((
                    loc.member,
                    IoOp::Write {
                        off: DATA_OFFSET + loc.offset + v.page as u64 * PAGE,
                        buf: b,
                    },
                ));
            }
        }
        let members: Vec<usize> = ops.iter().map(|(m, _)| *m).collect();
        for (r, m) in run_batch(self.queues(), ops).into_iter().zip(members) {
            if let Err(e) = r {
                self.member_error(m, &e);
            }
        }
        let member = |c: &usize| sp.columns[*c].loc.member;
        corrected.extend(verdicts.into_iter().map(|v| StripeMismatch {
            page: v.page,
            located: v.located.map(|cs| cs.iter().map(member).collect()),
            fixed: v.fixed.iter().map(member).collect(),
        }));
        Ok(corrected)
    }

    /// Check every stripe at full speed, users or not; with `trust`, repair
    /// as it allows.
    pub fn scrub(&self, trust: Option<Trust>) -> Result<ScrubReport> {
        self.scrub_with(
            trust,
            ScrubOptions {
                // No maximum, and a minimum no user load slows it below
                // (0 would let users stop it: MD's speed_limit_min 0).
                min_speed: u64::MAX,
                max_speed: 0,
            },
            &|_| {},
        )
    }

    /// Check every stripe, paced by the core's pacer (the rebuild's rule), and
    /// record the result in the superblocks (`status` shows it).
    pub fn scrub_with(
        &self,
        trust: Option<Trust>,
        opts: ScrubOptions,
        progress: &(dyn Fn(RebuildProgress) + Sync),
    ) -> Result<ScrubReport> {
        let mut r = ScrubReport::default();
        let t0 = std::time::Instant::now();
        let total = self.layout().stripe_count();
        let chunk = self.layout().chunk_bytes();
        let limits = hetraid_core::pace::PaceLimits {
            min_bps: opts.min_speed,
            max_bps: opts.max_speed,
        };
        self.hot
            .user_io
            .store(false, std::sync::atomic::Ordering::Relaxed);
        self.record(
            crate::annex::EventKind::ScrubStarted,
            None,
            [total, trust.is_some() as u64, 0],
            "",
        );
        let _progress = self.progress_guard();
        // The procedure is the core's (`control::sweep`, as a rebuild's): a
        // stripe at a time, in order, the pacer asked before each.
        let mut sweep = Sweep::new(SweepSpec {
            streams: vec![Stripes::Range(0..total)],
            batch_stripes: 1,
            lanes: 1,
            stripe_bytes: chunk,
            limits,
            scope: hetraid_core::pace::PaceScope::Array,
            stop_after: None,
        });
        // Bounded: each round checks a stripe (finitely many) or waits as
        // the pacer says (the average rate falls as time passes).
        loop {
            let s = match sweep.next(0, t0.elapsed().as_nanos() as u64, self.users_active()) {
                Step::Batch { first, .. } => first as u64,
                Step::Wait(ns) => {
                    std::thread::sleep(std::time::Duration::from_nanos(ns));
                    continue;
                }
                // One lane, and its stripe done before it asks again.
                Step::Busy => unreachable!("a scrub's one lane asks only when its stripe is done"),
                Step::Finished => break,
            };
            let found = self.scrub_stripe(s, trust)?;
            sweep.done(0, 1);
            r.stripes_checked += 1;
            let p = RebuildProgress {
                stripes_done: s + 1,
                stripes_total: total,
                bytes_done: sweep.bytes(),
                elapsed_s: t0.elapsed().as_secs_f64(),
            };
            self.note_progress("scrub", &p, 0);
            progress(p);
            if found.is_empty() {
                continue;
            }
            r.mismatches += 1;
            if r.mismatched_stripes.len() < DETAILS_MAX {
                r.mismatched_stripes.push(s);
            }
            let mut pages: Vec<u32> = found.iter().map(|m| m.page).collect();
            pages.dedup();
            r.mismatched_pages += pages.len() as u64;
            r.repaired += found.iter().any(|m| !m.fixed.is_empty()) as u64;
            for m in &found {
                match m.located {
                    Some(_) => r.located_pages += 1,
                    None => r.unlocated_pages += 1,
                }
                r.repaired_pages += !m.fixed.is_empty() as u64;
                self.add_details(&mut r.details, s, m);
            }
        }
        self.flush()?;
        let record = ScrubRecord {
            finished_unix_s: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_secs().max(1)),
            duration_ms: t0.elapsed().as_millis() as u64,
            stripes_checked: r.stripes_checked,
            mismatched_stripes: r.mismatches.min(u32::MAX as u64) as u32,
            repaired_stripes: r.repaired.min(u32::MAX as u64) as u32,
        };
        self.record_scrub(record)?;
        self.record(
            crate::annex::EventKind::ScrubFinished,
            None,
            [r.stripes_checked, r.mismatches, r.repaired],
            "",
        );
        if r.mismatches > r.repaired {
            self.record(
                crate::annex::EventKind::ScrubMismatch,
                None,
                [r.mismatches - r.repaired, r.mismatches, 0],
                "",
            );
        }
        Ok(r)
    }

    /// One entry per wrong member (or one "cannot tell"), runs of pages merged.
    fn add_details(&self, out: &mut Vec<ScrubMismatch>, s: u64, m: &StripeMismatch) {
        let entries: Vec<(Option<usize>, &'static str)> = match &m.located {
            Some(ms) => ms
                .iter()
                .map(|&x| {
                    let action = if m.fixed.contains(&x) {
                        "repaired"
                    } else {
                        "located, not repaired"
                    };
                    (Some(x), action)
                })
                .collect(),
            None if !m.fixed.is_empty() => vec![(None, "rewritten from the side trusted")],
            None => vec![(None, "cannot tell which member is wrong")],
        };
        for (member, action) in entries {
            if let Some(last) = out.last_mut() {
                if last.stripe == s
                    && last.member == member
                    && last.action == action
                    && last.page_last + 1 == m.page
                {
                    last.page_last = m.page;
                    continue;
                }
            }
            if out.len() < DETAILS_MAX {
                out.push(ScrubMismatch {
                    stripe: s,
                    page_first: m.page,
                    page_last: m.page,
                    member,
                    path: member.and_then(|x| self.member(x)).map(|p| p.name()),
                    action: action.into(),
                });
            }
        }
    }
}
