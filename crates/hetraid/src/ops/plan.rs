pub use crate::cli::plan::*;
use crate::render::plan::{PlanReport, PlanRow};
use hetraid_core::layout::build;
use hetraid_core::plan::{ArrayState, Mode, Planner, Request, WritePolicy};
use hetraid_core::units::parse_extent;

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
        let mut rows: Vec<PlanRow> = Vec::new();
        for sp in &plan.stripes {
            if sp.runs.is_empty() {
                rows.push(PlanRow {
                    stripe: sp.stripe,
                    mode: Mode::Read,
                    first_page: 0,
                    pages: 0,
                });
            }
            for r in &sp.runs {
                match rows.last_mut() {
                    Some(last)
                        if last.stripe == sp.stripe
                            && last.mode == r.mode
                            && last.first_page + last.pages == r.page =>
                    {
                        last.pages += r.pages
                    }
                    _ => rows.push(PlanRow {
                        stripe: sp.stripe,
                        mode: r.mode,
                        first_page: r.page,
                        pages: r.pages,
                    }),
                }
            }
        }
        let report = PlanReport {
            layout: l.name().to_string(),
            policy: planner.policy.as_str(),
            op: plan.op,
            offset: req.offset,
            length: req.len,
            failed: self.failed.clone(),
            members,
            rows,
            request: text.clone(),
        };
        crate::render::emit(&report, self.json)
    }
}
