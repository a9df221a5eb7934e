pub use crate::cli::plan::*;
use hetraid_core::layout::build;
use hetraid_core::plan::{ArrayState, Mode, Planner, Request, WritePolicy};
use hetraid_core::units::parse_extent;
use serde_json::json;

pub fn planner_for<'a>(
    l: &'a dyn hetraid_core::Layout,
    spec: &hetraid_core::LayoutSpec,
    policy: &str,
) -> Result<Planner<'a>, String> {
    let policy = WritePolicy::parse(policy)?;
    let service = spec
        .kinds_or_default()
        .iter()
        .map(|k| k.default_service())
        .collect();
    Ok(Planner::new(l, policy, service))
}

pub fn state_for(n: usize, failed: &[usize]) -> Result<ArrayState, String> {
    if let Some(f) = failed.iter().find(|&&f| f >= n) {
        return Err(format!(
            "--failed {f} names no member; members are numbered 0 to {}",
            n - 1
        ));
    }
    Ok(ArrayState::with_failed(n, failed))
}

impl PlanCmd {
    pub fn run(&self) -> Result<(), String> {
        let spec = self.layout.spec()?;
        let l = build(&spec).map_err(|e| e.to_string())?;
        let planner = planner_for(l.as_ref(), &spec, &self.policy)?;
        let state = state_for(l.members(), &self.failed)?;
        let (req, text) = match (&self.write, &self.read) {
            (Some(w), _) => {
                let (o, n) = parse_extent(w)?;
                (Request::write(o, n), w)
            }
            (None, Some(r)) => {
                let (o, n) = parse_extent(r)?;
                (Request::read(o, n), r)
            }
            _ => return Err("give --write OFFSET+LENGTH or --read OFFSET+LENGTH".into()),
        };
        let plan = planner.plan(&req, &state).map_err(|e| e.to_string())?;
        let members = plan.member_io(l.members());
        // Rows: consecutive runs of one stripe with the same mode merged.
        let mut rows: Vec<(u64, Mode, u32, u32)> = Vec::new();
        for sp in &plan.stripes {
            if sp.runs.is_empty() {
                rows.push((sp.stripe, Mode::Read, 0, 0));
            }
            for r in &sp.runs {
                match rows.last_mut() {
                    Some(last)
                        if last.0 == sp.stripe && last.1 == r.mode && last.2 + last.3 == r.page =>
                    {
                        last.3 += r.pages
                    }
                    _ => rows.push((sp.stripe, r.mode, r.page, r.pages)),
                }
            }
        }
        if self.json {
            let v = json!({
                "layout": l.name(),
                "policy": planner.policy.as_str(),
                "op": plan.op,
                "offset": req.offset,
                "length": req.len,
                "failed": self.failed,
                "members": members,
                "rows": rows.iter().map(|(s, m, p, n)| json!({"stripe": s, "mode": m, "first_page": p, "pages": n})).collect::<Vec<_>>(),
            });
            return super::print_json(&v);
        }
        println!(
            "{} {} on {} ({} policy{})",
            if self.write.is_some() {
                "write"
            } else {
                "read"
            },
            text,
            l.name(),
            planner.policy.as_str(),
            if self.failed.is_empty() {
                String::new()
            } else {
                format!(", failed {:?}", self.failed)
            }
        );
        println!(
            "{:>6} {:>12} {:>12} {:>10} {:>11} {:>8} {:>9}",
            "member",
            "read_bytes",
            "write_bytes",
            "read_pages",
            "write_pages",
            "read_ops",
            "write_ops"
        );
        for m in &members {
            println!(
                "{:>6} {:>12} {:>12} {:>10} {:>11} {:>8} {:>9}",
                m.device,
                m.read_bytes,
                m.write_bytes,
                m.read_pages,
                m.write_pages,
                m.read_ops,
                m.write_ops
            );
        }
        println!("{:>8} {:>9} {:>6}", "stripe", "mode", "pages");
        for (s, m, p, n) in rows.iter().take(32) {
            let mode = serde_json::to_value(m).unwrap();
            println!(
                "{:>8} {:>9} {:>6}",
                s,
                mode.as_str().unwrap_or("?"),
                if *n == 0 {
                    "-".to_string()
                } else {
                    format!("{p}..{}", p + n)
                }
            );
        }
        if rows.len() > 32 {
            println!("({} more rows; --json lists all)", rows.len() - 32);
        }
        Ok(())
    }
}
