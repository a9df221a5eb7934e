//! Planning writes: per page row, read-modify-write or reconstruct-write by
//! the policy ([Wacha 2012] ch. 3–4), what degraded rows allow, rows merged into runs.

use super::*;

impl Planner<'_> {
    pub(super) fn plan_write(
        &self,
        s: u64,
        pieces: Vec<Piece>,
        state: &ArrayState,
    ) -> Result<StripePlan, PlanError> {
        let (cols, k, pc) = self.columns(s);
        let failed = self.failed_set(s, &cols, state);
        let chunk_pages = (self.layout.chunk_bytes() / PAGE) as u32;
        let lo = pieces
            .iter()
            .map(|p| (p.chunk_offset / PAGE) as u32)
            .min()
            .unwrap_or(0);
        let hi = pieces
            .iter()
            .map(|p| (p.chunk_offset + p.len).div_ceil(PAGE) as u32)
            .max()
            .unwrap_or(0);
        debug_assert!(hi <= chunk_pages);
        let mut sp = StripePlan {
            stripe: s,
            columns: cols,
            data_count: k,
            parity_count: pc,
            runs: vec![],
            pieces,
        };
        let mut cover = vec![Cover::None; k];
        let cover_of = |page: u32, cover: &mut Vec<Cover>, pieces: &[Piece]| {
            let (ps, pe) = (page as u64 * PAGE, (page as u64 + 1) * PAGE);
            cover.iter_mut().for_each(|c| *c = Cover::None);
            for p in pieces {
                let (a, b) = (p.chunk_offset.max(ps), (p.chunk_offset + p.len).min(pe));
                if a < b {
                    cover[p.data] = if a == ps && b == pe {
                        Cover::Full
                    } else {
                        Cover::Partial
                    };
                }
            }
        };
        // modthresh-stripe: one decision for the stripe, over the members
        // its rows read under each rule.
        let stripe_pref = (self.policy == WritePolicy::ModthreshStripe).then(|| {
            let (mut written, mut not_full) = (ColSet::default(), ColSet::default());
            for page in lo..hi {
                cover_of(page, &mut cover, &sp.pieces);
                if cover.iter().all(|c| *c == Cover::None) {
                    continue;
                }
                for (i, c) in cover.iter().enumerate() {
                    if *c != Cover::None {
                        written.insert(i);
                    }
                    if *c != Cover::Full {
                        not_full.insert(i);
                    }
                }
            }
            let mut rmw = written;
            (k..k + pc).for_each(|c| rmw.insert(c));
            rmw.minus(failed).len() <= not_full.minus(failed).len() + 1
        });
        for page in lo..hi {
            cover_of(page, &mut cover, &sp.pieces);
            if cover.iter().all(|c| *c == Cover::None) {
                continue;
            }
            let row = self.decide_row(s, &sp, &cover, failed, page, stripe_pref)?;
            match sp.runs.last_mut() {
                Some(r)
                    if r.page + r.pages == page
                        && (r.mode, r.strategy, r.read, r.write, r.lost)
                            == (row.mode, row.strategy, row.read, row.write, row.lost) =>
                {
                    r.pages += 1
                }
                _ => sp.runs.push(row),
            }
        }
        Ok(sp)
    }

    pub(super) fn decide_row(
        &self,
        s: u64,
        sp: &StripePlan,
        cover: &[Cover],
        failed: ColSet,
        page: u32,
        stripe_pref: Option<bool>,
    ) -> Result<RowRun, PlanError> {
        let (k, pc) = (sp.data_count, sp.parity_count);
        let mut written = ColSet::default();
        let mut not_full = ColSet::default();
        for (i, c) in cover.iter().enumerate() {
            if *c != Cover::None {
                written.insert(i);
            }
            if *c != Cover::Full {
                not_full.insert(i);
            }
        }
        let degraded = !failed.is_empty();
        let run = |mode, strategy, read: ColSet, write: ColSet, lost| RowRun {
            page,
            pages: 1,
            mode: if degraded { Mode::Degraded } else { mode },
            strategy,
            read,
            write,
            lost,
        };
        if pc == 0 {
            // Mirrors or no redundancy: per written column, read a partial page from
            // one live copy, write every live copy.
            let mut read = ColSet::default();
            let mut write = ColSet::default();
            for i in written.iter() {
                let copies: Vec<usize> = std::iter::once(i)
                    .chain(sp.copies_of(i))
                    .filter(|c| !failed.contains(*c))
                    .collect();
                if copies.is_empty() {
                    return Err(Self::data_lost(s, &sp.columns, failed));
                }
                if cover[i] == Cover::Partial {
                    read.insert(copies[0]);
                }
                copies.iter().for_each(|c| write.insert(*c));
            }
            let mode = if read.is_empty() {
                Mode::Full
            } else {
                Mode::Rmw
            };
            return Ok(run(mode, Strategy::Mirror, read, write, ColSet::default()));
        }
        let mut parity = ColSet::default();
        (k..k + pc).for_each(|c| parity.insert(c));
        let live_parity = parity.minus(failed);
        let write = written.union(parity).minus(failed);
        if live_parity.is_empty() {
            // Every parity column is gone: keep the data, read only partial pages.
            let read = ColSet(written.0 & not_full.0).minus(failed);
            return Ok(run(
                Mode::Rmw,
                Strategy::DataOnly,
                read,
                write,
                ColSet::default(),
            ));
        }
        let data_mask = ColSet(low_bits(k));
        if not_full.is_empty() {
            return Ok(run(
                Mode::Full,
                Strategy::Full,
                ColSet::default(),
                write,
                ColSet::default(),
            ));
        }
        let rmw_reads = written.union(live_parity);
        let rcw_reads = not_full;
        let rmw_ok = written.0 & failed.0 == 0;
        let rcw_ok = not_full.0 & failed.0 == 0;
        let use_rmw = match (rmw_ok, rcw_ok) {
            (true, true) => self
                .avoid_sat_out(sp, rmw_reads, rcw_reads)
                .unwrap_or_else(|| {
                    stripe_pref.unwrap_or_else(|| self.prefer_rmw(sp, rmw_reads, rcw_reads, write))
                }),
            (true, false) => true,
            (false, true) => false,
            (false, false) => {
                let lost = ColSet(failed.0 & data_mask.0);
                let par = Self::parity_for(k, pc, failed, lost.len())
                    .ok_or_else(|| Self::data_lost(s, &sp.columns, failed))?;
                let read = data_mask.minus(failed).union(par);
                return Ok(run(Mode::Rcw, Strategy::Reconstruct, read, write, lost));
            }
        };
        Ok(if use_rmw {
            run(
                Mode::Rmw,
                Strategy::Rmw,
                rmw_reads,
                write,
                ColSet::default(),
            )
        } else {
            run(
                Mode::Rcw,
                Strategy::Rcw,
                rcw_reads,
                write,
                ColSet::default(),
            )
        })
    }

    /// With members sat out for reads (core `sitout`): the strategy whose
    /// reads leave them out when only one does (Some(true): RMW), else None.
    fn avoid_sat_out(&self, sp: &StripePlan, rmw: ColSet, rcw: ColSet) -> Option<bool> {
        if self.sat_out.is_empty() {
            return None;
        }
        let touches = |reads: ColSet| {
            reads
                .iter()
                .any(|c| self.sat_out.contains(sp.columns[c].loc.member))
        };
        match (touches(rmw), touches(rcw)) {
            (true, false) => Some(false),
            (false, true) => Some(true),
            _ => None,
        }
    }

    pub(super) fn prefer_rmw(
        &self,
        sp: &StripePlan,
        rmw: ColSet,
        rcw: ColSet,
        write: ColSet,
    ) -> bool {
        let (a, b) = (rmw.len(), rcw.len());
        match self.policy {
            WritePolicy::Md => a < b,
            WritePolicy::Modthresh | WritePolicy::ModthreshStripe => a <= b + 1,
            WritePolicy::RmwAlways => true,
            WritePolicy::Cost => {
                // Estimated cost of a row = total member busy time (what limits
                // throughput under load) + the slowest member (latency). A member
                // read and then written at the same place positions once: the
                // write follows the read (a rotation on a disk, nothing on flash).
                let cost = |reads: ColSet| {
                    let mut busy: Vec<(usize, u64, u64)> = Vec::new(); // (member, ops, ns)
                    for c in reads.iter().chain(write.iter()) {
                        let m = sp.columns[c].loc.member;
                        let sv = self
                            .service
                            .get(m)
                            .copied()
                            .unwrap_or(crate::member::MemberKind::Hdd.default_service());
                        let xfer = sv.service_ns(PAGE) - sv.position_ns;
                        match busy.iter_mut().find(|b| b.0 == m) {
                            Some(b) => {
                                b.1 += 1;
                                b.2 += xfer;
                            }
                            None => busy.push((m, 1, sv.position_ns + xfer)),
                        }
                    }
                    let total: u64 = busy.iter().map(|b| b.2).sum();
                    total + busy.iter().map(|b| b.2).max().unwrap_or(0)
                };
                cost(rmw) <= cost(rcw)
            }
        }
    }
}
