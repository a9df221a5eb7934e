//! docs/SWEEP.md is the sweep format's reference: its example parses into
//! the grid it describes, and it names every key the parser takes.

const DOC: &str = include_str!("../../../docs/SWEEP.md");

#[test]
fn the_documented_example_is_a_sweep_of_the_grid_it_describes() {
    let i = DOC.find("```toml\n").expect("an example") + "```toml\n".len();
    let j = i + DOC[i..].find("```").unwrap();
    let c = hetraid_sim::sweep::SweepConfig::parse(&DOC[i..j], "docs/SWEEP.md").unwrap();
    // Two series times three x values, no grid.
    let points = c.points().unwrap();
    assert_eq!(points.len(), 6);
    assert_eq!(points[0].series, "RAID5");
    assert_eq!(points[3].config.layout, "raid4s");
    assert_eq!(c.headline.len(), 1);
}

#[test]
fn every_key_the_parser_takes_is_documented() {
    let src = include_str!("../src/sweep/mod.rs");
    for strukt in ["pub struct SweepConfig {", "pub struct Headline {"] {
        let body = &src[src.find(strukt).unwrap()..];
        let body = &body[..body.find("\n}\n").unwrap()];
        for line in body.lines().map(str::trim) {
            let Some(field) = line
                .strip_prefix("pub ")
                .and_then(|l| l.split_once(':'))
                .map(|(f, _)| f)
            else {
                continue;
            };
            // Set by the parser or the command (`--set`), not read from the file.
            if field == "dir" || field == "departures" {
                continue;
            }
            let key = match field {
                "base" | "grid" => format!("`[{field}]`"),
                "series" | "headline" => format!("`[[{field}]]`"),
                f => format!("`{f}`"),
            };
            assert!(DOC.contains(&key), "docs/SWEEP.md does not name {key}");
        }
    }
}
