//! The run's report: response times, throughput, per-member numbers, the
//! rebuild's and the log's.

use super::*;

impl Runner<'_> {
    pub(super) fn report(mut self) -> Report {
        let end = self.end.max(1);
        let secs = |ns: Ns| ns as f64 / NS_PER_S as f64;
        let (mean, p50, p99, max) =
            crate::report::summarize_merged(&mut self.resp_read, &mut self.resp_write);
        let members: Vec<MemberReport> = self
            .devices
            .iter()
            .zip(&self.s.specs)
            .enumerate()
            .map(|(i, (d, spec))| member_report(i, d.as_ref(), spec, end))
            .collect();
        let log = self.log.as_ref().map(|l| {
            let specs = &self.s.log.as_ref().unwrap().specs;
            LogReport {
                mode: if l.write_back {
                    "write-back"
                } else {
                    "journal"
                }
                .into(),
                reclaimed_bytes: l.reclaimed_bytes,
                idle_reclaims: self.log_idle_reclaims,
                hpda_log_writes: self.hpda_routed[0],
                hpda_raid4_writes: self.hpda_routed[1],
                on_members: self
                    .s
                    .log
                    .as_ref()
                    .map_or(vec![], |x| x.on_members.iter().map(|m| m.0).collect()),
                ring_bytes: l.ring.len,
                records: l.records_written,
                record_writes: l.record_writes,
                record_bytes: l.record_bytes,
                pads: l.pads,
                checkpoints: l.checkpoints,
                devices: l
                    .devs
                    .iter()
                    .zip(specs)
                    .enumerate()
                    .map(|(i, (&d, spec))| member_report(i, self.devices[d].as_ref(), spec, end))
                    .collect(),
            }
        });
        let rebuild = self.rebuild.as_ref().map(|rb| {
            let (m, _, p, _) = summarize(&mut self.resp_rebuild);
            RebuildReport {
                member: rb.target,
                rebuild_time_s: secs(rb.finished_at.unwrap_or(end)),
                rebuilt_bytes: rb.sweep.bytes(),
                rebuild_mbps: rb.sweep.bytes() as f64
                    / secs(rb.finished_at.unwrap_or(end).max(1))
                    / 1e6,
                streams: rb.sweep.spec().streams.len(),
                requests_during: self.resp_rebuild.len() as u64,
                mean_response_during_ms: m,
                p99_response_during_ms: p,
                stream_time_s: rb
                    .stream_done
                    .iter()
                    .map(|t| secs(t.unwrap_or(end)))
                    .collect(),
                stream_bytes: rb.sweep.stream_bytes().to_vec(),
                completed: rb.finished_at.is_some(),
                sampled_fraction: (rb.sweep.stripes_total() < rb.full_stripes)
                    .then(|| rb.sweep.stripes_total() as f64 / rb.full_stripes.max(1) as f64),
            }
        });
        let scrub = self.scrub.as_ref().map(|r| {
            let t = r.finished_at.unwrap_or(end);
            crate::report::ScrubReport {
                scrub_time_s: secs(t),
                stripes: r.sweep.stripes_done(),
                checked_bytes: r.sweep.bytes(),
                scrub_mbps: r.sweep.bytes() as f64 / secs(t.max(1)) / 1e6,
                completed: r.finished_at.is_some(),
            }
        });
        let grow = self.grow_report(end);
        let copy_back = self.copy_back.as_ref().map(|c| {
            let (m, _, p, _) = summarize(&mut self.resp_copy_back);
            let took = c.finished_at.unwrap_or(end) - c.started_at;
            crate::report::CopyBackReport {
                member: c.member,
                start_s: secs(c.started_at),
                copy_back_time_s: secs(took),
                chunks: c.chunks(),
                copied_bytes: c.bytes(),
                copy_back_mbps: c.bytes() as f64 / secs(took.max(1)) / 1e6,
                recopied: c.recopied,
                requests_during: self.resp_copy_back.len() as u64,
                mean_response_during_ms: m,
                p99_response_during_ms: p,
                completed: c.finished_at.is_some(),
            }
        });
        let requests = self.reads + self.writes;
        // User throughput over the time the user load ran (a rebuild may go on).
        let user_end = self.last_user_done.max(1);
        Report {
            throughput_mbps: self.bytes as f64 / secs(user_end) / 1e6,
            iops: requests as f64 / secs(user_end),
            mean_response_ms: mean,
            p99_response_ms: p99,
            sim_time_s: secs(end),
            energy_j: members.iter().map(|m| m.energy_j).sum(),
            members,
            layout: self.s.cfg.layout.clone(),
            policy: self.s.policy.as_str().into(),
            workload: self.s.cfg.workload.clone(),
            seed: self.s.cfg.seed,
            requests,
            bytes: self.bytes,
            reads: self.reads,
            writes: self.writes,
            p50_response_ms: p50,
            max_response_ms: max,
            busy_throughput_mbps: self.bytes as f64 / secs(self.array_busy_ns.max(1)) / 1e6,
            member_ops: self.member_ops,
            rebuild,
            scrub,
            grow,
            copy_back,
            read: crate::report::DirectionStats::of(&mut self.resp_read),
            write: crate::report::DirectionStats::of(&mut self.resp_write),
            log,
            trims: self.trims,
            trim_bytes: self.trim_bytes,
            trim_discarded_bytes: self.trim_discarded_bytes,
            sit_out: self.sit_out_report(),
        }
    }
}

/// A device's counters as a report row.
pub(super) fn member_report(
    i: usize,
    d: &dyn Device,
    spec: &crate::preset::DeviceSpec,
    end: Ns,
) -> MemberReport {
    let secs = |ns: Ns| ns as f64 / NS_PER_S as f64;
    let c = d.counters();
    let wear = d.wear();
    let [er, ew, ei] = spec.power.energy_by_state_j(c, end);
    MemberReport {
        device: i,
        preset: spec.name.clone(),
        reads: c.reads,
        writes: c.writes,
        read_pages: c.read_pages,
        write_pages: c.write_pages,
        erases: c.erases,
        busy_s: secs(c.busy_ns.min(end)),
        idle_s: secs(end.saturating_sub(c.busy_ns)),
        energy_j: spec.power.energy_j(c, end),
        kind: spec.kind.as_str().into(),
        read_bytes: c.read_bytes,
        write_bytes: c.write_bytes,
        utilization: c.busy_ns.min(end) as f64 / end as f64,
        energy_read_j: er,
        energy_write_j: ew,
        energy_idle_j: ei,
        write_amplification: wear.map(|w| w.write_amplification),
        erase_max: wear.map(|w| w.erase_max),
        gc_page_copies: wear.map(|w| w.gc_page_copies),
        sub_page_rmw: wear.map(|w| w.sub_page_rmw),
        discards: c.discards,
        discard_bytes: c.discard_bytes,
        discarded_pages: wear.map(|w| w.discarded_pages),
        mechanics: d
            .mechanics()
            .map(|m| crate::report::MechanicsReport::of(&m)),
    }
}
