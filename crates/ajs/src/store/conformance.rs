//! The behaviour every [`RunStore`] must have, checked against each backend built.

use std::sync::Arc;

use super::*;

fn run(id: &str, now: i64, ttl: i64) -> NewRun {
    NewRun {
        id: id.into(),
        bundle: vec![1, 2, 3, 0, 255],
        pending: r#"[{"id":0,"atom":"httpFetch"}]"#.into(),
        created_ms: now,
        expires_ms: now + ttl,
    }
}

/// Insert, get, list, claim exactly once, re-suspend, finish, expire, abandon, purge.
pub(crate) async fn exercise(store: Arc<dyn RunStore>) {
    let now = 1_000_000;
    let a = new_run_id().unwrap();
    assert!(is_run_id(&a), "{a}");
    assert_ne!(a, new_run_id().unwrap());
    store.insert(run(&a, now, 1000)).await.unwrap();
    assert_eq!(
        store.insert(run(&a, now, 1000)).await,
        Err(StoreError::Duplicate)
    );
    let r = store.get(&a, now).await.unwrap().unwrap();
    assert_eq!(
        (r.status, r.version, r.bundle.as_slice()),
        (RunStatus::Suspended, 1, &[1u8, 2, 3, 0, 255][..])
    );
    assert_eq!(
        r.pending.as_deref(),
        Some(r#"[{"id":0,"atom":"httpFetch"}]"#)
    );
    assert_eq!(store.count(RunStatus::Suspended, now).await.unwrap(), 1);
    assert_eq!(
        store.count(RunStatus::Expired, now + 1000).await.unwrap(),
        1
    );
    let listed = store.list(RunStatus::Suspended, now, 10).await.unwrap();
    assert!(listed.iter().any(|s| s.id == a), "{listed:?}");
    assert!(store
        .get("0".repeat(32).as_str(), now)
        .await
        .unwrap()
        .is_none());

    // the claim names the version it decided on; a stale one loses
    assert_eq!(
        store.claim(&a, 7, now, now + 50).await,
        Err(StoreError::AlreadyDecided)
    );
    let v = store.claim(&a, 1, now, now + 50).await.unwrap();
    assert_eq!(v, 2);
    assert_eq!(
        store.claim(&a, 1, now, now + 50).await,
        Err(StoreError::AlreadyDecided)
    );
    assert_eq!(
        store.get(&a, now).await.unwrap().unwrap().status,
        RunStatus::Running
    );
    // suspended again: a new bundle and pending, resumable at the next version
    let again = Completion::Suspended {
        bundle: vec![9],
        pending: "[]".into(),
        expires_ms: now + 2000,
    };
    assert_eq!(
        store.complete(&a, 1, again.clone()).await,
        Err(StoreError::AlreadyDecided)
    );
    store.complete(&a, v, again).await.unwrap();
    let r = store.get(&a, now).await.unwrap().unwrap();
    assert_eq!(
        (r.status, r.version, r.bundle),
        (RunStatus::Suspended, 3, vec![9])
    );
    let v = store.claim(&a, 3, now, now + 50).await.unwrap();
    let done = Completion::Done {
        outcome: r#"{"result":{"ok":true}}"#.into(),
        journal: Some(b"AJSJ\x00\x01".to_vec()),
        keep_until_ms: now + 3000,
    };
    store.complete(&a, v, done.clone()).await.unwrap();
    assert_eq!(
        store.complete(&a, v, done).await,
        Err(StoreError::AlreadyDecided),
        "a claim completes once"
    );
    let r = store.get(&a, now).await.unwrap().unwrap();
    assert_eq!(r.status, RunStatus::Done);
    assert_eq!(r.outcome.as_deref(), Some(r#"{"result":{"ok":true}}"#));
    assert_eq!(r.journal.as_deref(), Some(&b"AJSJ\x00\x01"[..]));
    assert_eq!(
        store.claim(&a, r.version, now, now + 50).await,
        Err(StoreError::AlreadyDecided)
    );
    assert_eq!(
        store.claim(&"f".repeat(32), 1, now, now + 50).await,
        Err(StoreError::NotFound)
    );

    // expiry: reads as expired, cannot be claimed, is listed as expired
    let b = new_run_id().unwrap();
    store.insert(run(&b, now, 10)).await.unwrap();
    let later = now + 10;
    assert_eq!(
        store.get(&b, later).await.unwrap().unwrap().status,
        RunStatus::Expired
    );
    assert_eq!(
        store.claim(&b, 1, later, later + 50).await,
        Err(StoreError::Expired)
    );
    let expired = store.list(RunStatus::Expired, later, 10).await.unwrap();
    assert_eq!(
        expired.iter().map(|s| s.id.as_str()).collect::<Vec<_>>(),
        [b.as_str()]
    );
    assert!(!store
        .list(RunStatus::Suspended, later, 10)
        .await
        .unwrap()
        .iter()
        .any(|s| s.id == b));

    // racing claims: exactly one winner
    let c = new_run_id().unwrap();
    store.insert(run(&c, now, 1000)).await.unwrap();
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let store = store.clone();
        let c = c.clone();
        tasks.push(tokio::spawn(async move {
            store.claim(&c, 1, now, now + 50).await
        }));
    }
    let mut won = 0;
    for t in tasks {
        match t.await.unwrap() {
            Ok(_) => won += 1,
            Err(e) => assert_eq!(e, StoreError::AlreadyDecided),
        }
    }
    assert_eq!(won, 1);

    // a claimant that never completes: after its lease the run is abandoned, never resumable
    let sweep = store.sweep(now + 49, 1_000_000).await.unwrap();
    assert_eq!(sweep.abandoned, 0, "the lease still holds");
    let sweep = store.sweep(now + 51, 1_000_000).await.unwrap();
    assert_eq!(
        sweep,
        Sweep {
            abandoned: 1,
            purged: 0
        }
    );
    let r = store.get(&c, now + 51).await.unwrap().unwrap();
    assert_eq!(r.status, RunStatus::Done);
    assert_eq!(r.outcome.as_deref(), Some(ABANDONED_OUTCOME));
    assert_eq!(
        store
            .complete(
                &c,
                2,
                Completion::Done {
                    outcome: "{}".into(),
                    journal: None,
                    keep_until_ms: now
                }
            )
            .await,
        Err(StoreError::AlreadyDecided),
        "the late claimant cannot overwrite"
    );
    assert_eq!(
        store.claim(&c, r.version, now + 51, now + 99).await,
        Err(StoreError::AlreadyDecided)
    );

    // purge: everything past expiry + grace goes; a run still waiting stays
    let d = new_run_id().unwrap();
    store.insert(run(&d, now, 1_000_000)).await.unwrap();
    let sweep = store.sweep(now + 100_000, 1000).await.unwrap();
    assert_eq!(sweep.purged, 3, "a, b and c");
    for id in [&a, &b, &c] {
        assert!(store.get(id, now).await.unwrap().is_none());
    }
    assert!(store.get(&d, now).await.unwrap().is_some());
    assert_eq!(
        store.list(RunStatus::Suspended, now, 0).await.unwrap(),
        vec![]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_store_conforms() {
    exercise(Arc::new(MemoryRunStore::default())).await;
}

#[tokio::test]
async fn unknown_and_unbuilt_stores_are_refused_with_what_to_write() {
    let Err(StoreError::Config(m)) = open("redis://x").await else {
        panic!("refused");
    };
    assert!(m.contains("sqlite:PATH"), "{m}");
    assert!(!is_run_id("../etc/passwd"));
    assert!(!is_run_id(&"A".repeat(32)), "lower-case hex only");
}

#[cfg(feature = "store-sqlite")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_store_conforms_and_survives_reopening() {
    let dir = std::env::temp_dir().join(format!("ajs-store-{}", new_run_id().unwrap()));
    std::fs::create_dir_all(&dir).unwrap();
    let spec = format!("sqlite:{}", dir.join("runs.db").display());
    exercise(open(&spec).await.unwrap()).await;
    // migrations are idempotent; what was written is there after reopening
    let again = open(&spec).await.unwrap();
    let waiting = again
        .list(RunStatus::Suspended, 1_000_000, 10)
        .await
        .unwrap();
    assert_eq!(waiting.len(), 1, "{waiting:?}");
    // two handles (as two processes would have) race for one claim
    let other = open(&spec).await.unwrap();
    let id = &waiting[0].id;
    let (x, y) = tokio::join!(
        again.claim(id, 1, 1_000_000, 2_000_000),
        other.claim(id, 1, 1_000_000, 2_000_000)
    );
    assert!(x.is_ok() != y.is_ok(), "{x:?} {y:?}");
    drop((again, other));
    std::fs::remove_dir_all(&dir).unwrap();
}
