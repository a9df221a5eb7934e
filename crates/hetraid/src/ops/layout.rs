pub use crate::cli::layout::*;
use hetraid_core::layout::build;
use hetraid_core::units::format_size;
use serde_json::json;

impl LayoutCmd {
    pub fn run(&self) -> Result<(), String> {
        let spec = self.layout.spec()?;
        let l = build(&spec).map_err(|e| e.to_string())?;
        let count = l.stripe_count();
        let listed = self
            .stripes
            .unwrap_or(if self.json { count } else { 32 })
            .min(count);
        let stripes: Vec<_> = (0..listed).map(|s| l.stripe(s)).collect();
        if self.json {
            let mut v = json!({
                "layout": l.name(),
                "devices": l.members(),
                "chunk_bytes": l.chunk_bytes(),
                "capacity_bytes": l.capacity_bytes(),
                "stripe_count": count,
                "data_per_stripe": l.data_per_stripe(),
                "parity_cycle": l.parity_cycle(),
                "kinds": spec.kinds.iter().map(|k| k.as_str()).collect::<Vec<_>>(),
                "stripes": stripes,
            });
            if let Some(b) = l.bundles() {
                v["bundles"] = json!(b);
            }
            let logs = l.log_regions();
            if !logs.is_empty() {
                v["log"] = json!(logs);
            }
            return super::print_json(&v);
        }
        println!(
            "{}: {} members, chunk {}, capacity {} ({} bytes), {} stripes of {} data chunks",
            l.name(),
            l.members(),
            format_size(l.chunk_bytes()),
            format_size(l.capacity_bytes()),
            l.capacity_bytes(),
            count,
            l.data_per_stripe()
        );
        if let Some(b) = l.bundles() {
            println!("bundles: {b}");
        }
        for r in l.log_regions() {
            println!(
                "log copy: member {} offset {} length {}",
                r.member,
                r.offset,
                format_size(r.length)
            );
        }
        let n = l.members();
        println!(
            "{:>8}  {}",
            "stripe",
            (0..n)
                .map(|d| format!("{:>10}", format!("m{d}")))
                .collect::<String>()
        );
        for st in &stripes {
            let mut cells = vec![String::from("."); n];
            for (i, c) in st.data.iter().enumerate() {
                cells[c.member] = format!("D{i}@{}", format_size(c.offset));
            }
            for (j, c) in st.parity.iter().enumerate() {
                cells[c.member] = format!(
                    "{}@{}",
                    if j == 0 { "P" } else { "Q" },
                    format_size(c.offset)
                );
            }
            for (i, m) in st.mirrors.iter().enumerate() {
                for c in m {
                    cells[c.member] = format!("C{i}@{}", format_size(c.offset));
                }
            }
            println!(
                "{:>8}  {}",
                st.index,
                cells.iter().map(|c| format!("{c:>10}")).collect::<String>()
            );
        }
        if listed < count {
            println!("({} more stripes; --stripes N lists more)", count - listed);
        }
        Ok(())
    }
}
