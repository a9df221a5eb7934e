//! The advisor as a library: a request in, a typed report out, with no
//! command line in between.

use hetraid_advise::{Request, OBJECTIVES};

fn request(members: &str) -> Request {
    Request {
        members: members.into(),
        workload: None,
        read_fraction: None,
        size: 4096,
        qd: 4,
        trace: None,
        objective: None,
        chunks: vec![64 << 10],
        redundancy: 1,
        budget_s: None,
        candidates_max: None,
        total: 1 << 20,
        capacity_min: None,
        mttdl_min_years: None,
        probe_seconds: 1.0,
    }
}

#[test]
fn advice_ranks_what_it_simulated_and_accounts_for_every_candidate() {
    let a = request("caviar-black-640*3,x25e-64").advise().unwrap();
    assert_eq!(a.objective, "throughput");
    let p = &a.pruned;
    assert!(a.simulated > 0 && !a.ranked.is_empty());
    // Every candidate is simulated or pruned; distinct rows fold the rest.
    assert_eq!(
        a.candidates,
        a.simulated + p.fit + p.capacity + p.mttdl + p.load_map,
        "{a:?}"
    );
    let folded: usize = a.ranked.iter().map(|r| 1 + r.equivalent.len()).sum();
    assert_eq!(folded, a.simulated);
    // Best first by throughput; some row is on the Pareto front; the
    // winner has a create line, a rebuild time and an MTTDL.
    let t: Vec<f64> = a.ranked.iter().filter_map(|r| r.throughput_mbps).collect();
    assert!(t.windows(2).all(|w| w[0] >= w[1]), "{t:?}");
    assert!(a.ranked.iter().any(|r| r.pareto));
    let w = &a.ranked[0];
    assert!(w.create.starts_with("hetraid create"), "{w:?}");
    assert!(w.rebuild_s.is_some_and(|s| s > 0.0) && w.mttdl_h.is_some_and(|h| h > 0.0));
}

#[test]
fn bad_requests_are_refused_before_anything_runs() {
    let mut r = request("x25e-64*3");
    r.objective = Some("speed".into());
    let e = r.advise().unwrap_err();
    assert!(e.starts_with("--objective speed is unknown"), "{e}");
    assert!(OBJECTIVES.iter().all(|(n, _, _)| e.contains(n)));
    let mut r = request("x25e-64*3");
    r.chunks = vec![12 << 10];
    assert!(r
        .advise()
        .unwrap_err()
        .starts_with("--chunks must list powers of two"));
    let mut r = request("x25e-64*3");
    r.redundancy = 3;
    assert_eq!(r.advise().unwrap_err(), "--redundancy 3 must be 1 or 2");
}

/// Issue 42: the advice depends on the request alone. Without a wall-clock
/// budget the same request ranks the same rows with the same numbers; with
/// `candidates_max` only the most promising are simulated, the rest are
/// listed as not run, again the same every time.
#[test]
fn the_same_request_gives_the_same_advice() {
    let mut r = request("caviar-black-640*3,x25e-64");
    r.candidates_max = Some(3);
    let rows = |r: &Request| {
        let a = r.advise().unwrap();
        (a.simulated, serde_json::to_string(&a.ranked).unwrap())
    };
    let (n, first) = rows(&r);
    assert_eq!(n, 3, "candidates_max 3 simulates 3");
    assert_eq!(rows(&r), (n, first.clone()), "same request, other advice");
    r.candidates_max = None;
    let (all, _) = rows(&r);
    assert!(all > 3, "without a cap every candidate left runs: {all}");
}
