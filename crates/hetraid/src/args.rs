//! Layout options shared by every verb, turned into a core `LayoutSpec`.

use clap::Args;
use hetraid_core::layout::{LayoutKind, LayoutSpec};
use hetraid_core::units::parse_size;
use hetraid_core::MemberKind;

#[derive(Debug, Clone, Args)]
pub struct LayoutArgs {
    #[command(flatten)]
    pub opts: LayoutOpts,
    /// Number of members.
    #[arg(long)]
    pub devices: usize,
    /// Data-area size of each member (comma-separated); default 1G each.
    #[arg(long, value_delimiter = ',', value_parser = size)]
    pub sizes: Option<Vec<u64>>,
}

/// The layout and its parameters (everything but the members).
#[derive(Debug, Clone, Args)]
pub struct LayoutOpts {
    /// Layout: raid0 raid1 raid10 raid4 raid5 raid6 raidh s2raid5 s2raid10 raidx hpda,
    /// or a placement preset: raid4s raid4n raid5s raidf5 raide raid5nss.
    #[arg(long)]
    pub layout: String,
    /// Chunk (stripe unit) size, a multiple of 4K.
    #[arg(long, default_value = "64K", value_parser = size)]
    pub chunk: u64,
    /// Member kinds, one per member: hdd, ssd, nvram (presets, hpda, cost policy).
    #[arg(long, value_delimiter = ',', value_parser = kind)]
    pub kinds: Option<Vec<MemberKind>>,
    #[command(flatten)]
    pub params: LayoutParamArgs,
}

/// Per-layout parameters, shared by every verb that names a layout (`create`,
/// `layout`, `plan`, `loadmap`, `sim`).
#[derive(Debug, Clone, Default, Args)]
pub struct LayoutParamArgs {
    /// RAIDH (and RAIDX5/6) parity weights, one per member (1,1,1,3,3), or
    /// auto: from the members' service rates (their kinds, or the
    /// simulator's device models), the shares that make every member
    /// equally busy under small random writes.
    #[arg(long, value_name = "W,W,...|auto", value_parser = weights_arg)]
    pub weights: Option<hetraid_sim::config::Weights>,
    /// RAID5 parity order: left-symmetric (default), left-asymmetric,
    /// right-symmetric, right-asymmetric.
    #[arg(long)]
    pub parity_order: Option<String>,
    /// RAID10 copies per chunk (default 2).
    #[arg(long)]
    pub copies: Option<usize>,
    /// S2-RAID5 group size G (prime).
    #[arg(long)]
    pub group: Option<usize>,
    /// S2-RAID partitions per member K (default G; S2-RAID10: members/2).
    #[arg(long)]
    pub partitions: Option<usize>,
    /// S2-RAID5/S2-RAID10 spare partitions reserved at the end of each member
    /// (default 0).
    #[arg(long)]
    pub spare_partitions: Option<usize>,
    /// RAIDX chunks per bundle c. Left out: each bundle as wide as it can be
    /// where it is placed, which reaches the capacity bound on any member
    /// sizes (one parity: all but the largest member; two: all but the two
    /// largest; mirrors: half, at most all but the largest); such an array
    /// cannot add or remove members yet.
    #[arg(long)]
    pub chunks_per_bundle: Option<usize>,
    /// RAIDX level inside a bundle: 0, 1, 5, 6, 10 (default by c: 1->0, 2->1, 3+->5; without c, 5).
    #[arg(long)]
    pub raidx_level: Option<String>,
    /// Declustered: members per redundancy group G, parity included.
    #[arg(long)]
    pub width: Option<usize>,
    /// Declustered: parity chunks per group, 1 or 2 (default 1).
    #[arg(long)]
    pub parity: Option<usize>,
    /// Declustered: spare chunks in every row, spread over all members (default 1).
    #[arg(long)]
    pub spares: Option<usize>,
}

impl LayoutParamArgs {
    pub fn decluster(&self) -> hetraid_core::layout::DeclusterParams {
        hetraid_core::layout::DeclusterParams {
            width: self.width,
            parity: self.parity,
            spares: self.spares,
        }
    }

    /// The options given for layout `name`, with `weights` as resolved.
    pub fn options(
        &self,
        name: &str,
        weights: Option<Vec<u64>>,
    ) -> hetraid_core::layout::LayoutOptions {
        hetraid_core::layout::LayoutOptions {
            name: name.to_string(),
            weights,
            parity_order: self.parity_order.clone(),
            copies: self.copies,
            group: self.group,
            partitions: self.partitions,
            spare_partitions: self.spare_partitions.unwrap_or(0),
            chunks_per_bundle: self.chunks_per_bundle,
            raidx_level: self.raidx_level.clone(),
            declustered: self.decluster(),
        }
    }

    /// Set the parameters given on the command line in a simulator run config
    /// (the ones not given keep the config's values).
    pub fn apply_to(&self, c: &mut hetraid_sim::RunConfig) {
        macro_rules! param {
            ($($f:ident),* $(,)?) => {$(
                if self.$f.is_some() { c.$f = self.$f.clone(); }
            )*};
        }
        param!(
            weights,
            parity_order,
            copies,
            group,
            partitions,
            chunks_per_bundle,
            raidx_level,
            width,
            parity,
            spares
        );
        if let Some(n) = self.spare_partitions {
            c.spare_partitions = n;
        }
    }
}

fn weights_arg(s: &str) -> Result<hetraid_sim::config::Weights, String> {
    s.parse()
}

/// `--weights` for the engine's verbs: the list, or for `auto` the core's
/// weights from each member's kind (its default service model; small
/// random writes), printed so the operator sees what was chosen.
pub fn engine_weights(
    w: &Option<hetraid_sim::config::Weights>,
    kinds: &[MemberKind],
    layout: &str,
) -> Result<Option<Vec<u64>>, String> {
    match w {
        None => Ok(None),
        Some(hetraid_sim::config::Weights::List(v)) => Ok(Some(v.clone())),
        Some(hetraid_sim::config::Weights::Auto) => {
            hetraid_sim::setup::auto_applies(layout)?;
            if kinds.is_empty() {
                return Err("--weights auto needs --kinds (hdd, ssd or nvram per member): the weights follow the members' speeds".into());
            }
            let service: Vec<f64> = kinds
                .iter()
                .map(|k| k.default_service().service_ns(4096) as f64)
                .collect();
            let plan = hetraid_core::weights::auto_weights(&service, 0.0)
                .map_err(|e| format!("--weights auto: {e}"))?;
            eprintln!(
                "hetraid: weights auto: {} for small random writes",
                plan.summary()
            );
            Ok(Some(plan.weights))
        }
    }
}

pub fn size(s: &str) -> Result<u64, String> {
    parse_size(s)
}

fn kind(s: &str) -> Result<MemberKind, String> {
    MemberKind::parse(s)
}

impl LayoutOpts {
    /// The layout options given (a misspelt option value is an error, never
    /// stored as the default); the engine stores them as core's
    /// `ArraySpec::stored_layout` resolves them.
    pub fn record(&self) -> Result<hetraid_core::layout::LayoutOptions, String> {
        let o = self.params.options(
            &self.layout,
            engine_weights(
                &self.params.weights,
                self.kinds.as_deref().unwrap_or_default(),
                &self.layout,
            )?,
        );
        o.kind().map_err(|e| e.to_string())?;
        Ok(o)
    }
}

impl LayoutArgs {
    pub fn spec(&self) -> Result<LayoutSpec, String> {
        let o = &self.opts;
        if self.devices == 0 {
            return Err("--devices must be at least 1".into());
        }
        let sizes = match &self.sizes {
            Some(s) if s.len() != self.devices => {
                return Err(format!(
                    "--sizes lists {} sizes but --devices is {}; give one size per member",
                    s.len(),
                    self.devices
                ))
            }
            Some(s) => s.clone(),
            None => vec![1 << 30; self.devices],
        };
        let options = o.record()?;
        let kind = options.kind().map_err(|e| e.to_string())?;
        // Geometry alone: kinds that would not move a chunk are an error, not
        // silently ignored.
        if o.kinds.is_some() && !kind.geometry_uses_kinds() {
            return Err(format!(
                "--kinds does not change where {} puts chunks or parity (kinds place data in the raid4s/raid5s/raidf5/raide/raid4n/raid5nss presets, hpda, and raidx5/6 without --weights); leave it out",
                o.layout
            ));
        }
        let kinds = match (&o.kinds, &kind) {
            (Some(k), _) => k.clone(),
            // A preset without kinds: members are in the preset's canonical order.
            (None, LayoutKind::Preset(p)) if self.devices >= 2 => p.default_kinds(self.devices),
            _ => vec![],
        };
        // The array as create would make it (core `ArraySpec`: RAIDX5/6
        // weights from the kinds, S2-RAID's partitions).
        let spec = hetraid_core::spec::ArraySpec {
            layout: options,
            chunk_bytes: o.chunk,
            kinds,
            ..Default::default()
        };
        let valid = spec
            .validate(&sizes)
            .map_err(|e| e.sentence(&hetraid_core::spec::CLI))?;
        // The kinds as given (none: the layout's map says none).
        Ok(LayoutSpec {
            kind: valid.kind,
            chunk_bytes: o.chunk,
            sizes,
            kinds: spec.kinds,
        })
    }
}
