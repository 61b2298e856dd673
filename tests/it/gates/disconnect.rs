//! A waiter that goes away changes nothing: waiters that hang up
//! mid-wait (a dropped TCP connection, a client timing out) leave the
//! request PENDING with the same record and the same run events, and it
//! is decided as usual afterwards.

use std::time::Duration;

use serde_json::{Value, json};

use super::{SPEC, create, full, gate, key_of, requester, serve};
use crate::common::server::{Api, Served};
use crate::common::{Workspace, open_store};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn waiters_that_hang_up_leave_the_request_as_it_was() {
    let ws = Workspace::new(SPEC);
    let served = serve(&ws);
    let bot = requester();
    let asked = create(
        &served,
        &bot,
        json!({"message": "Refund order 77?", "payload": {"order": 77}}),
    )
    .await;
    let key = key_of(&asked);
    let before = observed(&served, &ws, &key).await;

    // Three waiters that drop their connections mid-wait, and one whose
    // client gives up on its own timeout.
    for _ in 0..3 {
        let address = served.base.trim_start_matches("http://").to_string();
        let request = format!(
            "GET /gates/{key}?wait=30s HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer tok-bot\r\n\r\n"
        );
        tokio::task::spawn_blocking(move || {
            use std::io::Write as _;
            let mut socket = std::net::TcpStream::connect(address).expect("connect");
            socket.write_all(request.as_bytes()).expect("send");
            std::thread::sleep(Duration::from_millis(300));
            // Dropped: the connection closes mid-wait.
        })
        .await
        .expect("the hanging-up waiter");
    }
    let impatient = reqwest::Client::builder()
        .timeout(Duration::from_millis(700))
        .build()
        .expect("client");
    let gave_up = impatient
        .get(served.url(&format!("/gates/{key}?wait=30s")))
        .bearer_auth("tok-bot")
        .send()
        .await
        .expect_err("the client times out before any decision");
    assert!(gave_up.is_timeout(), "{gave_up}");
    // Let the server notice the hang-ups before reading again.
    tokio::time::sleep(Duration::from_millis(300)).await;

    let after = observed(&served, &ws, &key).await;
    assert_eq!(after.gate["status"], "PENDING", "{}", after.gate);
    assert_eq!(before.gate, after.gate, "GET /gates/{key} changed");
    assert_eq!(
        before.approval, after.approval,
        "GET /approvals/{key} changed"
    );
    assert_eq!(before.events, after.events, "the run's events changed");
    let logs = served.logs();
    assert!(!logs.contains("panicked"), "{logs}");

    // Decided as usual.
    let (status, answer) = full()
        .post(
            &served.url(&format!("/approvals/{key}/approve")),
            json!({"reason": "fine"}),
        )
        .await;
    assert_eq!(status, 200, "{answer}");
    let (status, view) = gate(&served, &bot, &key, Some("5s")).await;
    assert_eq!(status, 200);
    assert_eq!(view["status"], "APPROVED", "{view}");
    assert_eq!(view["decision"]["by"], "carol");
    assert_eq!(view["decision"]["payload"], json!({"order": 77}));
}

/// What a reader can see of a request: as the requester sees it, as the
/// approvals API shows it, and its run's events in the store.
struct Observed {
    gate: Value,
    approval: Value,
    events: Vec<String>,
}

async fn observed(served: &Served, ws: &Workspace, key: &str) -> Observed {
    let (status, gate) = requester().get(&served.url(&format!("/gates/{key}"))).await;
    assert_eq!(status, 200, "{gate}");
    let (status, approval) = Api::with_token("tok-carol")
        .get(&served.url(&format!("/approvals/{key}")))
        .await;
    assert_eq!(status, 200, "{approval}");
    let run_id = approval["run_id"].as_str().expect("run_id").to_string();
    let events = open_store(&ws.state_db())
        .run_events(&run_id, 0)
        .await
        .expect("events")
        .iter()
        .map(|e| format!("{e:?}"))
        .collect();
    Observed {
        gate,
        approval,
        events,
    }
}
