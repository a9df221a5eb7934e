//! Living arrays from the command line (issue 14): `grow --add`, `grow
//! --weights` and `shrink --member` on files, what they refuse (one
//! sentence, exit 2, nothing changed), and a change cut short that
//! `assemble` finishes, as MD resumes a reshape.

mod common;
use common::{args, hetraid, json};

fn files(d: &std::path::Path, mib: &[u64]) -> Vec<String> {
    mib.iter()
        .enumerate()
        .map(|(i, &m)| {
            let p = d.join(format!("m{i}"));
            std::fs::File::create(&p).unwrap().set_len(m << 20).unwrap();
            p.display().to_string()
        })
        .collect()
}

fn create(m: &[String], layout: &[&str]) {
    let mut a = vec!["create"];
    a.extend_from_slice(layout);
    a.extend(["--chunk", "64K"]);
    a.extend(m.iter().map(|s| s.as_str()));
    let (code, _, err) = hetraid(&a);
    assert_eq!(code, 0, "{err}");
}

fn fill(m: &[String], seed: u64) -> Vec<u8> {
    let cap = json(&args("status", m, &["--json"]))["capacity_bytes"]
        .as_u64()
        .unwrap();
    let data = common::bytes(cap as usize, seed);
    common::write_array(m, 0, &data);
    data
}

fn read(m: &[String], len: usize) -> Vec<u8> {
    common::read_array(m, len)
}

/// A RAIDX5 of bundles of three.
const RAIDX5: &[&str] = &[
    "--layout",
    "raidx",
    "--chunks-per-bundle",
    "3",
    "--raidx-level",
    "5",
];

/// The members but slot `slot`'s.
fn without(m: &[String], slot: usize) -> Vec<String> {
    let mut v = m.to_vec();
    v.remove(slot);
    v
}

fn sums(m: &[String]) -> Vec<Vec<u8>> {
    m.iter().map(|p| std::fs::read(p).unwrap()).collect()
}

#[test]
fn grow_and_shrink_refuse_what_they_cannot_do_and_change_nothing() {
    let d = tempfile::tempdir().unwrap();
    let m = files(d.path(), &[16, 16, 16, 16, 16]);
    let (old, new) = (m[..4].to_vec(), m[4].clone());
    create(&old, RAIDX5);
    fill(&old, 1);
    let before = sums(&m);
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            args("grow", &old, &["--add", &old[1]]),
            "already listed as a member",
        ),
        (
            args("grow", &old, &["--add", &new, "--weights", "1,1,1,1,1"]),
            "--weights on grow applies to raidh",
        ),
        (
            args(
                "grow",
                &old,
                &["--add", &new, "--max-speed", "5M", "--batches", "1"],
            ),
            "do not go with --batches",
        ),
        (
            args("grow", &old, &["--force"]),
            "--force applies with --add only",
        ),
        (args("grow", &old, &[]), "no grow or shrink is in progress"),
        (
            args("shrink", &old, &["--member", "9", "--size", "1M"]),
            "slot 9 is not a member slot",
        ),
        (
            args("shrink", &old, &["--member", "1", "--size", "1G"]),
            "at most",
        ),
        (
            args("shrink", &old, &["--member", "1", "--size", "100000"]),
            "whole number of bundles",
        ),
    ];
    for (a, want) in cases {
        let (code, out, err) = hetraid(&a);
        assert_eq!(code, 2, "{a:?}: {out}{err}");
        assert!(err.contains(want), "{a:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "one sentence: {err}");
        assert!(sums(&m) == before, "{a:?} changed a member");
    }
    // A RAID5 gains no weights; a raidh gaining a member needs them.
    let d2 = tempfile::tempdir().unwrap();
    let r = files(d2.path(), &[8, 8, 8, 8]);
    create(&r[..3], &["--layout", "raid5"]);
    let (code, _, err) = hetraid(&args("grow", &r[..3], &["--weights", "1,1,1"]));
    assert_eq!(code, 2);
    assert!(err.contains("--weights applies to raidh"), "{err}");
    let d3 = tempfile::tempdir().unwrap();
    let h = files(d3.path(), &[8, 8, 8, 8, 8]);
    create(&h[..4], &["--layout", "raidh", "--weights", "1,1,1,1"]);
    let (code, _, err) = hetraid(&args("grow", &h[..4], &["--add", &h[4]]));
    assert_eq!(code, 2);
    assert!(err.contains("needs --weights with 5"), "{err}");
    let (code, _, err) = hetraid(&args("grow", &h[..4], &["--weights", "1,1,1,1"]));
    assert_eq!(code, 2);
    assert!(err.contains("these weights already"), "{err}");
}

#[test]
fn a_grow_cut_short_is_finished_by_assemble_and_shrink_re_places_a_lost_member() {
    let d = tempfile::tempdir().unwrap();
    let m = files(d.path(), &[24, 24, 20, 16, 40]);
    let (old, new) = (m[..4].to_vec(), m[4].clone());
    create(&old, RAIDX5);
    let data = fill(&old, 2);
    let add = format!("{new}:ssd");
    let (code, out, err) = hetraid(&args("grow", &old, &["--add", &add, "--batches", "2"]));
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("stopped after 2 batches"), "{out}");
    let v = json(&args("status", &m, &["--json"]));
    assert_eq!(v["change"]["change"], "grow", "{v}");
    let done = v["change"]["moves_done"].as_u64().unwrap();
    assert!(
        done > 0 && done < v["change"]["moves"].as_u64().unwrap(),
        "{v}"
    );
    // The half-grown array reads right.
    assert!(read(&m, data.len()) == data);
    let (code, out, err) = hetraid(&args("assemble", &m, &[]));
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("slot 4 added"), "{out}");
    let v = json(&args("status", &m, &["--json"]));
    assert!(v.get("change").is_none(), "{v}");
    let cap = v["capacity_bytes"].as_u64().unwrap();
    assert!(cap > data.len() as u64);
    assert!(read(&m, data.len()) == data);
    // Member 1 fails; the others take its chunks.
    let (code, _, err) = hetraid(&args("fail", &m, &["--member", "1"]));
    assert_eq!(code, 0, "{err}");
    let left = without(&m, 1);
    let (code, _, err) = hetraid(&args(
        "shrink",
        &left,
        &["--member", "1", "--size", &cap.to_string()],
    ));
    assert_eq!(code, 2);
    let most = err
        .split("at most ")
        .nth(1)
        .and_then(|s| s.split(' ').next())
        .and_then(|s| s.parse::<u64>().ok())
        .unwrap_or_else(|| panic!("{err}"));
    let (code, out, err) = hetraid(&args(
        "shrink",
        &left,
        &["--member", "1", "--size", &most.to_string()],
    ));
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("slot 1 removed") && out.contains("rebuilt from their bundles"),
        "{out}"
    );
    let v = json(&args("status", &left, &["--json"]));
    assert_eq!(v["state"], "optimal", "{v}");
    let keep = (most as usize).min(data.len());
    assert!(read(&left, keep) == data[..keep]);
    // Adding into the emptied slot is refused, pointing to grow --add.
    let spare = d.path().join("spare");
    std::fs::File::create(&spare)
        .unwrap()
        .set_len(24 << 20)
        .unwrap();
    let (code, _, err) = hetraid(&args("add", &left, &["--with", spare.to_str().unwrap()]));
    assert_eq!(code, 2);
    assert!(err.contains("grow MEMBERS... --add"), "{err}");
}

/// Members by path (issue 16): `--member PATH` wherever a slot is taken;
/// the message names the member by slot and path; a path that is not a
/// member of this array is refused in one sentence.
#[test]
fn members_are_named_by_path() {
    let d = tempfile::tempdir().unwrap();
    let m = files(d.path(), &[8, 8, 8, 8]);
    create(&m, &["--layout", "raid5"]);
    let (code, out, err) = hetraid(&args("fail", &m, &["--member", &m[2]]));
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(&format!("member 2 ({})", m[2])), "{out}");
    let v = json(&args("status", &m, &["--json"]));
    assert_eq!(v["member_states"][2]["state"], "faulty", "{v}");
    let stranger = d.path().join("stranger");
    std::fs::File::create(&stranger)
        .unwrap()
        .set_len(8 << 20)
        .unwrap();
    let (code, _, err) = hetraid(&args("fail", &m, &["--member", stranger.to_str().unwrap()]));
    assert_eq!(code, 2);
    assert!(err.contains("has no hetraid superblock"), "{err}");
    let (code, out, err) = hetraid(&args("remove", &m, &["--member", &m[2]]));
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains(&format!("member 2 ({}) removed", m[2])),
        "{out}"
    );
}

/// Heterogeneous checks at create (issue 16, part): a preset without kinds
/// says which member it takes as the SSD; members of different sizes under
/// a layout that uses each as the smallest get a warning with the waste.
#[test]
fn create_says_what_a_preset_assumes_and_what_sizes_waste() {
    let d = tempfile::tempdir().unwrap();
    let m = files(d.path(), &[64, 256, 64, 1024]);
    let mut a = vec!["create", "--layout", "raid5"];
    a.extend(m.iter().map(|s| s.as_str()));
    let (code, _, err) = hetraid(&a);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("the members differ in size") && err.contains("raidx"),
        "{err}"
    );
    let mut a = vec!["create", "--layout", "raid4s", "--force"];
    a.extend(m.iter().map(|s| s.as_str()));
    let (code, _, err) = hetraid(&a);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains(&format!("raid4s takes {} as its SSD", m[3])),
        "{err}"
    );
    // Same sizes, kinds given: nothing to say.
    let d2 = tempfile::tempdir().unwrap();
    let e = files(d2.path(), &[16, 16, 16, 16]);
    let k: Vec<String> = e
        .iter()
        .enumerate()
        .map(|(i, p)| format!("{p}:{}", if i == 3 { "ssd" } else { "hdd" }))
        .collect();
    let mut a = vec!["create", "--layout", "raid4s"];
    a.extend(k.iter().map(|s| s.as_str()));
    let (code, _, err) = hetraid(&a);
    assert_eq!(code, 0, "{err}");
    assert!(err.is_empty(), "{err}");
}

/// Health exit codes (issue 16): `status --test` exits 0 optimal, 1
/// degraded, 2 failed, 4 when the array cannot be read; `scrub` exits 1 when
/// it leaves a mismatch (tested in `integrity_cli.rs`).
#[test]
fn status_test_exits_with_the_arrays_health() {
    let d = tempfile::tempdir().unwrap();
    let m = files(d.path(), &[8, 8, 8, 8]);
    create(&m, &["--layout", "raid5"]);
    let code = |a: &[&str]| hetraid(a).0;
    assert_eq!(code(&args("status", &m, &["--test"])), 0);
    assert_eq!(
        code(&args("status", &m, &[])),
        0,
        "without --test: 0 when printed"
    );
    assert_eq!(hetraid(&args("fail", &m, &["--member", "1"])).0, 0);
    assert_eq!(code(&args("status", &m, &["--test"])), 1);
    assert_eq!(code(&args("status", &m, &["--test", "--json"])), 1);
    assert_eq!(code(&args("status", &m, &[])), 0);
    assert_eq!(
        hetraid(&args("fail", &m, &["--member", "2", "--force"])).0,
        0
    );
    assert_eq!(code(&args("status", &m, &["--test"])), 2);
    let nothing = d.path().join("nothing");
    std::fs::File::create(&nothing)
        .unwrap()
        .set_len(8 << 20)
        .unwrap();
    let n = vec![nothing.display().to_string()];
    assert_eq!(code(&args("status", &n, &["--test"])), 4);
    let (c, _, err) = hetraid(&args("assemble", &m, &["--test"]));
    assert_eq!(c, 2);
    assert!(err.contains("--test applies to status"), "{err}");
}

/// Issue 41: a RAIDX whose bundle widths vary (no --chunks-per-bundle)
/// grows by a member to the capacity bound of the new set, every byte in
/// place, and again when a member is replaced by a larger one (`--size
/// max`); `status` says it holds the whole bound; a member leaves it, the
/// bytes asked for kept and the capacity at the bound of the rest.
#[test]
fn a_raidx_of_varying_widths_grows_to_the_new_bound() {
    let d = tempfile::tempdir().unwrap();
    let m = files(d.path(), &[8, 8, 12, 12, 24, 24]);
    let old = m[..5].to_vec();
    create(&old, &["--layout", "raidx", "--raidx-level", "5"]);
    let data = fill(&old, 41);
    let (code, out, err) = hetraid(&args("grow", &old, &["--add", &m[5], "--json"]));
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["moves"], 0, "nothing moves: {v}");
    let st = json(&args("status", &m, &["--json"]));
    let cap = st["capacity_bytes"].as_u64().unwrap();
    assert_eq!(Some(cap), st["capacity_bound_bytes"].as_u64(), "{st}");
    assert!(
        cap as usize > data.len() * 3 / 2,
        "{cap} after {}",
        data.len()
    );
    assert!(read(&m, data.len()) == data, "bytes moved");
    let more = fill(&m, 42);
    // Member 0 replaced by a larger one (its file made longer).
    std::fs::OpenOptions::new()
        .write(true)
        .open(&m[0])
        .unwrap()
        .set_len(40 << 20)
        .unwrap();
    let (code, _, err) = hetraid(&args("grow", &m, &["--size", "max"]));
    assert_eq!(code, 0, "{err}");
    let st = json(&args("status", &m, &["--json"]));
    let cap2 = st["capacity_bytes"].as_u64().unwrap();
    assert!(cap2 > cap, "{cap} -> {cap2}");
    assert_eq!(Some(cap2), st["capacity_bound_bytes"].as_u64(), "{st}");
    assert!(read(&m, more.len()) == more, "bytes moved");
    let (code, out, _) = hetraid(&args("scrub", &m, &[]));
    assert_eq!(code, 0);
    assert!(out.contains(" 0 mismatched"), "{out}");
    // Removing member 1 keeping the whole array is refused, saying what
    // the others keep, nothing changed...
    let before = sums(&m);
    let full = cap2.to_string();
    let (code, _, err) = hetraid(&args("shrink", &m, &["--member", "1", "--size", &full]));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("the other members keep"), "{err}");
    assert!(sums(&m) == before, "a refused shrink changed a member");
    let kept: u64 = err
        .split("give --size ")
        .nth(1)
        .and_then(|x| x.trim().trim_end_matches('.').parse().ok())
        .unwrap_or_else(|| panic!("no size in {err}"));
    // ...and with that size it runs: the first `kept` bytes in place, the
    // capacity at the bound of the four left, parity agreeing.
    let (code, out, err) = hetraid(&args(
        "shrink",
        &m,
        &["--member", "1", "--size", &kept.to_string(), "--force"],
    ));
    assert_eq!(code, 0, "{out}{err}");
    let left = without(&m, 1);
    let st = json(&args("status", &left, &["--json"]));
    let cap3 = st["capacity_bytes"].as_u64().unwrap();
    let bound = st["capacity_bound_bytes"].as_u64().unwrap();
    assert!(
        cap3 >= kept && cap3 <= bound,
        "{kept} kept, {cap3} of {bound}: {st}"
    );
    assert!(cap3 as f64 >= 0.97 * bound as f64, "{cap3} of {bound}");
    // What was written, then the zeros the enlargement added.
    let mut want = more.clone();
    want.resize(kept as usize, 0);
    assert!(
        read(&left, kept as usize) == want[..kept as usize],
        "bytes lost"
    );
    let (code, out, _) = hetraid(&args("scrub", &left, &[]));
    assert_eq!(code, 0);
    assert!(out.contains(" 0 mismatched"), "{out}");
}
